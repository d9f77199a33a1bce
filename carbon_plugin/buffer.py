"""Points carbon handed over, held in memory until the flusher writes them in batches.

Carbon's writer thread adds the points of one metric at a time; the flusher thread takes
everything at once when either BG_FLUSH_SIZE points are waiting or the oldest waiting point
has waited BG_FLUSH_INTERVAL seconds, so a point never waits longer than that for its flush
to start (unless the flusher is still writing an earlier batch). Above
BG_MAX_BUFFERED_POINTS, `add` blocks carbon's writer thread until the flusher catches up:
carbon's own cache (and its flow control, MAX_CACHE_SIZE) then holds the backlog.

`add` only appends to two lists (carbon's thread holds the GIL: it must stay cheap); `take`
turns everything taken into flat arrays in one go, with the receiver's PointBuffer (one
name interning, normalisation and owner-array code for both ingest paths): a `Batch` of
normalised names, owner, timestamps and values for `Accessor.insert_columns`.
"""
from __future__ import annotations

import threading
import time
from typing import Iterable

import numpy as np

from biggraphite_like.receiver.buffer import Batch, PointBuffer
from biggraphite_like.receiver.points import Points, Refusals


class WriteBuffer:
    """Points in arrival order, with the name of each (thread-safe)."""

    def __init__(self, flush_size: int, flush_interval: float, max_points: int):
        self.flush_size = flush_size
        self.flush_interval = flush_interval
        self.max_points = max_points
        self._names: list[str] = []  # name of each point, as carbon gave it
        self._points: list = []  # (timestamp, value) of each point
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
        if not points:
            return
        with self._cond:
            while self._size >= self.max_points and not self._stopping:
                self._cond.wait()
            self._names.extend([name] * len(points))
            self._points.extend(points)  # later points win over earlier ones of the same timestamp
            before = self._size
            self._size += len(points)
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
            points, self._points = self._points, []
            self._size = 0
            self._cond.notify_all()
        if not names:
            return None, names
        self._columns.add(Points(names, *_columns(points)), refusals)
        batch = self._columns.take()
        if batch is not None:
            self._columns.done(batch)
        return batch, names

    def wake(self) -> None:
        """Make `wait_for_batch` return now (work other than points is waiting)."""
        with self._cond:
            self._kicked = True
            self._cond.notify_all()

    def stop(self) -> None:
        """Release every waiter: the flusher drains what is left, `add` no longer blocks."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()


def _columns(points: list) -> tuple[np.ndarray, np.ndarray]:
    """Timestamps and values of [(timestamp, value), ...]; a field that is not a number
    becomes NaN (the accessor refuses that point and says why)."""
    try:
        flat = np.array(points, dtype=np.float64).reshape(len(points), 2)
    except (TypeError, ValueError):
        flat = np.array([(_number(p, 0), _number(p, 1)) for p in points], dtype=np.float64).reshape(len(points), 2)
    return flat[:, 0].copy(), flat[:, 1].copy()


def _number(point, index: int) -> float:
    try:
        return float(point[index])
    except (TypeError, ValueError, IndexError):
        return float("nan")
