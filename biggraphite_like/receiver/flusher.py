"""The flusher thread: every flush interval, everything buffered goes to the store, as one
accessor batch (`Accessor.insert_columns`: one transaction on SQLite, each metric's points
together) per `max_batch_points` points at most, so a backlog is written in bounded
batches, one after the other (insert_columns itself writes a batch's metrics 10,000 at a
time in its transaction, which bounds the store's transient memory per call).

This is the one place where the receiver creates metrics: the batch's unknown metrics are
created in its transaction, together, with the metadata the storage rules give them
(rules.py), so a point never waits for nor races with its metric's creation.

A failed batch is retried with exponential backoff (`retries`, from `retry_delay` doubling
up to `retry_max_delay`); meanwhile the buffer fills and back-pressure stops the reads.
After the last attempt the batch is dropped, logged and counted (droppedPoints).
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Callable

from biggraphite_like.accessor import Accessor
from biggraphite_like.receiver.buffer import Batch, PointBuffer
from biggraphite_like.receiver.rules import StorageRules
from biggraphite_like.receiver.stats import ReceiverStats

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class FlushPolicy:
    interval: float = 1.0  # seconds between the starts of two flushes
    retries: int = 10  # attempts after a failed batch
    retry_delay: float = 0.2
    retry_max_delay: float = 10.0
    max_batch_points: int = 500_000  # points per accessor batch at most (--flush-size)


class Flusher:
    """Writes the buffer to the store from its own thread."""

    def __init__(self, accessor: Accessor, buffer: PointBuffer, rules: StorageRules, stats: ReceiverStats,
                 policy: FlushPolicy = FlushPolicy(), on_flush: Callable[[], None] | None = None):
        self.accessor = accessor
        self.buffer = buffer
        self.rules = rules
        self.stats = stats
        self.policy = policy
        self.on_flush = on_flush or (lambda: None)  # after each batch (wakes the I/O loop)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bgl-receiver-flusher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Flush what is buffered (with its retries), then end the thread."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        next_start = time.monotonic() + self.policy.interval
        while True:
            stopping = self._stop.wait(max(0.0, next_start - time.monotonic()))
            next_start = time.monotonic() + self.policy.interval
            while True:
                batch = self.buffer.take(self.policy.max_batch_points)
                if batch is not None:
                    self.write(batch)
                if batch is None or (not stopping and self.buffer.pending < self.policy.max_batch_points
                                     and time.monotonic() < next_start):
                    break  # the rest (less than a batch) waits for the next interval
            if stopping:
                return

    def write(self, batch: Batch) -> None:
        """Write one batch, retrying; counts the outcome."""
        delay = self.policy.retry_delay
        attempts = self.policy.retries + 1
        try:
            for attempt in range(1, attempts + 1):
                started = time.perf_counter()
                try:
                    result = self.accessor.insert_columns(batch.names, batch.owner, batch.timestamps, batch.values,
                                                          create=self.rules.metadata_for)
                except Exception as exc:  # the store may recover; a bug fails every attempt and is logged
                    self.stats.increment("storeErrors")
                    if attempt == attempts:
                        self.stats.increment("droppedPoints", len(batch))
                        _log.error("dropped %d points of %d metrics (%s...) after %d attempts: %s", len(batch),
                                   len(batch.names), ", ".join(batch.names[:3]), attempts, exc)
                        return
                    _log.warning("store batch of %d points failed (attempt %d/%d): %s; retrying in %.2fs",
                                 len(batch), attempt, attempts, exc, delay)
                    time.sleep(delay)
                    delay = min(delay * 2, self.policy.retry_max_delay)
                    continue
                elapsed_ms = int((time.perf_counter() - started) * 1000)
                self.stats.increment("flushes")
                self.stats.increment("flushMilliseconds", elapsed_ms)
                self.stats.increment("committedPoints", result.stored)
                self.stats.increment("tooOldPoints", result.too_old)
                self.stats.increment("creates", result.created)
                if result.rejected:
                    self.stats.increment("rejectedPoints", result.rejected)
                    _log.warning("store refused %d points: %s", result.rejected, "; ".join(result.errors[:5]))
                _log.debug("flushed %d points of %d metrics in %d ms", len(batch), len(batch.names), elapsed_ms)
                return
        finally:
            self.buffer.done(batch)
            self.on_flush()
