"""VictoriaMetrics (Debian's `victoria-metrics` package) as a peer in the benchmarks: found or
installed, started as a subprocess on free 127.0.0.1 ports with its own data directory
(never as a system service), talked to over its HTTP and Graphite plaintext ports, stopped.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator

from tests.carbon_env import free_port

PACKAGE = "victoria-metrics"
INSTALL_HINT = f"apt-get install {PACKAGE}  (as root; Debian's package, the binary is /usr/bin/{PACKAGE})"


class PeerUnavailable(RuntimeError):
    """VictoriaMetrics is not installed and cannot be installed here."""


def binary(install: bool = True) -> str:
    """Path of the victoria-metrics binary; installs the package with apt-get when it is
    missing and we run as root, else raises PeerUnavailable saying how to install it."""
    found = shutil.which(PACKAGE) or (f"/usr/bin/{PACKAGE}" if os.access(f"/usr/bin/{PACKAGE}", os.X_OK) else None)
    if found:
        return found
    if install and os.geteuid() == 0 and shutil.which("apt-get"):
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "--no-install-recommends", PACKAGE]):
            subprocess.run(command, check=False, env=env, stdout=subprocess.DEVNULL)
        return binary(install=False)
    raise PeerUnavailable(f"{PACKAGE} is not installed; install it with: {INSTALL_HINT}")


def http_get(url: str, timeout: float = 300.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read()


class VictoriaMetrics:
    """One VictoriaMetrics process on a data directory."""

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        self.http_port = free_port()
        self.graphite_port = free_port()
        self.process: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def command(self) -> list[str]:
        return [binary(), f"-httpListenAddr=127.0.0.1:{self.http_port}",
                f"-graphiteListenAddr=127.0.0.1:{self.graphite_port}", f"-storageDataPath={self.data_dir}",
                "-retentionPeriod=1y",
                # just-written points are readable at once (the defaults hide the last 30 s)
                "-search.latencyOffset=0s", "-search.cacheTimestampOffset=0s", "-search.disableCache",
                "-loggerLevel=ERROR"]

    def start(self, timeout: float = 60.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if http_get(self.url + "/health", timeout=5).strip() == b"OK":
                    break
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"victoria-metrics did not start:\n{self.log()[-2000:]}")
            time.sleep(0.1)
        # the plaintext listener opens with the HTTP one; wait for it anyway
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.graphite_port), timeout=5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self, timeout: float = 60.0) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    # -- HTTP --------------------------------------------------------------------------------
    def get(self, path: str, **params: object) -> bytes:
        query = urllib.parse.urlencode(params, doseq=True)
        return http_get(self.url + path + ("?" + query if query else ""))

    def export(self, match: str, start: int, end: int) -> Iterator[tuple[str, list[int], list[float]]]:
        """Raw points (/api/v1/export): (name, timestamps in seconds, values) per series."""
        body = self.get("/api/v1/export", **{"match[]": match, "start": start, "end": end})
        for line in body.splitlines():
            if line.strip():
                series = json.loads(line)
                yield (series["metric"]["__name__"], [t // 1000 for t in series["timestamps"]],
                       [float(v) for v in series["values"]])

    def series_count(self) -> int:
        return int(json.loads(self.get("/api/v1/series/count"))["data"][0])

    def stored_rows(self) -> int:
        """Rows held in the storage's parts, in memory or on disk (its own /metrics: vm_rows)."""
        total = 0
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith(('vm_rows{type="storage/small"}', 'vm_rows{type="storage/big"}')):
                total += int(float(line.split()[-1]))
        return total

    def settle_on_disk(self, rows: int, timeout: float = 300.0) -> int:
        """Bytes on disk once `rows` rows are stored and merged: /internal/force_flush makes
        them searchable (in this version, not written), /internal/force_merge writes the
        merged parts and returns at once, so wait until the size has changed and then held
        still for 2 s (or held still for 10 s: nothing was left to write)."""
        deadline = time.monotonic() + timeout
        while True:
            self.get("/internal/force_flush")
            if self.stored_rows() >= rows:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"victoria-metrics holds {self.stored_rows()} rows, expected {rows}")
            time.sleep(0.5)
        before = self.disk_bytes()
        self.get("/internal/force_merge")
        merged = time.monotonic()
        sizes = [before]
        while time.monotonic() < deadline:
            time.sleep(0.5)
            sizes.append(self.disk_bytes())
            still = len(sizes) >= 5 and len(set(sizes[-5:])) == 1
            if still and (sizes[-1] != before or time.monotonic() - merged > 10):  # nothing was left to write
                break
        return sizes[-1]

    def disk_bytes(self) -> int:
        """Bytes of every file under the data directory (data, indexdb, metadata)."""
        return sum(path.stat().st_size for path in self.data_dir.rglob("*") if path.is_file())
