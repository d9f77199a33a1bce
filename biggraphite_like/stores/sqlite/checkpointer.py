"""The checkpoint of bulk tag indexing, in a thread of its own.

A write batch that defers its checkpoint (store.defer_checkpoint) lets the WAL grow to
the size it allows; copying it into the database and syncing that then cost the writer
about 6 us a series, mostly fsync, every few batches. Instead, past that size, a pass of
`wal_checkpoint(PASSIVE)` runs on a connection of its own in a thread while the writer
goes on with its next batches (in WAL mode a checkpoint and a writer run side by side;
SQLite copies only committed frames and keeps them in the WAL until the database file
holds them, synced: a committed batch is never lost, whatever is killed when). Once the
pass is over (and has synced the WAL frames committed during it, so that the writer's
sync has only the newest to write), the writer's next commit checkpoints what was
written meanwhile (a batch or two) and restarts the WAL: the next commit writes it from
its start, the file is kept, not truncated (a truncation frees blocks that ext4 mounted
with `discard` trims, ~33-80 ms a time here, and the next commits allocate them again).
If the WAL's frames reach twice the allowed size before the pass is over, the writer
waits for it: the WAL stays under twice the allowed size plus a batch.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import threading

log = logging.getLogger(__name__)


class BackgroundCheckpoint:
    """At most one checkpoint pass at a time on the store file at path, in a thread."""

    def __init__(self, path: str):
        self.path = path
        self.passes = 0  # passes started (tests and stats)
        self.error: str | None = None  # the last pass's failure, if any (the writer's own checkpoint follows)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def running(self) -> bool:
        """Whether a pass is in flight (in this process: a fork does not inherit the thread)."""
        thread = self._thread
        return thread is not None and self._pid == os.getpid() and thread.is_alive()

    def start(self) -> None:
        """Start a pass unless one is in flight."""
        with self._lock:
            if self.running():
                return
            self._thread = threading.Thread(target=self._run, name="bgl-wal-checkpoint", daemon=True)
            self._pid = os.getpid()
            self.passes += 1
            self._thread.start()

    def take_finished(self) -> bool:
        """Whether a pass was started and is over (then forgotten): the WAL's frames up to
        its start are in the database, the writer's own checkpoint has only the rest to copy."""
        with self._lock:
            if self._thread is None or self.running():
                return False
            self._thread = None
            return True

    def wait(self) -> None:
        """Wait for the pass in flight, if any."""
        thread = self._thread
        if thread is not None and self._pid == os.getpid():
            thread.join()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()  # never waits for readers nor writers
            finally:
                conn.close()
            self._sync_wal()
            self.error = None
        except (sqlite3.Error, OSError) as exc:  # disk full, I/O error: the writer's own checkpoint meets it again
            self.error = f"background checkpoint of {self.path}: {exc}"
            log.warning("%s", self.error)

    def _sync_wal(self) -> None:
        """Write to disk the frames committed during the pass (fdatasync of the WAL: the
        writer's own checkpoint that follows then has only the newest to sync)."""
        fd = os.open(self.path + "-wal", os.O_RDONLY)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
