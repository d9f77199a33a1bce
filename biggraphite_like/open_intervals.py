"""The downsampler's memory of what the store holds: each metric's latest coarser interval.

Propagation recomputes a coarser interval from its finer points. Reading them back from
the store is most of a write's cost, so the downsampler remembers, per table (a finer
stage) and metric, the start of the latest interval it wrote and the finer points that
interval holds. It is a cache, never a source of truth: an entry is dropped whenever it
may not hold what the store holds, and the downsampler clears everything when the store
changed otherwise (its change token).

Memory is per known point, not per object: a table is a few arrays indexed by a dense
slot per metric (start, where its points are, how many) and one pool of the points
(value, column in the interval), about 10 bytes a point and 60 a metric besides the
name -> slot dict. A young metric (5 points in its hour) costs about 100 bytes, a full
hour at 60 s about 600; one NumPy row and two tuples per metric cost 700 bytes whatever
they held (issue 21: 75 MiB at 100,000 metrics). Lookups and updates are a few NumPy
operations per batch, however many metrics.

The pool lives in anonymous memory maps, grown and shrunk in place (mremap) and compacted
in place a few slots at a time: a pool of NumPy arrays grew by allocating a larger copy
beside the old one and compacted into another copy, so the receiver's flush of the peer
bench's 100,000 existing metrics held about 25 MiB of pool besides the 10 it kept.
"""
from __future__ import annotations

import itertools
import mmap

import numpy as np

DEFAULT_OPEN_INTERVALS = 250_000  # metrics remembered per table at most (the least recently written are forgotten)
MAX_WIDTH = 1 << 16  # finer points per interval at most for an interval to be remembered (uint16 columns)
_NONE = -1  # start of a slot that holds nothing
_POOL = (("values", np.dtype(np.float64)), ("columns", np.dtype(np.uint16)))  # the pool's arrays
_MOVED = 1 << 16  # points moved at once by a compaction (its only copy)


class _Table:
    """The remembered intervals of one finer-stage table."""

    def __init__(self) -> None:
        self.slots: dict[str, int] = {}  # metric name -> slot
        self.start = np.empty(0, np.int64)  # per slot: the interval's start, or _NONE
        self.offset = np.empty(0, np.int64)  # per slot: its first point in the pool
        self.count = np.empty(0, np.int32)  # per slot: its points in the pool
        self.used = np.empty(0, np.int64)  # per slot: when it was last remembered (eviction order)
        self.values = np.empty(0, np.float64)  # the pool: each slot's points, contiguous
        self.columns = np.empty(0, np.uint16)  # column of each point in its interval's grid row
        self._maps: dict[str, mmap.mmap] = {}  # the memory of values and columns
        self.size = 0  # points used in the pool (live or dead)

    def entries(self) -> int:
        return int(np.count_nonzero(self.start[:len(self.slots)] != _NONE))

    @property
    def live(self) -> int:
        """Points of the slots that hold an interval (a slot holding none counts 0): summed
        when the pool must grow, not kept up to date by every store."""
        return int(self.count[:len(self.slots)].sum())

    def find(self, names: list[str]) -> np.ndarray:
        """Slot of each name, -1 for names never remembered."""
        return np.fromiter(map(self.slots.get, names, itertools.repeat(-1)), dtype=np.int64, count=len(names))

    def allocate(self, names: list[str], rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Give names[rows[i]] a new slot where it has none (slots[i] == -1); returns every slot."""
        new = np.flatnonzero(slots < 0)
        if len(new):
            first = len(self.slots)
            for index, row in enumerate(rows[new].tolist()):
                self.slots[names[row]] = first + index
            slots[new] = np.arange(first, first + len(new))
            self._grow_slots(len(self.slots))
            self.start[first:len(self.slots)] = _NONE
            self.count[first:len(self.slots)] = 0
        return slots

    def _grow_slots(self, needed: int) -> None:
        if needed <= len(self.start):
            return
        capacity = max(needed, len(self.start) * 3 // 2, 1024)
        for field in ("start", "offset", "count", "used"):
            old = getattr(self, field)
            grown = np.empty(capacity, old.dtype)
            grown[:len(old)] = old
            setattr(self, field, grown)

    def forget(self, slots: np.ndarray) -> None:
        """The slots hold nothing now (a slot may be given twice)."""
        self.start[slots] = _NONE
        self.count[slots] = 0

    def gather(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(points per slot, pool index of each of their points, slot after slot)."""
        counts = self.count[slots].astype(np.int64)
        total = int(counts.sum())
        first = np.cumsum(counts) - counts
        return counts, np.repeat(self.offset[slots] - first, counts) + np.arange(total)

    def store(self, slots: np.ndarray, starts: np.ndarray, grid: np.ndarray, write: np.ndarray, now: int) -> None:
        """slots[i] (distinct) now holds interval starts[i], whose finer points are the
        i-th grid row of those selected by `write` (NaN: no point)."""
        self.forget(slots)
        chosen = grid if write.all() else grid[write]
        known = ~np.isnan(chosen)
        counts = np.count_nonzero(known, axis=1).astype(np.int32)
        flat = np.flatnonzero(known)  # one pass over the flat grid: row-major, each row's columns in order
        self._reserve(len(flat))
        end = self.size + len(flat)
        self.values[self.size:end] = chosen.reshape(-1)[flat]
        self.columns[self.size:end] = flat % chosen.shape[1]
        self.offset[slots] = self.size + np.cumsum(counts) - counts
        self.count[slots] = counts
        self.start[slots] = starts
        self.used[slots] = now
        self.size = end

    def extend(self, slots: np.ndarray, starts: np.ndarray, width: int, rows: np.ndarray, columns: np.ndarray,
               values: np.ndarray, now: int) -> np.ndarray | None:
        """Append point k (columns[k], values[k]) to the interval of slots[rows[k]] (slots
        distinct, rows in order, each row's columns increasing); returns each slot's points
        after. None, and nothing changed, unless every slot holds interval starts[i], no
        value is NaN and each row's points all come after the points its slot holds (then
        the interval's points are the held ones followed by these: what store() would keep
        of the grid)."""
        if width > MAX_WIDTH or (slots < 0).any() or (self.start[slots] != starts).any() or np.isnan(values).any():
            return None  # (a NaN, an aggregate of infinities, is no point in a grid: the grid path decides)
        added = np.bincount(rows, minlength=len(slots))
        step = np.diff(rows)
        if (step < 0).any() or (np.diff(columns)[step == 0] <= 0).any():
            return None
        held = self.count[slots].astype(np.int64)
        firsts = np.cumsum(added) - added  # each row's first new point
        both = (added > 0) & (held > 0)
        last_held = self.columns[self.offset[slots[both]] + held[both] - 1].astype(np.int64)
        if (columns[firsts[both]] <= last_held).any():
            return None
        _, index = self.gather(slots)
        kept_values, kept_columns = self.values[index], self.columns[index]  # copies: the pool may be compacted
        totals = held + added
        self.forget(slots)
        self._reserve(int(totals.sum()))
        offsets = self.size + np.cumsum(totals) - totals
        kept_at = np.repeat(offsets, held) + np.arange(len(index)) - np.repeat(np.cumsum(held) - held, held)
        new_at = np.repeat(offsets + held, added) + np.arange(len(rows)) - np.repeat(firsts, added)
        self.values[kept_at], self.columns[kept_at] = kept_values, kept_columns
        self.values[new_at], self.columns[new_at] = values, columns
        self.offset[slots] = offsets
        self.count[slots] = totals
        self.start[slots] = starts
        self.used[slots] = now
        self.size += int(totals.sum())
        return totals

    def _reserve(self, points: int) -> None:
        if self.size + points <= len(self.values):
            return
        live = self.live
        if 4 * (self.size - live) > live:  # a fifth dead or more: compact before growing
            self._compact()
        needed = self.size + points
        if needed > len(self.values):
            self._resize(max(needed, len(self.values) * 5 // 4, 4096))
        elif len(self.values) > 2 * needed + 4096:  # compacted far below its size: give memory back
            self._resize(needed * 5 // 4 + 4096)

    def _resize(self, capacity: int) -> None:
        """Make the pool hold `capacity` points, keeping its first `size` ones: the maps are
        resized in place (a map referred to by an array cannot be: then a new one, copied)."""
        for field, dtype in _POOL:
            nbytes = max(capacity * dtype.itemsize, mmap.PAGESIZE)
            old = self._maps.get(field)
            setattr(self, field, None)  # the map's only array: dropped so that it can be resized
            mapped = None
            if old is not None:
                try:
                    old.resize(nbytes)
                    mapped = old
                except (BufferError, OSError, ValueError):
                    pass
            if mapped is None:
                mapped = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)  # private: not shared with a fork
                if old is not None:
                    kept = min(self.size, capacity)
                    np.frombuffer(mapped, dtype, kept)[:] = np.frombuffer(old, dtype, kept)
            self._maps[field] = mapped
            setattr(self, field, np.frombuffer(mapped, dtype, capacity))

    def _compact(self) -> None:
        """Move the live points to the start of the pool, in place: slots in the order of
        their points, a few at a time, each moved down (never over points not moved yet)."""
        held = np.flatnonzero(self.start[:len(self.slots)] != _NONE)
        held = held[np.argsort(self.offset[held], kind="stable")]
        counts = self.count[held].astype(np.int64)
        ends = np.cumsum(counts)
        total = int(ends[-1]) if len(ends) else 0
        cuts = np.searchsorted(ends, np.arange(_MOVED, total, _MOVED), side="right").tolist()
        for first, end in zip([0] + cuts, cuts + [len(held)]):
            if first == end:
                continue
            _, index = self.gather(held[first:end])
            to = int(ends[first] - counts[first])
            self.values[to:to + len(index)] = self.values[index]
            self.columns[to:to + len(index)] = self.columns[index]
        self.offset[held] = ends - counts
        self.size = total

    def keep_latest(self, keep: int) -> None:
        """Forget all but the `keep` slots remembered last (and every empty slot)."""
        count = len(self.slots)
        held = np.flatnonzero(self.start[:count] != _NONE)
        order = np.argsort(-self.used[held], kind="stable")
        kept = held[order[:keep]]
        self.forget(held[order[keep:]])
        self._compact()
        renumber = np.full(count, -1, np.int64)
        renumber[kept] = np.arange(len(kept))
        slot_of = renumber.tolist()
        self.slots = {name: slot_of[slot] for name, slot in self.slots.items() if slot_of[slot] >= 0}
        for field in ("start", "offset", "count", "used"):
            setattr(self, field, getattr(self, field)[kept].copy())


class OpenIntervals:
    """The finer-stage points of the latest coarser interval of each (metric, table) written.

    An entry is what the store holds for that interval, as long as every write to the store
    went through the owning downsampler: it lets propagation skip reading them back. Entries
    are dropped whenever that may no longer hold (an older interval written, intervals of a
    metric in one batch whose points may share slots), and all of them when the store
    changed otherwise.
    A table remembers `max_entries` metrics at most: past that, the least recently written
    tenth is forgotten.
    """

    def __init__(self, max_entries: int = DEFAULT_OPEN_INTERVALS):
        self.max_entries = max_entries
        self._tables: dict[str, _Table] = {}
        self._writes = 0  # remember() calls so far: the eviction order

    def __len__(self) -> int:
        """Intervals held, over every table."""
        return sum(table.entries() for table in self._tables.values())

    def clear(self) -> None:
        self._tables.clear()

    def slots(self, table: str, names: list[str]) -> np.ndarray:
        """Where each name is remembered in table (-1: nowhere): one lookup of the names
        for a lookup() and the remember() that follows it (nothing else changes the table
        in between)."""
        memory = self._tables.get(table)
        return np.full(len(names), -1, np.int64) if memory is None else memory.find(names)

    def lookup(self, table: str, names: list[str], starts: np.ndarray, grid: np.ndarray, alone: np.ndarray,
               slots: np.ndarray | None = None) -> np.ndarray:
        """Fill the grid rows held in memory (rows are all NaN before); returns their mask.

        Only rows `alone` may be used: the one interval of its metric in the batch, or one
        of intervals whose points cannot have replaced slots of the one remembered (less
        than a ring of the finer stage apart, see the downsampler). `slots`: what
        slots(table, names) says, if known.
        """
        hit = np.zeros(len(names), dtype=bool)
        memory = self._tables.get(table)
        rows = np.flatnonzero(alone)
        if memory is None or not len(rows):
            return hit
        slots = memory.find([names[row] for row in rows.tolist()]) if slots is None else slots[rows]
        known = slots >= 0
        rows, slots = rows[known], slots[known]
        same = memory.start[slots] == starts[rows]
        rows, slots = rows[same], slots[same]
        hit[rows] = True
        counts, index = memory.gather(slots)
        grid[np.repeat(rows, counts), memory.columns[index]] = memory.values[index]
        return hit

    def extend(self, table: str, slots: np.ndarray, starts: np.ndarray, width: int, rows: np.ndarray,
               columns: np.ndarray, values: np.ndarray) -> np.ndarray | None:
        """remember() of intervals (one a metric) that memory holds, for points that come
        after those it holds, without a grid: point k (columns[k] in a grid row of `width`,
        values[k]) goes to the interval of slots[rows[k]] (what slots() said; rows in
        order). Returns the points each interval holds after, or None when that does not
        apply (an interval not held, a point at or before one held): nothing changed, the
        caller builds the grid."""
        memory = self._tables.get(table)
        if memory is None:
            return None
        totals = memory.extend(slots, starts, width, rows, columns, values, self._writes + 1)
        if totals is not None:
            self._writes += 1
        return totals

    def remember(self, table: str, names: list[str], starts: np.ndarray, grid: np.ndarray, alone: np.ndarray,
                 slots: np.ndarray | None = None) -> None:
        """Keep each row `alone` as its metric's latest interval (at most one such row a
        metric: the downsampler passes the last of a metric's intervals when none can have
        replaced another's points); forget the metrics of the other rows, and those whose
        remembered interval is later than the one written (its slots may be those of the
        older one). `slots`: what slots(table, names) said before the lookup, if known."""
        memory = self._tables.get(table)
        if memory is None:
            memory = self._tables[table] = _Table()
        slots = memory.find(names) if slots is None else slots
        known = slots >= 0
        if grid.shape[1] > MAX_WIDTH:  # not remembered: forget what these metrics had
            memory.forget(slots[known])
            return
        doubtful = known & ~alone
        older = np.zeros(len(names), dtype=bool)
        older[known] = memory.start[slots[known]] > starts[known]
        memory.forget(slots[doubtful | (older & alone)])
        write = alone & ~older
        rows = np.flatnonzero(write)
        slots = memory.allocate(names, rows, slots[rows])
        self._writes += 1
        memory.store(slots, starts[rows], grid, write, self._writes)
        if len(memory.slots) > self.max_entries:
            memory.keep_latest(self.max_entries * 9 // 10)
