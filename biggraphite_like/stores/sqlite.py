"""The embedded store: one SQLite file in WAL mode (one writer, many readers, crash-safe).

Layout (schema/sqlite.sql is the readable copy, `bgl syncdb --dry-run` prints it):
- `metrics` and `directories`: name, parent, component_0..component_63 with `__END__`
  after the last component, each component column with a partial index, so a glob turns
  into indexed lookups (parent, name prefix, component equality) before client filtering.
- one `datapoints_<points>p_<precision>s_0|aggr` table per stage, created with the first
  metric that uses it, holding whisper's ring of `points` slots per metric with
  slot = (timestamp / precision) mod points: a point replaces whatever its slot held, so a
  stage never holds more than `points` points per metric, as in a whisper file. Slots are
  stored in blocks: a row is `block_slots(table)` consecutive slots of one metric, keyed
  id = metric key * 2**32 + slot // block_slots, its `slots` BLOB packing (timestamp uint32,
  value float64[, count uint32]) little-endian per slot, timestamp 0 for an empty slot.
  A block is sized to stay inside a quarter of a 4 KiB page (no overflow pages, four rows a
  page), so a day at 60 s is 18 rows: reads fetch few rows and decode them with one numpy call and
  keep the slots whose timestamp is in the window, as whisper does. Writes replace one or
  two slots of a block inside SQLite (carbon's case), or read the block, change it with
  numpy and write it back. `newest` (at least the greatest timestamp of the block) lets
  expiry drop whole blocks without decoding them. A table's block size must never change
  for an existing file: reads check it.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import os
import shutil
import sqlite3
import threading
from typing import Iterable, Iterator, Mapping, Sequence
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from biggraphite_like import names as names_mod
from biggraphite_like.errors import (
    BglError,
    InvalidPoint,
    InvalidStoreURL,
    MetricNotFound,
    SchemaMissing,
    StoreError,
    StoreFull,
    StoreUnavailable,
)
from biggraphite_like.glob import GlobPattern
from biggraphite_like.metric import Metric, MetricMetadata
from biggraphite_like.retention import Retention, Stage
from biggraphite_like.stores import sqlite_tags
from biggraphite_like.stores.base import PointReads, ScanPage, StageTable, Store, check_shard, metrics_page

COMPONENTS = names_mod.MAX_COMPONENTS
END = names_mod.END_MARKER
_COMPONENT_COLUMNS = [f"component_{i}" for i in range(COMPONENTS)]
_METADATA_COLUMNS = ("retention", "aggregator", "xfilesfactor", "created_on", "updated_on", "read_on")
_METRIC_FIELDS = "name, retention, aggregator, xfilesfactor, created_on, updated_on, read_on"
_CHUNK = 500  # bound parameters per IN (...) chunk
_REQUESTS_PER_QUERY = 5000  # block ranges per VALUES list (3 parameters each)
_IDS_PER_QUERY = 100_000  # block ids per json_each() list
_SPLICE_POINTS = 3  # an existing block given fewer points in a batch is changed in place, slot by slot
_PROBE_LIMIT = 1000  # rows read to estimate how selective a candidate index is
_MAX_WALK = 5000  # directories one level of a glob walk may expand before the indexes take over
DEFAULT_TIMEOUT = 30.0
WAL_LIMIT_BYTES = 16 << 20  # past this after a commit, the WAL is checkpointed and truncated (journal_size_limit)
_MAX_TIMESTAMP = 2**32 - 1  # timestamps are whisper's unsigned 32-bit integers


def _metadata_table_sql(table: str, metrics: bool) -> list[str]:
    columns = ["  key INTEGER PRIMARY KEY AUTOINCREMENT" if metrics else "  key INTEGER PRIMARY KEY",
               "  name TEXT NOT NULL UNIQUE", "  parent TEXT NOT NULL"]
    columns += [f"  {c} TEXT" for c in _COMPONENT_COLUMNS]
    if metrics:
        columns += [
            "  retention TEXT NOT NULL",
            "  aggregator TEXT NOT NULL",
            "  xfilesfactor REAL NOT NULL",
            "  created_on INTEGER NOT NULL DEFAULT 0",
            "  updated_on INTEGER NOT NULL DEFAULT 0",
            "  read_on INTEGER NOT NULL DEFAULT 0",
        ]
    statements = [f"CREATE TABLE IF NOT EXISTS {table} (\n" + ",\n".join(columns) + "\n);"]
    statements.append(f"CREATE INDEX IF NOT EXISTS {table}_parent ON {table} (parent);")
    statements += [
        f"CREATE INDEX IF NOT EXISTS {table}_{c} ON {table} ({c}) WHERE {c} IS NOT NULL;"
        for c in _COMPONENT_COLUMNS
    ]
    return statements


_ROW_BYTES = 992  # bytes of slots a row holds at most: four rows fit a 4 KiB rowid-table leaf page
_RAW_SLOT = np.dtype([("ts", "<u4"), ("value", "<f8")])
_AGGREGATED_SLOT = np.dtype([("ts", "<u4"), ("value", "<f8"), ("count", "<u4")])
_ID_BITS = 32  # id = metric key << _ID_BITS | block


def slot_dtype(table: StageTable) -> np.dtype:
    """The packed layout of one slot in a block of table (numpy structured dtype)."""
    return _AGGREGATED_SLOT if table.aggregated else _RAW_SLOT


@functools.lru_cache(maxsize=None)
def _block_slots(points: int, aggregated: bool) -> int:
    itemsize = (_AGGREGATED_SLOT if aggregated else _RAW_SLOT).itemsize
    blocks = -(-points // (_ROW_BYTES // itemsize))
    return -(-points // blocks)  # as even as possible: the last block wastes fewer than `blocks` slots


def block_slots(table: StageTable) -> int:
    """Slots per row of table: the fewest rows of at most _ROW_BYTES, evenly filled."""
    return _block_slots(table.stage.points, table.aggregated)


def stage_table_sql(table: StageTable) -> str:
    """DDL of one stage table (also the template shown in schema/sqlite.sql)."""
    fields = "timestamp uint32, value float64, count uint32" if table.aggregated else "timestamp uint32, value float64"
    return (
        f"CREATE TABLE IF NOT EXISTS {table.name} (\n"
        f"  id INTEGER PRIMARY KEY,  -- metric key * 2^32 + slot / {block_slots(table)}\n"
        "  newest INTEGER NOT NULL,  -- >= every timestamp of the block (expiry)\n"
        f"  slots BLOB NOT NULL  -- {block_slots(table)} x ({fields}), little-endian; timestamp 0: empty\n"
        ");"
    )


_SCHEMA_HEADER = """\
-- biggraphite_like: schema of the embedded SQLite store.
-- `bgl syncdb` creates exactly this (`bgl syncdb --dry-run` prints it); a test keeps them equal.
-- Apply by hand with: sqlite3 FILE.db < schema/sqlite.sql  (then: PRAGMA journal_mode = WAL;)"""


def _stage_table_comment() -> str:
    example = stage_table_sql(StageTable(Stage(60, 1440), True))
    return (
        "-- One datapoints table per stage, created with the first metric that uses it:\n"
        "-- datapoints_<points>p_<precision>s_0 (stage 0, raw values) or ..._aggr (coarser stages,\n"
        "-- with the count of finer points aggregated). A row is a block of consecutive slots of\n"
        "-- one metric's ring, slot = (ts / precision) % points; the block size depends on the\n"
        "-- points and the kind of stage (biggraphite_like.stores.sqlite.block_slots). Example:\n"
        + "\n".join("-- " + line for line in example.splitlines())
    )


_STATE_SQL = [
    "-- Shared by every process using the file: deletions counts metric deletions (see",
    "-- SQLiteStore._check_deletions); points changes with every transaction that changes points",
    "-- (see SQLiteStore.change_token).",
    "CREATE TABLE IF NOT EXISTS store_state (\n  name TEXT PRIMARY KEY,\n  value INTEGER NOT NULL\n);",
    "INSERT OR IGNORE INTO store_state (name, value) VALUES ('deletions', 0);",
    "INSERT OR IGNORE INTO store_state (name, value) VALUES ('points', 0);",
]


def schema_statements() -> list[str]:
    """The schema, in order (comments included: they run as no-ops)."""
    return (
        [_SCHEMA_HEADER]
        + _metadata_table_sql("metrics", True)
        + _metadata_table_sql("directories", False)
        + _STATE_SQL
        + sqlite_tags.SCHEMA_SQL
        + [_stage_table_comment()]
    )


def _component_values(name: str) -> list[str]:
    """component_0.. of a name: its parts then `__END__` (the columns after stay NULL)."""
    return (name.split(".") + [END])[:COMPONENTS]


@functools.lru_cache(maxsize=4 * COMPONENTS)
def _named_insert_sql(verb: str, table: str, depth: int, columns: tuple[str, ...], conflict: str) -> str:
    names = ["name", "parent", *_COMPONENT_COLUMNS[:depth], *columns]
    return f"{verb} {table} ({', '.join(names)}) VALUES ({', '.join(['?'] * len(names))}){conflict}"


def _insert_named(conn: sqlite3.Connection, verb: str, table: str, rows: Iterable[tuple[str, tuple]],
                  columns: tuple[str, ...] = (), conflict: str = "") -> None:
    """Insert rows (name, values of columns) into a metrics or directories table, binding
    only the component columns each name has: binding all 64 made inserts twice as slow."""
    by_depth: dict[int, list[tuple]] = collections.defaultdict(list)
    for name, values in rows:
        components = _component_values(name)
        by_depth[len(components)].append((name, names_mod.parent(name), *components, *values))
    for depth, group in sorted(by_depth.items()):
        conn.executemany(_named_insert_sql(verb, table, depth, columns, conflict), group)


def _prefix_bounds(prefix: str) -> tuple[str, str]:
    """[low, high) of the strings starting with prefix (prefix ends before its last char + 1)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


class SQLiteStore(Store):
    """Metrics and points in one SQLite file (see module docstring)."""

    def __init__(self, path: str, timeout: float = DEFAULT_TIMEOUT, url: str | None = None):
        self.path = os.path.abspath(path)
        self.timeout = timeout
        self.url = url or f"sqlite://{self.path}"
        self._local = threading.local()
        self._keys: dict[str, int] = {}  # metric name -> integer key used by datapoint tables
        self._tables: set[str] = set()
        self._schema_checked = False
        self._may_create = False  # only syncdb creates the file: reads never leave an empty one
        self._deletions_seen: int | None = None
        self.wal_limit = WAL_LIMIT_BYTES  # set before the first connection to change it

    @classmethod
    def from_url(cls, url: str) -> "SQLiteStore":
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
        if options:
            raise InvalidStoreURL(f"store URL {url!r}: unknown option(s) {', '.join(sorted(options))} (known: timeout)")
        return cls(path, timeout=timeout, url=url)

    # -- connections -----------------------------------------------------------------
    @property
    def _conn(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use (and again after a fork)."""
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
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
                conn.execute("PRAGMA cache_size = -65536")
                conn.execute(f"PRAGMA journal_size_limit = {int(self.wal_limit)}")
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"cannot open SQLite store {self.path}: {exc}") from exc
            local.conn, local.pid, local.depth, local.points_marked = conn, os.getpid(), 0, False
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "no such table" in text:
                raise SchemaMissing(f"{what}: the store {self.path} has no schema ({text}); run `bgl syncdb`") from exc
            if "locked" in text or "unable to open" in text or "readonly" in text:
                raise StoreUnavailable(f"{what}: SQLite store {self.path}: {text}") from exc
            if _is_disk_full(exc):
                raise self._full(what, exc) from exc
            raise StoreError(f"{what}: SQLite store {self.path}: {text}") from exc
        except sqlite3.Error as exc:
            if _is_disk_full(exc):
                raise self._full(what, exc) from exc
            raise StoreError(f"{what}: SQLite store {self.path}: {exc}") from exc

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
        try:
            self._check_deletions()
            yield
            local.depth = 0
            with self._errors("commit a write"):
                conn.execute("COMMIT")
        except BaseException as exc:
            local.depth = 0
            # Forget keys and tables the rolled back transaction created before ROLLBACK lets
            # a waiting writer in, or it could write under a key that no longer exists.
            self._keys.clear()
            self._tables.clear()
            local.points_marked = False
            if conn.in_transaction:  # also after a failed COMMIT (disk full, I/O error)
                conn.execute("ROLLBACK")
            if isinstance(exc, StoreFull) or (isinstance(exc, sqlite3.Error) and _is_disk_full(exc)):
                self._checkpoint()  # give back the WAL's space if readers allow it
            raise
        local.points_marked = False
        self._bound_wal()

    def _bound_wal(self) -> None:
        """Checkpoint and truncate the WAL once it passes wal_limit, so a burst of big
        transactions (or a long reader holding off autocheckpoints) cannot leave it huge."""
        try:
            size = os.path.getsize(self.path + "-wal")
        except OSError:
            return
        if size > self.wal_limit:
            self._checkpoint()

    def _checkpoint(self) -> bool:
        """wal_checkpoint(TRUNCATE) without waiting for readers or writers; True when the WAL
        was emptied (False: busy, or the disk is too full to copy it into the database)."""
        conn = self._conn
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
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
        """Forget cached metric keys when any process deleted metrics since we cached them.

        A metric deleted and created again gets a new key: writing under the old one would
        lose the points. Deletions bump a counter in `store_state`, read once a transaction.
        """
        try:
            row = self._conn.execute("SELECT value FROM store_state WHERE name = 'deletions'").fetchone()
        except sqlite3.OperationalError:
            return  # no schema yet: nothing cached either
        deletions = row[0] if row else 0
        if deletions != self._deletions_seen:
            self._keys.clear()
            self._deletions_seen = deletions

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

    def _points_changed(self) -> None:
        """Set a new points mark, once a transaction (call inside write_batch)."""
        local = self._local
        if not local.points_marked:
            mark = int.from_bytes(os.urandom(8), "little") >> 1  # not `random`: forked processes share its state
            self._conn.execute("UPDATE store_state SET value = ? WHERE name = 'points'", (mark,))
            local.points_marked = True

    # -- schema ------------------------------------------------------------------------
    def schema_statements(self) -> list[str]:
        return schema_statements()

    def syncdb(self) -> None:
        self._may_create = True
        conn = self._conn
        with self._errors("create the schema"):
            conn.execute("PRAGMA journal_mode = WAL")
            with self.write_batch():
                for statement in schema_statements():
                    conn.execute(statement)
                self._convert_point_tables()
        self._schema_checked = True

    def _check_schema(self) -> None:
        if self._schema_checked:
            return
        with self._errors("check the schema"):
            row = self._conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('metrics', 'directories', 'store_state')"
            ).fetchone()
        if row[0] != 3:
            raise SchemaMissing(f"the store {self.path} has no schema: run `bgl --store {self.url} syncdb`")
        self._schema_checked = True

    def _ensure_table(self, table: StageTable) -> None:
        if table.name in self._tables:
            return
        with self._errors(f"create table {table.name}"):
            self._conn.execute(stage_table_sql(table))
            self._check_layout(table.name)
        self._tables.add(table.name)

    def _table_exists(self, table: StageTable) -> bool:
        if table.name in self._tables:
            return True
        row = self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table.name,)).fetchone()
        if row:
            self._check_layout(table.name)
            self._tables.add(table.name)
        return bool(row)

    def _holds_rows_per_point(self, name: str) -> bool:
        row = self._conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
        return row is not None and "slots BLOB" not in row[0]

    def _check_layout(self, name: str) -> None:
        if self._holds_rows_per_point(name):
            raise SchemaMissing(f"{name} in {self.path} holds one row per point (the layout before blocks of slots):"
                                f" run `bgl --store {self.url} syncdb` to convert it")

    def _convert_point_tables(self) -> None:
        """Rewrite the stage tables of the one-row-per-point layout as blocks (run by syncdb)."""
        conn = self._conn
        for name in self.stage_tables():
            if not self._holds_rows_per_point(name):
                continue
            precision, points = _table_stage(name)
            table = StageTable(Stage(precision, points), name.endswith("_aggr"))
            conn.execute(f"ALTER TABLE {name} RENAME TO old_{name}")
            self._tables.discard(name)
            self._ensure_table(table)
            count = ", count" if table.aggregated else ""
            cursor = conn.execute(f"SELECT metric, ts, value{count} FROM old_{name} WHERE ts BETWEEN 1 AND ?"
                                  " ORDER BY metric, slot", (_MAX_TIMESTAMP,))
            while rows := cursor.fetchmany(100_000):
                columns = list(zip(*rows))
                self._write_slots(table, np.array(columns[0], dtype=np.int64), np.array(columns[1], dtype=np.int64),
                                  np.array(columns[2], dtype=np.float64),
                                  np.array(columns[3], dtype=np.int64) if table.aggregated else None)
            conn.execute(f"DROP TABLE old_{name}")
            self._points_changed()

    def stage_tables(self) -> list[str]:
        """Names of the datapoint tables that exist."""
        rows = self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'datapoints\\_%' ESCAPE '\\' ORDER BY name"
        ).fetchall()
        return [r[0] for r in rows]

    def tag_index(self) -> sqlite_tags.SQLiteTagIndex:
        return sqlite_tags.SQLiteTagIndex(self)

    # -- metadata ----------------------------------------------------------------------
    def create_metrics(self, metrics: Sequence[Metric]) -> None:
        if not metrics:
            return
        self._check_schema()
        directories = sorted({d for m in metrics for d in names_mod.ancestors(m.name)})
        existing = self.get_metrics([m.name for m in metrics])
        with self.write_batch(), self._errors("create metrics"):
            for metric in metrics:
                for index in range(len(metric.retention.stages)):
                    self._ensure_table(StageTable.of(metric, index))
                old = existing.get(metric.name)
                if old is not None and old.retention != metric.retention:
                    self._drop_points(metric.name, old.retention, keep=metric.retention)
            _insert_named(
                self._conn, "INSERT INTO", "metrics",
                ((m.name, (str(m.retention), m.metadata.aggregator.value, m.metadata.xfilesfactor,
                           m.created_on, m.updated_on, m.read_on)) for m in metrics),
                _METADATA_COLUMNS,
                " ON CONFLICT(name) DO UPDATE SET retention = excluded.retention, aggregator = excluded.aggregator,"
                " xfilesfactor = excluded.xfilesfactor, updated_on = excluded.updated_on",
            )
            _insert_named(self._conn, "INSERT OR IGNORE INTO", "directories", ((d, ()) for d in directories))

    def get_metrics(self, names: Sequence[str]) -> dict[str, Metric]:
        self._check_schema()
        found: dict[str, Metric] = {}
        names = list(dict.fromkeys(names))
        with self._errors("read metrics"):
            for start in range(0, len(names), _CHUNK):
                chunk = names[start:start + _CHUNK]
                rows = self._conn.execute(
                    f"SELECT key, {_METRIC_FIELDS} FROM metrics WHERE name IN ({', '.join(['?'] * len(chunk))})", chunk
                ).fetchall()
                for row in rows:
                    self._keys[row[1]] = row[0]
                found.update(self.readable_metrics(row[1:] for row in rows))
        return found

    def update_metadata(self, name: str, metadata: MetricMetadata) -> None:
        existing = self.get_metrics([name]).get(name)
        if existing is None:
            raise MetricNotFound(f"metric {name!r} does not exist")
        with self.write_batch(), self._errors("update metadata"):
            if existing.retention != metadata.retention:
                for index in range(len(metadata.retention.stages)):
                    self._ensure_table(StageTable(metadata.retention.stages[index], index > 0))
                self._drop_points(name, existing.retention, keep=metadata.retention)
            self._conn.execute(
                "UPDATE metrics SET retention = ?, aggregator = ?, xfilesfactor = ? WHERE name = ?",
                (str(metadata.retention), metadata.aggregator.value, metadata.xfilesfactor, name),
            )

    def touch_metrics(self, names: Sequence[str], field: str, timestamp: int) -> None:
        if field not in ("updated_on", "read_on"):
            raise ValueError(f"cannot touch {field!r}: use updated_on or read_on")
        with self.write_batch(), self._errors(f"set {field}"):
            self._conn.executemany(f"UPDATE metrics SET {field} = ? WHERE name = ?", ((timestamp, n) for n in names))

    def record_reads(self, reads: Mapping[str, int]) -> bool:
        """read_on without waiting: the writer lock is tried once (busy timeout 0); False
        if another connection holds it. Inside this thread's own write it is ours."""
        self._check_schema()
        conn = self._conn
        waits = not self._local.depth
        if waits:
            conn.execute("PRAGMA busy_timeout = 0")
        try:
            with self.write_batch(), self._errors("record reads (read_on)"):
                conn.executemany("UPDATE metrics SET read_on = max(read_on, ?) WHERE name = ?",
                                 ((timestamp, name) for name, timestamp in reads.items()))
        except StoreUnavailable as exc:
            if not isinstance(exc.__cause__, sqlite3.OperationalError) or "locked" not in str(exc.__cause__):
                raise
            return False
        finally:
            if waits:
                conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
        return True

    def delete_metrics(self, names: Sequence[str]) -> None:
        self._check_schema()
        names = list(dict.fromkeys(names))
        with self.write_batch(), self._errors("delete metrics"):
            deleted = 0
            for start in range(0, len(names), _CHUNK):
                chunk = names[start:start + _CHUNK]
                rows = self._conn.execute(
                    f"SELECT name, retention FROM metrics WHERE name IN ({', '.join(['?'] * len(chunk))})", chunk
                ).fetchall()
                for name, retention_text in rows:
                    try:
                        retention: Retention | None = Retention.parse(retention_text)
                    except (BglError, ValueError, TypeError):
                        retention = None  # an unreadable row (see `bgl repair`): its points may be anywhere
                    self._drop_points(name, retention)
                    self._conn.execute("DELETE FROM metrics WHERE name = ?", (name,))
                    self._keys.pop(name, None)
                deleted += len(rows)
            if deleted:
                self._conn.execute("UPDATE store_state SET value = value + 1 WHERE name = 'deletions'")

    def _drop_points(self, name: str, retention: Retention | None, keep: Retention | None = None) -> None:
        """Delete a metric's points in the tables of `retention` (None: every stage table) but `keep`'s."""
        self._points_changed()
        key = self._key(name)
        kept = {StageTable(s, i > 0).name for i, s in enumerate(keep.stages)} if keep else set()
        if retention is None:
            tables = self.stage_tables()
        else:
            tables = [t.name for t in (StageTable(s, i > 0) for i, s in enumerate(retention.stages))
                      if self._table_exists(t)]
        for table in tables:
            if table not in kept:
                self._conn.execute(f"DELETE FROM {table} WHERE id BETWEEN ? AND ?",
                                   (key << _ID_BITS, ((key + 1) << _ID_BITS) - 1))

    def _key(self, name: str) -> int:
        key = self._keys.get(name)
        if key is None:
            row = self._conn.execute("SELECT key FROM metrics WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise MetricNotFound(f"metric {name!r} does not exist: create it before writing points")
            key = self._keys[name] = row[0]
        return key

    # -- directories and full scans ------------------------------------------------------
    def create_directories(self, names: Sequence[str]) -> None:
        self._check_schema()
        wanted = sorted({a for n in names for a in (*names_mod.ancestors(n), n)})
        with self.write_batch(), self._errors("create directories"):
            _insert_named(self._conn, "INSERT OR IGNORE INTO", "directories", ((d, ()) for d in wanted))

    def delete_directories(self, names: Sequence[str]) -> None:
        self._check_schema()
        with self.write_batch(), self._errors("delete directories"):
            self._conn.executemany("DELETE FROM directories WHERE name = ?", ((n,) for n in names))

    def existing_directories(self, names: Sequence[str]) -> set[str]:
        return self._names_in("SELECT name FROM directories WHERE name IN ({})", names, "read directories")

    def directories_with_children(self, names: Sequence[str]) -> set[str]:
        return self._names_in(
            "SELECT parent FROM metrics WHERE parent IN ({0}) UNION SELECT parent FROM directories WHERE parent IN ({0})",
            names, "find children", repeat=2,
        )

    def _names_in(self, sql: str, names: Sequence[str], what: str, repeat: int = 1) -> set[str]:
        self._check_schema()
        found: set[str] = set()
        names = list(dict.fromkeys(names))
        with self._errors(what):
            for start in range(0, len(names), _CHUNK):
                chunk = names[start:start + _CHUNK]
                marks = ", ".join(["?"] * len(chunk))
                found.update(r[0] for r in self._conn.execute(sql.format(marks), chunk * repeat))
        return found

    def scan_metrics(self, shard=0, nshards=1, cursor=None, page_size=1000) -> Iterator[ScanPage[Metric]]:
        for rows, next_cursor in self._scan("metrics", f"key, {_METRIC_FIELDS}", shard, nshards, cursor, page_size):
            yield metrics_page((r[1:] for r in rows), next_cursor)

    def scan_directories(self, shard=0, nshards=1, cursor=None, page_size=1000) -> Iterator[ScanPage[str]]:
        for rows, next_cursor in self._scan("directories", "key, name", shard, nshards, cursor, page_size):
            yield ScanPage([r[1] for r in rows], next_cursor)

    def _scan(self, table: str, fields: str, shard: int, nshards: int, cursor: str | None, page_size: int):
        """Pages of rows in key order; shard k of n holds the keys equal to k modulo n."""
        check_shard(shard, nshards)
        self._check_schema()
        after = int(cursor) if cursor else 0
        sql = f"SELECT {fields} FROM {table} WHERE key > ? AND key % ? = ? ORDER BY key LIMIT ?"
        while True:
            with self._errors(f"scan {table}"):
                rows = self._conn.execute(sql, (after, nshards, shard, page_size)).fetchall()
            if not rows:
                return
            after = rows[-1][0]
            last = len(rows) < page_size
            yield rows, None if last else str(after)
            if last:
                return

    def stats(self) -> dict[str, int | float | str]:
        self._check_schema()
        conn = self._conn
        with self.read_snapshot(), self._errors("read statistics"):
            facts: dict[str, int | float | str] = {
                "store": "sqlite",
                "path": self.path,
                "file_bytes": sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p)),
                "metrics": conn.execute("SELECT count(*) FROM metrics").fetchone()[0],
                "directories": conn.execute("SELECT count(*) FROM directories").fetchone()[0],
            }
            for name in self.stage_tables():
                facts[f"blocks.{name}"] = conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
            facts.update(self._bytes_by_kind(conn))
        return facts

    @staticmethod
    def _bytes_by_kind(conn: sqlite3.Connection) -> dict[str, int]:
        """Bytes of the pages of the datapoints tables and of the rest (metadata, indexes),
        from the dbstat virtual table; nothing when SQLite was built without it."""
        try:
            rows = conn.execute("SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat AS d JOIN sqlite_master AS m"
                                " ON m.name = d.name GROUP BY m.tbl_name").fetchall()
        except sqlite3.OperationalError:  # no SQLITE_ENABLE_DBSTAT_VTAB
            return {}
        points = sum(size for table, size in rows if table.startswith("datapoints_"))
        return {"disk_bytes.points": points, "disk_bytes.metadata": sum(size for _, size in rows) - points}

    # -- globs -------------------------------------------------------------------------
    def glob_metrics(self, pattern: GlobPattern, max_results: int) -> list[str]:
        return self._glob("metrics", pattern, max_results)

    def glob_directories(self, pattern: GlobPattern, max_results: int) -> list[str]:
        return self._glob("directories", pattern, max_results)

    def _glob(self, table: str, pattern: GlobPattern, max_results: int) -> list[str]:
        self._check_schema()
        with self._errors(f"glob {pattern.pattern!r}"):
            return pattern.filter(self._candidates(table, pattern), max_results)

    def _candidates(self, table: str, pattern: GlobPattern) -> Iterator[str]:
        """Names that may match, from indexed queries only where the pattern allows it."""
        conn = self._conn
        exact = pattern.exact_names()
        if exact is not None:
            for start in range(0, len(exact), _CHUNK):
                chunk = exact[start:start + _CHUNK]
                yield from (r[0] for r in conn.execute(
                    f"SELECT name FROM {table} WHERE name IN ({', '.join(['?'] * len(chunk))})", chunk))
            return
        parents = self._walk_directories(pattern)
        if parents is not None:
            last = pattern.components[-1].literals
            column, keys = ("name", [f"{p}.{leaf}" for p in parents for leaf in sorted(last)]) if last else ("parent", parents)
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start:start + _CHUNK]
                yield from (r[0] for r in conn.execute(
                    f"SELECT name FROM {table} WHERE {column} IN ({', '.join(['?'] * len(chunk))})", chunk))
            return
        for sql, params in self._plan(table, pattern):
            yield from (r[0] for r in conn.execute(sql, params))

    def _walk_directories(self, pattern: GlobPattern) -> list[str] | None:
        """The directories whose children may match, walked level by level; None if unsuitable.

        As StandardFinder walks the file system: literal components extend the path without
        a query, a wildcard component lists the children of the current directories (parent
        index; a name range when it starts with literal text) and keeps those that match.
        Only for patterns of fixed depth; gives up (None) past _MAX_WALK directories at one
        level, where the component indexes do better.
        """
        if pattern.depth is None or pattern.depth < 2 or len(pattern.literal_prefix()) >= pattern.depth - 1:
            return None  # globstar/optional components, or a single parent lookup does it
        parents = [""]
        for component in pattern.components[:-1]:
            if component.literals is not None:
                parents = [f"{p}.{literal}" if p else literal for p in parents for literal in sorted(component.literals)]
            else:
                children: list[str] = []
                for name in self._children(parents, component.prefix):
                    if component.matches(name.rpartition(".")[2]):
                        children.append(name)
                        if len(children) > _MAX_WALK:
                            return None
                parents = children
            if len(parents) > _MAX_WALK:
                return None
            if not parents:
                return []
        return parents

    def _children(self, parents: list[str], prefix: str) -> Iterator[str]:
        """The child directories of the parents; with a literal prefix (`host00*`), only those
        starting with it, as a range of the name index per parent instead of every child."""
        conn = self._conn
        if prefix:
            for parent in parents:
                low, high = _prefix_bounds(f"{parent}.{prefix}" if parent else prefix)
                yield from (r[0] for r in conn.execute(
                    "SELECT name FROM directories WHERE name >= ? AND name < ? AND +parent = ?", (low, high, parent)))
            return
        for start in range(0, len(parents), _CHUNK):
            chunk = parents[start:start + _CHUNK]
            yield from (r[0] for r in conn.execute(
                f"SELECT name FROM directories WHERE parent IN ({', '.join(['?'] * len(chunk))})", chunk))

    def _plan(self, table: str, pattern: GlobPattern) -> list[tuple[str, list]]:
        """The queries whose union holds every match (see README: glob planning)."""
        depth = pattern.depth
        prefix = pattern.literal_prefix()
        depth_sql, depth_params = "", []
        if depth is not None and depth < COMPONENTS:
            depth_sql, depth_params = f" AND +component_{depth} = ?", [END]
        # 1. all but the last component fixed: the children of one directory
        if depth is not None and len(prefix) == depth - 1:
            return [(f"SELECT name FROM {table} WHERE parent = ?", [".".join(prefix)])]
        candidates: list[tuple[str, list]] = []
        # 2. a fixed leading path: a range of the name index
        if prefix:
            low, high = _prefix_bounds(".".join(prefix) + ".")
            candidates.append((f"SELECT name FROM {table} WHERE name >= ? AND name < ?{depth_sql}",
                               [low, high, *depth_params]))
        # 3. a fixed or prefixed component at a known position (before any globstar)
        for position, component in enumerate(pattern.components):
            if component.is_globstar or component.optional:
                break  # later components have no fixed position
            column = f"component_{position}"
            if component.literals is not None:
                values = sorted(component.literals)
                candidates.append((
                    f"SELECT name FROM {table} WHERE {column} IN ({', '.join(['?'] * len(values))}){depth_sql}",
                    [*values, *depth_params]))
            elif component.prefix:
                low, high = _prefix_bounds(component.prefix)
                candidates.append((f"SELECT name FROM {table} WHERE {column} >= ? AND {column} < ?{depth_sql}",
                                   [low, high, *depth_params]))
        if candidates:
            return [self._most_selective(candidates)] if len(candidates) > 1 else candidates
        # 4. a fixed last component after a globstar: one lookup per possible depth
        last = pattern.components[-1]
        if pattern.has_globstar and not last.is_globstar and last.literals is not None:
            values = sorted(last.literals)
            queries = []
            for size in range(max(pattern.min_depth, 1), COMPONENTS + 1):
                end_sql = f" AND +component_{size} = ?" if size < COMPONENTS else ""
                queries.append((
                    f"SELECT name FROM {table} WHERE component_{size - 1} IN ({', '.join(['?'] * len(values))}){end_sql}",
                    [*values, *([END] if size < COMPONENTS else [])]))
            return queries
        # 5. nothing fixed: every name of that depth, or every name
        if depth is not None and depth < COMPONENTS:
            return [(f"SELECT name FROM {table} WHERE component_{depth} = ?", [END])]
        return [(f"SELECT name FROM {table}", [])]

    def _most_selective(self, candidates: list[tuple[str, list]]) -> tuple[str, list]:
        """The candidate query reading the fewest rows, probing each up to a bound.

        When several reach the bound, they are probed again with a larger one: a leading
        prefix and a deeper fixed component often both match more than the first bound.
        """
        for limit in (_PROBE_LIMIT, _PROBE_LIMIT * 50):
            counted = []
            for sql, params in candidates:
                count = self._conn.execute(f"SELECT count(*) FROM ({sql} LIMIT {limit})", params).fetchone()[0]
                if count == 0:
                    return sql, params
                counted.append((count, len(counted), (sql, params)))
            best_count = min(counted)[0]
            if best_count < limit:
                return min(counted)[2]
            candidates = [query for count, _, query in counted if count == limit]
        return candidates[-1]  # the deepest fixed component

    # -- datapoints --------------------------------------------------------------------
    def write_points(self, table, names, timestamps, values, counts=None) -> None:
        """Set the slots of the points in their blocks (whisper's ring: a point replaces its slot).

        A block given fewer than _SPLICE_POINTS points (carbon's usual case: one point a
        metric) has each slot replaced inside SQLite, with no read back (an UPSERT that
        creates the block if needed); other blocks are read, changed with numpy and written
        back whole (one UPSERT each).
        Of several points given for one slot, the last given wins.
        """
        if not len(timestamps):
            return
        self._check_schema()
        timestamps = np.asarray(timestamps, dtype=np.int64)
        bad = (timestamps < 1) | (timestamps > _MAX_TIMESTAMP)
        if bad.any():
            raise InvalidPoint(f"timestamp {int(timestamps[bad][0])} is outside 1..{_MAX_TIMESTAMP}:"
                               " the SQLite store keeps whisper's unsigned 32-bit timestamps")
        with self.write_batch(), self._errors(f"write points to {table.name}"):
            self._points_changed()
            self._ensure_table(table)
            keys = np.fromiter((self._key(n) for n in names), dtype=np.int64, count=len(names))
            self._write_slots(table, keys, timestamps, values, counts)

    def _write_slots(self, table: StageTable, keys: np.ndarray, timestamps: np.ndarray, values: np.ndarray,
                     counts: np.ndarray | None) -> None:
        """write_points by metric key (timestamps already checked)."""
        if keys.max() >= 1 << (63 - _ID_BITS):
            raise StoreError(f"metric key {int(keys.max())} does not fit a block id: the metrics table has"
                             f" handed out 2**{63 - _ID_BITS} keys; copy the metrics to a new store")
        size = block_slots(table)
        slots = (timestamps // table.stage.precision) % table.stage.points
        ids, block = np.unique((keys << _ID_BITS) | (slots // size), return_inverse=True)
        cell = block * size + slots % size
        _, last = np.unique(cell[::-1], return_index=True)  # the last given point of each slot
        last = len(cell) - 1 - last
        points = np.zeros(len(last), dtype=slot_dtype(table))
        points["ts"] = timestamps[last]
        points["value"] = np.asarray(values, dtype=np.float64)[last]
        if table.aggregated:
            points["count"] = 1 if counts is None else np.asarray(counts, dtype=np.int64)[last]
        cell = cell[last]
        block = cell // size
        splice = np.bincount(block, minlength=len(ids)) < _SPLICE_POINTS
        spliced = splice[block]
        if spliced.any():
            self._splice_slots(table, ids[block[spliced]], cell[spliced] % size, points[spliced])
        if not spliced.all():
            whole = ~splice
            rows = (np.cumsum(whole) - 1)[block[~spliced]]  # index of each point's block among whole ones
            self._write_blocks(table, ids[whole], rows * size + cell[~spliced] % size, points[~spliced])

    def _splice_slots(self, table: StageTable, ids: np.ndarray, positions: np.ndarray, points: np.ndarray) -> None:
        """Set slot positions[i] of block ids[i] to points[i] inside SQLite (an empty block if none)."""
        item = points.dtype.itemsize
        block_bytes = block_slots(table) * item
        data = memoryview(points.tobytes())
        offsets = (positions * item).tolist()
        self._conn.executemany(
            f"INSERT INTO {table.name} (id, newest, slots) VALUES (?1, ?2, CAST(zeroblob(?3) || ?4 || zeroblob(?5) AS BLOB))"
            " ON CONFLICT (id) DO UPDATE SET newest = max(newest, ?2),"
            " slots = CAST(substr(slots, 1, ?3) || ?4 || substr(slots, ?3 + length(?4) + 1) AS BLOB)",
            zip(ids.tolist(), points["ts"].tolist(), offsets, (data[i:i + item] for i in range(0, len(data), item)),
                [block_bytes - o - item for o in offsets]),
        )

    def _write_blocks(self, table: StageTable, ids: np.ndarray, cells: np.ndarray, points: np.ndarray) -> None:
        """Read the blocks of sorted unique ids, set their cells (block index * size + slot) to points,
        write them back whole."""
        size = block_slots(table)
        blocks = np.zeros((len(ids), size), dtype=slot_dtype(table))
        found: list[tuple[int, bytes]] = []
        for start in range(0, len(ids), _IDS_PER_QUERY):
            found += self._conn.execute(
                f"SELECT id, slots FROM {table.name} WHERE id IN (SELECT value FROM json_each(?))",
                (_json_ids(ids[start:start + _IDS_PER_QUERY]),),
            ).fetchall()
        if found:
            held, blobs = zip(*found)
            blocks[np.searchsorted(ids, np.array(held, dtype=np.int64))] = _decode(table, blobs).reshape(-1, size)
        blocks.reshape(-1)[cells] = points
        data = memoryview(blocks.tobytes())
        step = size * points.dtype.itemsize
        self._conn.executemany(
            f"INSERT INTO {table.name} (id, newest, slots) VALUES (?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET newest = excluded.newest, slots = excluded.slots",
            zip(ids.tolist(), blocks["ts"].max(axis=1).tolist(), (data[i:i + step] for i in range(0, len(data), step))),
        )

    def read_points(self, table, names, starts, ends) -> PointReads:
        if not len(names):
            return PointReads.empty()
        self._check_schema()
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        with self.read_snapshot(), self._errors(f"read points from {table.name}"):
            if not self._table_exists(table):
                return PointReads.empty()
            requests = self._block_ranges(table, names, starts, ends)
            found: list[tuple[int, bytes]] = []
            for start in range(0, len(requests), _REQUESTS_PER_QUERY):
                chunk = requests[start:start + _REQUESTS_PER_QUERY]
                values_sql = ", ".join(["(?, ?, ?)"] * len(chunk))
                sql = (
                    f"WITH req(r, lo, hi) AS (VALUES {values_sql})"
                    f" SELECT req.r, d.slots FROM req CROSS JOIN {table.name} AS d ON d.id BETWEEN req.lo AND req.hi"
                )
                found.extend(self._conn.execute(sql, chunk.reshape(-1).tolist()).fetchall())
        if not found:
            return PointReads.empty()
        request, blobs = zip(*found)
        request = np.array(request, dtype=np.int64)
        size = block_slots(table)
        slots = _decode(table, blobs).reshape(len(request), size)
        # a row of slots per block, compared with its window as uint32: [max(start, 1), end - 1]
        # (timestamp 0, an empty slot, is never kept)
        low = np.clip(starts, 1, _MAX_TIMESTAMP).astype(np.uint32)[request, None]
        high = np.clip(ends - 1, 0, _MAX_TIMESTAMP).astype(np.uint32)[request, None]
        ts = slots["ts"]
        keep = ((ts >= low) & (ts <= high)).reshape(-1)
        flat = slots.reshape(-1)
        return PointReads(np.repeat(request, size)[keep], flat["ts"][keep].astype(np.int64), flat["value"][keep])

    def _block_ranges(self, table: StageTable, names: Sequence[str], starts: np.ndarray, ends: np.ndarray
                      ) -> np.ndarray:
        """Rows (request, first id, last id) of the blocks holding the slots of each window.

        A window that wraps around the ring is two ranges, or the whole ring when both ends
        fall in one block (a block is then read once: no point twice).
        """
        precision, points, size = table.stage.precision, table.stage.points, block_slots(table)
        last_block = (points - 1) // size
        keys = np.empty(len(names), dtype=np.int64)
        for index, name in enumerate(names):
            key = self._keys.get(name)
            if key is None:
                try:
                    key = self._key(name)
                except MetricNotFound:
                    key = -1
            keys[index] = key
        first = -(-starts // precision)  # first slot index at or after start
        last = -(-ends // precision) - 1
        request = np.arange(len(names), dtype=np.int64)
        valid = (keys >= 0) & (last >= first)
        low_block, high_block = (first % points) // size, (last % points) // size
        whole = (last - first + 1 >= points) | ((first % points > last % points) & (high_block >= low_block))
        wraps = ~whole & (first % points > last % points)
        base = keys << _ID_BITS
        # [low, high] when not wrapping, [low, last block] then [0, high] when wrapping
        lo = np.where(whole, 0, low_block)
        hi = np.where(whole | wraps, last_block, high_block)
        ranges = [np.stack([request, base + lo, base + hi], axis=1)[valid]]
        second = valid & wraps
        ranges.append(np.stack([request, base, base + high_block], axis=1)[second])
        return np.concatenate(ranges)

    def expire_points(self, now: int) -> int:
        """Drop the blocks whose every point is older than its stage's duration.

        Returns the number of points (non-empty slots) in the dropped blocks. Older points
        sharing a block with a newer one stay until the block is rewritten or expires;
        the accessor never reads them (its windows never reach past a stage's duration).
        """
        self._check_schema()
        removed = 0
        with self.write_batch(), self._errors("expire points"):
            self._points_changed()
            for name in self.stage_tables():
                precision, points = _table_stage(name)
                table = StageTable(Stage(precision, points), name.endswith("_aggr"))
                cutoff = now - precision * points
                cursor = self._conn.execute(f"SELECT slots FROM {name} WHERE newest < ?", (cutoff,))
                while blobs := cursor.fetchmany(10_000):
                    removed += int(np.count_nonzero(_decode(table, [b for (b,) in blobs])["ts"]))
                self._conn.execute(f"DELETE FROM {name} WHERE newest < ?", (cutoff,))
        return removed


def _is_disk_full(exc: sqlite3.Error) -> bool:
    """SQLITE_FULL (the disk, or max_page_count, is full)."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_FULL or "is full" in str(exc)


def _json_ids(ids: np.ndarray) -> str:
    return "[" + ",".join(map(str, ids.tolist())) + "]"


def _decode(table: StageTable, blobs: Sequence[bytes]) -> np.ndarray:
    """The slots of blobs of table, one flat structured array; StoreError if a blob is not a block."""
    dtype, size = slot_dtype(table), block_slots(table)
    data = b"".join(blobs)
    if len(data) != len(blobs) * size * dtype.itemsize:
        raise StoreError(
            f"{table.name}: a block is not {size} slots of {dtype.itemsize} bytes: the table was written with"
            " another block size or layout; run the version of biggraphite_like that wrote it"
        )
    return np.frombuffer(data, dtype=dtype)


def _table_stage(table_name: str) -> tuple[int, int]:
    """(precision, points) of a datapoints table name."""
    _, points, precision, _ = table_name.split("_")
    return int(precision[:-1]), int(points[:-1])

