"""The rows of a window of the SQLite store's stage tables: their ids and their decoding.

A window (one metric, `window_slots` consecutive slots of its ring) has up to three rows:
- its sealed chunk, id = window << 32 | key << 1: the points of a window whose last slot
  has been written, biggraphite_like.chunks bytes, written once as the window seals;
- its open chunk, id = OPEN | window << 32 | key << 1: the points merged so far of a
  window not sealed yet (at most one of the two chunks exists);
- its open tail, id = OPEN | window << 32 | key << 1 | 1: records (timestamp uint32,
  value float64[, count uint32]), little-endian, appended inside SQLite by each write; the
  last record of a slot wins over earlier ones and over the chunk.

Ids are ordered window first, and sealed rows apart from open ones (OPEN is bit 62), so
the rows of a window sealing for every metric at once are appended next to each other
and no later row splits their B-tree pages, while the rows that grow and shrink (open
chunks, tails) share pages only with each other. (Metric first, each window boundary
inserted a row per metric in the middle of the tree: pages ended half empty.)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from biggraphite_like import chunks
from biggraphite_like.errors import StoreError
from biggraphite_like.stores.base import StageTable

OPEN = 1 << 62  # the bit of the open rows (open chunk, tail)
TAIL = 1  # the bit of the open tail
WINDOW_SHIFT = 32
MAX_KEY = 1 << (WINDOW_SHIFT - 1)  # metric keys below this fit a row id
_KIND_BITS = OPEN | TAIL
_RAW_RECORD = np.dtype([("ts", "<u4"), ("value", "<f8")])
_AGGREGATED_RECORD = np.dtype([("ts", "<u4"), ("value", "<f8"), ("count", "<u4")])


def record_dtype(table: StageTable) -> np.dtype:
    """The packed layout of one point in an open tail of table (numpy structured dtype)."""
    return _AGGREGATED_RECORD if table.aggregated else _RAW_RECORD


def record_groups(data: bytes, item: int, starts: np.ndarray, ends: np.ndarray) -> list:
    """The bytes of records starts[k]:ends[k] of data (records of `item` bytes) for each k:
    what a write appends to each window's tail. Groups of one size (a flush's windows often
    each get as many points) are cut by numpy in one call; others are sliced one by one."""
    sizes = ends - starts
    if len(sizes) and (sizes == sizes[0]).all() and starts[0] == 0 and ends[-1] * item == len(data):
        return np.frombuffer(data, dtype=f"V{int(sizes[0]) * item}").tolist()
    view = memoryview(data)
    return [view[s * item:e * item] for s, e in zip(starts.tolist(), ends.tolist())]


def window_ids(keys: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """The id of each window (its sealed chunk's row id; the open rows add OPEN and TAIL)."""
    return (np.asarray(windows, np.int64) << WINDOW_SHIFT) | (np.asarray(keys, np.int64) << 1)


def window_of(ids: np.ndarray) -> np.ndarray:
    """The window id of rows of any kind."""
    return ids & ~_KIND_BITS


def rows_of(windows: np.ndarray) -> np.ndarray:
    """The row ids a window may have (sealed chunk, open chunk, open tail), window by window."""
    windows = np.asarray(windows, np.int64)
    return np.stack([windows, windows | OPEN, windows | OPEN | TAIL], axis=1).reshape(-1)


def ring_windows(points: int, width: int) -> int:
    """How many windows a ring of `points` slots has."""
    return -(-points // width)


def decode_rows(table: StageTable, width: int, groups: np.ndarray, cells: np.ndarray, is_tail: np.ndarray,
                blobs: Sequence[bytes], sort: bool = False
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(group, timestamps, values, counts) of the points of rows (groups[i], cells[i],
    is_tail[i], blobs[i]) of a table of windows of `width` slots, a slot once per group
    (cells: one integer per window, as window_of's), rows given in write order: a tail's
    last record of a slot wins over earlier ones and over the chunk (counts is None for a
    raw stage). Windows with a tail come last, sorted by group and timestamp when `sort`;
    the points of the others come in no set order."""
    heads = np.flatnonzero(~is_tail)
    tails = np.flatnonzero(is_tail)
    row, ts, values, counts = chunks.decode_many([blobs[i] for i in heads.tolist()], heads)
    if table.aggregated and counts is None:
        counts = np.zeros(len(ts), np.int64)
    if len(tails):
        owner, records = tail_records(table, tails, [blobs[i] for i in tails.tolist()])
        row = np.concatenate([row, owner])
        ts = np.concatenate([ts, records["ts"].astype(np.int64)])
        values = np.concatenate([values, records["value"].astype(np.float64)])
        if table.aggregated:
            counts = np.concatenate([counts, records["count"].astype(np.int64)])
    group = groups[row]
    if not len(tails):  # chunks alone: each holds a slot once
        return group, ts, values, counts
    # in windows with a tail: chunks first, then tails in row and append order; within a
    # (group, slot) the last wins: the latest position written to a (window, offset) cell
    group_rank = np.unique(groups, return_inverse=True)[1].reshape(-1).astype(np.int64)
    cell_rank = np.unique(cells, return_inverse=True)[1].reshape(-1).astype(np.int64)
    pair = group_rank * (int(cell_rank.max()) + 1) + cell_rank  # (group, window) of each row
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
        kept = kept[_by_group_and_time(group_rank[row[kept]], ts[kept])]
    keep = np.concatenate([cold, kept])
    return group[keep], ts[keep], values[keep], None if counts is None else counts[keep]


def tail_records(table: StageTable, owners: np.ndarray, blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(owner, record) of every record of open tails blobs[i] (owner: owners[i]), in order."""
    dtype = record_dtype(table)
    sizes = np.fromiter(map(len, blobs), np.int64, len(blobs))
    if (sizes % dtype.itemsize).any():
        raise StoreError(f"{table.name}: an open tail is not a whole number of {dtype.itemsize}-byte records:"
                         " the row is damaged or was written with another layout")
    return np.repeat(owners, sizes // dtype.itemsize), np.frombuffer(b"".join(blobs), dtype=dtype)


def last_tail_records(table: StageTable, owners: np.ndarray, blobs: Sequence[bytes]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(owner, timestamps, values) of the records of open tails blobs[i] (owner: owners[i],
    an integer >= 0; tails given in write order) that win their slot: the last record of
    each (owner, slot). Records already in (owner, slot) order, as tails written in time
    order and read owner by owner are, are kept without a sort."""
    owner, records = tail_records(table, owners, blobs)
    ts = records["ts"].astype(np.int64)
    values = records["value"].astype(np.float64)
    points = table.stage.points
    key = owner * points + (ts // table.stage.precision) % points
    if len(key) > 1 and not (key[1:] > key[:-1]).all():
        last = len(key) - 1 - np.unique(key[::-1], return_index=True)[1]  # the last position of each key
        owner, ts, values = owner[last], ts[last], values[last]
    return owner, ts, values


def _by_group_and_time(rank: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The order of points by group rank, then timestamp: one stable sort of a combined key
    when it fits 62 bits (the points of a window come mostly in order: timsort's runs,
    four times faster than lexsort's two passes on a seal burst's millions)."""
    if not len(ts):
        return np.zeros(0, np.int64)
    low, spread = int(ts.min()), int(ts.max()) - int(ts.min()) + 1
    if (int(rank.max()) + 1) * spread < 1 << 62:
        return np.argsort(rank * spread + (ts - low), kind="stable")
    return np.lexsort((ts, rank))
