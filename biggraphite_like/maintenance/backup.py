"""`bgl backup` and `bgl restore`: a consistent copy of an SQLite store, taken while it runs.

A store in WAL mode cannot be copied with `cp`: the file and its WAL change under the copy.
The backup holds one read transaction on the store (WAL gives it one snapshot, writers go
on beside it) and copies that snapshot page by page with SQLite's online backup API, in
steps, so progress can be shown; a step never restarts, since the snapshot does not move.
The copy is written next to DEST as DEST.partial, checked with `PRAGMA integrity_check`,
made a self-contained file (rollback journal, no WAL beside it) and only then renamed to
DEST: a DEST that exists is a complete, checked backup. What was committed before the
backup began is in it; what is committed while it runs may be or not, whole transactions
only. The store's WAL grows meanwhile (checkpoints cannot pass the snapshot) and shrinks at
the next checkpoint after it.

A restore checks SRC (integrity_check and our schema), refuses while any process has the
store open (Linux: /proc/*/fd; a restore under a running writer would be lost by it),
copies SRC to STORE.restoring, turns WAL mode on, and renames it to the store's path. A
store already there is replaced only with `force`, and kept beside it as
STORE.replaced-<time> (with its WAL, so nothing of it is lost).

Cassandra has no such copy: snapshots are per node (`nodetool snapshot`) plus the
keyspace's schema; `BackupUnsupported` says where that is described.
"""
from __future__ import annotations

import dataclasses
import os
import sqlite3
import time
from typing import TextIO

from biggraphite_like.errors import BglError, StoreError
from biggraphite_like.maintenance.exclusive import SIDE_FILES, refuse_if_in_use
from biggraphite_like.maintenance.progress import LOG_INTERVAL, Progress
from biggraphite_like.stores.base import Store
from biggraphite_like.urls import redact_url

STEP_PAGES = 1024  # pages copied per step (4 MiB of 4 KiB pages): a progress update each
SCHEMA_TABLES = ("metrics", "directories", "store_state")  # what makes a file a store of ours
CASSANDRA_DOC = "docs/operations.md#cassandra-backups"


class BackupUnsupported(BglError):
    """The store has no online copy (Cassandra): the message says how to back it up."""


class BackupFailed(StoreError):
    """A backup or restore could not be made or checked; nothing was replaced."""


@dataclasses.dataclass
class CopyReport:
    """What a backup or restore copied."""

    source: str
    destination: str
    pages: int = 0
    bytes: int = 0
    integrity: str = ""  # integrity_check's answer ("ok")
    replaced: str | None = None  # restore: where the store that was there went
    duration_seconds: float = 0.0

    def counters(self) -> dict[str, int | float]:
        return {"pages": self.pages, "bytes": self.bytes, "duration_seconds": self.duration_seconds}


def sqlite_path(store: Store, command: str) -> str:
    """The store's file; BackupUnsupported on a store that is not an SQLite file."""
    path = getattr(store, "path", None)
    if not store.url.startswith("sqlite:") or path is None:
        raise BackupUnsupported(
            f"`bgl {command}` copies an SQLite store; {redact_url(store.url)} is not one. Back up Cassandra"
            f" with `nodetool snapshot` on every node and a copy of the keyspace's schema ({CASSANDRA_DOC})")
    return path


def backup(store: Store, destination: str, progress_stream: TextIO | None = None,
           step_pages: int = STEP_PAGES) -> CopyReport:
    """Copy the store's current snapshot to `destination` (a new file), checked; see the module."""
    source = sqlite_path(store, "backup")
    destination = os.path.abspath(destination)
    if not os.path.exists(source):
        raise BackupFailed(f"nothing to back up: the store file {source} does not exist")
    if os.path.exists(destination):
        raise BackupFailed(f"{destination} exists: give a new file name (a backup never overwrites one)")
    _check_directory(os.path.dirname(destination))
    partial = destination + ".partial"
    started = time.monotonic()
    report = CopyReport(source, destination)
    _remove(partial)
    try:
        src = sqlite3.connect(source, timeout=getattr(store, "timeout", 30.0), isolation_level=None)
        try:
            src.execute("BEGIN")
            _check_schema(src, source)  # the read also opens the snapshot the copy keeps
            report.pages = _copy(src, partial, "bgl backup", progress_stream, step_pages)
        finally:
            src.close()
        report.integrity = _finish(partial, journal_mode="DELETE")
        os.rename(partial, destination)
        _sync_directory(os.path.dirname(destination))
    except sqlite3.Error as exc:
        raise BackupFailed(f"backup of {source} to {destination} failed: {exc}; nothing was kept") from exc
    finally:
        _remove(partial)
    report.bytes = os.path.getsize(destination)
    report.duration_seconds = round(time.monotonic() - started, 3)
    return report


def restore(store: Store, source: str, force: bool = False, progress_stream: TextIO | None = None,
            step_pages: int = STEP_PAGES) -> CopyReport:
    """Make the store a copy of the backup `source`; see the module."""
    target = sqlite_path(store, "restore")
    source = os.path.abspath(source)
    if not os.path.isfile(source):
        raise BackupFailed(f"no backup at {source}")
    started = time.monotonic()
    report = CopyReport(source, target)
    _check_directory(os.path.dirname(target))
    refuse_if_in_use(target, "a restore under a running writer would be lost by it")
    if os.path.exists(target) and not force:
        raise BackupFailed(f"the store {target} exists: a restore replaces it; give --force to do so (it is kept"
                           f" as {target}.replaced-<time>)")
    restoring = target + ".restoring"
    for suffix in SIDE_FILES:
        _remove(restoring + suffix)
    try:
        src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, isolation_level=None)
        try:
            report.integrity = _integrity(src, source)
            src.execute("BEGIN")
            _check_schema(src, source)
            report.pages = _copy(src, restoring, "bgl restore", progress_stream, step_pages)
        finally:
            src.close()
        _finish(restoring, journal_mode="WAL", check=False)
        report.replaced = _set_aside(target)
        os.rename(restoring, target)
        _sync_directory(os.path.dirname(target))
    except sqlite3.Error as exc:
        raise BackupFailed(f"restore of {source} into {target} failed: {exc}; the store was not changed") from exc
    finally:
        for suffix in SIDE_FILES:
            _remove(restoring + suffix)
    report.bytes = os.path.getsize(target)
    report.duration_seconds = round(time.monotonic() - started, 3)
    return report


def _copy(src: sqlite3.Connection, path: str, label: str, progress_stream: TextIO | None, step_pages: int) -> int:
    """Copy src's open snapshot into a new file at path, a progress update a step; pages copied."""
    progress = Progress(label + ": pages", stream=progress_stream, log_interval=LOG_INTERVAL)
    copied = 0

    def advance(_status: int, remaining: int, total: int) -> None:
        nonlocal copied
        progress.total = total
        progress.advance(total - remaining - progress.done)
        copied = total

    dst = sqlite3.connect(path, isolation_level=None)
    try:
        dst.execute("PRAGMA journal_mode = OFF")  # a new file, checked before it is used
        dst.execute("PRAGMA synchronous = OFF")
        src.backup(dst, pages=step_pages, progress=advance)
    finally:
        dst.close()
        progress.close()
    return copied


def _finish(path: str, journal_mode: str, check: bool = True) -> str:
    """Check the copy, set its journal mode, and sync it to disk; integrity_check's answer."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        answer = _integrity(conn, path) if check else ""
        conn.execute(f"PRAGMA journal_mode = {journal_mode}")
    finally:
        conn.close()
    with open(path, "rb") as file:
        os.fsync(file.fileno())
    return answer


def _integrity(conn: sqlite3.Connection, path: str) -> str:
    rows = [row[0] for row in conn.execute("PRAGMA integrity_check(20)")]
    if rows != ["ok"]:
        raise BackupFailed(f"{path} fails PRAGMA integrity_check: {'; '.join(rows)}")
    return "ok"


def _check_schema(conn: sqlite3.Connection, path: str) -> None:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = [table for table in SCHEMA_TABLES if table not in tables]
    if missing:
        raise BackupFailed(f"{path} is not a biggraphite_like store (no table {', '.join(missing)})")


def _set_aside(target: str) -> str | None:
    """Move the store at target (with its WAL and shared memory) to target.replaced-<time>;
    the new name, None when there was none. A WAL left beside the new file would be replayed
    into it."""
    if not any(os.path.exists(target + suffix) for suffix in SIDE_FILES):
        return None
    aside = f"{target}.replaced-{time.strftime('%Y%m%dT%H%M%S')}"
    for suffix in SIDE_FILES:
        if os.path.exists(target + suffix):
            os.rename(target + suffix, aside + suffix)
    return aside


def _check_directory(directory: str) -> None:
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise BackupFailed(f"directory {directory} does not exist or is not writable")


def _sync_directory(directory: str) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
