"""Free TCP ports for the processes the tests start, chosen outside the kernel's ephemeral range.

A port found free is bound by the server seconds later (a JVM: tens of seconds). A port from
the ephemeral range may meanwhile become the source port of any client connection on the
machine (other tests, other workers), and the server then fails with "Address already in
use"; below that range only another server choosing the same port at random can take it.
"""
from __future__ import annotations

import os
import random
import shutil
import socket
import tempfile
import time
from pathlib import Path

LOWEST = 10_000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


_HANDED_OUT: set[int] = set()


def _reservations() -> Path:
    """The folder every worker of this test run reserves its ports in."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    folder = Path(tempfile.gettempdir()) / f"bgl-test-ports-{run}"
    if not folder.exists():
        _remove_stale(folder.parent)
        folder.mkdir(exist_ok=True)
    return folder


def _remove_stale(parent: Path, age: float = 2 * 86_400) -> None:
    """Earlier runs' folders left for more than two days."""
    for old in parent.glob("bgl-test-ports-*"):
        try:
            if time.time() - old.stat().st_mtime > age:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass


def _reserve(port: int) -> bool:
    """True when no process of this run was handed the port before."""
    if port in _HANDED_OUT:
        return False
    try:
        os.close(os.open(_reservations() / str(port), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    _HANDED_OUT.add(port)
    return True


def _ephemeral() -> range:
    try:
        low, high = (int(field) for field in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)


def _bindable(port: int, addresses: tuple[str, ...]) -> bool:
    try:
        for address in addresses:
            with socket.socket() as probe:
                probe.bind((address, port))
    except OSError:
        return False
    return True


def free_port(addresses: tuple[str, ...] = ("127.0.0.1",)) -> int:
    """A TCP port free on every address (the nodes of a cluster share their ports)."""
    ephemeral = _ephemeral()
    ports = [port for span in (range(LOWEST, ephemeral.start), range(max(ephemeral.stop, LOWEST), 65536))
             for port in span]
    rng = random.Random()
    for _ in range(200):
        if ports:
            port = rng.choice(ports)
        else:  # the whole range is ephemeral: the kernel's choice
            with socket.socket() as probe:
                probe.bind((addresses[0], 0))
                port = probe.getsockname()[1]
        if _bindable(port, addresses) and _reserve(port):
            return port
    raise OSError(f"no TCP port free on all of {addresses}")
