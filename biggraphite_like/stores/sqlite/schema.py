"""The SQLite store's tables: metadata and stage tables, their SQL, block sizes, and the
schema methods of the store (syncdb, table checks, conversion of the one-row-per-point layout)."""
from __future__ import annotations

import json
from typing import Iterator

import numpy as np

from biggraphite_like.errors import (
    SchemaMissing,
    StoreError,
)
from biggraphite_like import names as names_mod
from biggraphite_like.point_check import MAX_TIMESTAMP
from biggraphite_like.retention import Stage
from biggraphite_like.stores.base import StageTable
from biggraphite_like.stores.sqlite import name_strings, name_tree
from biggraphite_like.stores.sqlite import tags as sqlite_tags
from biggraphite_like.stores.sqlite.windows import decode_rows, record_dtype

_NAME_TABLES = ("metrics", "directories")
_CONVERT_ROWS = 50_000  # rows of an older metrics table converted at a time
REQUESTS_PER_QUERY = 5000  # row id ranges per VALUES list (3 parameters each)
IDS_PER_QUERY = 100_000  # row ids per json_each() list
DEFAULT_TIMEOUT = 30.0
WAL_LIMIT_BYTES = 16 << 20  # past this after a commit, the WAL is checkpointed and truncated (journal_size_limit)
INCREMENTAL_VACUUM = 2  # PRAGMA auto_vacuum's value for incremental (see free_pages.py)


WINDOW_SLOTS = 720  # a new stage table's windows hold at most this many slots of the ring
_MERGE_BYTES = 1024  # an open tail of a raw stage this long is merged into its window's chunk
# the same for a coarser stage (a point an hour: a tail would stay for days). 64 bytes was tried:
# the tails' bytes moved into open chunks rewritten in place (pages 66-75 % full instead of 82-87 %,
# the table no smaller) and the extra merges cost ~20 % more CPU on a bulk load's writes
_MERGE_BYTES_AGGREGATED = 256
DIRECT_BYTES = 256  # a window given this many bytes of records in one write is merged directly, no tail


def merge_bytes(table: StageTable) -> int:
    """How long an open tail of table grows before it is merged into its window's chunk."""
    return _MERGE_BYTES_AGGREGATED if table.aggregated else _MERGE_BYTES


def default_window_slots(stage: Stage) -> int:
    """Slots per window for a new stage table: the fewest windows of at most WINDOW_SLOTS,
    evenly filled (the last window of the ring may be shorter)."""
    windows = -(-stage.points // WINDOW_SLOTS)
    return -(-stage.points // windows)


def stage_table_sql(table: StageTable) -> str:
    """DDL of one stage table (also the template shown in schema/sqlite.sql)."""
    fields = "timestamp uint32, value float64, count uint32" if table.aggregated else "timestamp uint32, value float64"
    return (
        f"CREATE TABLE IF NOT EXISTS {table.name} (\n"
        "  id INTEGER PRIMARY KEY,  -- window * 2^32 + metric key * 2 (sealed chunk); + 2^62 (open chunk); + 1 (open tail)\n"
        "  newest INTEGER NOT NULL,  -- >= every timestamp of the row (expiry)\n"
        f"  points BLOB NOT NULL  -- chunk: biggraphite_like.chunks; tail: ({fields}) records, little-endian\n"
        ");"
    )


WINDOWS_SQL = [
    "-- The width of the windows of each stage table, recorded once when the table is created:\n"
    "-- window = ((timestamp / precision) mod points) / window_slots.",
    "CREATE TABLE IF NOT EXISTS point_windows (\n  stage_table TEXT PRIMARY KEY,\n"
    "  window_slots INTEGER NOT NULL\n);",
]


_SCHEMA_HEADER = """\
-- biggraphite_like: schema of the embedded SQLite store.
-- `bgl syncdb` creates exactly this (`bgl syncdb --dry-run` prints it); a test keeps them equal.
-- Apply by hand to a new file with: sqlite3 FILE.db < schema/sqlite.sql  (then: PRAGMA journal_mode = WAL;)"""

_VACUUM_SQL = [
    "-- Free pages go back to the file system as writes free them (stores.sqlite.free_pages);\n"
    "-- only takes effect before the first table is created (or with a VACUUM).",
    "PRAGMA auto_vacuum = INCREMENTAL;",
]


def _stage_table_comment() -> str:
    example = stage_table_sql(StageTable(Stage(60, 1440), True))
    return (
        "-- One datapoints table per stage, created with the first metric that uses it:\n"
        "-- datapoints_<points>p_<precision>s_0 (stage 0, raw values) or ..._aggr (coarser stages,\n"
        "-- with the count of finer points aggregated). Whisper's ring of `points` slots per metric,\n"
        "-- slot = (ts / precision) % points, is cut into windows of point_windows.window_slots slots;\n"
        "-- a window is a compressed chunk, sealed once the window's last slot is written (row id below\n"
        "-- 2^62) or open, and an open tail of points appended since (row id odd; the last record of a\n"
        "-- slot wins), merged into the chunk as it fills. Ids are ordered window first. Example:\n"
        + "\n".join("-- " + line for line in example.splitlines())
    )


_STATE_SQL = [
    "-- Shared by every process using the file: deletions counts metric deletions (see",
    "-- SQLiteStore._check_deletions); points changes with every transaction that changes points",
    "-- (see SQLiteStore.change_token); directory_deletions counts directory deletions, hidings and",
    "-- showings (see SQLiteStore.names_token and name_tree).",
    "CREATE TABLE IF NOT EXISTS store_state (\n  name TEXT PRIMARY KEY,\n  value INTEGER NOT NULL\n);",
    "INSERT OR IGNORE INTO store_state (name, value) VALUES ('deletions', 0);",
    "INSERT OR IGNORE INTO store_state (name, value) VALUES ('points', 0);",
    "INSERT OR IGNORE INTO store_state (name, value) VALUES ('directory_deletions', 0);",
]


def schema_statements() -> list[str]:
    """The schema, in order (comments included: they run as no-ops)."""
    return (
        [_SCHEMA_HEADER]
        + _VACUUM_SQL
        + name_strings.SCHEMA_SQL
        + name_tree.SCHEMA_SQL
        + _STATE_SQL
        + sqlite_tags.SCHEMA_SQL
        + WINDOWS_SQL
        + [_stage_table_comment()]
    )



def table_stage(table_name: str) -> tuple[int, int]:
    """(precision, points) of a datapoints table name."""
    _, points, precision, _ = table_name.split("_")
    return int(precision[:-1]), int(points[:-1])



def _old_points(conn, name: str, table: StageTable, layout: str, width: int
                ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]]:
    """(metric keys, timestamps, values, counts) of an old stage table, in pages, in write
    order (a page's points replace the previous pages' in the same slot); `width`: the
    table's window slots."""
    if layout == "one row per point":
        count = ", count" if table.aggregated else ""
        cursor = conn.execute(f"SELECT metric, ts, value{count} FROM {name} WHERE ts BETWEEN 1 AND ?"
                              " ORDER BY metric, slot", (MAX_TIMESTAMP,))
        while rows := cursor.fetchmany(100_000):
            columns = list(zip(*rows))
            yield (np.array(columns[0], dtype=np.int64), np.array(columns[1], dtype=np.int64),
                   np.array(columns[2], dtype=np.float64),
                   np.array(columns[3], dtype=np.int64) if table.aggregated else None)
        return
    dtype = record_dtype(table)
    if layout == "windows keyed metric first":
        # id = metric key << 32 | window << 1 | (1: open tail, 0: chunk), data BLOB as today's
        # rows (the layout's own definition); a chunk's row comes before its tail's
        cursor = conn.execute(f"SELECT id, data FROM {name} ORDER BY id")
        while rows := cursor.fetchmany(20_000):
            ids = np.array([i for i, _ in rows], dtype=np.int64)
            group, ts, values, counts = decode_rows(table, width, ids >> 1, ids >> 1, (ids & 1).astype(bool),
                                                    [b for _, b in rows])
            yield group >> 31, ts, values, counts
        return
    # blocks of slots: id = metric key << 32 | block, slots BLOB of (ts uint32, value float64
    # [, count uint32]) per slot, timestamp 0 for an empty slot (the layout's own definition)
    cursor = conn.execute(f"SELECT id, slots FROM {name} ORDER BY id")
    while rows := cursor.fetchmany(20_000):
        ids, blobs = zip(*rows)
        sizes = np.array([len(b) for b in blobs], dtype=np.int64)
        if (sizes % dtype.itemsize).any():
            raise StoreError(f"{name}: a block is not a whole number of {dtype.itemsize}-byte slots;"
                             " the file is damaged: restore it from a backup")
        slots = np.frombuffer(b"".join(blobs), dtype=dtype)
        keys = np.repeat(np.array(ids, dtype=np.int64) >> 32, sizes // dtype.itemsize)
        filled = slots["ts"] != 0
        slots = slots[filled]
        yield (keys[filled], slots["ts"].astype(np.int64), slots["value"].astype(np.float64),
               slots["count"].astype(np.int64) if table.aggregated else None)


class SchemaMixin:
    """syncdb, stage tables created on first use, and the check of their layout."""

    def schema_statements(self) -> list[str]:
        return schema_statements()

    def syncdb(self) -> None:
        self._may_create = True
        conn = self._conn
        with self._errors("create the schema"):
            # a new file only (and outside a transaction, before the WAL mode writes its header)
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            self._local.incremental = None
            conn.execute("PRAGMA journal_mode = WAL")
            with self.write_batch():
                named = self._holds_full_names()
                if named:
                    for table in _NAME_TABLES:
                        self._set_aside(table)
                for statement in schema_statements():
                    conn.execute(statement)
                if named:
                    self._convert_names()
                self._convert_point_tables()
                sqlite_tags.upgrade(conn)
        self._schema_checked = True

    def _check_schema(self) -> None:
        if self._schema_checked:
            return
        with self._errors("check the schema"):
            tables = {r[0] for r in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name IN ('metrics', 'directories', 'store_state', 'name_strings')")}
        if not {"metrics", "directories", "store_state"} <= tables:
            raise SchemaMissing(f"the store {self.path} has no schema: run `bgl --store {self.url} syncdb`")
        if "name_strings" not in tables:
            raise SchemaMissing(f"the metrics and directories of {self.path} hold their components as text (the"
                                f" layout before interned name strings): run `bgl --store {self.url} syncdb`"
                                " to convert them in place")
        if self._holds_full_names():
            raise SchemaMissing(f"the metrics and directories of {self.path} hold full names (a layout before the"
                                f" name tree): run `bgl --store {self.url} syncdb` to convert them in place")
        self._schema_checked = True

    # -- conversion of the metadata tables written before the name tree -------------------
    def _holds_full_names(self) -> bool:
        """Whether the metrics table is of a layout before the name tree (a `name` column:
        component columns of text, or of interned ids)."""
        return any(r[1] == "name" for r in self._conn.execute("PRAGMA table_info(metrics)"))

    def _set_aside(self, table: str) -> None:
        """Rename table to old_<table> without its indexes, whose names the new table takes."""
        conn = self._conn
        indexes = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", (table,))]
        for index in indexes:
            conn.execute(f"DROP INDEX {index}")
        conn.execute(f"ALTER TABLE {table} RENAME TO old_{table}")

    def _convert_names(self) -> None:
        """Copy old_metrics and old_directories into the name tree, then drop them: metrics
        keep their keys (points and tag postings refer to them), metadata and times; every
        directory row becomes a visible node, the other ancestors of metrics hidden ones (as
        before: no directory row). Metrics keep the AUTOINCREMENT sequence, so no key of a
        deleted metric comes back."""
        conn, tree = self._conn, self._tree
        tree.forget()
        visible = [r[0] for r in conn.execute("SELECT name FROM old_directories ORDER BY key")]
        for start in range(0, len(visible), _CONVERT_ROWS):
            tree.keys(conn, self._strings, visible[start:start + _CONVERT_ROWS], create=True)
        parents: set[str] = set()
        cursor = conn.execute("SELECT key, name, retention, aggregator, xfilesfactor, created_on, updated_on, read_on"
                              " FROM old_metrics ORDER BY key")
        while rows := cursor.fetchmany(_CONVERT_ROWS):
            self._insert_metrics([(name, (retention, aggregator, xff), created, updated, read)
                                  for _, name, retention, aggregator, xff, created, updated, read in rows],
                                 keys=[row[0] for row in rows])
            parents.update(row[1].rpartition(".")[0] for row in rows)
        keys = tree.keys(conn, self._strings, parents | set(visible))  # their ancestors too (looked up)
        hidden = {keys[a] for p in parents for a in (*names_mod.ancestors(p), p) if p} - \
            {keys[name] for name in visible}
        conn.execute("UPDATE directories SET hidden = 1 WHERE key IN (SELECT value FROM json_each(?))",
                     (json.dumps(sorted(hidden)),))
        old = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'old_metrics'").fetchone()
        if old is not None:
            conn.execute("DELETE FROM sqlite_sequence WHERE name = 'metrics'")
            conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('metrics',"
                         " max(?, (SELECT coalesce(max(key), 0) FROM metrics)))", (old[0],))
        for table in _NAME_TABLES:
            conn.execute(f"DROP TABLE old_{table}")
            conn.execute("DELETE FROM sqlite_sequence WHERE name = ?", (f"old_{table}",))
        # the parent paths the layout before interned (the tree refers to components only);
        # writers are stopped during syncdb, and any cache of ids is forgotten
        conn.execute("DELETE FROM name_strings WHERE id != 0 AND id NOT IN (SELECT component FROM directories)"
                     " AND id NOT IN (SELECT leaf FROM metrics)")
        self._strings.forget()

    def _ensure_table(self, table: StageTable) -> None:
        if table.name in self._tables:
            return
        with self._errors(f"create table {table.name}"):
            self._conn.execute(stage_table_sql(table))
            self._conn.execute("INSERT OR IGNORE INTO point_windows (stage_table, window_slots) VALUES (?, ?)",
                               (table.name, default_window_slots(table.stage)))
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

    def _window_slots(self, table: StageTable) -> int:
        """Slots per window of an existing stage table, from its point_windows row."""
        slots = self._windows.get(table.name)
        if slots is None:
            row = self._conn.execute("SELECT window_slots FROM point_windows WHERE stage_table = ?",
                                     (table.name,)).fetchone()
            if row is None or not 1 <= row[0] <= table.stage.points:
                raise SchemaMissing(f"{table.name} in {self.path} has no valid window width in point_windows"
                                    f" ({row and row[0]}): run `bgl --store {self.url} syncdb`")
            slots = self._windows[table.name] = row[0]
        return slots

    def _old_layout(self, name: str) -> str | None:
        """What older layout a stage table holds ('one row per point', 'blocks of slots',
        'windows keyed metric first'), None if current."""
        row = self._conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
        if row is None or "points BLOB" in row[0]:
            return None
        if "data BLOB" in row[0]:
            return "windows keyed metric first"
        return "blocks of slots" if "slots BLOB" in row[0] else "one row per point"

    def _check_layout(self, name: str) -> None:
        old = self._old_layout(name)
        if old:
            raise SchemaMissing(f"{name} in {self.path} holds {old} (a layout before windows keyed window"
                                f" first): run `bgl --store {self.url} syncdb` to convert it")

    def _convert_point_tables(self) -> None:
        """Rewrite the stage tables of older layouts (one row per point; blocks of whisper
        slots; windows keyed metric first) as today's windows, point for point, every window
        written sealed (run by syncdb). A table keeps its recorded window width."""
        conn = self._conn
        for name in self.stage_tables():
            old = self._old_layout(name)
            if old is None:
                continue
            precision, points = table_stage(name)
            table = StageTable(Stage(precision, points), name.endswith("_aggr"))
            conn.execute(f"ALTER TABLE {name} RENAME TO old_{name}")
            self._tables.discard(name)
            self._ensure_table(table)
            width = self._window_slots(table)
            for keys, timestamps, values, counts in _old_points(conn, f"old_{name}", table, old, width):
                self._write_keyed(table, keys, timestamps, values, counts, seal=True)
            conn.execute(f"DROP TABLE old_{name}")
            self._points_changed()

    def stage_tables(self) -> list[str]:
        """Names of the datapoint tables that exist."""
        rows = self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'datapoints\\_%' ESCAPE '\\' ORDER BY name"
        ).fetchall()
        return [r[0] for r in rows]

    def tag_index(self) -> sqlite_tags.SQLiteTagIndex:
        """The store's one tag index (it keeps pair ids the store forgets on a rollback)."""
        if self._tag_index is None:
            self._tag_index = sqlite_tags.SQLiteTagIndex(self)
        return self._tag_index

