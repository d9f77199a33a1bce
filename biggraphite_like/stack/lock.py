"""One `bgl run` at a time on a data directory.

`bgl run` rewrites the data directory's configuration at every start and its programs keep
sockets and logs there: a second one on the same directory would change the first one's
files under it. So `bgl run` takes an exclusive lock (flock) on run/bgl-run.lock before it
writes anything, and holds it for its whole life; the kernel releases it when the process
ends, however it ends (SIGKILL too), so a stale file never blocks a start. The file holds
the owner's pid, address and ports, which a refused start reports.

The lock's descriptor is not inherited by the children (close_fds), so it is `bgl run`'s
own life that counts.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from biggraphite_like.errors import StackError
from biggraphite_like.exit_status import EXIT_BUSY
from biggraphite_like.stack.config import DIR_MODE, FILE_MODE, StackConfig


class DataDirectoryBusy(StackError):
    """Another `bgl run` holds the data directory's lock."""

    exit_status = EXIT_BUSY


class DataDirectoryLock:
    """The exclusive lock of a data directory, held until `release` (or the process's end)."""

    def __init__(self, config: StackConfig):
        self.config = config
        self.path = config.lock_file
        self._fd: int | None = None

    def acquire(self) -> "DataDirectoryLock":
        """Take the lock and record who holds it; DataDirectoryBusy when another process has it."""
        for folder in (self.config.data_dir, self.config.run_dir):
            if not folder.exists():
                folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise StackError(f"cannot lock {self.path}: {exc.strerror}") from None
            raise DataDirectoryBusy(self._busy_message()) from None
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(self._owner()) + "\n").encode())
        self._fd = fd
        return self

    def release(self) -> None:
        """Give the lock back (the file stays: removing it would race with a starting run)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "DataDirectoryLock":
        return self.acquire()

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def _owner(self) -> dict:
        config = self.config
        return {"pid": os.getpid(), "bind": config.bind, "ports": config.ports(),
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}

    def _busy_message(self) -> str:
        owner = read_owner(self.path)
        directory = self.config.data_dir
        if owner is None:
            who = "another `bgl run`"
        else:
            ports = ", ".join(f"{option} {port}" for option, port in owner.get("ports", {}).items())
            who = (f"`bgl run` pid {owner.get('pid')} (since {owner.get('started')}, on {owner.get('bind')}:"
                   f" {ports})")
        return (f"the data directory {directory} is in use by {who}: stop it first, or give this one another"
                f" --data-dir (lock: {self.path})")


def read_owner(path: Path, wait: float = 1.0) -> dict | None:
    """What the lock's holder recorded; None when unreadable (it may be writing it: retried
    for `wait` seconds)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            owner = json.loads(path.read_text())
            if isinstance(owner, dict):
                return owner
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)
