"""The SQLite store's metadata: metrics and directories as a tree of interned components
(name_tree), scans, and the store's statistics."""
from __future__ import annotations

import functools
import itertools
import json
import operator
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
from biggraphite_like.stores.sqlite.name_tree import METRIC_SELECT, ROOT, join, split

_ROWS_PER_INSERT = 500  # rows of one INSERT ... VALUES (6 bound parameters each)
_NEW_ROWS_PER_INSERT = 1_000  # rows of one INSERT of new metrics (2 bound parameters each; 5,000 took longer)
_LOOKUPS = 20_000  # names per json_each() lookup
_METRIC_COLUMNS = "parent, leaf, metadata, created_on, updated_on, read_on"
MetricRow = tuple[str, tuple[str, str, float], int, int, int]  # name, (retention, aggregator, xff), created, updated, read
_NAME, _METADATA = operator.attrgetter("name"), operator.attrgetter("metadata")
_CREATED, _UPDATED, _READ = (operator.attrgetter(field) for field in ("created_on", "updated_on", "read_on"))
_FIRST, _LAST = operator.itemgetter(0), operator.itemgetter(2)  # of str.rpartition's (parent, '.', leaf)
# the greatest metric key the table ever had (AUTOINCREMENT's sequence, or a row's key past it)
_LAST_KEY = ("SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'metrics'), 0),"
             " coalesce((SELECT max(key) FROM metrics), 0))")


@functools.lru_cache(maxsize=4)
def _new_rows_statement(rows: int) -> str:
    """INSERT of `rows` new metrics that share their metadata and times, under consecutive
    keys (see _insert_new_metrics): ?1 the first key, ?2-?5 metadata, created_on,
    updated_on, read_on, then parent and leaf a row (2 parameters a row, not 7)."""
    values = ", ".join(f"(?1 + {index}, ?{6 + 2 * index}, ?{7 + 2 * index}, ?2, ?3, ?4, ?5)" for index in range(rows))
    return f"INSERT INTO metrics (key, {_METRIC_COLUMNS}) VALUES {values} ON CONFLICT (parent, leaf) DO NOTHING"


def _by_fields(metrics: Sequence[Metric], row_ids: Mapping[int, int]) -> dict[tuple[int, int, int, int], list[Metric]]:
    """metrics by (metadatas row, created_on, updated_on, read_on), in their order: one
    group, checked in C, when they share them all (a writer's batch: one set of storage
    rules, one `now`)."""
    columns = (list(map(row_ids.__getitem__, map(id, map(_METADATA, metrics)))), list(map(_CREATED, metrics)),
               list(map(_UPDATED, metrics)), list(map(_READ, metrics)))
    if all(column.count(column[0]) == len(column) for column in columns):
        return {tuple(column[0] for column in columns): list(metrics)}
    groups: dict[tuple[int, int, int, int], list[Metric]] = {}
    for metric, fields in zip(metrics, zip(*columns)):
        groups.setdefault(fields, []).append(metric)
    return groups


class MetadataMixin:
    """Metrics and directories: create, read, touch, delete, scan, count."""

    def _insert_metrics(self, rows: Sequence[MetricRow], keys: Sequence[int] | None = None) -> list[tuple[str, int]]:
        """Insert metrics rows (with `keys`: under these keys, no conflict expected), their
        parent directories and strings first; an existing metric gets the new metadata and
        updated_on. Returns (name, key) of the rows written, the caller's strings."""
        conn, tree = self._conn, self._tree
        parts = [row[0].rpartition(".") for row in rows]  # (parent, '.', leaf): each name split once
        parents = tree.keys(conn, self._strings, {part[0] for part in parts}, create=True)
        leaves = self._strings.ids(conn, {part[2] for part in parts})
        metadatas = tree.metadata_ids(conn, {row[1] for row in rows})
        by_pair: dict[tuple[int, int], str] = {}
        records = []
        for index, ((name, fields, created_on, updated_on, read_on), (parent, _, leaf)) in enumerate(zip(rows, parts)):
            pair = (parents[parent], leaves[leaf])
            by_pair[pair] = name
            records.append((*pair, metadatas[fields], created_on, updated_on, read_on)
                           + ((keys[index],) if keys is not None else ()))
        width = len(records[0]) if records else 0
        columns = _METRIC_COLUMNS + (", key" if keys is not None else "")
        conflict = ("" if keys is not None else " ON CONFLICT (parent, leaf) DO UPDATE SET metadata = excluded.metadata,"
                    " updated_on = excluded.updated_on")
        written = []
        for start in range(0, len(records), _ROWS_PER_INSERT):
            chunk = records[start:start + _ROWS_PER_INSERT]
            row = f"({', '.join(['?'] * width)})"
            written += conn.execute(f"INSERT INTO metrics ({columns}) VALUES {', '.join([row] * len(chunk))}{conflict}"
                                    " RETURNING parent, leaf, key", [v for r in chunk for v in r]).fetchall()
        return [(by_pair[parent, leaf], key) for parent, leaf, key in written]

    def _metric_rows(self, names: Sequence[str], distinct: bool = False) -> dict[str, tuple]:
        """(key, retention, aggregator, xfilesfactor, created_on, updated_on, read_on) of the
        names that are metrics, keyed by the caller's strings (`distinct`: names has no repeat)."""
        conn, tree = self._conn, self._tree
        names = names if distinct else list(dict.fromkeys(names))
        parts = list(map(str.rpartition, names, itertools.repeat(".")))
        parent_paths = set(map(_FIRST, parts))
        parents = tree.keys(conn, self._strings, parent_paths)
        if not any(map(parents.__contains__, parent_paths)):  # no parent directory (new names): no metric
            return {}
        leaves = self._strings.lookup(conn, set(map(_LAST, parts)))
        wanted = [(name, parents[parent], leaves[leaf]) for name, (parent, _, leaf) in zip(names, parts)
                  if parent in parents and leaf in leaves]
        found: dict[str, tuple] = {}
        for start in range(0, len(wanted), _LOOKUPS):
            chunk = wanted[start:start + _LOOKUPS]
            for index, *row in conn.execute(
                    "SELECT j.key, m.key, d.retention, d.aggregator, d.xfilesfactor, m.created_on, m.updated_on,"
                    " m.read_on FROM json_each(?) AS j CROSS JOIN metrics AS m ON m.parent = j.value ->> 0"
                    " AND m.leaf = j.value ->> 1 LEFT JOIN metadatas AS d ON d.id = m.metadata",
                    (json.dumps([[parent, leaf] for _, parent, leaf in chunk]),)):
                found[chunk[index][0]] = tuple(row)
        return found

    def _directory_keys(self, names: Sequence[str], visible: bool = True) -> dict[str, int]:
        """Keys of the names that are directories (visible: not hidden ones)."""
        keys = self._tree.keys(self._conn, self._strings, names)
        found = {name: keys[name] for name in names if name in keys and name}
        if visible and found:
            hidden = self._hidden_keys()
            found = {name: key for name, key in found.items() if key not in hidden}
        return found

    def _hidden_keys(self) -> set[int]:
        """Keys of the hidden directories (deleted while they had children): few or none."""
        return {r[0] for r in self._conn.execute("SELECT key FROM directories WHERE hidden")}

    def _show(self, paths: Iterable[str]) -> None:
        """Make the hidden directories among paths and their ancestors visible again (they
        are created anew: the names token changes)."""
        hidden = self._hidden_keys()
        if not hidden:
            return
        wanted = names_mod.all_ancestors(paths) | set(paths)
        keys = self._tree.keys(self._conn, self._strings, wanted)
        shown = list({keys[p] for p in wanted if p in keys} & hidden)
        if shown:
            self._conn.execute("UPDATE directories SET hidden = 0 WHERE key IN (SELECT value FROM json_each(?))",
                               (json.dumps(shown),))
            self._directories_changed()

    def _directories_changed(self) -> None:
        """Bump the directory counter of store_state: every process's names token changes and
        its path -> key cache goes (see name_tree)."""
        self._conn.execute("UPDATE store_state SET value = value + 1 WHERE name = 'directory_deletions'")
        self._tree.forget_keys()

    def _has_children(self, key: int) -> bool:
        return bool(self._conn.execute("SELECT EXISTS (SELECT 1 FROM metrics WHERE parent = ?)"
                                       " OR EXISTS (SELECT 1 FROM directories WHERE parent = ?)", (key, key)).fetchone()[0])

    def _remove_directories(self, keys: Iterable[int], hidden_only: bool) -> None:
        """Delete the directories with keys, or hide those that still have children; then
        their hidden ancestors left without children. hidden_only: only hidden ones go."""
        conn = self._conn
        todo = [(k, hidden_only) for k in keys if k != ROOT]
        while todo:
            key, only_hidden = todo.pop()
            row = conn.execute("SELECT parent, hidden FROM directories WHERE key = ?", (key,)).fetchone()
            if row is None or (only_hidden and not row[1]):
                continue
            if self._has_children(key):
                conn.execute("UPDATE directories SET hidden = 1 WHERE key = ?", (key,))
                continue
            conn.execute("DELETE FROM directories WHERE key = ?", (key,))
            if row[0] != ROOT:
                todo.append((row[0], True))

    def create_metrics(self, metrics: Sequence[Metric]) -> set[str]:
        """Store.create_metrics; returns the names that had no row (new keys: no point).
        Names get_metrics found no row for in this write batch are not looked up again, and
        go in bulk (`_insert_new_metrics`); existing ones are upserted (`_insert_metrics`)."""
        if not metrics:
            return set()
        self._check_schema()
        names = list(map(_NAME, metrics))
        if len(set(names)) < len(names):  # the last of a name wins, as upserting each in turn would
            metrics = list({m.name: m for m in metrics}.values())
            names = list(map(_NAME, metrics))
        # metadata by object: a batch shares a few, and hashing or formatting one per metric cost more
        # than the rest of its row
        objects = dict(zip(map(id, map(_METADATA, metrics)), map(_METADATA, metrics)))
        fields = {key: (str(md.retention), md.aggregator.value, md.xfilesfactor) for key, md in objects.items()}
        with self.write_batch(), self._errors("create metrics"):
            absent = self._absent_names()
            unchecked = list(itertools.filterfalse(absent.__contains__, names))
            existing = self.get_metrics(unchecked) if unchecked else {}  # adds the names without a row to absent
            new = set(filter(absent.__contains__, names))
            for retention in {md.retention for md in objects.values()}:
                for index, stage in enumerate(retention.stages):
                    self._ensure_table(StageTable(stage, index > 0))
            self._keep_points(existing, metrics)
            row_ids = self._tree.metadata_ids(self._conn, fields.values())
            # the keys are known once the rows are written: the first write of each new metric needs
            # no lookup (a rollback forgets them, see write_batch)
            fresh = metrics if len(new) == len(metrics) else [m for m in metrics if m.name in new]
            written, taken = self._insert_new_metrics(fresh, {key: row_ids[f] for key, f in fields.items()})
            self._keys.update(written)
            if taken:  # rows the write lock rules out: existing metrics after all
                new.difference_update(m.name for m in taken)
                self._keep_points(self.get_metrics([m.name for m in taken]), taken)
            upserts = [m for m in metrics if m.name not in new] if len(new) < len(metrics) else []
            if upserts:
                self._keys.update(self._insert_metrics([(m.name, fields[id(m.metadata)], m.created_on, m.updated_on,
                                                         m.read_on) for m in upserts]))
            if self._hidden_keys():  # none, usually: the parents are not even listed then
                self._show({name.rpartition(".")[0] for name in names} - {""})
            absent.difference_update(names)
        return new

    def _keep_points(self, existing: Mapping[str, Metric], metrics: Sequence[Metric]) -> None:
        """Drop the points of the existing metrics whose new retention has not their stages."""
        wanted = {m.name: m.retention for m in metrics} if existing else {}
        for name, old in existing.items():
            if old.retention != wanted[name]:
                self._drop_points(name, old.retention, keep=wanted[name])

    def _insert_new_metrics(self, metrics: Sequence[Metric], row_ids: Mapping[int, int]
                            ) -> tuple[Iterable[tuple[str, int]], list[Metric]]:
        """Insert metrics that have no row (get_metrics found none in this write batch), their
        parent directories and strings first: ((name, key) of each row written, the metrics
        that had a row after all). `row_ids`: the metadatas row of each metadata object, by
        id(). Prepared statements of _NEW_ROWS_PER_INSERT rows, under keys handed out here
        above every key the table ever had, as AUTOINCREMENT would (an explicit key past the
        sequence moves it): no row comes back to be matched to its name. The metrics sharing
        their metadata and times go together, those bound once a statement: a row binds its
        parent and leaf only (an executemany of one row a statement took twice the SQLite
        time, each statement also writing the sequence; 7 parameters a row cost 0.2 s more
        at 1,000,000 metrics, and as much to build their list)."""
        if not metrics:
            return (), []
        conn = self._conn
        groups = _by_fields(metrics, row_ids)
        if len(groups) > 1:  # keys in group order: a statement's rows are consecutive keys of one group
            metrics = list(itertools.chain.from_iterable(groups.values()))
        names = list(map(_NAME, metrics))
        parts = list(map(str.rpartition, names, itertools.repeat(".")))
        parent_paths, leaf_strings = list(map(_FIRST, parts)), list(map(_LAST, parts))
        parents = self._tree.keys(conn, self._strings, set(parent_paths), create=True)
        leaves = self._strings.ids(conn, set(leaf_strings))
        pairs = list(itertools.chain.from_iterable(zip(map(parents.__getitem__, parent_paths),
                                                       map(leaves.__getitem__, leaf_strings))))
        base = conn.execute(_LAST_KEY).fetchone()[0]
        keys = range(base + 1, base + 1 + len(metrics))
        inserted = start = 0
        for fields, group in groups.items():
            for first in range(start, start + len(group), _NEW_ROWS_PER_INSERT):
                count = min(_NEW_ROWS_PER_INSERT, start + len(group) - first)
                inserted += conn.execute(_new_rows_statement(count),
                                         [keys[first], *fields, *pairs[first * 2:(first + count) * 2]]).rowcount
            start += len(group)
        if inserted == len(metrics):
            return zip(names, keys), []
        inserted = {row[0] for row in conn.execute("SELECT key FROM metrics WHERE key > ?", (base,))}
        return ([(name, key) for name, key in zip(names, keys) if key in inserted],
                [m for m, key in zip(metrics, keys) if key not in inserted])

    def _absent_names(self) -> set[str]:
        """Names found to have no metrics row in the current write batch (each write batch
        starts a new set, since the writer lock keeps anyone else from adding one), so
        that create_metrics need not look them up again; outside a batch, a throwaway set."""
        local = self._local
        return local.absent if getattr(local, "depth", 0) else set()

    def get_metrics(self, names: Sequence[str]) -> dict[str, Metric]:
        self._check_schema()
        absent = self._absent_names()
        names = list(dict.fromkeys(names))
        with self._errors("read metrics"):
            self._check_directories()
            rows = self._metric_rows(names, distinct=True)
        for name, row in rows.items():
            self._keys[name] = row[0]
        if len(rows) < len(names):
            absent.update(set(names).difference(rows) if rows else names)
        return self.readable_metrics((name, *row[1:]) for name, row in rows.items())

    def update_metadata(self, name: str, metadata: MetricMetadata) -> None:
        existing = self.get_metrics([name]).get(name)
        if existing is None:
            raise MetricNotFound(f"metric {name!r} does not exist")
        with self.write_batch(), self._errors("update metadata"):
            if existing.retention != metadata.retention:
                for index in range(len(metadata.retention.stages)):
                    self._ensure_table(StageTable(metadata.retention.stages[index], index > 0))
                self._drop_points(name, existing.retention, keep=metadata.retention)
            ids = self._tree.metadata_ids(self._conn, [(str(metadata.retention), metadata.aggregator.value,
                                                        metadata.xfilesfactor)])
            self._conn.execute("UPDATE metrics SET metadata = ? WHERE key = ?",
                               (ids[str(metadata.retention), metadata.aggregator.value, metadata.xfilesfactor],
                                self._key(name)))

    def touch_metrics(self, names: Sequence[str], field: str, timestamp: int) -> None:
        if field not in ("updated_on", "read_on"):
            raise ValueError(f"cannot touch {field!r}: use updated_on or read_on")
        with self.write_batch(), self._errors(f"set {field}"):
            keys = [row[0] for row in self._metric_rows(names).values()]
            self._conn.executemany(f"UPDATE metrics SET {field} = ? WHERE key = ?", ((timestamp, k) for k in keys))

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
                rows = self._metric_rows(list(reads))
                conn.executemany("UPDATE metrics SET read_on = max(read_on, ?) WHERE key = ?",
                                 ((reads[name], row[0]) for name, row in rows.items()))
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
        with self.write_batch(), self._errors("delete metrics"):
            rows = self._metric_rows(names)
            parents = set()
            for name, (key, retention_text, *_) in rows.items():
                try:
                    retention: Retention | None = Retention.parse(retention_text)
                except (BglError, ValueError, TypeError):
                    retention = None  # an unreadable row (see `bgl repair`): its points may be anywhere
                self._keys[name] = key
                self._drop_points(name, retention)
                self._conn.execute("DELETE FROM metrics WHERE key = ?", (key,))
                self._keys.pop(name, None)
                parents.add(split(name)[0])
            if rows:
                self._conn.execute("UPDATE store_state SET value = value + 1 WHERE name = 'deletions'")
                if self._hidden_keys():
                    keys = self._tree.keys(self._conn, self._strings, parents)
                    self._remove_directories([keys[p] for p in parents if p in keys], hidden_only=True)

    def _key(self, name: str) -> int:
        key = self._keys.get(name)
        if key is None:
            row = self._metric_rows([name]).get(name)
            if row is None:
                raise MetricNotFound(f"metric {name!r} does not exist: create it before writing points")
            key = self._keys[name] = row[0]
        return key

    # -- directories and full scans ------------------------------------------------------
    def create_directories(self, names: Sequence[str]) -> None:
        self._check_schema()
        wanted = {a for n in names for a in (*names_mod.ancestors(n), n)}
        with self.write_batch(), self._errors("create directories"):
            self._tree.keys(self._conn, self._strings, wanted, create=True)
            self._show(wanted)

    def delete_directories(self, names: Sequence[str]) -> None:
        self._check_schema()
        with self.write_batch(), self._errors("delete directories"):
            keys = self._directory_keys(list(dict.fromkeys(names)), visible=False)
            self._remove_directories(keys.values(), hidden_only=False)
            self._directories_changed()

    def existing_directories(self, names: Sequence[str]) -> set[str]:
        self._check_schema()
        with self._errors("read directories"):
            self._check_directories()
            return set(self._directory_keys(names))

    def directories_with_children(self, names: Sequence[str]) -> set[str]:
        self._check_schema()
        with self._errors("find children"):
            self._check_directories()
            keys = self._directory_keys(names, visible=False)
            return {name for name, key in keys.items() if self._conn.execute(
                "SELECT EXISTS (SELECT 1 FROM metrics WHERE parent = ?)"
                " OR EXISTS (SELECT 1 FROM directories WHERE parent = ? AND NOT hidden)", (key, key)).fetchone()[0]}

    def scan_metrics(self, shard=0, nshards=1, cursor=None, page_size=1000) -> Iterator[ScanPage[Metric]]:
        sql = f"{METRIC_SELECT} WHERE m.key > ? AND m.key % ? = ? ORDER BY m.key LIMIT ?"
        for rows, next_cursor in self._scan("metrics", sql, shard, nshards, cursor, page_size):
            paths = self._tree.paths(self._conn, {r[1] for r in rows})
            yield metrics_page(((join(paths[r[1]], r[2]), *r[3:]) for r in rows if r[1] in paths), next_cursor)

    def scan_directories(self, shard=0, nshards=1, cursor=None, page_size=1000) -> Iterator[ScanPage[str]]:
        sql = "SELECT key FROM directories WHERE key > ? AND key % ? = ? AND NOT hidden ORDER BY key LIMIT ?"
        for rows, next_cursor in self._scan("directories", sql, shard, nshards, cursor, page_size):
            paths = self._tree.paths(self._conn, [r[0] for r in rows])
            yield ScanPage([paths[r[0]] for r in rows if r[0] in paths], next_cursor)

    def _scan(self, table: str, sql: str, shard: int, nshards: int, cursor: str | None, page_size: int):
        """Pages of rows in key order; shard k of n holds the keys equal to k modulo n."""
        check_shard(shard, nshards)
        self._check_schema()
        after = int(cursor) if cursor else 0
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
                "directories": conn.execute("SELECT count(*) FROM directories WHERE NOT hidden").fetchone()[0],
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
