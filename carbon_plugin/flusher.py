"""The flusher thread: writes buffered points to the store in batches, with retries.

Each flush takes every buffered point as flat arrays (buffer.py) and writes them with
`Accessor.insert_columns`, many metrics per call (each metric's points together), at most
about BG_FLUSH_SIZE points per call (a metric's points are never split between calls).
Each metric travels with the metadata carbon created it with: insert_columns creates the
batch's unknown metrics in the same transaction as their first points (a metric the store
already has keeps its metadata), so a point is never dropped because its metric's creation
is still in progress. Metrics whose metadata this process does not know go in calls of
their own, without metadata (the store refuses their points if it lacks them).

Calls are written by ingest.batch_writer.BatchWriter, as the receiver's flusher writes its
batches: a call the store refuses whole is written in halves (down to 1,000 points: on a
full disk what fits gets in); a smallest one that fails is retried with exponential
backoff from BG_RETRY_DELAY, without limit while the error can recover (a full disk, a
disk I/O error, a locked file, Cassandra unavailable: the flusher holds the points, the
buffer fills, `add` blocks carbon's writer and carbon's cache holds the rest),
BG_RETRIES times otherwise and once stopping, then logged, counted as droppedPoints and
in carbon's `errors`. Points refused (invalid names, by the buffer; NaN or infinite
values and timestamps outside 1..2^32-1, by the accessor) are logged with the reason and
counted as rejectedPoints.
"""
from __future__ import annotations

import queue
import threading
import time

import numpy as np
from carbon import log

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import WriteResult
from biggraphite_like.batch_parts import cut_by_group
from biggraphite_like.ingest.batch_writer import BatchWriter
from biggraphite_like.errors import InvalidMetricName
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.ingest.buffer import Batch
from biggraphite_like.ingest.points import Refusals
from carbon_plugin.buffer import WriteBuffer
from carbon_plugin.known import KnownMetrics
from carbon_plugin.options import PluginOptions
from carbon_plugin.retry import GaveUp, log_failure, with_retries
from carbon_plugin.stats import PluginStats, count_carbon_error
from carbon_plugin.writer_process import InProcessWriter, ProcessWriter

StoreWriter = InProcessWriter | ProcessWriter


class Flusher:
    """Owns the thread that empties a WriteBuffer into the store."""

    def __init__(self, writer: StoreWriter, buffer: WriteBuffer, known: KnownMetrics,
                 options: PluginOptions, stats: PluginStats):
        self._writer = writer
        self._buffer = buffer
        self._known = known
        self._options = options
        self._stats = stats
        self._metadata_updates: queue.SimpleQueue[tuple[str, MetricMetadata]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._idle = threading.Condition()
        self._busy = False
        self._stopping = threading.Event()  # set by stop(): recoverable store errors get BG_RETRIES attempts from then
        self._batches = _CarbonBatches(self)

    # -- lifecycle -------------------------------------------------------------------------
    def ensure_started(self) -> None:
        """Start the thread on first use (after carbon's daemon fork: threads do not survive it)."""
        if self._thread is not None and self._thread.is_alive():
            return
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="biggraphite_like-flusher", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        """Flush everything buffered (with its retries), then end the thread."""
        self._stopping.set()
        self._buffer.stop()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join()
        else:  # never started (nothing written) or died: drain here
            self._drain()
        self._writer.close()

    def update_metadata(self, name: str, metadata: MetricMetadata) -> None:
        """Persist a setMetadata change off the caller's thread."""
        self._metadata_updates.put((name, metadata))
        self.ensure_started()
        self._buffer.wake()

    def flush_now(self, timeout: float | None = None) -> bool:
        """Ask for a flush and wait until the buffer was written (tests, benchmarks)."""
        self.ensure_started()
        deadline = None if timeout is None else time.monotonic() + timeout
        self._buffer.wake()
        with self._idle:
            while len(self._buffer) or self._busy or not self._metadata_updates.empty():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(0.05 if remaining is None else min(0.05, remaining))
                self._buffer.wake()
        return True

    # -- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            stopping = self._buffer.wait_for_batch()
            try:
                self._drain()
            except Exception:  # never let the thread die: points would pile up unseen
                log.err(None, "biggraphite_like: flusher error")
            if stopping and not len(self._buffer) and self._metadata_updates.empty():
                self._drain()
                return

    def _drain(self) -> None:
        with self._idle:
            self._busy = True
        try:
            self._apply_metadata_updates()
            refusals = Refusals()
            batch, spellings = self._buffer.take(refusals)
            if refusals.count:
                self._refused(refusals.count, [f"{why}: {name}" for why, name in refusals.samples])
            if batch is not None:
                self._flush(batch, spellings)
        finally:
            with self._idle:
                self._busy = False
                self._idle.notify_all()

    def _apply_metadata_updates(self) -> None:
        while True:
            try:
                name, metadata = self._metadata_updates.get_nowait()
            except queue.Empty:
                return
            try:
                canonical = names_mod.normalize(name)
            except InvalidMetricName:
                continue

            try:
                with_retries(lambda: self._writer.update_metadata(canonical, metadata),
                             f"metadata update of {canonical}", self._options, self._stats, self._stopping)
                self._stats.increment("metadataUpdates")
            except GaveUp as exc:
                log.msg(f"biggraphite_like: {exc}: the change stays in memory only")
                count_carbon_error()

    def _flush(self, batch: Batch, spellings: list[str]) -> None:
        """Write one taken buffer (`spellings`: each point's name as carbon gave it): in
        calls of about BG_FLUSH_SIZE points at most, metrics without known metadata apart."""
        metadata = [self._known.get(name) for name in batch.names]
        if None in metadata:
            metadata = self._spelled_metadata(batch.names, metadata, spellings)
        counts = np.bincount(batch.owner, minlength=len(batch.names)).tolist()
        limit = self._options.flush_size
        call_of_name: list[int] = []  # which call writes each name
        calls = [0, 1]  # current call of the names with metadata, of those without
        sizes = [0, 0]
        for meta, count in zip(metadata, counts):
            kind = int(meta is None)
            if sizes[kind] and sizes[kind] + count > limit:
                calls[kind] = max(calls) + 1
                sizes[kind] = 0
            sizes[kind] += count
            call_of_name.append(calls[kind])
        if len(set(call_of_name)) == 1:  # the usual case: one call, the batch as it is
            self._write(batch.names, batch.owner, batch.timestamps, batch.values,
                        None if metadata[0] is None else metadata)
            return
        for part in cut_by_group(batch.owner, np.asarray(call_of_name, np.int64)):
            create = part.names_of(metadata)
            self._write(part.names_of(batch.names), part.owner, batch.timestamps[part.points],
                        batch.values[part.points], None if create[0] is None else create)

    def _spelled_metadata(self, names: list[str], metadata: list, spellings: list[str]) -> list:
        """Metadata of names carbon gave (and created) in another spelling than the normalised one."""
        missing = {name for name, meta in zip(names, metadata) if meta is None}
        found = {}
        for raw in dict.fromkeys(spellings):
            if raw in missing or self._known.get(raw) is None:
                continue
            try:
                canonical = names_mod.normalize(raw)
            except InvalidMetricName:
                continue
            if canonical in missing:
                found[canonical] = self._known.get(raw)
        return [meta if meta is not None else found.get(name) for name, meta in zip(names, metadata)]

    def _write(self, names: list[str], owner: np.ndarray, timestamps: np.ndarray, values: np.ndarray,
               create: list[MetricMetadata] | None) -> None:
        """Write one call's points (in halves if the store refuses them whole, retrying:
        ingest.batch_writer.BatchWriter)."""
        self._batches.metadata = None if create is None else dict(zip(names, create))
        self._batches.write(Batch(names, owner, timestamps, values, np.arange(len(names))))

    def _refused(self, count: int, errors: list[str]) -> None:
        """Count refused points and log a few of the reasons."""
        self._stats.increment("rejectedPoints", count)
        shown = errors[: self._options.max_logged_errors]
        for message in shown:
            log.msg(f"biggraphite_like: refused point(s): {message}")
        if count > len(shown):
            log.msg(f"biggraphite_like: {count} points refused in this batch ({count - len(shown)} not logged)")


class _CarbonBatches(BatchWriter[Batch]):
    """The flusher's calls into the store writer, counted in the plugin's stats and
    carbon's `errors`, logged in carbon's log."""

    def __init__(self, flusher: Flusher):
        super().__init__(flusher._options, flusher._stopping)
        self.flusher = flusher
        self.metadata: dict[str, MetricMetadata] | None = None  # of the names being written (None: unknown)

    def insert(self, batch: Batch) -> WriteResult:
        create = None if self.metadata is None else [self.metadata[name] for name in batch.names]
        return self.flusher._writer.insert_columns(batch.names, batch.owner, batch.timestamps, batch.values,
                                                   int(time.time()), create)

    def written(self, batch: Batch, result: WriteResult, seconds: float) -> None:
        stats = self.flusher._stats
        stats.increment("flushes")
        stats.increment("flushMilliseconds", int(seconds * 1000))
        stats.increment("storedPoints", result.stored)
        if self.flusher._options.log_flushes:
            log.msg(f"biggraphite_like: wrote {result.stored} points of {len(batch.names)} metrics in {seconds:.3f}s")
        if result.too_old:
            stats.increment("tooOldPoints", result.too_old)
        if result.rejected:
            self.flusher._refused(result.rejected, result.errors)

    def failed(self, batch: Batch, exc: Exception, how: str, then: str) -> None:
        log_failure(f"write of {_described(batch)}", how, exc, then, self.flusher._stats)

    def dropped(self, points: int, batch: Batch, exc: BaseException | None) -> None:
        self.flusher._stats.increment("droppedPoints", points)
        count_carbon_error()
        log.msg(f"biggraphite_like: dropped {points} of the {_described(batch)}: {exc}")


def _described(batch: Batch) -> str:
    return f"{len(batch)} points of {len(batch.names)} metrics ({_sample(batch.names)})"


def _sample(names: list[str], first: int = 3, last: int = 2) -> str:
    """The first and last names of a batch, for log lines (a batch's names are in the order
    the buffer first saw them: the last ones are the newest metrics)."""
    if len(names) <= first + last:
        return ", ".join(names)
    return ", ".join(names[:first]) + ", ..., " + ", ".join(names[-last:])
