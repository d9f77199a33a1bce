"""The flusher thread: writes buffered points to the store in batches, with retries.

Each flush takes every buffered point and writes it with `Accessor.insert_points`, many
metrics per call, at most BG_FLUSH_SIZE points per call. Points of metrics carbon has just
created travel with their metadata: insert_points creates those metrics in the same
transaction as their first points (a metric the store already has keeps its metadata), so
a point is never dropped because its metric's creation is still in progress. Failed batches
are retried (BG_RETRIES, exponential backoff from BG_RETRY_DELAY), then logged, counted as
droppedPoints and in carbon's `errors`. Points the accessor refuses (NaN or infinite
values, timestamps outside 1..2^32-1, invalid names) are logged with the reason and counted
as rejectedPoints.
"""
from __future__ import annotations

import queue
import threading
import time
from carbon import log

from biggraphite_like import names as names_mod
from biggraphite_like.errors import InvalidMetricName
from biggraphite_like.metric import MetricMetadata
from carbon_plugin.buffer import Points, WriteBuffer
from carbon_plugin.known import KnownMetrics
from carbon_plugin.options import PluginOptions
from carbon_plugin.retry import GaveUp, with_retries
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
            batch = self._buffer.take()
            if batch:
                self._flush(batch)
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
                             f"metadata update of {canonical}", self._options, self._stats)
                self._stats.increment("metadataUpdates")
            except GaveUp as exc:
                log.msg(f"biggraphite_like: {exc}: the change stays in memory only")
                count_carbon_error()

    def _flush(self, batch: dict[str, Points]) -> None:
        """Write one taken buffer: grouped by creation metadata, chunked by BG_FLUSH_SIZE points."""
        groups: dict[int, tuple[MetricMetadata | None, list[str]]] = {}
        for name in batch:
            metadata = self._known.get(name)
            group = groups.get(id(metadata))
            if group is None:
                group = groups[id(metadata)] = (metadata, [])
            group[1].append(name)
        limit = self._options.flush_size
        for metadata, names in groups.values():
            chunk: dict[str, Points] = {}
            size = 0
            for name in names:
                points = batch[name]
                chunk[name] = points
                size += len(points)
                if size >= limit:
                    self._write(chunk, size, metadata)
                    chunk, size = {}, 0
            if chunk:
                self._write(chunk, size, metadata)

    def _write(self, chunk: dict[str, Points], size: int, metadata: MetricMetadata | None) -> None:
        started = time.perf_counter()
        try:
            result = with_retries(lambda: self._writer.insert_points(chunk, int(time.time()), metadata),
                                  f"write of {size} points of {len(chunk)} metrics ({_sample(chunk)})",
                                  self._options, self._stats)
        except GaveUp as exc:
            self._stats.increment("droppedPoints", size)
            count_carbon_error()
            log.msg(f"biggraphite_like: dropped {size} points of {len(chunk)} metrics ({_sample(chunk)}): {exc}")
            return
        elapsed = time.perf_counter() - started
        self._stats.increment("flushes")
        self._stats.increment("flushMilliseconds", int(elapsed * 1000))
        self._stats.increment("storedPoints", result.stored)
        if self._options.log_flushes:
            log.msg(f"biggraphite_like: wrote {result.stored} points of {len(chunk)} metrics in {elapsed:.3f}s")
        if result.too_old:
            self._stats.increment("tooOldPoints", result.too_old)
        if result.rejected:
            self._stats.increment("rejectedPoints", result.rejected)
            shown = result.errors[: self._options.max_logged_errors]
            for message in shown:
                log.msg(f"biggraphite_like: refused point(s): {message}")
            if result.rejected > len(shown):
                log.msg(f"biggraphite_like: {result.rejected} points refused in this batch"
                        f" ({result.rejected - len(shown)} not logged)")


def _sample(names, count: int = 5) -> str:
    """The first names of a batch, for log lines."""
    shown = []
    for name in names:
        if len(shown) == count:
            return ", ".join(shown) + ", ..."
        shown.append(name)
    return ", ".join(shown)
