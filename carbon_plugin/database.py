"""carbon's TimeSeriesDatabase plugins: `biggraphite_like` and `whisper+biggraphite_like`.

carbon.conf `[cache] DATABASE = biggraphite_like` writes through the accessor into the store
named by `BG_STORE`; `DATABASE = whisper+biggraphite_like` also keeps carbon's whisper files
(double writes while migrating). Threads, as carbon uses them:

- carbon's writer thread calls `exists` (memory; a miss looks up the store once, batched),
  `create` (memory: the metric is stored with its first points) and `write_many` (the
  batched writer loop, writer_loop.py) or `write` (buffers);
- the plugin's flusher thread writes the buffer to the store (see flusher.py);
- the reactor thread calls `getMetadata` / `setMetadata` for CarbonLink: answered from
  memory, changes persisted by the flusher thread.

Nothing touches the store before carbon has forked into a daemon: the accessor, its
connections and the flusher thread are created on first use. On shutdown (SIGTERM) a
reactor trigger, run after carbon's writer thread has stopped, writes what is still in
carbon's cache through this plugin and flushes the buffer before the process exits.
"""
from __future__ import annotations

import itertools
import os
import threading
from typing import Any, Sequence

from carbon import log
from carbon.database import TimeSeriesDatabase

from biggraphite_like.accessor import Accessor
from biggraphite_like.aggregation import Aggregator
from biggraphite_like.errors import BglError
from biggraphite_like.ingest import metadata as carbonlink_metadata
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.retention import Retention
from biggraphite_like.urls import redact_url
from carbon_plugin.buffer import WriteBuffer
from carbon_plugin.flusher import Flusher
from carbon_plugin.known import KnownMetrics
from carbon_plugin.options import PluginOptions
from carbon_plugin.stats import PluginStats, record_in_carbon
from carbon_plugin.store_size import GAUGE as STORE_BYTES, measurable, store_bytes
from carbon_plugin.writer_process import InProcessWriter, ProcessWriter

WAITING_NAMES_SCAN = 200_000  # names of carbon's cache scanned for a batched lookup


class MetadataNotLoaded(BglError, LookupError):
    """getMetadata/setMetadata for a metric not in memory: it is being loaded, ask again."""


def carbon_cache_names() -> Sequence[str]:
    """Names waiting in carbon's cache (the metrics carbon will ask `exists` about next)."""
    try:
        from carbon.cache import MetricCache
    except ImportError:  # pragma: no cover - carbon is a dependency of this package
        return ()
    cache = MetricCache()
    with cache.lock:
        return list(itertools.islice(iter(cache), WAITING_NAMES_SCAN))


class BigGraphiteLikeDatabase(TimeSeriesDatabase):
    """Stores carbon's points through `biggraphite_like.accessor.Accessor`."""

    plugin_name = "biggraphite_like"
    aggregationMethods = [a.value for a in Aggregator]

    def __init__(self, settings: Any):
        super().__init__(settings)
        self.options = PluginOptions.from_settings(settings)
        self.stats = PluginStats()
        self._accessor: Accessor | None = None
        self._accessor_lock = threading.Lock()
        self._pid = os.getpid()
        self.known = KnownMetrics(self.accessor, self.options, self.stats, carbon_cache_names)
        self.buffer = WriteBuffer(self.options.flush_size, self.options.flush_interval,
                                  self.options.max_buffered_points)
        writer = ProcessWriter(self.options.store_url) if self.options.writer_process else InProcessWriter(self.accessor)
        self.flusher = Flusher(writer, self.buffer, self.known, self.options, self.stats)
        self._stat_interval = float(settings.get("CARBON_METRIC_INTERVAL", 60) or 0)
        self._closed = False
        log.msg(f"biggraphite_like: store {redact_url(self.options.store_url)}, flush every"
                f" {self.options.flush_interval}s or {self.options.flush_size} points")
        self._hook_into_reactor()

    # -- store connection, lazily after the fork ---------------------------------------------
    def accessor(self) -> Accessor:
        """The accessor, opened on first use in this process."""
        accessor = self._accessor
        if accessor is not None and self._pid == os.getpid():
            return accessor
        with self._accessor_lock:
            if self._accessor is None or self._pid != os.getpid():
                self._accessor = Accessor.from_url(self.options.store_url)
                self._pid = os.getpid()
            return self._accessor

    # -- carbon's writer thread ----------------------------------------------------------------
    def exists(self, metric: str) -> bool:
        return self.known.exists(metric)

    def exists_many(self, metrics: Sequence[str]) -> list[bool]:
        """exists() of each metric, the ones not in memory looked up in the store
        BG_LOOKUP_BATCH at a time (the batched writer loop asks about a whole take of
        carbon's cache at once, when the cache no longer holds the names to batch with)."""
        batch = self.options.lookup_batch
        unknown = [m for m in metrics if not self.known.in_memory(m)]
        for start in range(0, len(unknown), batch):
            self.known.lookup(unknown[start:start + batch])
        return [self.exists(metric) for metric in metrics]

    def create(self, metric: str, retentions: list, xfilesfactor: float | None,
               aggregation_method: str | None) -> None:
        """Remember the metadata; the metric is stored in the transaction of its first points."""
        self.known.set(metric, MetricMetadata.create(retentions, aggregation_method, xfilesfactor))

    def write(self, metric: str, datapoints) -> None:
        self.flusher.ensure_started()
        self.buffer.add(metric, datapoints)

    def write_many(self, metrics: Sequence[str], datapoints: Sequence[dict[float, float]]) -> None:
        """`write` for many metrics at once ({timestamp: value} each), from the batched
        writer loop (writer_loop.py)."""
        self.flusher.ensure_started()
        self.buffer.add_many(metrics, datapoints)

    def pass_ended(self) -> None:
        """carbon's writer emptied its cache (writer_loop.py): flush what it handed over now.
        carbon's writer sleeps a second before its next pass, so waiting BG_FLUSH_INTERVAL
        for more points would only delay these."""
        self.buffer.wake()

    def tag(self, *metrics: str) -> None:
        """carbon's tag queue (ENABLE_TAGS), in its tagger thread. A tagged series is indexed
        when the flusher creates its metric, in the same store transaction, so nothing
        depends on this queue (which drops names when full); here the store's index is
        updated directly (no HTTP round trip to graphite-web), refreshing each series'
        time of last write. Names graphite's tag rules refuse are counted and logged."""
        try:
            _, refused = self.accessor().tags.tag_valid(metrics)
        except BglError as exc:
            self.stats.increment("storeErrors")
            log.msg(f"biggraphite_like: could not tag {len(metrics)} series: {exc}")
            return
        self.stats.increment("taggedSeries", len(metrics) - len(refused))
        if refused:
            self.stats.increment("invalidTags", len(refused))
            for name, why in itertools.islice(refused.items(), 10):
                log.msg(f"biggraphite_like: tagged series {name!r} refused: {why}")

    def validateArchiveList(self, archiveList: list) -> None:
        try:
            Retention.parse(archiveList)
        except BglError as exc:
            raise ValueError(str(exc)) from exc

    # -- CarbonLink metadata (reactor thread: never blocks on the store) ----------------------
    def getMetadata(self, metric: str, key: str) -> Any:
        return carbonlink_metadata.metadata_value(self._metadata_in_memory(metric, key), key)

    def setMetadata(self, metric: str, key: str, value: Any) -> Any:
        """Change aggregationMethod or xFilesFactor; returns the old value (as whisper does)."""
        old, new = carbonlink_metadata.changed(self._metadata_in_memory(metric, key), key, value)
        new = self.known.set(metric, new)
        self.flusher.update_metadata(metric, new)
        return old

    def _metadata_in_memory(self, metric: str, key: str) -> MetricMetadata:
        carbonlink_metadata.check_key(key)
        metadata = self.known.get(metric)
        if metadata is None:
            from twisted.internet import reactor

            reactor.callInThread(self.known.lookup, [metric])  # carbon's bounded thread pool
            raise MetadataNotLoaded(
                f"metadata of {metric!r} is not in memory (unknown metric, or not written since"
                " carbon started): loading it from the store now, ask again")
        return metadata

    # -- shutdown and self-metrics --------------------------------------------------------------
    def _hook_into_reactor(self) -> None:
        from twisted.internet import reactor

        reactor.callWhenRunning(self._on_reactor_running)

    def _on_reactor_running(self) -> None:
        """Runs after carbon's services started (after the daemon fork)."""
        from twisted.internet import reactor
        from twisted.internet.task import LoopingCall

        # 'during shutdown' triggers run in order: this one comes after the reactor's thread
        # pool shutdown, which joins carbon's writer thread (it exits once reactor.running
        # is False), so nothing else writes while it drains.
        reactor.addSystemEventTrigger("during", "shutdown", self.shutdown)
        self.flusher.ensure_started()
        if self._stat_interval > 0:
            self._stat_task = LoopingCall(self._record_stats)
            self._stat_task.start(self._stat_interval, now=False)

    def _record_stats(self) -> None:
        """The counters since the last record, and the store's size when it is known."""
        gauges = {}
        if measurable(self.options.store_url):
            try:
                size = store_bytes(self.accessor().store)
            except (BglError, OSError) as exc:
                log.msg(f"biggraphite_like: could not read the store's size: {exc}")
                size = None
            if size is not None:
                gauges[STORE_BYTES] = size
        record_in_carbon(self.stats, gauges)

    def shutdown(self) -> None:
        """Write what carbon still caches, then every buffered point; close the store."""
        if self._closed:
            return
        log.msg("biggraphite_like: shutting down: writing carbon's cache and the buffer")
        self._drain_carbon_cache()
        if self._stat_interval > 0:
            self._record_stats()  # the last counts, written with the rest
            self._drain_carbon_cache()
        self.flusher.stop()
        self._closed = True
        totals = self.stats.totals()
        log.msg("biggraphite_like: stopped; totals since start: "
                + ", ".join(f"{k}={v}" for k, v in totals.items()))
        if self._accessor is not None:
            self._accessor.close()

    @staticmethod
    def _drain_carbon_cache() -> None:
        """carbon's writer loop exits when the reactor stops, leaving up to a second of points
        in its cache: write them now, with carbon's own logic (schemas, rate limits)."""
        try:
            from carbon import writer
            from carbon.cache import MetricCache
        except ImportError:  # pragma: no cover
            return
        cache = MetricCache()
        if cache:
            log.msg(f"biggraphite_like: writing {cache.size} points left in carbon's cache")
            writer.writeCachedDataPoints()

    def flush(self, timeout: float | None = None) -> bool:
        """Write everything buffered now and wait for it (tests and tools)."""
        return self.flusher.flush_now(timeout)

    def close(self) -> None:
        """Flush and stop (for use outside carbon's reactor)."""
        if not self._closed:
            self.flusher.stop()
            self._closed = True
            if self._accessor is not None:
                self._accessor.close()


class WhisperAndBigGraphiteLikeDatabase(BigGraphiteLikeDatabase):
    """Double writes during a migration: carbon's whisper files and the store, same points.

    A metric counts as existing only when both sides have it; `create` creates the missing
    side. A metric that already has a whisper file gets the file's retention, aggregation
    and xFilesFactor in the store (not today's storage rules), so both sides agree.
    """

    plugin_name = "whisper+biggraphite_like"
    write_many = None  # both sides are written metric by metric (`write`)

    def __init__(self, settings: Any):
        try:
            whisper_class = TimeSeriesDatabase.plugins["whisper"]
        except KeyError:
            raise SystemExit("DATABASE = whisper+biggraphite_like needs the whisper package") from None
        self.whisper = whisper_class(settings)
        super().__init__(settings)
        self.aggregationMethods = [m for m in self.whisper.aggregationMethods if m in self.aggregationMethods]

    def exists(self, metric: str) -> bool:
        return self.whisper.exists(metric) and super().exists(metric)

    def create(self, metric: str, retentions: list, xfilesfactor: float | None,
               aggregation_method: str | None) -> None:
        import whisper

        if self.whisper.exists(metric):
            info = whisper.info(self.whisper.getFilesystemPath(metric))
            retentions = [(a["secondsPerPoint"], a["points"]) for a in info["archives"]]
            xfilesfactor, aggregation_method = info["xFilesFactor"], info["aggregationMethod"]
        else:
            self.whisper.create(metric, retentions, xfilesfactor, aggregation_method)
        if not super().exists(metric):
            super().create(metric, retentions, xfilesfactor, aggregation_method)

    def write(self, metric: str, datapoints) -> None:
        datapoints = list(datapoints)
        super().write(metric, datapoints)  # buffered first: a whisper failure does not lose ours
        self.whisper.write(metric, datapoints)

    def setMetadata(self, metric: str, key: str, value: Any) -> Any:
        import whisper

        old = super().setMetadata(metric, key, value)
        path = self.whisper.getFilesystemPath(metric)
        if key == "aggregationMethod":
            whisper.setAggregationMethod(path, value)
        else:
            whisper.setXFilesFactor(path, float(value))
        return old

    def getFilesystemPath(self, metric: str) -> str:
        return self.whisper.getFilesystemPath(metric)

    def validateArchiveList(self, archiveList: list) -> None:
        self.whisper.validateArchiveList(archiveList)
        super().validateArchiveList(archiveList)
