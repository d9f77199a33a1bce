"""Jobs that need an SQLite store to themselves (`bgl restore`, `bgl set-metadata`).

A process that has the store open keeps what it read: a writer keeps writing into the
file it opened (a restored file replaces it under it), and keeps the metadata of the
metrics it writes for up to its metadata cache's ttl (a metric changed under it would get
points it can no longer read). Such jobs refuse while any other process holds the file
open, and name them.
"""
from __future__ import annotations

import os

from biggraphite_like.errors import BglError

SIDE_FILES = ("", "-wal", "-shm", "-journal")  # an SQLite file and the files beside it


class StoreInUse(BglError):
    """A job that needs the store to itself was asked while other processes have it open."""


def refuse_if_in_use(path: str, why: str) -> None:
    """StoreInUse, naming the processes, when any other process has the file open."""
    users = processes_using(path)
    if users:
        raise StoreInUse(f"{path} is open in {', '.join(users)}: stop them (bgl run, bgl receive, carbon-cache,"
                         f" graphite-web) first; {why}")


def processes_using(path: str) -> list[str]:
    """`pid N (command)` of the other processes holding the file or its WAL open (Linux,
    the processes /proc shows us; elsewhere none are found)."""
    wanted = {os.path.realpath(path) + suffix for suffix in SIDE_FILES}
    found = []
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit() and int(entry) != os.getpid()]
    except OSError:
        return []
    for pid in entries:
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
            if not any(os.readlink(f"/proc/{pid}/fd/{fd}") in wanted for fd in descriptors):
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                command = file.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone, or not ours to look at
            continue
        found.append(f"pid {pid} ({command[:80]})")
    return found
