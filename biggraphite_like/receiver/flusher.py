"""The flusher thread: every flush interval, everything buffered goes to the store, as one
accessor batch (`Accessor.insert_columns`: one transaction on SQLite, each metric's points
together) per `max_batch_points` points at most, so a backlog is written in bounded
batches, one after the other (insert_columns itself writes a batch's metrics 10,000 at a
time in its transaction, which bounds the store's transient memory per call).

This is the one place where the receiver creates metrics: the batch's unknown metrics are
created in its transaction, together, with the metadata the storage rules give them
(rules.py), so a point never waits for nor races with its metric's creation.

A batch the store refuses as a whole is written in halves, in arrival order, down to
1,000 points (halving.py, as `bgl write -` does): on a full disk what fits gets in, and
a failure that does not go away is confined to a small batch. A smallest batch that
fails is retried with exponential backoff (from `retry_delay` doubling up to
`retry_max_delay`): without limit while the error can recover (RECOVERABLE: a full disk,
a disk I/O error, a locked file, Cassandra unavailable), `retries` times otherwise (a
bug, a corrupt store), then dropped, logged and counted (droppedPoints). Meanwhile the
flusher holds the batch and the buffer fills up to --max-buffered-points: reads stop,
clients block in send() (listeners.py), nothing is dropped; once the store takes writes
again the rest follows by itself. When the receiver stops, a recoverable error is
retried `retries` times too; if it persists, the rest of the buffer is tried once and
what fails is dropped and counted: the exit message then says so (service.py).
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from typing import Callable

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import BglError, StoreFull, StoreUnavailable
from biggraphite_like.halving import write_halving
from biggraphite_like.receiver.buffer import Batch, PointBuffer
from biggraphite_like.receiver.rules import StorageRules
from biggraphite_like.receiver.stats import ReceiverStats

_log = logging.getLogger(__name__)

RECOVERABLE = (StoreFull, StoreUnavailable)  # errors that pass with time or an operator's action


class _GaveUp(Exception):
    """Stopping, the store still fails: the rest of the batch is dropped."""


@dataclasses.dataclass(frozen=True)
class FlushPolicy:
    interval: float = 1.0  # seconds between the starts of two flushes
    retries: int = 10  # attempts after a failure that cannot recover (any failure once stopping)
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
        self._giving_up = False  # stopping, and the store still fails: one attempt a batch
        self._handled = 0  # points of the batch being written that are stored or dropped
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
        """Write one batch (in halves if the store refuses it whole, see the module doc);
        counts the outcome."""
        self._handled = 0
        try:
            if self._giving_up:
                self._write_smallest(batch)
            else:
                write_halving(batch, self._insert, last=self._write_smallest, on_split=self._split)
        except _GaveUp as exc:
            self._drop(len(batch) - self._handled, batch, exc.__cause__)
        finally:
            self.buffer.done(batch)
            self.on_flush()

    def _insert(self, batch: Batch) -> None:
        """One attempt (one transaction); storeErrors counts a failure."""
        started = time.perf_counter()
        try:
            result = self.accessor.insert_columns(batch.names, batch.owner, batch.timestamps, batch.values,
                                                  create=self.rules.metadata_for)
        except Exception:
            self.stats.increment("storeErrors")
            raise
        self._handled += len(batch)
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

    def _split(self, batch: Batch, exc: Exception) -> None:
        _log.warning("store batch of %d points of %d metrics failed: %s; writing it in halves", len(batch),
                     len(batch.names), exc)

    def _write_smallest(self, batch: Batch) -> None:
        """Write a batch that is not halved any more, retrying (see the module doc)."""
        delay = self.policy.retry_delay
        failures = 0  # counted against `retries`
        for attempt in itertools.count(1):
            try:
                self._insert(batch)
            except Exception as exc:
                stopping = self._stop.is_set()
                recoverable = isinstance(exc, RECOVERABLE)
                if stopping or not recoverable:
                    failures += 1
                if self._giving_up or failures > self.policy.retries:
                    if recoverable:  # stopping: the store still cannot take the rest either
                        self._giving_up = True
                        raise _GaveUp() from exc
                    self._drop(len(batch), batch, exc)
                    self._handled += len(batch)
                    return
                limit = "until the store takes it" if recoverable and not stopping else \
                    f"{self.policy.retries - failures + 1} more time(s)"
                _log.warning("store batch of %d points failed (attempt %d): %s; retrying in %.2fs, %s", len(batch),
                             attempt, exc, delay, limit)
                if stopping:
                    time.sleep(delay)
                else:
                    self._stop.wait(delay)  # a stop request ends the wait: the count of attempts starts
                delay = min(delay * 2, self.policy.retry_max_delay)
                continue
            if attempt > 1:
                _log.info("store batch of %d points written at attempt %d", len(batch), attempt)
            return

    def _drop(self, points: int, batch: Batch, exc: BaseException | None) -> None:
        self.stats.increment("droppedPoints", points)
        _log.error("dropped %d points of %d metrics (%s...): %s", points, len(batch.names),
                   ", ".join(batch.names[:3]), exc, exc_info=exc if not isinstance(exc, BglError) else None)
