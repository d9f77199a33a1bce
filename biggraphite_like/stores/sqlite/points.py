"""The SQLite store's points: blocks of whisper ring slots per metric and stage (see the
package docstring), written in place or read-modify-written with numpy, read in one
query per batch of windows, expired by whole blocks."""
from __future__ import annotations

from typing import Sequence

import numpy as np

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
    _REQUESTS_PER_QUERY,
    _SPLICE_POINTS,
    _table_stage,
    block_slots,
    slot_dtype,
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

