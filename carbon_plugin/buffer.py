"""Points carbon handed over, held in memory until the flusher writes them in batches.

Carbon's writer thread adds the points of one metric at a time; the flusher thread takes
everything at once when either BG_FLUSH_SIZE points are waiting or the oldest waiting point
has waited BG_FLUSH_INTERVAL seconds, so a point never waits longer than that for its flush
to start (unless the flusher is still writing an earlier batch). Above
BG_MAX_BUFFERED_POINTS, `add` blocks carbon's writer thread until the flusher catches up:
carbon's own cache (and its flow control, MAX_CACHE_SIZE) then holds the backlog.
"""
from __future__ import annotations

import threading
import time
from typing import Iterable

Points = list  # [(timestamp, value), ...]


class WriteBuffer:
    """Points by metric name, in arrival order (thread-safe)."""

    def __init__(self, flush_size: int, flush_interval: float, max_points: int):
        self.flush_size = flush_size
        self.flush_interval = flush_interval
        self.max_points = max_points
        self._points: dict[str, Points] = {}
        self._size = 0
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
            waiting = self._points.get(name)
            if waiting is None:
                self._points[name] = points
            else:
                waiting.extend(points)  # later points win over earlier ones of the same timestamp
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

    def take(self) -> dict[str, Points]:
        """Everything waiting (the buffer is then empty and `add` may proceed)."""
        with self._cond:
            points, self._points = self._points, {}
            self._size = 0
            self._cond.notify_all()
        return points

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
