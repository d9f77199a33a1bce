"""The Cassandra store's points: per-point rows in one partition per metric, stage and block
of ring slots (BigGraphite's layout, see schema.py), written in unlogged batches of the
partitions one set of replicas holds; sealed windows as chunks (sealing.py). A read runs,
with bounded concurrency, one statement per partition block and group of up to READ_GROUP
series reading the same slots (`metric IN ?`, each row told apart by its partition's token)
and, once `bgl seal` ran, one per series for its chunks; Cassandra expires both (TTL)."""
from __future__ import annotations

import struct
from typing import Any, Callable, Sequence

import numpy as np
from cassandra.murmur3 import murmur3
from cassandra.query import BatchStatement, BatchType

from biggraphite_like import chunks
from biggraphite_like.errors import SchemaMissing, StoreError
from biggraphite_like.stores.base import PointReads, StageTable
from biggraphite_like.stores.cassandra import schema
from biggraphite_like.stores.cassandra.connection import MAX_TOKEN, MIN_TOKEN
from biggraphite_like.stores.cassandra.requests import (
    is_missing_table,
)

MAX_BATCH = 256  # rows per unlogged batch (23 KiB of raw rows; Cassandra refuses batches of 50 KiB)
MAX_PARTITIONS = 10  # partitions per batch (Cassandra warns past unlogged_batch_across_partitions_warn_threshold, 10)
READ_GROUP = 50  # series per `metric IN ?` read of one partition block (one request)
_PARTITION_KEY = struct.Struct(">H16sBHiB")  # (metric uuid, slot_start int) as a composite partition key


def partition_key(metric: bytes, block: int) -> bytes:
    """The serialized partition key (metric, slot_start): its routing key, what its token hashes."""
    return _PARTITION_KEY.pack(16, metric, 0, 4, block, 0)


def partition_token(metric: bytes, block: int) -> int:
    """The Murmur3 token of partition (metric, slot_start), as Cassandra computes it."""
    token = murmur3(partition_key(metric, block))
    return MAX_TOKEN if token == MIN_TOKEN else token


def token_groups(keys: Sequence[Any], tokens: Sequence[int], size: int) -> list[dict[int, Any]]:
    """`keys` split into groups of at most `size`, as {token: key}, no two keys of a group
    sharing a token (a read tells its rows apart by token: two metrics whose partitions
    collide, however unlikely, are read by different requests)."""
    groups: list[dict[int, Any]] = []
    pending = list(zip(tokens, keys))
    while pending:
        distinct: dict[int, Any] = {}
        later = []
        for token, key in pending:
            if token in distinct:
                later.append((token, key))
            else:
                distinct[token] = key
        items = list(distinct.items())
        groups += [dict(items[first:first + size]) for first in range(0, len(items), size)]
        pending = later
    return groups


def batch_requests(statement: Any, partitions: Sequence[Sequence[int]], places: Sequence[Any],
                   params_of: Callable[[int], tuple], encoded_of: Callable[[int], tuple],
                   level: int) -> list[tuple[Any, Any]]:
    """Requests writing `partitions` (the point indexes of each partition's rows): unlogged
    batches of at most MAX_BATCH rows and MAX_PARTITIONS partitions, all held by the same
    replicas (`places`, one per partition), so the batch's coordinator (token-aware: a
    replica of its first row) holds every row it applies; a lone row alone.

    Fewer, larger requests: on one node a request of 60 rows cost as much node CPU as 40 more
    rows would. The first row of a batch is bound by the driver (which checks it and gives
    the batch its routing key); the others go in as the values `encoded_of` serialized in
    bulk, as bind would have (the driver's per-row bind was most of a write's client CPU)."""
    query_id = statement.query_id
    requests: list[tuple[Any, Any]] = []

    def send(rows: list[int]) -> None:
        if len(rows) == 1:
            requests.append((statement, params_of(rows[0])))
            return
        batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=level)
        batch.add(statement, params_of(rows[0]))
        inner = batch._statements_and_parameters  # what BatchStatement.add appends for a bound statement
        inner.extend((True, query_id, encoded_of(i)) for i in rows[1:])
        requests.append((batch, None))

    open_batches: dict[Any, tuple[list[int], int]] = {}  # place -> (rows, partitions)
    for group, place in zip(partitions, places):
        for first in range(0, len(group), MAX_BATCH):
            part = group[first:first + MAX_BATCH]
            rows, count = open_batches.get(place, ([], 0))
            if rows and (len(rows) + len(part) > MAX_BATCH or count == MAX_PARTITIONS):
                send(rows)
                rows, count = [], 0
            rows.extend(part)
            open_batches[place] = (rows, count + 1)
    for rows, _ in open_batches.values():
        send(rows)
    return requests


class PointsMixin:
    """write_points, read_points, expire_points."""

    def _places(self, partitions: Sequence[tuple[Any, int]]) -> list:
        """The replicas holding each (metric id, slot_start) partition; None for every one on a
        one-node cluster (or while the driver knows no token map)."""
        metadata = self._conn.cluster.metadata
        if metadata.token_map is None or len(metadata.all_hosts()) < 2:
            return [None] * len(partitions)
        return [frozenset(metadata.get_replicas(self.keyspace, partition_key(metric.bytes, block)))
                for metric, block in partitions]

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
        values = np.asarray(values, dtype=np.float64)
        slots = (timestamps // stage.precision) % stage.points
        offsets = slots % schema.ROW_POINTS
        blocks = slots - offsets
        keys: dict[str, int] = {}
        owner = np.fromiter((keys.setdefault(n, len(keys)) for n in names), np.int64, len(timestamps))
        uuids = [ids[n] for n in keys]
        order = np.lexsort((blocks, owner))  # stable: the points of a slot stay in the order given
        starts = np.flatnonzero(np.r_[True, (np.diff(owner[order]) != 0) | (np.diff(blocks[order]) != 0)])
        shard = self.options.shard
        owner_l, blocks_l, offsets_l = owner.tolist(), blocks.tolist(), offsets.tolist()
        order = order.tolist()
        ts_l, values_l = timestamps.tolist(), values.tolist()
        columns = _Serialized(uuids, owner_l, blocks, offsets, timestamps, values,
                              shard if table.aggregated else None, counts)
        if table.aggregated:
            counts_l = np.asarray(counts).tolist()
            params_of = lambda i: (uuids[owner_l[i]], blocks_l[i], offsets_l[i], shard, ts_l[i],  # noqa: E731
                                   values_l[i], counts_l[i])
        else:
            params_of = lambda i: (uuids[owner_l[i]], blocks_l[i], offsets_l[i], ts_l[i], values_l[i])  # noqa: E731
        # two points of one slot (turns of the ring apart): the last given wins, as in a whisper file;
        # in one batch both would get the same write time and Cassandra would keep the larger value
        bounds = [*starts.tolist(), len(order)]
        partitions = [list({offsets_l[i]: i for i in order[a:b]}.values()) for a, b in zip(bounds, bounds[1:])]
        places = self._places([(uuids[owner_l[group[0]]], blocks_l[group[0]]) for group in partitions])
        requests = batch_requests(statement, partitions, places, params_of, columns.row, self._levels["data_write"])
        kind = "aggregated" if table.aggregated else "raw"
        self._run(requests, f"write {len(timestamps)} {kind} points to {self.keyspace}.{table.name}")

    def read_points(self, table, names, starts, ends) -> PointReads:
        if not len(names):
            return PointReads.empty()
        with self.read_snapshot():  # the sealed horizon is read with the deletion marker, once a snapshot
            return self._read_points(table, names, starts, ends)

    def _read_points(self, table: StageTable, names, starts: np.ndarray, ends: np.ndarray) -> PointReads:
        """Per-point rows of the windows' slots, plus the chunks of sealed windows they overlap
        (one statement a series, `window_start IN ?`), merged as whisper would read them.

        Series whose windows cover the same slots of the same partition block (a panel's
        series, fetched over one window) are read together: `metric IN ?` (at most
        READ_GROUP of them a request), one request per group instead of one per series."""
        self._check_schema()
        ids = self._metric_ids(names, missing_ok=True)
        # the token, not the metric: the driver decodes a uuid column into a uuid.UUID a row, which
        # was two thirds of a read's client CPU; the token is a bigint (token_groups keeps it unique)
        columns = "token(metric, slot_start), ts, value" + (", count, writetime(value)" if table.aggregated else "")
        try:
            statement = self._point_statement(
                table, f"SELECT {columns} FROM {self.keyspace}.{table.name}"
                " WHERE metric IN ? AND slot_start = ? AND offset >= ? AND offset <= ?", "data_read", False)
        except SchemaMissing as exc:
            if is_missing_table(exc.__cause__ or exc):
                return PointReads.empty()  # no metric ever used this stage
            raise
        chunk_statement = self._chunk_read_statement(table)
        groups: dict[tuple[int, int, int], dict] = {}  # (block, low, high) -> {metric id: [request indexes]}
        chunk_requests: list[tuple[Any, Any]] = []
        chunk_owners: list[int] = []
        span = schema.window_steps(table.stage, self._chunk_width) * table.stage.precision
        for index, (name, start, end) in enumerate(zip(names, starts.tolist(), ends.tolist())):
            key = ids.get(name)
            if key is None:
                continue
            for block, low, high in schema.slot_ranges(table.stage, start, end):
                groups.setdefault((block, low, high), {}).setdefault(key, []).append(index)
            if chunk_statement is not None:
                windows = list(range(start - start % span, min(end, self._sealed_horizon - span + 1), span))
                if windows:
                    chunk_requests.append((chunk_statement, (key, windows)))
                    chunk_owners.append(index)
        requests: list[tuple[Any, Any]] = []
        owners: list[dict] = []  # per request: partition token -> request indexes
        for (block, low, high), members in groups.items():
            keys = list(members)
            for part in token_groups(keys, [partition_token(k.bytes, block) for k in keys], READ_GROUP):
                requests.append((statement, (list(part.values()), block, low, high)))
                owners.append({token: members[key] for token, key in part.items()})
        results = self._run(requests + chunk_requests,
                            f"read points of {len(names)} metrics from {self.keyspace}.{table.name}")
        rows = _flat(results[:len(requests)], owners, 4 if table.aggregated else 2)
        sealed = _sealed_points(results[len(requests):], chunk_owners)
        if not len(rows[0]) and not len(sealed[0]):
            return PointReads.empty()
        request, timestamps, values = rows[0], rows[1], rows[2]
        counts, written = (rows[3], rows[4]) if table.aggregated else (None, None)
        if len(sealed[0]):
            request, timestamps, values, counts, written = _shadow(
                table, starts, ends, (request, timestamps, values, counts, written), sealed)
        # a slot may hold a point of another turn of the ring: keep those inside the window, as whisper
        inside = (timestamps >= starts[request]) & (timestamps < ends[request])
        request, timestamps, values = request[inside], timestamps[inside], values[inside]
        if table.aggregated and len(request):
            # per timestamp, the shard row with the largest count, ties by the latest write
            counts, written = counts[inside], written[inside]
            order = np.lexsort((written, counts, timestamps, request))
            request, timestamps, values = request[order], timestamps[order], values[order]
            last = np.ones(len(order), dtype=bool)
            last[:-1] = (request[1:] != request[:-1]) | (timestamps[1:] != timestamps[:-1])
            request, timestamps, values = request[last], timestamps[last], values[last]
        return PointReads(request, timestamps, values)

    def _chunk_read_statement(self, table: StageTable):
        """The read of a series' chunks, or None when no window can have been sealed yet (no
        `bgl seal` ran: store_settings has no `sealed` horizon) or the chunk table is missing."""
        if self._sealed_horizon is None or not self._chunk_width:
            return None
        try:
            return self._prepare(f"SELECT chunk, data, writetime(data) FROM {self.keyspace}."
                                 f"{schema.chunk_table_name(table)} WHERE metric = ? AND window_start IN ?",
                                 "data_read")
        except SchemaMissing as exc:
            if is_missing_table(exc.__cause__ or exc):
                return None  # a store written before chunks, not yet synced: nothing sealed in this stage
            raise

    def expire_points(self, now: int) -> int:
        """0: Cassandra expires points itself (each stage table's default_time_to_live)."""
        self._check_schema()
        return 0




class _Serialized:
    """The columns of many point rows serialized at once (numpy, big-endian, as the protocol
    wants them): `row(i)` is the values of row i as BoundStatement.bind would give them."""

    def __init__(self, uuids: list, owner: list[int], blocks: np.ndarray, offsets: np.ndarray,
                 timestamps: np.ndarray, values: np.ndarray, shard: int | None, counts: np.ndarray | None):
        self.uuids = [u.bytes for u in uuids]
        self.owner = owner
        self.blocks = blocks.astype(">i4").tobytes()  # slot_start int
        self.offsets = offsets.astype(">i2").tobytes()  # offset smallint
        self.timestamps = timestamps.astype(">i8").tobytes()  # ts bigint
        self.values = values.astype(">f8").tobytes()  # value double
        self.shard = None if shard is None else struct.pack(">h", shard)  # shard smallint
        self.counts = None if shard is None else np.asarray(counts).astype(">i4").tobytes()  # count int

    def row(self, i: int) -> tuple:
        key, block, offset = self.uuids[self.owner[i]], self.blocks[4 * i:4 * i + 4], self.offsets[2 * i:2 * i + 2]
        ts, value = self.timestamps[8 * i:8 * i + 8], self.values[8 * i:8 * i + 8]
        if self.shard is None:
            return (key, block, offset, ts, value)
        return (key, block, offset, self.shard, ts, value, self.counts[4 * i:4 * i + 4])


def _flat(results: list[list[tuple]], owners: list[dict], width: int) -> tuple[np.ndarray, ...]:
    """(request, ts, value[, count, write time]) arrays of per-point rows; each result's rows
    start with their partition's token, which `owners` maps to the request indexes that
    asked for it (a series asked for twice over the same window gets the rows twice)."""
    requests: list[np.ndarray] = []
    kept: list[tuple] = []
    for rows, owner in zip(results, owners):
        if not rows:
            continue
        tokens = np.array([row[0] for row in rows], np.int64)
        known = np.array(list(owner), np.int64)
        order = np.argsort(known)
        first = np.array([indexes[0] for indexes in owner.values()], np.int64)[order]
        found = np.minimum(np.searchsorted(known[order], tokens), len(known) - 1)
        if not np.array_equal(known[order][found], tokens):
            raise StoreError("a point read answered rows of a partition it did not ask for (token"
                             f" {int(tokens[known[order][found] != tokens][0])}): the cluster's partitioner is"
                             " not Murmur3Partitioner, which this store requires")
        requests.append(first[found])
        kept += rows
        for token, indexes in owner.items():
            if len(indexes) > 1:  # rare: the same rows again for the other requests of the series
                again = [rows[i] for i in np.flatnonzero(tokens == token).tolist()]
                for index in indexes[1:]:
                    requests.append(np.full(len(again), index, np.int64))
                    kept += again
    out = [np.concatenate(requests) if requests else np.zeros(0, np.int64),
           np.array([row[1] for row in kept], np.int64), np.array([row[2] for row in kept], np.float64)]
    if width == 4:  # a count or write time may be null: 0
        out += [np.array([row[k] or 0 for row in kept], np.int64) for k in (3, 4)]
    return tuple(out)


def _shadow(table: StageTable, starts: np.ndarray, ends: np.ndarray, rows: tuple, sealed: tuple) -> tuple:
    """Per-point rows and the chunks' points inside the windows, as one set of rows.

    A per-point row written after its window's chunk replaces the chunk's point of its slot
    (whisper's later write; raw rows are never older than the chunk of their window but for
    the copies a crash of `bgl seal` leaves, which hold the chunk's values); an aggregated
    row written before the chunk is one the chunk already holds, and is left out, so the
    largest-count rule only ever compares rows newer than the chunk."""
    request, timestamps, values, counts, written = rows
    points = table.stage.points
    c_request, c_ts, c_values, c_counts, c_written = sealed
    inside = (c_ts >= starts[c_request]) & (c_ts < ends[c_request])
    c_request, c_ts, c_values, c_counts, c_written = (a[inside] for a in sealed)
    slots = request * points + (timestamps // table.stage.precision) % points
    chunk_slots = c_request * points + (c_ts // table.stage.precision) % points  # unique: one turn a window
    if table.aggregated:
        order = np.argsort(chunk_slots)
        at = np.minimum(np.searchsorted(chunk_slots[order], slots), max(len(order) - 1, 0))
        covered = (chunk_slots[order][at] == slots) if len(order) else np.zeros(len(slots), bool)
        newer = ~covered | (written > c_written[order][at] if len(order) else True)
        keep_rows, replaced = newer, slots[covered & newer]
    else:
        keep_rows, replaced = np.ones(len(slots), bool), slots
    keep = ~np.isin(chunk_slots, replaced)
    out = [np.concatenate([a[keep_rows], b[keep]]) for a, b in
           zip((request, timestamps, values), (c_request, c_ts, c_values))]
    if table.aggregated:
        out += [np.concatenate([counts[keep_rows], c_counts[keep]]), np.concatenate([written[keep_rows], c_written[keep]])]
    else:
        out += [None, None]
    return tuple(out)


def _sealed_points(results: list[list[tuple]], owners: list[int]) -> tuple[np.ndarray, ...]:
    """(request, ts, value, count, write time) of the chunks read; only the newest chunk's
    point of each timestamp (a window sealed again holds every point: an older chunk is left
    only by a crash of `bgl seal` before it deleted it)."""
    blobs, owner, chunk, written = [], [], [], []
    for index, rows in zip(owners, results):
        for chunk_id, data, when in rows:
            blobs.append(data)
            owner.append(index)
            chunk.append(chunk_id)
            written.append(when or 0)
    if not blobs:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, np.float64), empty, empty
    which, timestamps, values, counts = chunks.decode_many(blobs)
    request = np.array(owner, np.int64)[which]
    order = np.array(chunk, np.int64)[which]
    when = np.array(written, np.int64)[which]
    counts = counts if counts is not None else np.ones(len(which), np.int64)
    if len(blobs) > 1:
        keep = np.lexsort((order, timestamps, request))
        request, timestamps, values, counts, when = (a[keep] for a in (request, timestamps, values, counts, when))
        last = np.ones(len(keep), dtype=bool)
        last[:-1] = (request[1:] != request[:-1]) | (timestamps[1:] != timestamps[:-1])
        request, timestamps, values, counts, when = (a[last] for a in (request, timestamps, values, counts, when))
    return request, timestamps, values, counts, when
