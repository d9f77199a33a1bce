"""contrib/: the systemd units pass `systemd-analyze verify` (with their venv path pointed
at this test's venv, whose binaries exist), and the cron lines run as written."""
from __future__ import annotations

import os
import shlex
import shutil
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.carbon_env import REPO_ROOT

CONTRIB = REPO_ROOT / "contrib"
VENV_PATH = "/opt/bgl/venv"  # what the shipped files name
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
UNITS = sorted((CONTRIB / "systemd").glob("*.service"))


def test_the_units_are_shipped():
    assert [unit.name for unit in UNITS] == ["bgl-graphite-web.service", "bgl-receive.service", "bgl-run.service"]


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (Debian's systemd package)")
@pytest.mark.parametrize("unit", UNITS, ids=lambda unit: unit.name)
def test_unit_passes_systemd_analyze_verify(unit, tmp_path):
    text = unit.read_text()
    assert f"ExecStart={VENV_PATH}/bin/" in text
    installed = tmp_path / unit.name
    installed.write_text(text.replace(VENV_PATH, sys.prefix))
    for line in installed.read_text().splitlines():  # verify needs every Exec* binary to exist
        if line.startswith(("ExecStart=", "ExecStartPre=")):
            assert os.access(shlex.split(line.split("=", 1)[1])[0], os.X_OK), line
    result = subprocess.run([SYSTEMD_ANALYZE, "verify", str(installed)], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert result.returncode == 0 and not result.stderr.strip(), result.stdout + result.stderr
    # and verify does fail on a unit whose binary is missing (the check above is not empty)
    result = subprocess.run([SYSTEMD_ANALYZE, "verify", str(unit)], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert result.returncode != 0 and "is not executable" in result.stderr, result.stderr


def cron_commands() -> list[str]:
    """The uncommented jobs of contrib/cron/bgl: their command, without the time fields and user."""
    commands = []
    for line in (CONTRIB / "cron" / "bgl").read_text().splitlines():
        fields = line.split(None, 6)
        if line.strip() and not line.startswith("#") and "=" not in fields[0]:
            commands.append(fields[6])
    return commands


def test_cron_jobs_run_as_written(tmp_path):
    store = tmp_path / "bgl.db"
    subprocess.run([sys.executable, "-m", "biggraphite_like.cli", "--store", f"sqlite://{store}", "write", "a.b", "1"],
                   check=True, capture_output=True, timeout=120)
    commands = cron_commands()
    assert commands and all("bgl clean" in command or "bgl seal" in command for command in commands)
    for command in commands:
        command = command.replace(f"{VENV_PATH}/bin/bgl", f"{sys.executable} -m biggraphite_like.cli")
        command = command.replace("/var/lib/node_exporter", str(tmp_path))
        env = dict(os.environ, BGL_STORE=f"sqlite://{store}", PYTHONPATH=str(REPO_ROOT))
        result = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
    assert "bgl_clean_metrics_scanned 1.0" in (tmp_path / "bgl_clean.prom").read_text()


def unit_lines(unit: Path, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in unit.read_text().splitlines() if line.startswith(key + "=")]


def test_graphite_web_unit_commands_serve_on_bgl_runs_configuration(tmp_path):
    """The graphite-web unit's Environment, ExecStartPre and ExecStart, run as written (the
    venv and /var/lib/bgl substituted) on the configuration `bgl run` writes: it answers."""
    from biggraphite_like.stack.config import StackConfig, write_configuration
    from tests.carbon_env import free_port

    data_dir = tmp_path / "bgl"
    port = free_port()
    write_configuration(StackConfig.create(data_dir, web_port=port, web_workers=1))
    unit = CONTRIB / "systemd" / "bgl-graphite-web.service"

    def substituted(text: str) -> str:
        return text.replace(VENV_PATH, sys.prefix).replace("/var/lib/bgl", str(data_dir))

    env = {key: value for key, value in os.environ.items() if not key.startswith(("BGL_", "DJANGO", "GRAPHITE"))}
    for assignment in unit_lines(unit, "Environment"):
        env.update(item.split("=", 1) for item in shlex.split(substituted(assignment)))
    cwd = substituted(unit_lines(unit, "WorkingDirectory")[0])
    for command in unit_lines(unit, "ExecStartPre"):
        subprocess.run(shlex.split(substituted(command)), env=env, cwd=cwd, check=True, timeout=300)
    (start,) = unit_lines(unit, "ExecStart")
    process = subprocess.Popen(shlex.split(substituted(start)), env=env, cwd=cwd)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics/find?query=*", timeout=10) as answer:
                    assert answer.status == 200 and json.loads(answer.read()) == []
                    break
            except (urllib.error.URLError, ConnectionError):
                assert process.poll() is None and time.monotonic() < deadline, (data_dir / "log" / "gunicorn.log").read_text()
                time.sleep(0.5)
    finally:
        process.terminate()
        assert process.wait(60) == 0
