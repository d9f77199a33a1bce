"""Run `bgl run` as an operator would, on free 127.0.0.1 ports, for the end-to-end and
browser tests: its own process group (so a test can press Ctrl-C the way a terminal does:
SIGINT to the whole group), stdout read until the "ready" banner.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from tests.carbon_env import REPO_ROOT, free_port, process_state


class BglRun:
    """One `bgl run` process on a data directory."""

    def __init__(self, data_dir: Path, store_url: str | None = None, carbon: bool = False,
                 options: tuple[str, ...] = ()):
        self.data_dir = Path(data_dir)
        self.options = options  # more `bgl run` options
        self.store_url = store_url
        self.carbon = carbon  # `bgl run --carbon`: carbon-cache with our plugin instead of `bgl receive`
        self.ports = {option: free_port() for option in ("--line-port", "--pickle-port", "--carbonlink-port",
                                                         "--web-port")}
        self.process: subprocess.Popen | None = None
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()

    @property
    def web(self) -> str:
        return f"http://127.0.0.1:{self.ports['--web-port']}"

    @property
    def line_port(self) -> int:
        return self.ports["--line-port"]

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "biggraphite_like.cli", "run", "--data-dir", str(self.data_dir)]
        if self.store_url:
            command += ["--store", self.store_url]
        for option, port in self.ports.items():
            command += [option, str(port)]
        return command + (["--carbon"] if self.carbon else []) + list(self.options)

    @property
    def receiver_name(self) -> str:
        return "carbon-cache" if self.carbon else "receiver"

    @property
    def receiver_log(self) -> Path:
        return self.data_dir / "log" / ("carbon-cache.out" if self.carbon else "receiver.log")

    def start(self, timeout: float = 180.0) -> str:
        """Start and wait for the banner; returns everything printed until then."""
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env.pop("BGL_STORE", None)
        self.process = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env=env, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not any(line.startswith("Ctrl-C stops both") for line in self.lines):
            try:
                line = self._queue.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise AssertionError(f"bgl run not ready within {timeout}s:\n{self.output()}")
            if line is None:
                raise AssertionError(f"bgl run exited with {self.process.wait()} before it was ready:\n{self.output()}")
        return self.output()

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            self._queue.put(line)
        self._queue.put(None)

    def output(self) -> str:
        return "".join(self.lines)

    def children(self) -> list[int]:
        """Pids of the processes working on this data directory (carbon, gunicorn, their children)."""
        marker = str(self.data_dir)
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == (self.process.pid if self.process else -1):
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    cmdline = file.read().decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline and "biggraphite_like.cli" not in cmdline and process_state(int(entry)) not in ("Z", "gone"):
                found.append(int(entry))
        return found

    def stop(self, signum: int = signal.SIGINT, timeout: float = 300.0) -> int:
        """Send `signum` the way a terminal sends Ctrl-C (to the process group); returns the exit status."""
        assert self.process is not None
        os.killpg(self.process.pid, signum)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"bgl run did not stop within {timeout}s:\n{self.output()}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        for pid in self.children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    # -- HTTP ------------------------------------------------------------------------------
    def get(self, path: str, **params: object) -> tuple[int, bytes, str]:
        url = self.web + path + ("?" + urllib.parse.urlencode(params, doseq=True) if params else "")
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                return response.status, response.read(), response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as error:
            return error.code, error.read(), error.headers.get("Content-Type", "")

    def get_json(self, path: str, **params: object) -> object:
        status, body, _ = self.get(path, **params)
        assert status == 200, (path, params, status, body[:2000])
        return json.loads(body)

    def wait_for_values(self, target: str, expected: list[float], timeout: float = 60.0, **params: object) -> list:
        """Poll /render?format=json until the series' non-null values are `expected`; returns its datapoints."""
        deadline = time.monotonic() + timeout
        while True:
            series = self.get_json("/render", target=target, format="json", **params)
            values = [value for value, _ in series[0]["datapoints"] if value is not None] if series else []
            if values == expected:
                return series[0]["datapoints"]
            if time.monotonic() > deadline:
                raise AssertionError(f"{target}: {values} after {timeout}s, expected {expected}")
            time.sleep(0.5)
