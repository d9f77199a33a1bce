"""The SQLite file's free pages: given back to the file system as transactions free them.

Sealing a window deletes its open tail and open chunk; expiry and deletions drop rows:
the pages they held go to SQLite's freelist, which later writes reuse but which the file
keeps (0.2 bytes a point of a dense day's store, by the hour of the day). A file made by
`bgl syncdb` is in SQLite's incremental auto-vacuum mode (`PRAGMA auto_vacuum =
INCREMENTAL`, set before its first table: SQLite keeps a pointer map, a page per ~800),
and each write batch gives back, before it commits, up to FREE_PAGES_PER_COMMIT of the
pages left free (`PRAGMA incremental_vacuum`: the file's last pages move into free ones
and the file is cut; ~70 us a page moved). A file made before keeps its free pages until
`bgl syncdb --vacuum` (`vacuum`) rewrites it in that mode.
"""
from __future__ import annotations

import os
import time

from biggraphite_like.errors import StoreError
from biggraphite_like.stores.sqlite.schema import INCREMENTAL_VACUUM

FREE_PAGES_PER_COMMIT = 512  # pages a write batch gives back at most (2 MiB; ~35 ms of moving pages)
_MODES = {0: "none", 1: "full", 2: "incremental"}


class FreePagesMixin:
    """Free pages given back at each commit; VACUUM for files made before."""

    def _give_back_free_pages(self) -> None:
        """Before a write batch commits: cut up to FREE_PAGES_PER_COMMIT free pages off the
        file (nothing in a file not in incremental auto-vacuum mode, read once a connection)."""
        local = self._local
        conn = local.conn
        if local.incremental is None:
            local.incremental = conn.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL_VACUUM
        if not local.incremental:
            return
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        # one page a call: Python's sqlite3 steps a statement without result columns once,
        # and incremental_vacuum frees one page a step
        for _ in range(min(free, FREE_PAGES_PER_COMMIT)):
            conn.execute("PRAGMA incremental_vacuum(1)")

    def free_pages_facts(self) -> dict[str, int | str]:
        """What `bgl stats` and `bgl du` show of the free pages (call inside a read)."""
        conn = self._conn
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        mode = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
        facts: dict[str, int | str] = {
            "disk_bytes.free": conn.execute("PRAGMA freelist_count").fetchone()[0] * page_size,
            "free_pages": _MODES.get(mode, str(mode)) if mode else (
                "none: kept for later writes, never given back (a file made before incremental"
                f" vacuum); `bgl --store {self.url} syncdb --vacuum` rewrites it to give them back"),
        }
        return facts

    def upgrade_notes(self) -> list[str]:
        self._check_schema()
        with self.read_snapshot(), self._errors("read the vacuum mode"):
            mode = self._conn.execute("PRAGMA auto_vacuum").fetchone()[0]
        if mode:  # incremental, or full (set by hand: SQLite then gives them back at every commit)
            return []
        return [f"{self.path} keeps its free pages (made before incremental vacuum): `bgl --store {self.url} syncdb"
                f" --vacuum` rewrites it ({_size(self.path)}) so that writes give them back; it needs about twice"
                " that free (a temporary copy in SQLite's temporary directory, the WAL beside the file) and"
                " holds off writers while it runs"]

    def vacuum(self) -> dict[str, int | float | str]:
        """VACUUM: the file rewritten in incremental auto-vacuum mode, every free page given
        back, then the WAL checkpointed and truncated. It copies the whole file (a temporary
        copy in SQLite's temporary directory: $SQLITE_TMPDIR, $TMPDIR, /var/tmp or /tmp, not
        memory; then every page through the WAL): writers wait for it (readers go on)."""
        self._check_schema()
        self._bulk_checkpoint.wait()
        conn = self._conn
        if conn.in_transaction:
            raise StoreError(f"cannot vacuum {self.path} inside a transaction: call vacuum() outside write_batch")
        before = _file_bytes(self.path)
        started = time.monotonic()
        with self._errors("vacuum the store"):
            mode = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute("PRAGMA temp_store = FILE")  # the copy of a big store does not fit in memory
            try:
                conn.execute("VACUUM")
            finally:
                conn.execute("PRAGMA temp_store = MEMORY")
            self._local.incremental = None
            self._checkpoint()
        return {"file_bytes_before": before, "file_bytes_after": _file_bytes(self.path),
                "auto_vacuum_before": _MODES.get(mode, str(mode)), "seconds": round(time.monotonic() - started, 3)}


def _file_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def _size(path: str) -> str:
    size = _file_bytes(path)
    return f"{size / (1 << 20):.1f} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
