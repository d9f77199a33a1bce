"""The SQLite store's points: whisper's ring of slots per metric and stage, cut into
windows (see the package docstring). A window is a compressed chunk (biggraphite_like.chunks)
and an open tail that writes append to inside SQLite; the tail is merged into the chunk when
the window's last slot is written or the tail grows long. Reads decode the rows of a batch of
windows with numpy; expiry drops whole rows."""
from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from biggraphite_like import chunks
from biggraphite_like.errors import (
    InvalidPoint,
    MetricNotFound,
    StoreError,
)
from biggraphite_like.retention import Retention, Stage
from biggraphite_like.stores.base import PointReads, StageTable
from biggraphite_like.stores.sqlite.schema import (
    _ID_BITS,
    _IDS_PER_QUERY,
    _MAX_TIMESTAMP,
    _MERGE_BYTES,
    _REQUESTS_PER_QUERY,
    _table_stage,
    record_dtype,
)


class PointsMixin:
    """write_points, read_points, expire_points and the dropping of a metric's points."""

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

    def write_points(self, table, names, timestamps, values, counts=None) -> None:
        """Append the points to the open tails of their windows (whisper's ring: a point
        replaces its slot; of several points given for one slot, the last given wins).

        Appending happens inside SQLite, with no read back. A window whose last slot is
        written, or whose tail passes _MERGE_BYTES, is then merged into its chunk.
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
            self._write_keyed(table, keys, timestamps, values, counts)

    def _write_keyed(self, table: StageTable, keys: np.ndarray, timestamps: np.ndarray, values: np.ndarray,
                     counts: np.ndarray | None, seal: bool = False) -> None:
        """write_points by metric key (timestamps already checked); `seal` merges every
        window written into its chunk (conversions)."""
        if keys.max() >= 1 << (63 - _ID_BITS):
            raise StoreError(f"metric key {int(keys.max())} does not fit a row id: the metrics table has"
                             f" handed out 2**{63 - _ID_BITS} keys; copy the metrics to a new store")
        precision, points = table.stage.precision, table.stage.points
        width = self._window_slots(table)
        slots = (timestamps // precision) % points
        cell = (keys << _ID_BITS) | slots
        _, last = np.unique(cell[::-1], return_index=True)  # the last given point of each slot, by (key, slot)
        last = len(cell) - 1 - last
        slots = slots[last]
        records = np.zeros(len(last), dtype=record_dtype(table))
        records["ts"] = timestamps[last]
        records["value"] = np.asarray(values, dtype=np.float64)[last]
        if table.aggregated:
            records["count"] = 1 if counts is None else np.asarray(counts, dtype=np.int64)[last]
        window = slots // width
        tails = (keys[last] << _ID_BITS) | (window << 1) | 1
        starts = np.flatnonzero(np.diff(tails, prepend=-1))  # tails are sorted: one group per window
        ends = np.append(starts[1:], len(tails))
        data = memoryview(records.tobytes())
        item = records.dtype.itemsize
        ids = tails[starts]
        # a window given a tail's worth of points at once is merged into its chunk directly
        direct = (ends - starts) * item >= _MERGE_BYTES if not seal else np.ones(len(ids), dtype=bool)
        blobs = [data[s * item:e * item] for s, e in zip(starts.tolist(), ends.tolist())]
        if direct.any():
            self._merge(table, ids[direct], {int(i): blobs[k] for k, i in zip(np.flatnonzero(direct).tolist(),
                                                                              ids[direct].tolist())})
        append = np.flatnonzero(~direct)
        if not len(append):
            return
        newest = np.maximum.reduceat(timestamps[last], starts)
        self._conn.executemany(
            f"INSERT INTO {table.name} (id, newest, data) VALUES (?1, ?2, ?3)"
            " ON CONFLICT (id) DO UPDATE SET newest = max(newest, excluded.newest), data = CAST(CASE"
            # one record for the slot of the tail's last one (a downsampled point updated each minute):
            # replaced, not appended
            "  WHEN length(excluded.data) = ?4 AND substr(data, -?4, 4) = substr(excluded.data, 1, 4)"
            "  THEN substr(data, 1, length(data) - ?4) || excluded.data ELSE data || excluded.data END AS BLOB)",
            zip(ids[append].tolist(), newest[append].tolist(), (blobs[k] for k in append.tolist()),
                itertools.repeat(item)),
        )
        # the window's last slot (the last window of the ring may be shorter) or a long tail
        window_width = np.minimum(width, points - window * width)
        full = np.intersect1d(np.unique(tails[slots % width == window_width - 1]), ids[append])
        ids = ids[append]
        long = []
        for start in range(0, len(ids), _IDS_PER_QUERY):
            long += self._conn.execute(
                f"SELECT id FROM {table.name} WHERE id IN (SELECT value FROM json_each(?)) AND length(data) >= ?",
                (_json_ids(ids[start:start + _IDS_PER_QUERY]), _MERGE_BYTES)).fetchall()
        if long or len(full):
            self._merge(table, np.union1d(full, np.array([i for (i,) in long], dtype=np.int64)))

    def _merge(self, table: StageTable, tails: np.ndarray, given: dict[int, bytes] | None = None) -> None:
        """Merge the open tails of windows (sorted unique tail row ids) into their chunks;
        `given`: records of some of these windows (by tail id) newer than their tail."""
        given = given or {}
        for start in range(0, len(tails), _IDS_PER_QUERY // 2):
            part = tails[start:start + _IDS_PER_QUERY // 2]
            rows = self._conn.execute(
                f"SELECT id, data FROM {table.name} WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id",
                (_json_ids(np.concatenate([part - 1, part])),)).fetchall()
            rows += [(i, given[i]) for i in part.tolist() if i in given]
            if not rows:
                continue
            ids = np.array([i for i, _ in rows], dtype=np.int64)
            group, ts, values, counts = _window_points(table, self._window_slots(table), ids >> 1, ids,
                                                       [b for _, b in rows], sort=True)
            bounds = np.flatnonzero(np.diff(group, prepend=-1))
            windows = group[bounds]
            ends = np.append(bounds[1:], len(group)).tolist()
            blobs = [chunks.encode(chunks.Points(ts[s:e], values[s:e], None if counts is None else counts[s:e]))
                     for s, e in zip(bounds.tolist(), ends)]
            self._conn.executemany(
                f"INSERT INTO {table.name} (id, newest, data) VALUES (?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET newest = excluded.newest, data = excluded.data",
                zip((windows << 1).tolist(), np.maximum.reduceat(ts, bounds).tolist(), blobs))
            self._conn.execute(f"DELETE FROM {table.name} WHERE id IN (SELECT value FROM json_each(?))",
                               (_json_ids(part),))

    def read_points(self, table, names, starts, ends) -> PointReads:
        if not len(names):
            return PointReads.empty()
        self._check_schema()
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        with self.read_snapshot(), self._errors(f"read points from {table.name}"):
            if not self._table_exists(table):
                return PointReads.empty()
            requests = self._window_ranges(table, names, starts, ends)
            found: list[tuple[int, int, bytes]] = []
            for start in range(0, len(requests), _REQUESTS_PER_QUERY):
                chunk = requests[start:start + _REQUESTS_PER_QUERY]
                values_sql = ", ".join(["(?, ?, ?)"] * len(chunk))
                sql = (
                    f"WITH req(r, lo, hi) AS (VALUES {values_sql})"
                    f" SELECT req.r, d.id, d.data FROM req CROSS JOIN {table.name} AS d ON d.id BETWEEN req.lo AND req.hi"
                )
                found.extend(self._conn.execute(sql, chunk.reshape(-1).tolist()).fetchall())
        if not found:
            return PointReads.empty()
        request, ids, blobs = zip(*found)
        request, ts, values, _ = _window_points(table, self._window_slots(table), np.array(request, dtype=np.int64),
                                                np.array(ids, dtype=np.int64), blobs)
        # a slot may hold a point of another turn of the ring: keep those inside the window, as whisper
        keep = (ts >= starts[request]) & (ts < ends[request])
        return PointReads(request[keep], ts[keep], values[keep])

    def _window_ranges(self, table: StageTable, names: Sequence[str], starts: np.ndarray, ends: np.ndarray
                       ) -> np.ndarray:
        """Rows (request, first row id, last row id) of the windows holding the slots of each
        read window (chunk and tail rows alike).

        A read window that wraps around the ring is two ranges, or the whole ring when both
        ends fall in one ring window (every row is then read once: no point twice).
        """
        precision, points, size = table.stage.precision, table.stage.points, self._window_slots(table)
        last_window = (points - 1) // size
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
        low, high = (first % points) // size, (last % points) // size
        whole = (last - first + 1 >= points) | ((first % points > last % points) & (high >= low))
        wraps = ~whole & (first % points > last % points)
        base = keys << _ID_BITS
        # [low, high] when not wrapping, [low, last window] then [0, high] when wrapping
        lo = np.where(whole, 0, low)
        hi = np.where(whole | wraps, last_window, high)
        ranges = [np.stack([request, base + (lo << 1), base + (hi << 1) + 1], axis=1)[valid]]
        second = valid & wraps
        ranges.append(np.stack([request, base, base + (high << 1) + 1], axis=1)[second])
        return np.concatenate(ranges)

    def expire_points(self, now: int) -> int:
        """Drop the windows (chunk and tail rows) whose every point is older than its stage's
        duration.

        Returns the number of points in the dropped windows (a slot counted once). Older points
        sharing a window with a newer one stay until the window is rewritten or expires;
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
                # a window's chunk and tail go together: neither has a point of the last duration
                expired = (f"newest < ?1 AND NOT EXISTS (SELECT 1 FROM {name} AS o"
                           f" WHERE o.id = {name}.id + 1 - 2 * ({name}.id & 1) AND o.newest >= ?1)")
                cursor = self._conn.execute(f"SELECT id, data FROM {name} WHERE {expired} ORDER BY id", (cutoff,))
                while rows := cursor.fetchmany(10_000):
                    ids = np.array([i for i, _ in rows], dtype=np.int64)
                    removed += len(_window_points(table, self._window_slots(table), ids >> 1, ids,
                                                  [b for _, b in rows])[0])
                self._conn.execute(f"DELETE FROM {name} WHERE {expired}", (cutoff,))
        return removed


def _json_ids(ids: np.ndarray) -> str:
    return "[" + ",".join(map(str, ids.tolist())) + "]"


def _window_points(table: StageTable, width: int, groups: np.ndarray, ids: np.ndarray, blobs: Sequence[bytes],
                   sort: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(group, timestamps, values, counts) of the points of rows (groups[i], ids[i], blobs[i])
    of a table of windows of `width` slots, a slot once per group: the open tail's last
    record of a slot wins over earlier ones and over the chunk (counts is None for a raw
    stage). Windows with a tail come last, sorted by group and timestamp when `sort`; the
    points of the others come in no set order."""
    dtype = record_dtype(table)
    is_tail = (ids & 1).astype(bool)
    heads = np.flatnonzero(~is_tail)
    tails = np.flatnonzero(is_tail)
    index, ts, values, counts = chunks.decode_many([blobs[i] for i in heads.tolist()])
    row = heads[index]
    if table.aggregated and counts is None:
        counts = np.zeros(len(ts), np.int64)
    if len(tails):
        sizes = np.array([len(blobs[i]) for i in tails.tolist()], dtype=np.int64)
        if (sizes % dtype.itemsize).any():
            raise StoreError(f"{table.name}: an open tail is not a whole number of {dtype.itemsize}-byte records:"
                             " the row is damaged or was written with another layout")
        records = np.frombuffer(b"".join(blobs[i] for i in tails.tolist()), dtype=dtype)
        row = np.concatenate([row, np.repeat(tails, sizes // dtype.itemsize)])
        ts = np.concatenate([ts, records["ts"].astype(np.int64)])
        values = np.concatenate([values, records["value"].astype(np.float64)])
        if table.aggregated:
            counts = np.concatenate([counts, records["count"].astype(np.int64)])
    group = groups[row]
    if not len(tails):  # chunks alone: each holds a slot once
        return group, ts, values, counts
    # in windows with a tail: chunks first, then tails in row and append order; within a
    # (group, slot) the last wins: the latest position written to a (window, offset) cell
    rank = np.unique(groups, return_inverse=True)[1].reshape(-1).astype(np.int64)
    pair = (rank << 31) | ((ids & 0xFFFFFFFF) >> 1)  # (group, window) of each row
    hot_pairs, row_cell = np.unique(pair, return_inverse=True)
    hot_rows = np.isin(hot_pairs, pair[tails])
    hot = hot_rows[row_cell.reshape(-1)][row]
    cold = np.flatnonzero(~hot)
    hot = np.flatnonzero(hot)
    cell = np.cumsum(hot_rows) - 1  # index of each hot (group, window) among hot ones
    window = cell[row_cell.reshape(-1)][row[hot]]
    offset = ((ts[hot] // table.stage.precision) % table.stage.points) % width
    latest = np.full((int(hot_rows.sum()), width), -1, np.int64)
    position = np.arange(len(hot), dtype=np.int64)
    np.maximum.at(latest, (window, offset), position)
    kept = hot[latest[window, offset] == position]
    if sort:
        kept = kept[np.lexsort((ts[kept], group[kept]))]
    keep = np.concatenate([cold, kept])
    return group[keep], ts[keep], values[keep], None if counts is None else counts[keep]
