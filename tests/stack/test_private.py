"""`bgl run` keeps its secrets and data private: a Cassandra password in the store URL never
reaches its output or a log, and what it creates (store, graphite-web's database,
configuration, logs) is not readable by other users."""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from tests.carbon_env import plaintext, send_to_carbon
from tests.conftest import drop_keyspaces, new_keyspace
from tests.stack_env import BglRun

pytestmark = pytest.mark.slow

PASSWORD = "Pa55-w0rd_in_url"


def _world_or_group_readable(root) -> list[str]:
    """Paths under root (root included) that anyone but the owner can read or enter."""
    found = []
    for directory, folders, files in os.walk(root):
        for path in [directory, *(os.path.join(directory, name) for name in files)]:
            mode = os.lstat(path).st_mode
            if not stat.S_ISLNK(mode) and mode & 0o077:
                found.append(f"{path} {oct(mode & 0o777)}")
    return found


def _files_containing(root, text: bytes) -> list[str]:
    found = []
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as file:
                if text in file.read():
                    found.append(os.path.relpath(path, root))
    return sorted(found)


def _run_with_one_point(run: BglRun, name: str, value: float) -> str:
    """Start, send one point, read it back through graphite-web, stop; returns the banner."""
    try:
        banner = run.start()
        now = int(time.time()) // 60 * 60
        send_to_carbon(run.line_port, plaintext([(name, now - 60, value)]))
        run.wait_for_values(name, [value], **{"from": "-10min"})
        assert run.stop(signal.SIGTERM) == 0
    finally:
        run.kill()
    return banner


def test_sqlite_stack_creates_nothing_others_can_read(tmp_path):
    run = BglRun(tmp_path / "data")
    _run_with_one_point(run, "private.a", 1.0)
    data = run.data_dir
    for path in (data / "bgl.db", data / "storage" / "graphite.db", data / "conf" / "carbon.conf",
                 data / "conf" / "local_settings.py", data / "log" / "gunicorn.log", data / "log" / "receiver.log",
                 data / "log" / "receiver.prom"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    for path in (data, data / "conf", data / "storage", data / "log", data / "log" / "webapp"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    assert _world_or_group_readable(data) == []


def test_an_existing_configuration_is_made_private_again(tmp_path):
    conf = tmp_path / "data" / "conf"
    conf.mkdir(parents=True)
    (conf / "carbon.conf").write_text("old\n")
    os.chmod(conf / "carbon.conf", 0o644)
    os.chmod(conf, 0o755)
    result = subprocess.run([sys.executable, "-c", (
        "from biggraphite_like.stack.config import StackConfig, write_configuration;"
        f"write_configuration(StackConfig.create({str(tmp_path / 'data')!r}, 'cassandra://u:{PASSWORD}@h/ks'))")],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE((conf / "carbon.conf").stat().st_mode) == 0o600
    assert stat.S_IMODE(conf.stat().st_mode) == 0o700
    assert _files_containing(tmp_path / "data", PASSWORD.encode()) == ["conf/carbon.conf", "conf/local_settings.py"]


def test_a_cassandra_password_is_in_no_output_no_log_and_only_in_private_files(tmp_path, cassandra_address,
                                                                                cassandra_admin):
    url = f"cassandra://bgl:{PASSWORD}@{cassandra_address}/{new_keyspace()}"
    run = BglRun(tmp_path / "data", store_url=url)
    try:
        banner = _run_with_one_point(run, "private.b", 2.0)
    finally:
        drop_keyspaces(cassandra_admin, url)
    assert f"cassandra://bgl:***@{cassandra_address}/" in banner
    assert PASSWORD not in run.output()
    logs = [name for name in _files_containing(run.data_dir, PASSWORD.encode())]
    # the only copies: the two configuration files that must name the store, owner-only
    assert logs == ["conf/carbon.conf", "conf/local_settings.py"]
    for name in logs:
        assert stat.S_IMODE((run.data_dir / name).stat().st_mode) == 0o600
    assert "biggraphite_like.receiver: store cassandra://bgl:***@" in (run.data_dir / "log" / "receiver.log").read_text()
    assert _world_or_group_readable(run.data_dir) == []
