"""Run the real carbon-cache (through `bgl-carbon-cache`) on free 127.0.0.1 ports.

Used by tests/carbon/test_plugin.py and bench/carbon_bench.py: writes carbon.conf,
storage-schemas.conf and storage-aggregation.conf in a directory, starts the daemon in the
foreground (`--debug start`) as a subprocess, sends plaintext and pickle, stops it with
SIGTERM.
"""
from __future__ import annotations

import os
import pickle
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from tests.paths import REPO_ROOT
from tests.ports import free_port  # noqa: F401  (the tests and bench/ import it from here)

VENV_BIN = Path(sys.executable).parent
LAUNCHER = VENV_BIN / "bgl-carbon-cache"
WHISPER_LAUNCHER = VENV_BIN / "carbon-cache.py"
SIGTERM_EXIT = (0, -15)  # twistd re-raises SIGTERM after a clean shutdown

Point = tuple[str, float, float]  # (name, timestamp, value)


def schemas_text(rules: Sequence[tuple[str, str, str]]) -> str:
    """storage-schemas.conf from [(section, pattern, retentions)], first match wins."""
    return "".join(f"[{name}]\npattern = {pattern}\nretentions = {retentions}\n\n" for name, pattern, retentions in rules)


def aggregation_text(rules: Sequence[tuple[str, str, float, str]]) -> str:
    """storage-aggregation.conf from [(section, pattern, xFilesFactor, aggregationMethod)]."""
    return "".join(
        f"[{name}]\npattern = {pattern}\nxFilesFactor = {xff}\naggregationMethod = {method}\n\n"
        for name, pattern, xff, method in rules
    )


class CarbonCache:
    """One carbon-cache instance: its configuration directory, ports, process and log."""

    def __init__(self, root: Path, store_url: str | None, database: str = "biggraphite_like",
                 schemas: Sequence[tuple[str, str, str]] = (("default", ".*", "60s:1d"),),
                 aggregation: Sequence[tuple[str, str, float, str]] = (),
                 settings: Mapping[str, object] | None = None, launcher: Path = LAUNCHER):
        self.root = Path(root)
        self.conf_dir = self.root / "conf"
        self.storage_dir = self.root / "storage"
        self.whisper_dir = self.storage_dir / "whisper"
        self.log_path = self.root / "carbon.out"
        self.store_url = store_url
        self.database = database
        self.launcher = launcher
        self.line_port = free_port()
        self.pickle_port = free_port()
        self.query_port = free_port()
        self.settings: dict[str, object] = {
            "STORAGE_DIR": self.storage_dir,
            "LOCAL_DATA_DIR": self.whisper_dir,
            "LOG_DIR": self.storage_dir / "log",
            "PID_DIR": self.storage_dir,
            "DATABASE": database,
            "LINE_RECEIVER_INTERFACE": "127.0.0.1",
            "LINE_RECEIVER_PORT": self.line_port,
            "PICKLE_RECEIVER_INTERFACE": "127.0.0.1",
            "PICKLE_RECEIVER_PORT": self.pickle_port,
            "CACHE_QUERY_INTERFACE": "127.0.0.1",
            "CACHE_QUERY_PORT": self.query_port,
            "ENABLE_UDP_LISTENER": "False",
            "ENABLE_MANHOLE": "False",
            "ENABLE_TAGS": "False",
            "MAX_CACHE_SIZE": "inf",
            "MAX_UPDATES_PER_SECOND": "inf",
            "MAX_CREATES_PER_MINUTE": "inf",
            "LOG_UPDATES": "False",
            "LOG_CREATES": "False",
            "LOG_CACHE_HITS": "False",
            "LOG_CACHE_QUEUE_SORTS": "False",
            "CARBON_METRIC_INTERVAL": 60,
            "USER": "",
        }
        if store_url is not None:
            self.settings["BG_STORE"] = store_url
        self.settings.update(settings or {})
        self.process: subprocess.Popen | None = None
        self.daemon = False
        self.write_config(schemas, aggregation)

    @property
    def conf_path(self) -> Path:
        return self.conf_dir / "carbon.conf"

    def write_config(self, schemas: Sequence[tuple[str, str, str]],
                     aggregation: Sequence[tuple[str, str, float, str]] = ()) -> None:
        """(Re)write the three configuration files (rules take effect at the next start)."""
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        lines = ["[cache]"] + [f"{key} = {value}" for key, value in self.settings.items()]
        self.conf_path.write_text("\n".join(lines) + "\n")
        (self.conf_dir / "storage-schemas.conf").write_text(schemas_text(schemas))
        (self.conf_dir / "storage-aggregation.conf").write_text(aggregation_text(aggregation))

    # -- process ---------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = dict(os.environ, GRAPHITE_ROOT=str(self.root), PYTHONUNBUFFERED="1")
        env.pop("BGL_STORE", None)
        # the checkout first: an editable install made before carbon_plugin existed lacks it
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        return env

    def _command(self, *args: str) -> list[str]:
        return [str(self.launcher), f"--config={self.conf_path}", *args]

    def start(self, timeout: float = 60.0, daemon: bool = False) -> None:
        """Start (in the foreground, or as a daemon) and wait until the line and pickle ports listen."""
        self._log = open(self.log_path, "ab")
        self.daemon = daemon
        if daemon:  # twistd forks; the launcher returns once the daemon is on its own
            subprocess.run(self._command("start"), stdout=self._log, stderr=subprocess.STDOUT, env=self._env(),
                           cwd=self.root, check=True, timeout=timeout)
            self.process = None
        else:
            self.process = subprocess.Popen(self._command("--debug", "start"), stdout=self._log,
                                            stderr=subprocess.STDOUT, env=self._env(), cwd=self.root)
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"carbon-cache exited with {self.process.returncode}:\n{self.log()[-3000:]}")
            try:
                for port in (self.line_port, self.pickle_port):
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(f"carbon-cache did not listen within {timeout}s:\n{self.log()[-3000:]}")
                time.sleep(0.1)

    @property
    def pidfile(self) -> Path:
        return self.storage_dir / "carbon-cache-a.pid"

    def daemon_pid(self) -> int:
        return int(self.pidfile.read_text().strip())

    def stop(self, timeout: float = 120.0) -> int:
        """SIGTERM (a daemon: through `bgl-carbon-cache stop`), then wait for the exit; returns its status."""
        if self.daemon:
            pid = self.daemon_pid()
            subprocess.run(self._command("stop"), stdout=self._log, stderr=subprocess.STDOUT, env=self._env(),
                           cwd=self.root, check=True, timeout=timeout)
            deadline = time.monotonic() + timeout
            while os.path.exists(f"/proc/{pid}") and process_state(pid) != "Z":
                if time.monotonic() > deadline:
                    raise RuntimeError(f"carbon-cache daemon {pid} did not stop within {timeout}s")
                time.sleep(0.05)
            self._log.close()
            return 0
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"carbon-cache did not stop within {timeout}s:\n{self.log()[-3000:]}")
        self._log.close()
        return code

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def log(self) -> str:
        """The current run's log, which only grows: carbon's output in the foreground, its
        console log (LOG_DIR/carbon-cache-a/console.log) as a daemon."""
        path = self.storage_dir / "log" / "carbon-cache-a" / "console.log" if self.daemon else self.log_path
        return path.read_text(errors="replace") if path.exists() else ""

    def full_log(self) -> str:
        """Every run's output: the foreground log, then the daemon console log."""
        console = self.storage_dir / "log" / "carbon-cache-a" / "console.log"
        return "".join(p.read_text(errors="replace") for p in (self.log_path, console) if p.exists())

    def wait_for_log(self, text: str, timeout: float = 60.0, start: int = 0) -> int:
        """Wait until `text` appears in the log after offset `start`; returns its offset."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.log().find(text, start)
            if found >= 0:
                return found
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"carbon-cache exited while waiting for {text!r}:\n{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{text!r} not in carbon's log after {timeout}s:\n{self.log()[-3000:]}")
            time.sleep(0.05)

    # -- sending ---------------------------------------------------------------------------
    def send_plaintext(self, points: Iterable[Point], raw_lines: Iterable[str] = ()) -> None:
        """Send `name value timestamp` lines; returns once carbon has read all of them."""
        send_to_carbon(self.line_port, plaintext(points) + "".join(raw_lines).encode())

    def send_pickle(self, points: Iterable[Point], batch: int = 500) -> None:
        """Send pickle messages of `batch` points; returns once carbon has read all of them."""
        points = list(points)
        chunks = []
        for start in range(0, len(points), batch):
            payload = pickle.dumps([(n, (t, v)) for n, t, v in points[start:start + batch]], protocol=2)
            chunks.append(struct.pack("!L", len(payload)) + payload)
        send_to_carbon(self.pickle_port, b"".join(chunks))


def plaintext(points: Iterable[Point]) -> bytes:
    """Carbon plaintext lines `name value timestamp` of (name, timestamp, value) points."""
    return "".join(f"{name} {value!r} {timestamp!r}\n" for name, timestamp, value in points).encode()


def send_to_carbon(port: int, data: bytes, host: str = "127.0.0.1") -> None:
    """Send, half-close, and wait for carbon to close: it has then processed every byte."""
    with socket.create_connection((host, port), timeout=120) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass


def process_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def carbon_self_metric(name: str) -> str:
    """Glob of a carbon-cache self-metric (any host, any instance)."""
    return f"carbon.agents.*.{name}"


def carbonlink_request(port: int, request: dict, timeout: float = 30.0) -> dict:
    """One CarbonLink request (graphite-web's cache query protocol) and its answer."""
    payload = pickle.dumps(request, protocol=2)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(struct.pack("!L", len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack("!L", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("carbon closed the CarbonLink connection")
            data += chunk
    return pickle.loads(data[4:])


def series_points(name: str, step: int, count: int, now: int, rng: random.Random) -> list[tuple[str, float, float]]:
    """`count` points of one metric, one per `step` seconds ending a step before now, random values."""
    last = now - now % step - step
    return [(name, float(last - i * step), rng.uniform(-1000, 1000)) for i in range(count)]
