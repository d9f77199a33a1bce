"""The flusher thread: every flush interval, and when a sender's burst is over (no point for
`flush_quiet` seconds, a quarter interval after the last flush at the soonest), everything buffered goes to the store, as one
accessor batch (`Accessor.insert_columns`: one transaction on SQLite, each metric's points
together) per `flush_size` points at most (ingest.policy.FlushPolicy), so a backlog is written in bounded
batches, one after the other (insert_columns itself writes a batch's metrics 10,000 at a
time in its transaction, which bounds the store's transient memory per call).

This is the one place where the receiver creates metrics: the batch's unknown metrics are
created in its transaction, together, with the metadata the storage rules give them
(rules.py), so a point never waits for nor races with its metric's creation.

Batches are written by ingest.batch_writer.BatchWriter (shared with carbon's plugin): a batch
the store refuses as a whole is written in halves, in arrival order, down to 1,000
points (as `bgl write -` does): on a full disk what fits gets in, and a failure that
does not go away is confined to a small batch. A smallest batch that fails is retried
with exponential backoff (from `retry_delay` doubling up to `retry_max_delay`): without
limit while the error can recover (batch_writer.RECOVERABLE: a full disk, a disk I/O
error, a locked file, Cassandra unavailable), `retries` times otherwise (a bug, a
corrupt store), then dropped, logged and counted (droppedPoints). Meanwhile the flusher
holds the batch and the buffer fills up to --max-buffered-points: reads stop, clients
block in send() (listeners.py), nothing is dropped; once the store takes writes again
the rest follows by itself. When the receiver stops, a recoverable error is retried
`retries` times too; if it persists, the rest of the buffer is tried once and what
fails is dropped and counted: the exit message then says so (service.py).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from biggraphite_like.accessor import Accessor, WriteResult
from biggraphite_like.ingest.batch_writer import BatchWriter
from biggraphite_like.ingest.buffer import Batch, PointBuffer
from biggraphite_like.ingest.policy import FlushPolicy
from biggraphite_like.errors import BglError
from biggraphite_like.receiver.rules import StorageRules
from biggraphite_like.receiver.stats import ReceiverStats

_log = logging.getLogger(__name__)


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
        self._batches = _StoreBatches(self)
        self._thread = threading.Thread(target=self._run, name="bgl-receiver-flusher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Flush what is buffered (with its retries), then end the thread."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        interval, quiet = self.policy.flush_interval, self.policy.flush_quiet
        started = time.monotonic()
        next_start = started + interval
        while True:
            now = time.monotonic()
            wake = next_start
            if quiet:  # look for the end of a burst meanwhile
                wake = min(next_start, max(started + interval / 4, now + quiet))
            stopping = self._stop.wait(max(0.0, wake - now))
            now = time.monotonic()
            if not stopping and now < next_start and not self._burst_over(now, started):
                continue
            started = now
            next_start = now + interval
            while True:
                batch = self.buffer.take(self.policy.flush_size)
                if batch is not None:
                    self.write(batch)
                if batch is None or (not stopping and self.buffer.pending < self.policy.flush_size
                                     and time.monotonic() < next_start):
                    break  # the rest (less than a batch) waits for the next interval
            if stopping:
                return

    def _burst_over(self, now: float, started: float) -> bool:
        """Points wait, none came for `flush_quiet` seconds and the last flush started a
        quarter interval ago or more: the sender's burst is over, flush it now."""
        quiet = self.policy.flush_quiet
        return bool(quiet and self.buffer.pending and now - self.buffer.last_added >= quiet
                    and now - started >= self.policy.flush_interval / 4)

    def write(self, batch: Batch) -> None:
        """Write one batch (in halves if the store refuses it whole, see the module doc);
        counts the outcome."""
        try:
            self._batches.write(batch)
        finally:
            self.buffer.done(batch)
            self.on_flush()


class _StoreBatches(BatchWriter[Batch]):
    """The flusher's batches into the accessor, counted in the receiver's stats."""

    def __init__(self, flusher: Flusher):
        super().__init__(flusher.policy, flusher._stop)
        self.accessor = flusher.accessor
        self.rules = flusher.rules
        self.stats = flusher.stats

    def insert(self, batch: Batch) -> WriteResult:
        return self.accessor.insert_columns(batch.names, batch.owner, batch.timestamps, batch.values,
                                            create=self.rules.metadata_for, checked=True)

    def written(self, batch: Batch, result: WriteResult, seconds: float) -> None:
        elapsed_ms = int(seconds * 1000)
        self.stats.increment("flushes")
        self.stats.increment("flushMilliseconds", elapsed_ms)
        self.stats.increment("storedPoints", result.stored)
        self.stats.increment("tooOldPoints", result.too_old)
        self.stats.increment("creates", result.created)
        if result.rejected:
            self.stats.increment("rejectedPoints", result.rejected)
            _log.warning("store refused %d points: %s", result.rejected, "; ".join(result.errors[:5]))
        _log.debug("flushed %d points of %d metrics in %d ms", len(batch), len(batch.names), elapsed_ms)

    def failed(self, batch: Batch, exc: Exception, how: str, then: str) -> None:
        self.stats.increment("storeErrors")
        _log.warning("store batch of %d points of %d metrics failed (%s): %s; %s", len(batch), len(batch.names), how,
                     exc, then, exc_info=exc if not isinstance(exc, BglError) else None)

    def dropped(self, points: int, batch: Batch, exc: BaseException | None) -> None:
        self.stats.increment("droppedPoints", points)
        _log.error("dropped %d points of %d metrics (%s...): %s", points, len(batch.names),
                   ", ".join(batch.names[:3]), exc)
