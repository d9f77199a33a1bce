"""The Cassandra store's metadata: metrics rows with their data ids and generations,
directories, deletions other processes see, token-range scans, statistics."""
from __future__ import annotations

import collections
import contextlib
import time
import uuid
from typing import Any, Iterable, Iterator, Sequence

from cassandra import DriverException
from cassandra.cluster import NoHostAvailable
from cassandra.query import UNSET_VALUE, SimpleStatement

from biggraphite_like import names as names_mod
from biggraphite_like.errors import MetricNotFound, SchemaMissing
from biggraphite_like.metric import Metric, MetricMetadata
from biggraphite_like.stores.base import ScanPage, StageTable, metrics_page
from biggraphite_like.stores.cassandra import schema
from biggraphite_like.stores.cassandra.connection import data_id, token_range
from biggraphite_like.stores.cassandra.requests import (
    translate,
)

_METRIC_SELECT = "name, " + ", ".join(schema.METRIC_COLUMNS)


# store_settings rows read once a batch or snapshot
_MARKERS = ("deletions", "sealed", "chunk_window", "directory_deletions")
IN_CHUNK = 100  # names per `WHERE name IN ?` read: one request, few enough for one coordinator
DIRECTORY_CACHE = 200_000  # directories a process remembers having written (emptied when full)


class MetadataMixin:
    """Metrics and directories: create, read, touch, delete, scan, count."""

    def create_metrics(self, metrics: Sequence[Metric]) -> None:
        """Directories first, then metric rows, with no read of a row before writing it but one
        `IN` read a chunk of names (which exist already: their created_on is kept) and, only
        once a metric was ever deleted, one of their generations.

        Each row is idempotent: the data id is a function of the name and its generation;
        created_on is written only for names not found, read_on only when the metric has one.
        Directories this process wrote are not written again (a bounded cache, forgotten when
        any process deletes directories). A crash (kill -9) between the steps leaves
        directories without metrics, which cleanup removes, never a metric without its
        directories."""
        if not metrics:
            return
        with self._deletions_checked():  # one read of the markers: deletions of metrics and of directories
            self._create_metrics(list({m.name: m for m in metrics}.values()))

    def _create_metrics(self, metrics: list[Metric]) -> None:
        for metric in metrics:
            for index in range(len(metric.retention.stages)):
                self._ensure_table(StageTable.of(metric, index))
        meta = self.metadata_keyspace
        names = [m.name for m in metrics]
        directories = [d for d in sorted({d for m in metrics for d in names_mod.ancestors(m.name)})
                       if d not in self._directories_written]
        reads = self._row_reads(names)
        results = self._run(reads + self._directory_inserts(directories),
                            f"read which of {len(names)} metrics exist and write {len(directories)} directories")
        self._remember_directories(directories)
        existing = {name: row[1] for name, row in _rows(results[:len(reads)], False).items()}
        new = [n for n in names if n not in existing]
        generations = self._generations(new) if self._deletions_seen is not None else {}
        insert = self._prepare(
            f"INSERT INTO {meta}.metrics (name, parent, {', '.join(schema.COMPONENT_COLUMNS)}, "
            f"{', '.join(schema.METRIC_COLUMNS)}) VALUES ({', '.join(['?'] * (schema.COMPONENTS + 9))})",
            "metadata_write")
        update = self._prepare(
            f"UPDATE {meta}.metrics SET retention = ?, aggregator = ?, xfilesfactor = ?, updated_on = ? WHERE name = ?",
            "metadata_write")
        requests: list[tuple[Any, Any]] = []
        ids: dict[str, uuid.UUID] = {}
        for metric in metrics:
            md = metric.metadata
            if metric.name in existing:
                ids[metric.name] = existing[metric.name]
                requests.append((update, (str(md.retention), md.aggregator.value, md.xfilesfactor,
                                          metric.updated_on, metric.name)))
            else:
                ids[metric.name] = data_id(metric.name, generations.get(metric.name))
                requests.append((insert, (metric.name, _parent(metric.name), *_components(metric.name),
                                          ids[metric.name], str(md.retention), md.aggregator.value, md.xfilesfactor,
                                          metric.created_on, metric.updated_on, metric.read_on or UNSET_VALUE)))
        self._run(requests, f"create {len(new)} metrics and update {len(existing)}")
        self._ids.update(ids)
        if new:
            self._names_changed()

    def _read_rows(self, names: Sequence[str], partial: bool = False) -> dict[str, tuple]:
        """Metric rows by name: (name, id, retention, ...) as in schema.METRIC_COLUMNS.

        Rows without a data id or retention are left by a touch racing a deletion: they are
        not metrics, and are only returned with `partial` (to delete them)."""
        return _rows(self._run(self._row_reads(names), f"read {len(names)} metrics"), partial)

    def _row_reads(self, names: Sequence[str]) -> list[tuple[Any, Any]]:
        """The requests reading the metric rows of names: one `IN` read of each IN_CHUNK of them."""
        select = self._prepare(f"SELECT {_METRIC_SELECT} FROM {self.metadata_keyspace}.metrics WHERE name IN ?",
                               "metadata_read")
        return [(select, (chunk,)) for chunk in _chunks(names)]

    def _generations(self, names: Sequence[str]) -> dict[str, int]:
        if not names:
            return {}
        select = self._prepare(
            f"SELECT name, generation FROM {self.metadata_keyspace}.metric_generations WHERE name IN ?",
            "metadata_read")
        results = self._run([(select, (chunk,)) for chunk in _chunks(names)],
                            f"read the generations of {len(names)} metric names")
        return {name: generation for rows in results for name, generation in rows if generation}

    def get_metrics(self, names: Sequence[str]) -> dict[str, Metric]:
        self._check_schema()
        rows = self._read_rows(names)
        for name, row in rows.items():
            self._ids[name] = row[1]
        found = self.readable_metrics(map(_stored_fields, rows.values()))
        for name in names:
            if name not in rows:
                self._ids.pop(name, None)
        return found

    def update_metadata(self, name: str, metadata: MetricMetadata) -> None:
        self._check_schema()
        if name not in self._read_rows([name]):
            raise MetricNotFound(f"metric {name!r} does not exist")
        for index, stage in enumerate(metadata.retention.stages):
            self._ensure_table(StageTable(stage, index > 0))
        self._execute(
            f"UPDATE {self.metadata_keyspace}.metrics SET retention = ?, aggregator = ?, xfilesfactor = ? WHERE name = ?",
            (str(metadata.retention), metadata.aggregator.value, metadata.xfilesfactor, name),
            "metadata_write", f"update the metadata of {name}")

    def touch_metrics(self, names: Sequence[str], field: str, timestamp: int) -> None:
        if field not in ("updated_on", "read_on"):
            raise ValueError(f"cannot touch {field!r}: use updated_on or read_on")
        if not names:
            return
        self._check_schema()
        update = self._prepare(f"UPDATE {self.metadata_keyspace}.metrics SET {field} = ? WHERE name = ?",
                               "metadata_write")
        self._run([(update, (timestamp, n)) for n in dict.fromkeys(names)], f"set {field} of {len(names)} metrics")

    def delete_metrics(self, names: Sequence[str]) -> None:
        self._check_schema()
        existing = list(self._read_rows(names, partial=True))
        if not existing:
            return
        meta = self.metadata_keyspace
        generation = time.time_ns() // 1000
        insert = self._prepare(f"INSERT INTO {meta}.metric_generations (name, generation) VALUES (?, ?)",
                               "metadata_write")
        delete = self._prepare(f"DELETE FROM {meta}.metrics WHERE name = ?", "metadata_write")
        # the generation first: a metric created again must never get the old data id back
        self._run([(insert, (n, generation)) for n in existing], f"record the deletion of {len(existing)} metrics")
        self._run([(delete, (n,)) for n in existing], f"delete {len(existing)} metrics")
        for name in existing:
            self._ids.pop(name, None)
        marker = self._prepare(f"INSERT INTO {meta}.{schema.SETTINGS_TABLE} (name, value) VALUES (?, ?)",
                               "metadata_write")
        self._run([(marker, ("deletions", f"{generation}-{uuid.uuid4().hex}"))], "record that metrics were deleted")
        self._names_changed()

    def _names_changed(self) -> None:
        """Set a new `names` marker in store_settings, after creating or deleting names."""
        self._set_marker("names")

    def _set_marker(self, name: str) -> None:
        """A new value of a store_settings marker (`names`, `directory_deletions`) that other processes read."""
        marker = self._prepare(f"INSERT INTO {self.metadata_keyspace}.{schema.SETTINGS_TABLE} (name, value)"
                               " VALUES (?, ?)", "metadata_write")
        self._run([(marker, (name, f"{time.time_ns()}-{uuid.uuid4().hex}"))], f"record a new {name} marker")

    def _remember_directories(self, directories: Sequence[str]) -> None:
        """Directories this process wrote: not written again until the cache is full or any
        process deletes directories (the `directory_deletions` marker, read with the others)."""
        written = self._directories_written
        if len(written) + len(directories) > DIRECTORY_CACHE:
            written.clear()
        written.update(directories)

    def names_token(self) -> str | None:
        """The `names` marker of store_settings: a new value after each creation or deletion
        of metrics or directories, by any process (one primary-key read)."""
        self._check_schema()
        rows = self._execute(f"SELECT value FROM {self.metadata_keyspace}.{schema.SETTINGS_TABLE} WHERE name = ?",
                             ["names"], "metadata_read", "read the names marker")
        return rows[0][0] if rows else ""

    @contextlib.contextmanager
    def write_batch(self) -> Iterator[None]:
        """Not a transaction (Cassandra has none); the outermost one checks for deletions first."""
        with self._deletions_checked():
            yield

    @contextlib.contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """Not a snapshot (Cassandra has none); the outermost one checks for deletions first."""
        with self._deletions_checked():
            yield

    @contextlib.contextmanager
    def _deletions_checked(self) -> Iterator[None]:
        """The outermost batch or snapshot is one operation: `timeout` bounds all of it."""
        local = self._local
        depth = getattr(local, "depth", 0)
        with self._conn.runner.operation():
            if not depth:
                self._check_deletions()
            local.depth = depth + 1
            try:
                yield
            finally:
                local.depth = depth

    def _check_deletions(self) -> None:
        """Forget cached data ids when any process deleted metrics since we last looked.

        A metric deleted and created again has a new data id: points written under the old
        one would be lost, points read under it would be the deleted ones. Deletions change
        one row of store_settings, read once a write batch or read snapshot, so a writer
        with a stale id finds the metric gone (MetricNotFound: the accessor reads the
        metadata again and creates the metric if it was asked to) and a reader reads the
        new id (or nothing).
        """
        try:
            self._check_schema()
        except SchemaMissing:
            return  # the batch's first statement says so
        # one statement also reads how far `bgl seal` may have sealed windows (points.py)
        rows = dict(self._execute(f"SELECT name, value FROM {self.metadata_keyspace}.{schema.SETTINGS_TABLE}"
                                  " WHERE name IN ?", [list(_MARKERS)], "metadata_read", "read the deletion marker"))
        marker = rows.get("deletions")
        self._sealed_horizon = int(rows["sealed"]) if rows.get("sealed") else None
        self._chunk_width = int(rows.get("chunk_window") or 0)
        if marker != self._deletions_seen:
            self._ids.clear()
            self._deletions_seen = marker
        directory_marker = rows.get("directory_deletions")
        if directory_marker != self._directory_deletions_seen:
            self._directories_written.clear()
            self._directory_deletions_seen = directory_marker

    def _metric_ids(self, names: Iterable[str], missing_ok: bool) -> dict[str, uuid.UUID]:
        unique = list(dict.fromkeys(names))
        unknown = [n for n in unique if n not in self._ids]
        if unknown:
            rows = self._read_rows(unknown)
            for name, row in rows.items():
                self._ids[name] = row[1]
            if not missing_ok:
                missing = [n for n in unknown if n not in rows]
                if missing:
                    raise MetricNotFound(f"metric {missing[0]!r} does not exist: create it before writing points")
        return {n: self._ids[n] for n in unique if n in self._ids}

    # -- directories and full scans ------------------------------------------------------------
    def _directory_inserts(self, directories: Sequence[str]) -> list[tuple[Any, Any]]:
        insert = self._prepare(
            f"INSERT INTO {self.metadata_keyspace}.directories (name, parent, {', '.join(schema.COMPONENT_COLUMNS)})"
            f" VALUES ({', '.join(['?'] * (schema.COMPONENTS + 2))})", "metadata_write")
        return [(insert, (d, _parent(d), *_components(d))) for d in directories]

    def create_directories(self, names: Sequence[str]) -> None:
        self._check_schema()
        wanted = sorted({a for n in names for a in (*names_mod.ancestors(n), n)})
        self._run(self._directory_inserts(wanted), f"create {len(wanted)} directories")
        self._remember_directories(wanted)
        self._names_changed()

    def delete_directories(self, names: Sequence[str]) -> None:
        self._check_schema()
        delete = self._prepare(f"DELETE FROM {self.metadata_keyspace}.directories WHERE name = ?", "metadata_write")
        self._directories_written.clear()
        self._run([(delete, (n,)) for n in dict.fromkeys(names)], f"delete {len(names)} directories")
        self._set_marker("directory_deletions")
        self._names_changed()

    def existing_directories(self, names: Sequence[str]) -> set[str]:
        self._check_schema()
        select = self._prepare(f"SELECT name FROM {self.metadata_keyspace}.directories WHERE name IN ?",
                               "metadata_read")
        results = self._run([(select, (chunk,)) for chunk in _chunks(names)], f"read {len(names)} directories")
        return {row[0] for rows in results for row in rows}

    def directories_with_children(self, names: Sequence[str]) -> set[str]:
        self._check_schema()
        unique = [n for n in dict.fromkeys(names) if n]
        requests = []
        for table in ("metrics", "directories"):
            select = self._prepare(
                f"SELECT parent FROM {self.metadata_keyspace}.{table} WHERE parent = ? LIMIT 1", "metadata_read")
            requests += [(select, (n,)) for n in unique]
        results = self._run(requests, f"find children of {len(unique)} directories")
        return {rows[0][0] for rows in results if rows}

    def scan_metrics(self, shard=0, nshards=1, cursor=None, page_size=1000) -> Iterator[ScanPage[Metric]]:
        for rows, next_cursor in self._scan("metrics", _METRIC_SELECT, shard, nshards, cursor, page_size):
            yield metrics_page(map(_stored_fields, rows), next_cursor)

    def scan_directories(self, shard=0, nshards=1, cursor=None, page_size=1000) -> Iterator[ScanPage[str]]:
        for rows, next_cursor in self._scan("directories", "name", shard, nshards, cursor, page_size):
            yield ScanPage([r[0] for r in rows], next_cursor)

    def _scan(self, table: str, columns: str, shard: int, nshards: int, cursor: str | None, page_size: int):
        """Pages of one shard's token range; the cursor is `shard/nshards/<driver paging state>`."""
        low, high = token_range(shard, nshards)
        paging_state = None
        if cursor:
            tag, _, state = cursor.rpartition("/")
            try:
                paging_state = bytes.fromhex(state)
            except ValueError:
                paging_state = None
            if tag != f"{shard}/{nshards}" or not paging_state:
                raise ValueError(f"cursor {cursor!r} is not one of a scan of shard {shard} of {nshards}")
        self._check_schema()
        statement = self._prepare(
            f"SELECT {columns} FROM {self.metadata_keyspace}.{table} WHERE token(name) > ? AND token(name) <= ?",
            "metadata_read")
        yielded = False
        while True:
            bound = statement.bind((low, high))
            bound.fetch_size = page_size
            try:
                result = self._conn.session.execute(bound, paging_state=paging_state, timeout=self.options.timeout)
            except Exception as exc:
                raise translate(exc, f"scan {table}", self.options.timeout, self._display_url) from exc
            rows = list(result.current_rows)
            paging_state = result.paging_state
            next_cursor = f"{shard}/{nshards}/{paging_state.hex()}" if paging_state else None
            if rows or (next_cursor is None and yielded):
                yield rows, next_cursor
                yielded = True
            if next_cursor is None:
                return

    def stats(self) -> dict[str, int | float | str]:
        kind = self._check_schema()
        rows = self._run([(SimpleStatement("SELECT release_version FROM system.local"), None)], "read system.local")[0]
        connection = self._conn
        return {
            "store": "cassandra",
            "url": self._display_url,
            "keyspace": self.keyspace,
            "metadata_keyspace": self.metadata_keyspace,
            "index": kind,
            "release_version": rows[0][0] if rows else "unknown",
            "hosts_up": sum(1 for h in connection.cluster.metadata.all_hosts() if h.is_up),
            "hosts_known": len(connection.cluster.metadata.all_hosts()),
            "consistency": ",".join(f"{k}={getattr(self.options, k)}" for k in self._levels),
            "max_concurrency": self.options.max_concurrency,
            "timeout": self.options.timeout,
            "shard": self.options.shard,
            "stage_tables_seen": len(self._tables),
            "prepared_statements": len(self._prepared),
            "stores_sharing_the_session": connection.users,
            **self._disk_usage(),
        }

    def _disk_usage(self) -> dict[str, int | str]:
        """Bytes on disk of each table of the store's keyspaces (`disk_bytes.table.<ks>.<table>`),
        summed over the nodes, from `system_views.disk_usage` (Cassandra 4.0 and later), which
        each node answers for its own SSTables in whole mebibytes: replicas count on every node
        holding them, memtables not yet flushed count nothing. A note instead when no node answers."""
        connection = self._conn
        statement = SimpleStatement("SELECT keyspace_name, table_name, mebibytes FROM system_views.disk_usage")
        ours = (self.keyspace, self.metadata_keyspace)
        sizes: collections.Counter = collections.Counter()
        answered, problems = 0, []
        for host in connection.cluster.metadata.all_hosts():
            try:
                rows = connection.session.execute(statement, host=host, timeout=self.options.timeout)
            except (DriverException, NoHostAvailable) as exc:
                problems.append(f"{host.address}: {exc}")
                continue
            answered += 1
            for keyspace, table, mebibytes in rows:
                if keyspace in ours:
                    sizes[f"{keyspace}.{table}"] += int((mebibytes or 0) * (1 << 20))
        if not answered:
            return {"disk_bytes.tables": "unavailable: no node answered SELECT FROM system_views.disk_usage"
                                         f" (Cassandra 4.0 and later): {'; '.join(problems)[:300]}"}
        facts: dict[str, int | str] = {"disk_bytes.nodes": answered}
        if problems:
            facts["disk_bytes.nodes_missing"] = "; ".join(problems)[:300]
        points = sum(size for name, size in sizes.items() if name.startswith(f"{self.keyspace}.datapoints_"))
        facts.update({"disk_bytes.points": points, "disk_bytes.metadata": sum(sizes.values()) - points})
        facts.update({f"disk_bytes.table.{name}": size for name, size in sorted(sizes.items())})
        return facts



def _rows(results: list[list[tuple]], partial: bool) -> dict[str, tuple]:
    """Metric rows by name from the results of _row_reads (see _read_rows for `partial`)."""
    return {row[0]: row for rows in results for row in rows if partial or (row[2] is not None and row[1] is not None)}


def _chunks(names: Sequence[str]) -> list[list[str]]:
    """Distinct names in lists of at most IN_CHUNK (the bound values of `name IN ?` reads)."""
    unique = list(dict.fromkeys(names))
    return [unique[i:i + IN_CHUNK] for i in range(0, len(unique), IN_CHUNK)]


def _parent(name: str):
    """The parent column: unset for top-level names (indexes skip empty values; `component_1 = '__END__'`
    finds the top level)."""
    return names_mod.parent(name) or UNSET_VALUE


def _components(name: str) -> list:
    """component_0..63 of a name: its parts, `__END__`, then unset (no tombstones for empty columns)."""
    parts = name.split(".")
    values: list = parts + [schema.END] + [UNSET_VALUE] * (schema.COMPONENTS - len(parts) - 1)
    return values[:schema.COMPONENTS]


def _stored_fields(row: Sequence) -> tuple:
    """A metrics row (name, id, retention, ...) as stored_metric's arguments; a row without a
    data id is a partial one (an update racing a deletion): nothing of it is readable."""
    name, data_id_, *fields = row
    return (name, *fields) if data_id_ is not None else (name, *[None] * len(fields))


