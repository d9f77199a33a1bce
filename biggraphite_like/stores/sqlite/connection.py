"""The SQLite store's connections and transactions: one connection per thread (and per
forked process), plus the shared readers a process's globs take turns on when it reads
through mmap (its pages mapped once, not once per thread), IMMEDIATE write batches, read
snapshots, a bounded WAL, the change marks other processes see (deletions, points)."""
from __future__ import annotations

import contextlib
import functools
import os
import queue
import shutil
import sqlite3
import struct
import threading
from typing import Callable, Iterator, Self, TypeVar
from urllib.parse import parse_qsl, urlsplit

from biggraphite_like.errors import (
    InvalidStoreURL,
    SchemaMissing,
    StoreError,
    StoreFull,
    StoreLocked,
    StoreUnavailable,
)
from biggraphite_like.stores.sqlite.checkpointer import BackgroundCheckpoint
from biggraphite_like.stores.sqlite.name_strings import NameStrings
from biggraphite_like.stores.sqlite.name_tree import NameTree
from biggraphite_like.stores.sqlite.schema import DEFAULT_TIMEOUT, WAL_LIMIT_BYTES


_WAL_INDEX_HEADER = struct.Struct("=IIIBBHII")  # version, unused, change, initialised, big-endian, page size, mxFrame, pages
_AUTOCHECKPOINT_PAGES = 1000  # SQLite's default wal_autocheckpoint, restored after a deferring batch
TIGHT_FREE_FACTOR = 4  # below this many wal_limits free on its disk, the WAL is bounded at TIGHT_WAL_BYTES
TIGHT_WAL_BYTES = 1 << 20
T = TypeVar("T")
SHARED_READERS = 1  # connections of a process reading through mmap that its threads' globs share (shared_reads)
SHARED_READER_WAIT = 0.05  # seconds a glob waits for a shared reader before reading through its thread's own connection
_READERS_LOCK = threading.Lock()


def through_shared_reader(method: Callable[..., T]) -> Callable[..., T]:
    """A store method whose reads go through a shared reader (ConnectionMixin.shared_reads)."""
    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        with self.shared_reads():
            return method(self, *args, **kwargs)
    return wrapped


class ConnectionMixin:
    """Per-thread connections, shared readers, transactions and the marks that tell
    processes what changed."""

    def __init__(self, path: str, timeout: float = DEFAULT_TIMEOUT, url: str | None = None, mmap_size: int = 0):
        self.path = os.path.abspath(path)
        self.timeout = timeout
        self.mmap_size = mmap_size  # bytes of the file each connection reads through mmap (0: none)
        self.url = url or f"sqlite://{self.path}"
        self._local = threading.local()
        self._keys: dict[str, int] = {}  # metric name -> integer key used by datapoint tables
        self._tables: set[str] = set()
        self._strings = NameStrings()  # ids of the components and parents of names
        self._tree = NameTree()  # directory keys and paths, metadata ids
        self._id_caches: list[NameStrings | NameTree] = [self._strings, self._tree]  # forgotten on a rollback
        # (the tag index adds its own)
        self._tag_index = None  # made by tag_index() (schema), once
        self._windows: dict[str, int] = {}  # stage table -> slots per window (its point_windows row)
        self._schema_checked = False
        self._may_create = False  # only syncdb creates the file: reads never leave an empty one
        self._deletions_seen: int | None = None
        self._directory_changes_seen: int | None = None
        self.wal_limit = WAL_LIMIT_BYTES  # set before the first connection to change it
        self._bulk_checkpoint = BackgroundCheckpoint(self.path)  # deferring (bulk tag) batches' checkpoint
        self._readers: tuple[int, queue.LifoQueue] | None = None  # (pid, shared readers): shared_reads

    @classmethod
    def from_url(cls, url: str) -> Self:
        parts = urlsplit(url)
        path = url[len("sqlite://"):].split("?", 1)[0]
        if not path:
            raise InvalidStoreURL(f"store URL {url!r} names no file: use sqlite:///absolute/path.db")
        options = dict(parse_qsl(parts.query))
        timeout = DEFAULT_TIMEOUT
        if "timeout" in options:
            try:
                timeout = float(options.pop("timeout"))
            except ValueError:
                raise InvalidStoreURL(f"store URL {url!r}: timeout must be a number of seconds") from None
        mmap_size = 0
        if "mmap_size" in options:
            text = options.pop("mmap_size")
            if not text.isdigit():
                raise InvalidStoreURL(f"store URL {url!r}: mmap_size must be a number of bytes (0: off), not {text!r}")
            mmap_size = int(text)
        if options:
            raise InvalidStoreURL(f"store URL {url!r}: unknown option(s) {', '.join(sorted(options))}"
                                  " (known: timeout, mmap_size)")
        return cls(path, timeout=timeout, url=url, mmap_size=mmap_size)

    # -- connections -----------------------------------------------------------------
    @property
    def _conn(self) -> sqlite3.Connection:
        """The connection this thread reads and writes through: a shared reader checked out
        by shared_reads, else its own, opened on first use (and again after a fork)."""
        local = self._local
        reader = getattr(local, "reader", None)
        if reader is not None:
            return reader
        conn = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            conn = self._connect()
            local.conn, local.pid, local.depth, local.points_marked = conn, os.getpid(), 0, False
            local.absent = set()  # metric names with no row, as found inside the current write batch
            local.deferred_wal = 0
            local.incremental = None  # whether the file gives back free pages (free_pages), read at a commit
        return conn

    def _connect(self) -> sqlite3.Connection:
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            raise StoreUnavailable(f"cannot open {self.path}: directory {directory} does not exist")
        if not self._may_create and not os.path.exists(self.path):
            raise SchemaMissing(f"the store file {self.path} does not exist: run `bgl --store {self.url} syncdb`")
        try:
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA temp_store = MEMORY")
            # 16 MiB of page cache per connection (it was 64): the receiver's flusher held
            # about 50 MiB more at 100,000 metrics with no CPU-time gain; reads beyond it come
            # from the OS page cache
            conn.execute("PRAGMA cache_size = -16384")
            conn.execute(f"PRAGMA journal_size_limit = {int(self.wal_limit)}")
            if self.mmap_size:
                # pages read from the OS's page cache in place, no read() copy each (graphite-web's
                # finder sets it; a writer's touched pages would count in its RSS)
                conn.execute(f"PRAGMA mmap_size = {int(self.mmap_size)}")
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite store {self.path}: {exc}") from exc
        return conn

    @contextlib.contextmanager
    def shared_reads(self) -> Iterator[None]:
        """The block's reads go through one of the process's SHARED_READERS connections,
        checked out for the block (waiting for one when all are out), when the store reads
        through mmap and this thread is in no transaction of its own (else through its own
        connection: its snapshot, its writes; and when every reader stays out longer than
        SHARED_READER_WAIT, so that a long glob never holds up the others: their pages then
        count in the thread's own mapping, which post-request releases bound). SQLite maps
        the file once per connection and the RSS counts a page once per mapping that
        touched it: a graphite-web worker's
        request threads walking the name tree through their own connections held its pages
        once per thread; through shared readers, at most SHARED_READERS times, and they stay
        mapped for the next walk."""
        local = self._local
        own = getattr(local, "conn", None)
        if not self.mmap_size or getattr(local, "reader", None) is not None or (
                own is not None and local.pid == os.getpid() and (local.depth or own.in_transaction)):
            yield
            return
        readers = self._shared_readers()
        try:
            conn = readers.get(timeout=SHARED_READER_WAIT)
        except queue.Empty:  # a long glob holds every reader: this one is not queued behind it
            yield
            return
        try:
            if conn is None:
                conn = self._connect()
            local.reader = conn
            yield
        finally:
            local.reader = None
            if conn is not None and conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    conn.close()
                    conn = None  # its slot opens a fresh one
            if self._readers is not None and self._readers[1] is readers:
                readers.put(conn)
            elif conn is not None:
                conn.close()  # the store was closed meanwhile

    def _shared_readers(self) -> queue.LifoQueue:
        """This process's queue of shared readers (None: not opened yet), made afresh after a fork."""
        pid = os.getpid()
        made = self._readers
        if made is None or made[0] != pid:
            with _READERS_LOCK:
                made = self._readers
                if made is None or made[0] != pid:
                    readers: queue.LifoQueue = queue.LifoQueue()
                    for _ in range(SHARED_READERS):
                        readers.put(None)
                    made = self._readers = (pid, readers)
        return made[1]

    def release_mapped_pages(self) -> bool:
        """The connection this thread reads through (the shared reader it has checked out,
        else its own) maps the file afresh (when it reads through mmap and is in no
        transaction): the pages its reads touched leave the process's resident memory.
        They stay in the OS page cache, where the next reads map them again (minor faults, no
        disk). SQLite's unix VFS maps the file once per connection, and a page counts in RSS
        once per mapping that touched it."""
        local = self._local
        conn = getattr(local, "reader", None)
        if conn is None:
            conn = getattr(local, "conn", None)
            if conn is not None and local.pid != os.getpid():
                return False
        if not self.mmap_size or conn is None or conn.in_transaction:
            return False
        conn.execute("PRAGMA mmap_size = 0")  # unmaps the file
        conn.execute(f"PRAGMA mmap_size = {int(self.mmap_size)}")  # maps it again, nothing resident
        return True

    def close(self) -> None:
        self._bulk_checkpoint.wait()
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        made, self._readers = self._readers, None  # one checked out is closed when its block ends
        while made is not None and made[0] == os.getpid() and not made[1].empty():
            reader = made[1].get_nowait()
            if reader is not None:
                reader.close()

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            text = str(exc)
            if isinstance(exc, sqlite3.OperationalError):
                if "no such table" in text:
                    raise SchemaMissing(f"{what}: the store {self.path} has no schema ({text}); run `bgl syncdb`") from exc
                if "locked" in text:
                    raise StoreLocked(f"{what}: SQLite store {self.path}: {text}") from exc
                if "unable to open" in text or "readonly" in text:
                    raise StoreUnavailable(f"{what}: SQLite store {self.path}: {text}") from exc
            if _is_disk_full(exc):
                raise self._full(what, exc) from exc
            if _is_io_error(exc):
                raise self._io_error(what, exc) from exc
            raise StoreError(f"{what}: SQLite store {self.path}: {text}") from exc

    def _io_error(self, what: str, exc: sqlite3.Error) -> StoreUnavailable:
        return StoreUnavailable(f"{what}: SQLite store {self.path}: {exc} (the disk failed a read or write, or is"
                                " full): the transaction was rolled back, earlier ones are kept; write again once"
                                " the disk works")

    def _full(self, what: str, exc: sqlite3.Error) -> StoreFull:
        try:
            free = f"{shutil.disk_usage(os.path.dirname(self.path)).free >> 10} KiB free"
        except OSError:
            free = "free space unknown"
        return StoreFull(f"{what}: the disk holding the SQLite store {self.path} is full ({free}; {exc}): the"
                         " transaction was rolled back, earlier ones are kept; free some space and write again")

    @contextlib.contextmanager
    def write_batch(self) -> Iterator[None]:
        """One IMMEDIATE transaction (the writer lock is taken up front: no deadlocks)."""
        conn = self._conn
        local = self._local
        if local.depth:
            local.depth += 1
            try:
                yield
            finally:
                local.depth -= 1
            return
        with self._errors("begin a write"):
            conn.execute("BEGIN IMMEDIATE")
        local.depth = 1
        local.points_marked = False
        local.absent = set()
        try:
            self._check_deletions()
            yield
            local.depth = 0
            local.absent = set()
            with self._errors("commit a write"):
                self._give_back_free_pages()
                conn.execute("COMMIT")
        except BaseException as exc:
            local.depth = 0
            local.absent = set()
            self._end_deferral()
            # Forget keys, tables and interned ids the rolled back transaction created before
            # ROLLBACK lets a waiting writer in, or it could write under a key that no longer exists.
            self._keys.clear()
            self._tables.clear()
            for cache in self._id_caches:
                cache.forget()
            self._windows.clear()
            local.points_marked = False
            if conn.in_transaction:  # also after a failed COMMIT (disk full, I/O error)
                conn.execute("ROLLBACK")
            cause = exc.__cause__ if isinstance(exc, StoreError) else exc
            if isinstance(exc, StoreFull) or _is_io_error(cause) or (isinstance(cause, sqlite3.Error)
                                                                     and _is_disk_full(cause)):
                self._checkpoint()  # give back the WAL's space if readers allow it
            raise
        local.points_marked = False
        allowed = self._end_deferral()
        if allowed:
            self._bound_bulk_wal(max(self.wal_limit, allowed))
        else:
            self._bound_wal(self._wal_bound())

    def defer_checkpoint(self, up_to: int) -> None:
        """Let the commit of this write batch leave the WAL up to `up_to` bytes without
        checkpointing (SQLite's own checkpoint at 1,000 pages is off for it): bulk tag
        indexing, whose batches each dirty thousands of pages, many the same from batch to
        batch (the counts, the path index's region), copies them to the file once every
        few batches, with one fsync, instead of once a batch. The next commit that does not
        defer checkpoints as usual (the WAL is then past both thresholds). Past `up_to`,
        the checkpoint runs in a thread of its own (checkpointer.BackgroundCheckpoint).
        The commit's journal_size_limit is twice `up_to` (the store's is put back after it)."""
        local = self._local
        if not local.depth:
            raise StoreError("defer_checkpoint is for the commit of a write batch: call it inside one")
        if int(up_to) > local.deferred_wal:
            if not local.deferred_wal:
                self._conn.execute("PRAGMA wal_autocheckpoint = 0")
            local.deferred_wal = int(up_to)
            self._conn.execute(f"PRAGMA journal_size_limit = {2 * max(self.wal_limit, local.deferred_wal)}")

    def _end_deferral(self) -> int:
        """Turn SQLite's checkpoint back on after a deferring batch; the WAL size that
        batch allowed (0 when it did not defer)."""
        local = self._local
        allowed, local.deferred_wal = local.deferred_wal, 0
        if allowed:
            with contextlib.suppress(sqlite3.Error):  # on a failing batch: its own error is the one to raise
                local.conn.execute(f"PRAGMA wal_autocheckpoint = {_AUTOCHECKPOINT_PAGES}")
                local.conn.execute(f"PRAGMA journal_size_limit = {int(self.wal_limit)}")
        return allowed

    def _wal_size(self) -> int:
        try:
            return os.path.getsize(self.path + "-wal")
        except OSError:
            return 0

    def _wal_frames_size(self) -> int:
        """Bytes the WAL's frames fill, from its wal-index header (the first bytes of the
        -shm file: version 3007000, mxFrame, page size; www.sqlite.org/walformat.html):
        a restarted WAL's file keeps its length, its frames start again from 0. The file's
        size when the header cannot be read."""
        try:
            with open(self.path + "-shm", "rb") as shm:
                header = shm.read(_WAL_INDEX_HEADER.size)
        except OSError:
            return self._wal_size()
        if len(header) < _WAL_INDEX_HEADER.size:
            return self._wal_size()
        version, _, _, initialised, _, page, frames, _ = _WAL_INDEX_HEADER.unpack(header)
        if version != 3007000 or not initialised:
            return self._wal_size()
        return 32 + frames * ((65536 if page == 1 else page) + 24)  # a 32-byte header, then frames

    def _wal_bound(self) -> int:
        """The WAL's bound after a commit: wal_limit, or TIGHT_WAL_BYTES while the disk has
        less than TIGHT_FREE_FACTOR times wal_limit free (it was full, or nearly): the WAL's
        file, grown by a transaction that ran into a full disk or by the backlog written once
        space returned, gives its space back at the next commit, not at 16 MiB."""
        try:
            stats = os.statvfs(os.path.dirname(self.path))
        except OSError:
            return self.wal_limit
        if stats.f_bavail * stats.f_frsize < TIGHT_FREE_FACTOR * self.wal_limit:
            return min(self.wal_limit, TIGHT_WAL_BYTES)
        return self.wal_limit

    def _bound_wal(self, limit: int) -> None:
        """Checkpoint and truncate the WAL once it passes limit (wal_limit), so a burst
        of big transactions (or a long reader holding off autocheckpoints) cannot leave it
        huge; a background pass in flight is waited for first."""
        if self._wal_size() > limit:
            self._bulk_checkpoint.wait()
            self._bulk_checkpoint.take_finished()
            self._checkpoint()

    def _bound_bulk_wal(self, allowed: int) -> None:
        """After a deferring batch's commit: past `allowed` bytes of WAL, start a
        background checkpoint pass; once one is over, checkpoint the rest here (RESTART:
        the next commit writes the WAL from its start, the file is kept; the deferring
        commits' journal_size_limit is twice `allowed`: the sizes compared are those of the
        frames); wait for the pass only if the WAL reaches twice `allowed` first."""
        size = self._wal_frames_size()
        background = self._bulk_checkpoint
        if background.running():
            if size <= 2 * allowed:
                return
            background.wait()
        if background.take_finished():
            self._checkpoint("RESTART")
        elif size > allowed:
            background.start()

    def _checkpoint(self, mode: str = "TRUNCATE") -> bool:
        """wal_checkpoint(TRUNCATE) without waiting for readers or writers; True when the WAL
        was emptied (False: busy, or the disk is too full to copy it into the database).
        RESTART: the same, but the WAL file is kept and written again from its start by the
        next commit (bulk indexing: a truncation frees its blocks, which ext4 mounted with
        `discard` trims, ~80 ms for 100 MB here, and the next commits allocate them again)."""
        conn = self._conn
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            busy, _, _ = conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            return not busy
        except sqlite3.Error:
            return False
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")

    @contextlib.contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """One read transaction: WAL gives it a single snapshot however many queries it runs."""
        conn = self._conn
        if conn.in_transaction:
            yield
            return
        with self._errors("begin a read"):
            conn.execute("BEGIN")
        try:
            self._check_deletions()
            yield
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")

    def _check_deletions(self) -> None:
        """Forget cached metric keys when any process deleted metrics since we cached them,
        and cached directory keys when any process deleted or hid directories.

        A metric deleted and created again gets a new key: writing under the old one would
        lose the points (a directory likewise). Deletions bump counters in `store_state`,
        read once a transaction.
        """
        try:
            deletions, directories = self._conn.execute(
                "SELECT (SELECT value FROM store_state WHERE name = 'deletions'),"
                " (SELECT value FROM store_state WHERE name = 'directory_deletions')").fetchone()
        except sqlite3.OperationalError:
            return  # no schema yet: nothing cached either
        if deletions != self._deletions_seen:
            self._keys.clear()
            self._deletions_seen = deletions
        self._directories_seen(directories)

    def _check_directories(self) -> None:
        """_check_deletions for the directory keys alone, before a read resolves paths."""
        if getattr(self._local, "depth", 0):
            return  # the write batch checked
        row = self._conn.execute("SELECT value FROM store_state WHERE name = 'directory_deletions'").fetchone()
        self._directories_seen(row[0] if row else None)

    def _directories_seen(self, changes: int | None) -> None:
        if changes != self._directory_changes_seen:
            self._tree.forget_keys()
            self._directory_changes_seen = changes

    def change_token(self) -> tuple[int, int] | None:
        """(this thread's connection, the `points` mark of store_state).

        Every transaction that changes points (writes, deletions, expiry, conversion), in
        any process, sets the mark to a new random value (`_points_changed`); a rollback
        puts back the old one, which differs from the value its writer last saw. Commits
        that change no point (metric creation, graphite-web's read_on) leave it alone, so
        they do not make the downsampler forget what it holds. None on a file whose
        schema predates the mark, until `bgl syncdb`.
        """
        with self._errors("read the points mark"):
            row = self._conn.execute("SELECT value FROM store_state WHERE name = 'points'").fetchone()
        return None if row is None else (id(self._conn), row[0])

    def names_token(self) -> tuple | None:
        """(the highest metric key ever given, the highest directory key, the deletion counts).

        Metric keys only grow (AUTOINCREMENT) and a new directory takes a key above the
        highest; deletions bump their counters in store_state: any creation or deletion
        of a name, in any process, changes the tuple. Four index lookups.
        """
        with self._errors("read the names token"):
            return self._conn.execute(
                "SELECT (SELECT max(key) FROM metrics), (SELECT max(key) FROM directories),"
                " (SELECT value FROM store_state WHERE name = 'deletions'),"
                " (SELECT value FROM store_state WHERE name = 'directory_deletions')"
            ).fetchone()

    def _points_changed(self) -> None:
        """Set a new points mark, once a transaction (call inside write_batch)."""
        local = self._local
        if not local.points_marked:
            mark = int.from_bytes(os.urandom(8), "little") >> 1  # not `random`: forked processes share its state
            self._conn.execute("UPDATE store_state SET value = ? WHERE name = 'points'", (mark,))
            local.points_marked = True


def _is_io_error(exc: BaseException | None) -> bool:
    """SQLITE_IOERR (and its extended codes): a read, write, sync or mmap of a file failed."""
    return isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_IOERR


def _is_disk_full(exc: sqlite3.Error) -> bool:
    """SQLITE_FULL (the disk, or max_page_count, is full)."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_FULL or "is full" in str(exc)
