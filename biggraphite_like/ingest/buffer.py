"""The ingest buffer: received points as flat arrays, until a flusher writes them (the
receiver's; the carbon plugin's turns what carbon handed over into batches with it).

Names are interned once, here, for both ingest paths (the one place they become
canonical, see the accessor's module doc): a name seen for the first time is normalised (names.normalize,
which refuses invalid names with the reason) and given an integer id; a name's later
points cost one dict lookup, done for a whole read by `map` in C. Spellings other than
the canonical one and invalid names are remembered up to `max_name_cache_bytes` (their
strings and entries), then all forgotten at once and normalised again when seen: a sender
of endless distinct 60 KB spellings or invalid names costs bounded memory. Each read
appends three arrays (ids, timestamps, values); the flusher takes everything at once
(`take`), which stays queryable (CarbonLink) until the store has it (`done`).

`buffered` counts points taken but not yet written too: it is what the receiver holds in
memory, and what its back-pressure (receiver/listeners.py) compares with
--max-buffered-points.
"""
from __future__ import annotations

import dataclasses
import sys
import threading
import time

import numpy as np

from biggraphite_like import names as names_mod
from biggraphite_like.errors import InvalidMetricName
from biggraphite_like.ingest.points import ReceivedPoints, Refusals

INVALID = -1  # id of a name that names.normalize refuses
MAX_NAME_CACHE_BYTES = 64 * 2**20  # other spellings and invalid names remembered (see the module doc)
ALIAS_ENTRY_BYTES = 200  # an alias's entries in _ids and _aliases, besides its string and reason


@dataclasses.dataclass
class Batch:
    """Points taken for one flush: point i belongs to names[owner[i]], in arrival order."""

    names: list[str]
    owner: np.ndarray
    timestamps: np.ndarray
    values: np.ndarray
    ids: np.ndarray  # the buffer's ids of names (for CarbonLink queries while in flight)

    def __len__(self) -> int:
        return len(self.owner)

    def halves(self) -> tuple["Batch", "Batch"]:
        """The points before the middle one and the rest, in arrival order (batch_writer.py:
        the flusher writes a batch the store refuses as a whole in halves)."""
        middle = len(self.owner) // 2
        return self._part(slice(0, middle)), self._part(slice(middle, None))

    def _part(self, points: slice) -> "Batch":
        unique, owner = np.unique(self.owner[points], return_inverse=True)
        return Batch(list(map(self.names.__getitem__, unique.tolist())), owner.astype(np.int64, copy=False),
                     self.timestamps[points], self.values[points], self.ids[unique])


class PointBuffer:
    """Thread-safe: the I/O thread adds, the flusher takes, CarbonLink reads."""

    def __init__(self, max_name_cache_bytes: int = MAX_NAME_CACHE_BYTES) -> None:
        # name as received, and each canonical name -> id (or INVALID); one dict for both, as
        # most names arrive in their canonical spelling (100,000 names: a dict less, ~5 MiB)
        self._ids: dict[str, int] = {}
        self._aliases: dict[str, str | None] = {}  # name as received, not canonical -> why invalid (None: valid)
        self._alias_bytes = 0
        self.max_alias_bytes = max_name_cache_bytes
        self._canonical: list[str] = []  # id -> normalised name
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending = 0
        self._in_flight: Batch | None = None
        self._lock = threading.Lock()
        self.last_added = 0.0  # time.monotonic() of the last add that buffered points

    @property
    def buffered(self) -> int:
        """Points held: waiting for a flush, or being written."""
        in_flight = self._in_flight
        return self._pending + (len(in_flight) if in_flight is not None else 0)

    @property
    def pending(self) -> int:
        return self._pending

    def add(self, points: ReceivedPoints, refusals: Refusals) -> int:
        """Buffer points (already checked); points of invalid names are refused. Returns
        how many were buffered."""
        if not len(points):
            return 0
        ids = list(map(self._ids.get, points.names))
        if None in ids:
            ids = self._intern_all(points.names, ids)
        array = np.fromiter(ids, dtype=np.int64, count=len(ids))
        timestamps, values = points.timestamps, points.values
        if (array == INVALID).any():
            bad = array == INVALID
            for index in np.flatnonzero(bad)[:5].tolist():
                name = points.names[index]
                refusals.add(self._aliases.get(name) or "invalid name", name, 0)
            refusals.count += int(bad.sum())
            keep = ~bad
            array, timestamps, values = array[keep], timestamps[keep], values[keep]
        if len(array):
            with self._lock:
                self._chunks.append((array, timestamps, values))
                self._pending += len(array)
                self.last_added = time.monotonic()
        return len(array)

    def _intern_all(self, names: list[str], ids: list[int | None]) -> list[int]:
        """ids with the names not interned yet (None) interned: together when all of them
        are canonical already (names.all_canonical), else one by one."""
        fresh = list(dict.fromkeys(name for name, index in zip(names, ids) if index is None))
        if names_mod.all_canonical(fresh):
            first = len(self._canonical)
            self._canonical.extend(fresh)
            self._ids.update(zip(fresh, range(first, first + len(fresh))))
            return list(map(self._ids.__getitem__, names))
        return [self._intern(name) if i is None else i for name, i in zip(names, ids)]

    def _intern(self, name: str) -> int:
        known = self._ids.get(name)
        if known is not None:
            return known
        try:
            canonical = names_mod.normalize(name)
        except InvalidMetricName as exc:
            self._remember_alias(name, INVALID, str(exc))
            return INVALID
        index = self._ids.get(canonical)  # a canonical name is valid: never INVALID here
        if index is None:
            index = self._ids[canonical] = len(self._canonical)
            self._canonical.append(canonical)
        if name != canonical:
            self._remember_alias(name, index, None)
        return index

    def _remember_alias(self, name: str, index: int, why: str | None) -> None:
        """Remember a spelling that is not canonical, or invalid, within max_alias_bytes."""
        size = sys.getsizeof(name) + (sys.getsizeof(why) if why else 0) + ALIAS_ENTRY_BYTES
        if self._alias_bytes + size > self.max_alias_bytes:
            for forgotten in self._aliases:
                del self._ids[forgotten]
            self._aliases.clear()
            self._alias_bytes = 0
        self._aliases[name] = why
        self._ids[name] = index
        self._alias_bytes += size

    def take(self, max_points: int | None = None) -> Batch | None:
        """The oldest waiting points as one batch, at least one read's and about `max_points`
        at most (None: everything; the batch is None if nothing waits); call done() after
        writing it. Batches are taken in arrival order, so a metric's points stay in order."""
        with self._lock:
            if not self._chunks:
                return None
            if max_points is None:
                chunks, self._chunks = self._chunks, []
            else:
                count, end = 0, 0
                while end < len(self._chunks) and (end == 0 or count + len(self._chunks[end][0]) <= max_points):
                    count += len(self._chunks[end][0])
                    end += 1
                chunks, self._chunks = self._chunks[:end], self._chunks[end:]
            ids = np.concatenate([c[0] for c in chunks])
            timestamps = np.concatenate([c[1] for c in chunks])
            values = np.concatenate([c[2] for c in chunks])
            if 4 * len(ids) >= len(self._canonical):  # ids are dense (0 .. names interned): a table, not a sort
                present = np.zeros(len(self._canonical), dtype=bool)
                present[ids] = True
                unique = np.flatnonzero(present)
                owner = (np.cumsum(present) - 1)[ids]
            else:
                unique, owner = np.unique(ids, return_inverse=True)
            names = list(map(self._canonical.__getitem__, unique.tolist()))
            batch = Batch(names, owner.astype(np.int64, copy=False), timestamps, values, unique)
            self._in_flight = batch
            self._pending -= len(ids)
        return batch

    def done(self, batch: Batch) -> None:
        """The batch is written (or given up): it no longer counts nor answers queries."""
        with self._lock:
            if self._in_flight is batch:
                self._in_flight = None

    def cached(self, names: list[str]) -> dict[str, list[tuple[int, float]]]:
        """Points of these metrics not in the store yet (CarbonLink's cache-query), by name
        as asked (each spelling asked of one metric gets its points); for a timestamp
        received twice, the last value."""
        wanted: dict[int, str] = {}
        spellings: list[tuple[str, int]] = []  # another name asked of a metric already wanted
        for name in names:
            index = self._ids.get(name)  # as received: its id, or INVALID (no normalising again)
            if index is None:
                try:
                    index = self._ids.get(names_mod.normalize(name))
                except InvalidMetricName:
                    continue
            if index is not None and index != INVALID:
                if index in wanted:
                    spellings.append((name, index))
                else:
                    wanted[index] = name
        result: dict[str, list[tuple[int, float]]] = {name: [] for name in names}
        if not wanted:
            return result
        with self._lock:
            parts = []
            in_flight = self._in_flight
            if in_flight is not None:
                parts.append((in_flight.ids[in_flight.owner], in_flight.timestamps, in_flight.values))
            parts.extend(self._chunks)
        keys = np.fromiter(wanted, dtype=np.int64, count=len(wanted))
        for ids, timestamps, values in parts:
            mask = np.isin(ids, keys)
            for index, timestamp, value in zip(ids[mask].tolist(), timestamps[mask].tolist(), values[mask].tolist()):
                result[wanted[index]].append((int(timestamp), value))
        for name, points in result.items():
            if points:
                result[name] = sorted(dict(points).items())
        for name, index in spellings:
            result[name] = list(result[wanted[index]])
        return result
