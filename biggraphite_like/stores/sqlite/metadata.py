"""The SQLite store's metadata: metrics and directories rows (64 component columns a name),
scans, and the store's statistics."""
from __future__ import annotations

import functools
import os
import sqlite3
from typing import Iterable, Iterator, Mapping, Sequence

from biggraphite_like import names as names_mod
from biggraphite_like.errors import (
    BglError,
    MetricNotFound,
    StoreUnavailable,
)
from biggraphite_like.metric import Metric, MetricMetadata
from biggraphite_like.retention import Retention
from biggraphite_like.stores.base import ScanPage, StageTable, check_shard, metrics_page
from biggraphite_like.stores.sqlite.name_strings import END_ID
from biggraphite_like.stores.sqlite.schema import (
    _CHUNK,
    _COMPONENT_COLUMNS,
    _METADATA_COLUMNS,
    _METRIC_FIELDS,
    COMPONENTS,
)


_ROWS_PER_INSERT = 500  # rows of one INSERT ... VALUES (bound parameters: at most the connection's limit)


@functools.lru_cache(maxsize=64)
def _named_insert_sql(verb: str, table: str, columns: tuple[str, ...], depth: int, rows: int, conflict: str,
                      returning: str) -> str:
    names = [*columns, "name", "parent", *_COMPONENT_COLUMNS[:depth]]
    row = f"({', '.join(['?'] * len(names))})"
    tail = f" RETURNING {returning}" if returning else ""
    return f"{verb} {table} ({', '.join(names)}) VALUES {', '.join([row] * rows)}{conflict}{tail}"


class MetadataMixin:
    """Metrics and directories: create, read, touch, delete, scan, count."""

    def _insert_named(self, verb: str, table: str, rows: Iterable[tuple[str, Sequence]],
                      columns: tuple[str, ...] = (), conflict: str = "", returning: str = "") -> list[tuple]:
        """Insert rows (name, values of columns) into a metrics or directories table with
        their parent and component ids (name_strings), hundreds of rows a statement: each
        statement opens the cursors of the 66 indexes again, and executemany runs one
        statement a row (it made creation three times slower). Returns the `returning`
        columns of the rows written (none without it)."""
        conn = self._conn
        split = [(values, name, name.rpartition(".")[0], name.split(".")) for name, values in rows]
        if not split:
            return []
        strings = {parent for _, _, parent, _ in split}
        for _, _, _, parts in split:
            strings.update(parts)
        ids = self._strings.ids(conn, strings)
        records = []
        depth = 0
        for values, name, parent, parts in split:
            components = [ids[part] for part in parts]
            if len(components) < COMPONENTS:
                components.append(END_ID)
            depth = max(depth, len(components))
            records.append((*values, name, ids[parent], *components))
        self._ensure_component_indexes(table, depth)
        width = len(columns) + 2 + depth
        per_statement = min(_ROWS_PER_INSERT, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width)
        padding = {size: (None,) * (width - size) for size in {len(r) for r in records}}
        written: list[tuple] = []
        for start in range(0, len(records), per_statement):
            chunk = records[start:start + per_statement]
            written += conn.execute(_named_insert_sql(verb, table, columns, depth, len(chunk), conflict, returning),
                                    [value for record in chunk for value in record + padding[len(record)]]).fetchall()
        return written

    def create_metrics(self, metrics: Sequence[Metric]) -> set[str]:
        """Store.create_metrics; returns the names that had no row (new keys: no point).
        Names get_metrics found no row for in this write batch are not looked up again."""
        if not metrics:
            return set()
        self._check_schema()
        directories = sorted(names_mod.all_ancestors(m.name for m in metrics))
        # metadata by object: a batch shares a few, and hashing or formatting one per metric cost more
        # than the rest of its row
        metadatas = {id(m.metadata): m.metadata for m in metrics}
        fields = {key: (str(md.retention), md.aggregator.value, md.xfilesfactor) for key, md in metadatas.items()}
        with self.write_batch(), self._errors("create metrics"):
            absent = self._absent_names()
            unchecked = [m.name for m in metrics if m.name not in absent]
            existing = self.get_metrics(unchecked) if unchecked else {}  # adds the names without a row to absent
            new = {m.name for m in metrics if m.name in absent}
            for retention in {md.retention for md in metadatas.values()}:
                for index, stage in enumerate(retention.stages):
                    self._ensure_table(StageTable(stage, index > 0))
            wanted = {m.name: m.retention for m in metrics} if existing else {}
            for name, old in existing.items():
                if old.retention != wanted[name]:
                    self._drop_points(name, old.retention, keep=wanted[name])
            # the keys come back with the rows: the first write of each new metric needs no lookup
            # (a rollback forgets them, see write_batch)
            same = {m.name: m.name for m in metrics}  # the key cache keeps the caller's strings, not copies
            self._keys.update((same.get(name, name), key) for name, key in self._insert_named(
                "INSERT INTO", "metrics",
                ((m.name, (*fields[id(m.metadata)], m.created_on, m.updated_on, m.read_on)) for m in metrics),
                _METADATA_COLUMNS,
                " ON CONFLICT(name) DO UPDATE SET retention = excluded.retention, aggregator = excluded.aggregator,"
                " xfilesfactor = excluded.xfilesfactor, updated_on = excluded.updated_on",
                returning="name, key",
            ))
            self._insert_named("INSERT OR IGNORE INTO", "directories", ((d, ()) for d in directories))
            absent.difference_update(new)
        return new

    def _absent_names(self) -> set[str]:
        """Names found to have no metrics row in the current write batch (each write batch
        starts a new set, since the writer lock keeps anyone else from adding one), so
        that create_metrics need not look them up again; outside a batch, a throwaway set."""
        local = self._local
        return local.absent if getattr(local, "depth", 0) else set()

    def get_metrics(self, names: Sequence[str]) -> dict[str, Metric]:
        self._check_schema()
        absent = self._absent_names()
        found: dict[str, Metric] = {}
        names = list(dict.fromkeys(names))
        with self._errors("read metrics"):
            for start in range(0, len(names), _CHUNK):
                chunk = names[start:start + _CHUNK]
                rows = self._conn.execute(
                    f"SELECT key, {_METRIC_FIELDS} FROM metrics WHERE name IN ({', '.join(['?'] * len(chunk))})", chunk
                ).fetchall()
                # rows name metrics with the caller's strings, not SQLite's copies: the key
                # cache and the Metric objects then share one string a name with the caller
                same = {name: name for name in chunk}
                rows = [(key, same[name], *rest) for key, name, *rest in rows]
                for row in rows:
                    self._keys[row[1]] = row[0]
                if len(rows) < len(chunk):
                    absent.update(same.keys() - {row[1] for row in rows})
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
            self._insert_named("INSERT OR IGNORE INTO", "directories", ((d, ()) for d in wanted))

    def delete_directories(self, names: Sequence[str]) -> None:
        self._check_schema()
        with self.write_batch(), self._errors("delete directories"):
            self._conn.executemany("DELETE FROM directories WHERE name = ?", ((n,) for n in names))
            self._conn.execute("UPDATE store_state SET value = value + 1 WHERE name = 'directory_deletions'")

    def existing_directories(self, names: Sequence[str]) -> set[str]:
        return self._names_in("SELECT name FROM directories WHERE name IN ({})", names, "read directories")

    def directories_with_children(self, names: Sequence[str]) -> set[str]:
        return self._names_in(
            "SELECT value FROM name_strings AS s WHERE value IN ({})"
            " AND (EXISTS (SELECT 1 FROM metrics WHERE parent = s.id) OR EXISTS (SELECT 1 FROM directories WHERE parent = s.id))",
            names, "find children",
        )

    def _names_in(self, sql: str, names: Sequence[str], what: str) -> set[str]:
        self._check_schema()
        found: set[str] = set()
        names = list(dict.fromkeys(names))
        with self._errors(what):
            for start in range(0, len(names), _CHUNK):
                chunk = names[start:start + _CHUNK]
                marks = ", ".join(["?"] * len(chunk))
                found.update(r[0] for r in self._conn.execute(sql.format(marks), chunk))
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
            facts.update(self._bytes_by_table(conn))
            facts.update(self.free_pages_facts())
        return facts

    @staticmethod
    def _bytes_by_table(conn: sqlite3.Connection) -> dict[str, int | str]:
        """Bytes of the pages each table takes with its indexes (`disk_bytes.table.<name>`,
        a stage table's are its stage's), their sums for the datapoints tables and for the
        rest (`disk_bytes.points`, `disk_bytes.metadata`), from the dbstat virtual table,
        which reads every page once; without dbstat (SQLite built without
        SQLITE_ENABLE_DBSTAT_VTAB) a note saying so (the free pages are free_pages_facts')."""
        facts: dict[str, int | str] = {}
        try:
            rows = conn.execute("SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat AS d JOIN sqlite_master AS m"
                                " ON m.name = d.name GROUP BY m.tbl_name ORDER BY m.tbl_name").fetchall()
        except sqlite3.OperationalError:  # no SQLITE_ENABLE_DBSTAT_VTAB
            facts["disk_bytes.tables"] = "unavailable: this SQLite has no dbstat table"
            return facts
        points = sum(size for table, size in rows if table.startswith("datapoints_"))
        facts.update({"disk_bytes.points": points, "disk_bytes.metadata": sum(size for _, size in rows) - points})
        facts.update({f"disk_bytes.table.{table}": size for table, size in rows})
        return facts
