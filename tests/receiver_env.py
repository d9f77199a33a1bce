"""Run `bgl receive` as an operator would, on free 127.0.0.1 ports, for the receiver's
end-to-end tests: its output and log in files, stopped with SIGTERM (or killed)."""
from __future__ import annotations

import os
import pickle
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from biggraphite_like.accessor import Accessor
from tests.carbon_env import REPO_ROOT, free_port


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BglReceive:
    """One `bgl receive` process on a store."""

    def __init__(self, root: Path, store_url: str, *options: str, udp: bool = False):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.store_url = store_url
        self.line_port, self.pickle_port, self.carbonlink_port = free_port(), free_port(), free_port()
        self.udp_port = free_udp_port() if udp else None
        self.metrics_file = self.root / "receiver.prom"
        self.out_path = self.root / "receive.out"
        self.err_path = self.root / "receive.err"
        self.options = list(options)
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "biggraphite_like.cli", "--store", self.store_url, "receive",
                   "--line-port", str(self.line_port), "--pickle-port", str(self.pickle_port),
                   "--carbonlink-port", str(self.carbonlink_port), "--metrics-file", str(self.metrics_file)]
        if self.udp_port:
            command += ["--udp-port", str(self.udp_port)]
        return command + self.options

    def start(self, timeout: float = 60.0) -> "BglReceive":
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.process = subprocess.Popen(self.command(), stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + timeout
        while "listening:" not in self.out_path.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"bgl receive did not start:\n{self.output()}")
            time.sleep(0.05)
        return self

    def output(self) -> str:
        return self.out_path.read_text(errors="replace") + self.err_path.read_text(errors="replace")

    def stop(self, timeout: float = 120.0) -> int:
        """SIGTERM and wait for the exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def counters(self) -> dict[str, float]:
        """The totals of the Prometheus text file (written at start, each record and exit)."""
        found = {}
        for line in self.metrics_file.read_text().splitlines():
            match = re.match(r"bgl_receiver_(\w+) (\S+)$", line)
            if match:
                found[match.group(1)] = float(match.group(2))
        return found


def stored_points(url: str, points, now: int) -> int:
    """How many of points, (name, timestamp, value) sent around `now`, the store holds with
    exactly the value sent (the metrics never created count as not held)."""
    accessor = Accessor.from_url(url)
    try:
        existing = accessor.get_metrics(sorted({n for n, _, _ in points}))
        series = accessor.fetch(sorted(existing), now - 86_000, now + 60, now=now + 60) if existing else {}
        held = 0
        for name, timestamp, value in points:
            ts = series.get(name)
            if ts is not None and ts.values[(timestamp - ts.start) // ts.step] == value:
                held += 1
        return held
    finally:
        accessor.close()


def pickle_frames(points, batch: int = 500) -> bytes:
    """carbon's pickle frames of (name, timestamp, value) points, batch points a frame."""
    frames = []
    for start in range(0, len(points), batch):
        payload = pickle.dumps([(n, (t, v)) for n, t, v in points[start:start + batch]], protocol=2)
        frames.append(struct.pack("!L", len(payload)) + payload)
    return b"".join(frames)
