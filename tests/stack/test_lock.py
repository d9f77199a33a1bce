"""`bgl run` owns its data directory: a second one on it is refused before it writes
anything, and gunicorn's control socket is the data directory's, not ~/.gunicorn/'s."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from biggraphite_like import cli, stack
from biggraphite_like.stack.config import StackConfig, gunicorn_conf_text
from biggraphite_like.stack.lock import DataDirectoryBusy, DataDirectoryLock
from tests.carbon_env import REPO_ROOT
from tests.stack_env import BglRun


def _gunicornc(socket_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "gunicornc"), "-s", str(socket_path),
                           "-c", "show workers", "-j"], capture_output=True, text=True, timeout=60)


def _files(directory: Path) -> dict[str, tuple[int, bytes]]:
    return {str(path): (path.stat().st_mtime_ns, path.read_bytes()) for path in sorted(directory.iterdir())
            if path.is_file()}


@pytest.mark.slow
def test_a_second_bgl_run_on_the_same_data_dir_is_refused_and_changes_nothing(tmp_path):
    first = BglRun(tmp_path / "data")
    try:
        first.start()
        conf_before = _files(first.data_dir / "conf")
        second = BglRun(tmp_path / "data")  # other free ports: nothing but the directory is shared
        result = subprocess.run(second.command(), capture_output=True, text=True, timeout=120,
                                env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
        assert result.returncode == cli.EXIT_BUSY == stack.EXIT_BUSY == 3, result
        message = result.stderr
        assert f"the data directory {first.data_dir} is in use by `bgl run` pid {first.process.pid}" in message
        for option, port in first.ports.items():
            assert f"{option} {port}" in message
        assert f"lock: {first.data_dir / 'run' / 'bgl-run.lock'}" in message
        assert _files(first.data_dir / "conf") == conf_before  # local_settings.py, gunicorn.conf.py untouched
        # the first one still serves, its control socket included
        assert first.get("/version/")[0] == 200
        answer = _gunicornc(first.data_dir / "run" / "gunicorn.ctl")
        assert answer.returncode == 0 and json.loads(answer.stdout)["count"] == 2, answer
        assert first.stop(signal.SIGINT) == 0
    finally:
        first.kill()


@pytest.mark.slow
def test_two_stacks_keep_their_own_control_sockets(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    one, two = BglRun(tmp_path / "one"), BglRun(tmp_path / "two")
    try:
        one.start()
        two.start()
        sockets = [run.data_dir / "run" / "gunicorn.ctl" for run in (one, two)]
        assert all(path.is_socket() for path in sockets)
        assert oct(sockets[0].stat().st_mode & 0o777) == "0o600"
        assert two.stop(signal.SIGTERM) == 0
        assert not sockets[1].exists() and sockets[0].is_socket()  # stopping one removed its own only
        answer = _gunicornc(sockets[0])
        assert answer.returncode == 0 and json.loads(answer.stdout)["count"] == 2, answer
        assert one.stop(signal.SIGTERM) == 0
        assert list(home.iterdir()) == []  # no runtime file outside the data directories
    finally:
        one.kill()
        two.kill()


def test_the_lock_goes_with_its_process_however_it_ends(tmp_path):
    config = StackConfig.create(tmp_path / "data", line_port=12003, web_port=18080)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from biggraphite_like.stack.config import StackConfig;"
         "from biggraphite_like.stack.lock import DataDirectoryLock;"
         "DataDirectoryLock(StackConfig.create(sys.argv[1], line_port=12003, web_port=18080)).acquire();"
         "print('locked', flush=True); time.sleep(600)", str(tmp_path / "data")],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(DataDirectoryBusy) as refused:
            DataDirectoryLock(config).acquire()
        assert f"pid {holder.pid}" in str(refused.value) and "--line-port 12003" in str(refused.value)
        assert "--web-port 18080" in str(refused.value)
        assert oct(config.lock_file.stat().st_mode & 0o777) == "0o600"
        assert oct(config.run_dir.stat().st_mode & 0o777) == "0o700"
    finally:
        holder.kill()  # SIGKILL: no chance to release anything
        holder.wait()
    deadline = time.monotonic() + 10
    with DataDirectoryLock(config) as lock:  # the kernel released it; the stale file is no obstacle
        assert time.monotonic() < deadline
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()


def test_a_data_dir_too_deep_for_a_unix_socket_gets_no_control_socket(tmp_path):
    deep = tmp_path / ("d" * 100)
    assert "control_socket_disable = True" in gunicorn_conf_text(StackConfig.create(deep))
    text = gunicorn_conf_text(StackConfig.create(tmp_path / "data"))
    assert f"control_socket = {str(tmp_path / 'data' / 'run' / 'gunicorn.ctl')!r}" in text
