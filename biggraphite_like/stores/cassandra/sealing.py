"""Sealing: past windows of per-point rows become one compressed chunk each (FiloDB's
immutable chunks; see schema.py for the tables and points.py for how reads merge them).

For each metric and stage, the job reads the per-point rows of the whole ring (one
statement per partition), groups them by window and seals every window that ends at or
before the horizon and is still within retention:
1. the window's points (those of an existing chunk, replaced by the per-point rows: a
   point written after a window was sealed wins, as whisper's later write) are encoded
   into one new chunk, written with the TTL its window's last point would have and the
   write time of the latest row it holds plus one (so a row written since the scan is
   newer than the chunk, which is how reads tell rows that replace a chunk's points from
   rows the chunk holds);
2. then older chunks of the window and its per-point rows are deleted `USING TIMESTAMP`
   of the latest write sealed, so a point written since the scan (a later write time)
   stays: one range of offsets (a range tombstone, not one per row) for each run of the
   window's rows that no other row of the partition interrupts.
A crash between the two leaves rows and a chunk holding the same values: reads give the
same answer, and the next run seals the window again. Before any deletion, the horizon is
announced in store_settings (`sealed`); readers look for chunks only in windows ending by
the horizon they read at the start of their operation, so the job waits for operations
that started before the announcement to end (`settle`, the store's timeout by default)
before it deletes anything.
"""
from __future__ import annotations

import bisect
import dataclasses
import time
import uuid
from typing import Any, Callable, Sequence

import numpy as np

from biggraphite_like import chunks
from biggraphite_like.errors import SchemaMissing
from biggraphite_like.metric import Metric
from biggraphite_like.stores.base import SealCounts, StageTable
from biggraphite_like.stores.cassandra import schema
from biggraphite_like.stores.cassandra.requests import is_missing_table


@dataclasses.dataclass
class _Window:
    """The per-point rows of one window of one metric's stage, and what sealing needs of them."""

    key: uuid.UUID
    table: StageTable
    start: int
    rows: list[tuple] = dataclasses.field(default_factory=list)  # (slot_start, offset, shard, ts, value, count, wt)
    foreign: dict[int, set[int]] = dataclasses.field(default_factory=dict)  # slot_start -> offsets holding other rows


class SealingMixin:
    """announce_seal and seal_points (the `bgl seal` job's store side)."""

    def announce_seal(self, horizon: int) -> bool:
        """Raise store_settings `sealed` to horizon; False if it already was there or past it."""
        self._check_schema()
        meta = self.metadata_keyspace
        rows = self._execute(f"SELECT value FROM {meta}.{schema.SETTINGS_TABLE} WHERE name = ?", ["sealed"],
                             "metadata_read", "read the sealed horizon")
        if rows and rows[0][0] and int(rows[0][0]) >= horizon:
            return False
        self._execute(f"INSERT INTO {meta}.{schema.SETTINGS_TABLE} (name, value) VALUES (?, ?)",
                      ["sealed", str(horizon)], "metadata_write", "announce the sealed horizon")
        self._sealed_horizon = horizon
        return True

    def _window_width(self) -> int:
        rows = self._execute(f"SELECT value FROM {self.metadata_keyspace}.{schema.SETTINGS_TABLE} WHERE name = ?",
                             ["chunk_window"], "metadata_read", "read the chunk window")
        if not rows or not rows[0][0]:
            raise SchemaMissing(f"the store {self._display_url} records no chunk window (it was created before"
                                f" chunks): run `bgl --store {self._display_url} syncdb`, then seal")
        return int(rows[0][0])

    def seal_points(self, metrics: Sequence[Metric], horizon: int, now: int,
                    race_hook: Callable[[], None] | None = None) -> SealCounts:
        """Seal the windows of metrics ending at or before horizon (see the module docstring).

        race_hook (tests) runs between the scan and the chunk writes: where another writer's
        point would race the job."""
        self._check_schema()
        counts = SealCounts()
        width = self._window_width()
        ids = self._metric_ids([m.name for m in metrics], missing_ok=True)
        windows: dict[tuple, _Window] = {}
        for table, keyed in _by_table(metrics, ids).items():
            self._seal_scan(table, keyed, width, horizon, now, windows, counts)
        if not windows:
            return counts
        if race_hook is not None:
            race_hook()
        chunk_rows = self._run([(self._chunk_statement(w.table, "SELECT chunk, data, writetime(data) FROM {t}"
                                                       " WHERE metric = ? AND window_start = ?"), (w.key, w.start))
                                for w in windows.values()], f"read the chunks of {len(windows)} windows")
        sealed_at = time.time_ns() // 1000
        merged = [_merge(window, existing) for window, existing in zip(windows.values(), chunk_rows)]
        writes, deletes = [], []
        for window, existing, points, chunk in zip(windows.values(), chunk_rows, merged, chunks.encode_many(merged)):
            stage = window.table.stage
            expires = window.start + schema.window_steps(stage, width) * stage.precision + schema.ttl_seconds(stage)
            # written at the time of the latest row it holds (+1): a row written since the scan is newer
            written = max(row[6] for row in window.rows) + 1
            writes.append((self._chunk_statement(window.table, "INSERT INTO {t} (metric, window_start, chunk, data)"
                                                 " VALUES (?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?"),
                           (window.key, window.start, sealed_at, chunk, max(1, expires - now), written)))
            if existing:
                deletes.append((self._chunk_statement(window.table, "DELETE FROM {t} WHERE metric = ? AND"
                                                      " window_start = ? AND chunk < ?"),
                                (window.key, window.start, sealed_at)))
                counts.windows_resealed += 1
            deletes += self._row_deletes(window)
            counts.windows_sealed += 1
            counts.points_sealed += len(points)
            counts.rows_deleted += len(window.rows)
        self._run(writes, f"write {len(writes)} chunks")  # the chunks first: a crash loses nothing
        self._run(deletes, f"delete the per-point rows of {len(writes)} sealed windows")
        return counts

    def _seal_scan(self, table: StageTable, keyed: list[uuid.UUID], width: int, horizon: int, now: int,
                   windows: dict[tuple, _Window], counts: SealCounts) -> None:
        """Read every per-point row of the metrics' stage; collect the rows of windows to seal."""
        stage = table.stage
        columns = "offset, shard, ts, value, count, writetime(value)" if table.aggregated else \
            "offset, ts, value, writetime(value)"
        try:
            select = self._point_statement(table, f"SELECT {columns} FROM {self.keyspace}.{table.name}"
                                           " WHERE metric = ? AND slot_start = ?", "data_read", False)
        except SchemaMissing as exc:
            if is_missing_table(exc.__cause__ or exc):
                return  # no metric ever wrote this stage
            raise
        if table.name not in self._chunk_tables:  # a store written before chunks, not synced since
            self._ddl(schema.chunk_table_cql(self.keyspace, table))
            self._chunk_tables.add(table.name)
        blocks = range(0, stage.points, schema.ROW_POINTS)
        requests = [(select, (key, block)) for key in keyed for block in blocks]
        results = self._run(requests, f"read the per-point rows of {len(keyed)} metrics in {table.name}")
        span = schema.window_steps(stage, width) * stage.precision
        for (_, (key, block)), rows in zip(requests, results):
            held: dict[int, set[int]] = {}  # offset -> windows of its rows (shards may differ)
            sealing: list[_Window] = []
            for row in rows:
                if table.aggregated:
                    offset, shard, ts, value, count, written = row
                else:
                    (offset, ts, value, written), shard, count = row, None, None
                start = ts - ts % span
                held.setdefault(offset, set()).add(start)
                if start + span > horizon:
                    continue  # the open window (or a later one): per-point rows
                if start + span + schema.ttl_seconds(stage) <= now:
                    counts.rows_past_retention += 1  # left to their TTL
                    continue
                window = windows.setdefault((key, table, start), _Window(key, table, start))
                window.rows.append((block, offset, shard, ts, value, count, written))
                sealing.append(window)
            for window in {id(w): w for w in sealing}.values():
                window.foreign[block] = {o for o, starts in held.items() if starts != {window.start}}

    def _chunk_statement(self, table: StageTable, query: str) -> Any:
        return self._prepare(query.format(t=f"{self.keyspace}.{schema.chunk_table_name(table)}"),
                             "data_read" if query.startswith("SELECT") else "data_write")

    def _row_deletes(self, window: _Window) -> list[tuple[Any, Any]]:
        """Deletions of a window's per-point rows `USING TIMESTAMP` of the latest write sealed (a
        point written since the scan, later, stays): a range of offsets (one range tombstone)
        for each run of its rows that no other row interrupts, a row deletion for a row
        sharing its offset with another window's row (another shard of an aggregated stage)."""
        table = window.table
        ranged = self._prepare(f"DELETE FROM {self.keyspace}.{table.name} USING TIMESTAMP ?"
                               " WHERE metric = ? AND slot_start = ? AND offset >= ? AND offset <= ?", "data_write")
        latest = max(row[6] for row in window.rows)
        requests: list[tuple[Any, Any]] = []
        by_block: dict[int, list[tuple]] = {}
        for row in window.rows:
            by_block.setdefault(row[0], []).append(row)
        for block, rows in by_block.items():
            foreign = sorted(window.foreign.get(block, ()))
            mixed = [row for row in rows if row[1] in window.foreign.get(block, ())]
            for low, high in _runs(sorted({row[1] for row in rows} - set(foreign)), foreign):
                requests.append((ranged, (latest, window.key, block, low, high)))
            if mixed:
                single = self._prepare(f"DELETE FROM {self.keyspace}.{table.name} USING TIMESTAMP ? WHERE metric = ?"
                                       " AND slot_start = ? AND offset = ? AND shard = ?", "data_write")
                requests += [(single, (row[6], window.key, block, row[1], row[2])) for row in mixed]
        return requests


def _runs(offsets: list[int], foreign: list[int]) -> list[tuple[int, int]]:
    """(first, last) of the runs of sorted offsets that no foreign offset falls between."""
    runs: list[tuple[int, int]] = []
    for offset in offsets:
        if runs and bisect.bisect_left(foreign, runs[-1][1]) == bisect.bisect_left(foreign, offset):
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    return runs


def _by_table(metrics: Sequence[Metric], ids: dict[str, uuid.UUID]) -> dict[StageTable, list[uuid.UUID]]:
    tables: dict[StageTable, list[uuid.UUID]] = {}
    for metric in metrics:
        key = ids.get(metric.name)
        if key is None:
            continue  # deleted since the scan
        for index in range(len(metric.retention.stages)):
            tables.setdefault(StageTable.of(metric, index), []).append(key)
    return tables


def _merge(window: _Window, existing: list[tuple]) -> chunks.Points:
    """The window's points: the newest chunk's, each replaced by the per-point rows of its
    timestamp written after that chunk (rows written before it are in it already); between
    rows of one timestamp (aggregated: shards), the largest count, ties to the latest write."""
    best: dict[int, tuple] = {}  # ts -> (count, written, value)
    sealed_at = -1
    if existing:
        _, data, sealed_at = max(existing, key=lambda r: r[0])
        sealed_at = sealed_at or 0
        old = chunks.decode(data)
        counts = old.counts if old.counts is not None else np.ones(len(old), np.int64)
        for ts, value, count in zip(old.timestamps.tolist(), old.values.tolist(), counts.tolist()):
            best[ts] = (count, sealed_at, value)
    replaced: set[int] = set()
    for _, _, _, ts, value, count, written in sorted(window.rows, key=lambda r: r[6]):
        if existing and window.table.aggregated and written <= sealed_at:
            continue  # a row the chunk holds (left by a crash before its deletion)
        candidate = (count or 0, written, value)
        if ts not in replaced or not window.table.aggregated or candidate[:2] >= best[ts][:2]:
            best[ts] = candidate
        replaced.add(ts)
    order = sorted(best)
    return chunks.Points(
        np.array(order, np.int64), np.array([best[t][2] for t in order], np.float64),
        np.array([best[t][0] for t in order], np.int64) if window.table.aggregated else None)
