"""The Cassandra store's points: one partition per metric, stage and time window
(BigGraphite's layout, see schema.py), written in unlogged single-partition batches, read
with bounded concurrency; Cassandra expires them (TTL)."""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from cassandra.query import BatchStatement, BatchType

from biggraphite_like.errors import SchemaMissing
from biggraphite_like.stores.base import PointReads, StageTable
from biggraphite_like.stores.cassandra import schema
from biggraphite_like.stores.cassandra.requests import (
    is_missing_table,
)

MAX_BATCH = 256  # statements per unlogged (single-partition) batch


class PointsMixin:
    """write_points, read_points, expire_points."""

    def _point_statement(self, table: StageTable, query: str, kind: str, create: bool):
        try:
            return self._prepare(query, kind)
        except SchemaMissing as exc:
            if not create or not is_missing_table(exc.__cause__ or exc):
                raise
            self._tables.discard(table.name)
            self._ensure_table(table)
            return self._prepare(query, kind)

    def write_points(self, table, names, timestamps, values, counts=None) -> None:
        if not len(timestamps):
            return
        self._check_schema()
        ids = self._metric_ids(names, missing_ok=False)
        stage = table.stage
        if table.aggregated:
            statement = self._point_statement(
                table, f"INSERT INTO {self.keyspace}.{table.name} (metric, slot_start, offset, shard, ts, value, count)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)", "data_write", True)
            counts = counts if counts is not None else np.ones(len(timestamps), np.int64)
        else:
            statement = self._point_statement(
                table, f"INSERT INTO {self.keyspace}.{table.name} (metric, slot_start, offset, ts, value)"
                " VALUES (?, ?, ?, ?, ?)", "data_write", True)
        timestamps = np.asarray(timestamps, dtype=np.int64)
        slots = (timestamps // stage.precision) % stage.points
        offsets = slots % schema.ROW_POINTS
        blocks = (slots - offsets).tolist()
        owners = [ids[n] for n in names]
        order = sorted(range(len(timestamps)), key=lambda i: (owners[i].bytes, blocks[i]))
        shard = self.options.shard
        offsets_l, ts_l, values_l = offsets.tolist(), timestamps.tolist(), np.asarray(values).tolist()
        counts_l = np.asarray(counts).tolist() if table.aggregated else None
        requests: list[tuple[Any, Any]] = []
        for _, group in itertools.groupby(order, key=lambda i: (owners[i], blocks[i])):
            # two points of one slot (turns of the ring apart): the last given wins, as in a whisper file;
            # in one batch both would get the same write time and Cassandra would keep the larger value
            group = list({offsets_l[i]: i for i in group}.values())
            for first in range(0, len(group), MAX_BATCH):
                params = [
                    (owners[i], blocks[i], offsets_l[i], shard, ts_l[i], values_l[i], counts_l[i])
                    if counts_l is not None else (owners[i], blocks[i], offsets_l[i], ts_l[i], values_l[i])
                    for i in group[first:first + MAX_BATCH]
                ]
                if len(params) == 1:
                    requests.append((statement, params[0]))
                else:  # one partition: an unlogged batch is one mutation
                    batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=self._levels["data_write"])
                    for p in params:
                        batch.add(statement, p)
                    requests.append((batch, None))
        kind = "aggregated" if table.aggregated else "raw"
        self._run(requests, f"write {len(timestamps)} {kind} points to {self.keyspace}.{table.name}")

    def read_points(self, table, names, starts, ends) -> PointReads:
        if not len(names):
            return PointReads.empty()
        self._check_schema()
        ids = self._metric_ids(names, missing_ok=True)
        columns = "ts, value, count, writetime(value)" if table.aggregated else "ts, value"
        try:
            statement = self._point_statement(
                table, f"SELECT {columns} FROM {self.keyspace}.{table.name}"
                " WHERE metric = ? AND slot_start = ? AND offset >= ? AND offset <= ?", "data_read", False)
        except SchemaMissing as exc:
            if is_missing_table(exc.__cause__ or exc):
                return PointReads.empty()  # no metric ever used this stage
            raise
        requests: list[tuple[Any, Any]] = []
        owners: list[int] = []
        for index, (name, start, end) in enumerate(zip(names, starts.tolist(), ends.tolist())):
            key = ids.get(name)
            if key is None:
                continue
            for block, low, high in schema.slot_ranges(table.stage, start, end):
                requests.append((statement, (key, block, low, high)))
                owners.append(index)
        results = self._run(requests, f"read points of {len(names)} metrics from {self.keyspace}.{table.name}")
        sizes = [len(rows) for rows in results]
        if not sum(sizes):
            return PointReads.empty()
        request = np.repeat(np.array(owners, dtype=np.int64), sizes)
        columns_data = list(zip(*(r for rows in results for r in rows)))
        timestamps = np.array(columns_data[0], dtype=np.int64)
        values = np.array(columns_data[1], dtype=np.float64)
        # a slot may hold a point of another turn of the ring: keep those inside the window, as whisper
        inside = (timestamps >= starts[request]) & (timestamps < ends[request])
        request, timestamps, values = request[inside], timestamps[inside], values[inside]
        if table.aggregated and len(request):
            # per timestamp, the shard row with the largest count, ties by the latest write
            counts = np.array([c or 0 for c in columns_data[2]], dtype=np.int64)[inside]
            written = np.array([w or 0 for w in columns_data[3]], dtype=np.int64)[inside]
            order = np.lexsort((written, counts, timestamps, request))
            request, timestamps, values = request[order], timestamps[order], values[order]
            last = np.ones(len(order), dtype=bool)
            last[:-1] = (request[1:] != request[:-1]) | (timestamps[1:] != timestamps[:-1])
            request, timestamps, values = request[last], timestamps[last], values[last]
        return PointReads(request, timestamps, values)

    def expire_points(self, now: int) -> int:
        """0: Cassandra expires points itself (each stage table's default_time_to_live)."""
        self._check_schema()
        return 0


