"""Points carbon handed over, held in memory until the flusher writes them in batches.

Carbon's writer thread adds the points of many metrics at a time (writer_loop.py; one
metric at a time where carbon's own writer loop runs); the flusher thread takes
everything at once when either BG_FLUSH_SIZE points are waiting or the oldest waiting point
has waited BG_FLUSH_INTERVAL seconds, so a point never waits longer than that for its flush
to start (unless the flusher is still writing an earlier batch). Above
BG_MAX_BUFFERED_POINTS, `add` blocks carbon's writer thread until the flusher catches up:
carbon's own cache (and its flow control, MAX_CACHE_SIZE) then holds the backlog.

`add` only appends to three lists (carbon's thread holds the GIL: it must stay cheap; the
timestamps and values are carbon's own float objects, no tuple a point); `take`
turns everything taken into flat arrays in one go, with the ingest package's PointBuffer (one
name interning, normalisation and owner-array code for both ingest paths): a `Batch` of
normalised names, owner, timestamps and values for `Accessor.insert_columns`.
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Iterable, Sequence

import numpy as np

from biggraphite_like.ingest.buffer import Batch, PointBuffer
from biggraphite_like.ingest.points import ReceivedPoints, Refusals


class WriteBuffer:
    """Points in arrival order, with the name of each (thread-safe)."""

    def __init__(self, flush_size: int, flush_interval: float, max_points: int):
        self.flush_size = flush_size
        self.flush_interval = flush_interval
        self.max_points = max_points
        self._names: list[str] = []  # name of each point, as carbon gave it
        self._timestamps: list = []  # timestamp of each point (carbon's float objects, not copies)
        self._values: list = []  # value of each point
        self._size = 0
        self._columns = PointBuffer()  # names interned across flushes (used by take() only)
        self._oldest = 0.0  # monotonic time the oldest waiting point arrived
        self._stopping = False
        self._kicked = False  # work other than points is waiting (metadata updates, lookups)
        self._cond = threading.Condition()

    def __len__(self) -> int:
        """Points waiting."""
        return self._size

    def add(self, name: str, points: Iterable[tuple[float, float]]) -> None:
        """Buffer points of one metric (blocks while the buffer is full, unless stopping)."""
        points = list(points)
        if points:
            self._append([name] * len(points), [_field(p, 0) for p in points], [_field(p, 1) for p in points])

    def add_many(self, names: Sequence[str], datapoints: Sequence[dict[float, float]]) -> None:
        """Buffer the {timestamp: value} points of many metrics at once (one lock, one wake-up)."""
        chain = itertools.chain.from_iterable  # every loop here runs in C
        timestamps = list(chain(map(dict.keys, datapoints)))
        if timestamps:
            self._append(list(chain(map(itertools.repeat, names, map(len, datapoints)))), timestamps,
                         list(chain(map(dict.values, datapoints))))

    def _append(self, names: list[str], timestamps: list, values: list) -> None:
        with self._cond:
            while self._size >= self.max_points and not self._stopping:
                self._cond.wait()
            self._names.extend(names)
            self._timestamps.extend(timestamps)  # later points win over earlier ones of the same timestamp
            self._values.extend(values)
            before = self._size
            self._size += len(names)
            if before == 0:
                self._oldest = time.monotonic()
                self._cond.notify_all()
            elif before < self.flush_size <= self._size:
                self._cond.notify_all()

    def wait_for_batch(self) -> bool:
        """Block until a flush is due; returns True once `stop()` was called."""
        with self._cond:
            while not self._stopping:
                if self._kicked or self._size >= self.flush_size:
                    break
                if self._size:
                    remaining = self._oldest + self.flush_interval - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                else:
                    self._cond.wait()
            self._kicked = False
            return self._stopping

    def take(self, refusals: Refusals) -> tuple[Batch | None, list[str]]:
        """Everything waiting as flat arrays (None: nothing), and the name of each point as
        carbon gave it; the buffer is then empty and `add` may proceed. Points of invalid
        names are left out and counted in `refusals`. Called by one thread at a time (the
        flusher)."""
        with self._cond:
            names, self._names = self._names, []
            timestamps, self._timestamps = self._timestamps, []
            values, self._values = self._values, []
            self._size = 0
            self._cond.notify_all()
        if not names:
            return None, names
        self._columns.add(ReceivedPoints(names, _floats(timestamps), _floats(values)), refusals)
        batch = self._columns.take()
        if batch is not None:
            self._columns.done(batch)
        return batch, names

    def wake(self) -> None:
        """Make `wait_for_batch` return now (work other than points is waiting, or the
        points waiting are all that will come for a while)."""
        with self._cond:
            self._kicked = True
            self._cond.notify_all()

    def stop(self) -> None:
        """Release every waiter: the flusher drains what is left, `add` no longer blocks."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()


def _floats(numbers: list) -> np.ndarray:
    """A float64 array of the list; an item that is not a number becomes NaN (the accessor
    refuses that point and says why)."""
    try:
        return np.array(numbers, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_number(n) for n in numbers], dtype=np.float64)


def _field(point, index: int):
    """point[index], or NaN when the point has no such field."""
    try:
        return point[index]
    except (TypeError, IndexError, KeyError):
        return float("nan")


def _number(item) -> float:
    try:
        return float(item)
    except (TypeError, ValueError):
        return float("nan")
