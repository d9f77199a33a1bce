"""From a received point to carbon's cache: carbon-cache's `write` pipeline processor, and
the same for many points at once.

carbon 1.1.10's CacheFeedingProcessor parses every received name as a tagged series
(`TaggedSeries.parse(metric).path`, to put tags in order) before storing the point in its
cache: an object, a dict and a sorted join per point, about a fifth of carbon's receiving
thread for plain names (py-spy, issue 21). For a name without `;`, not in OpenMetrics
form (ending in `"}`) and not starting with `~`, that parse gives the name back unchanged,
so the point is stored directly; every other name goes through carbon's parse.

`register()` defines the subclass with carbon's plugin name (`write`), which carbon's
PluginRegistrar puts in place of carbon's class (as receivers.py does for the receivers);
it must run before carbon builds its pipeline (the launcher calls it from carbon's service
maker).

`cache_many` is what carbon's `metricReceived` event does with each point of a read
(count it in `metricsReceived`, run the pipeline, store it in the cache) when the pipeline
is just that processor (carbon-cache's default `PIPELINE = write`) and nothing else
listens to the event (`bulk_feeder()` says so): the points are stored in order under one
hold of the cache's lock, with carbon's cache rules (a timestamp already cached is
replaced, a new one is refused while the cache is full: logged, `cacheFull` fired, as
MetricCache.store does). With any other pipeline the receivers deliver point by point.
"""
from __future__ import annotations

from typing import Sequence

_plain_feeder_class = None  # the registered processor class
_default_handlers: tuple = ()  # carbon's own metricReceived handlers (the metricsReceived count)


def is_plain(metric: str) -> bool:
    """Whether carbon's TaggedSeries.parse(metric).path is metric itself, without parsing."""
    return bool(metric) and ";" not in metric and metric[0] != "~" and metric[-2:] != '"}'


def cached_name(metric: str) -> str:
    """The name carbon's write processor caches a point under (tags put in order)."""
    if is_plain(metric):
        return metric
    from carbon import log
    from carbon.util import TaggedSeries

    try:
        return TaggedSeries.parse(metric).path
    except Exception as err:  # carbon logs it and caches the name as given
        log.msg("Error parsing metric %s: %s" % (metric, err))
        return metric


def register() -> None:
    """Put the fast `write` processor in place of carbon's (before carbon sets up its pipeline)."""
    global _plain_feeder_class, _default_handlers
    from carbon import events
    from carbon.cache import CacheFeedingProcessor
    from carbon.pipeline import Processor

    class PlainNameCacheFeeder(CacheFeedingProcessor):
        plugin_name = "write"  # replaces carbon's CacheFeedingProcessor

        def process(self, metric, datapoint):
            self.cache.store(cached_name(metric), datapoint)
            return Processor.NO_OUTPUT

    _plain_feeder_class = PlainNameCacheFeeder
    _default_handlers = tuple(events.metricReceived.handlers)


def bulk_feeder():
    """The write processor `cache_many` may feed, when carbon's metricReceived event does
    nothing but count the point and run a pipeline of that processor alone; else None."""
    from carbon import events, state
    from carbon.pipeline import run_pipeline

    processors = state.pipeline_processors
    if len(processors) != 1 or _plain_feeder_class is None or type(processors[0]) is not _plain_feeder_class:
        return None
    if tuple(events.metricReceived.handlers) != (*_default_handlers, run_pipeline):
        return None
    return processors[0]


def cache_many(feeder, points: Sequence[tuple[str, tuple[float, float]]]) -> None:
    """Count and cache points (already through carbon's receiver checks) as carbon's
    metricReceived event would, one point after the other, under one hold of the lock."""
    from carbon import events, log, state
    from carbon.conf import settings

    state.instrumentation.increment("metricsReceived", len(points))
    cache = feeder.cache
    limit = settings.MAX_CACHE_SIZE
    with cache.lock:
        size = cache.size
        try:
            for metric, (timestamp, value) in points:
                series = cache[cached_name(metric)]
                if timestamp in series:
                    series[timestamp] = value  # a duplicate does not grow the cache
                elif size >= limit:
                    cache.size = size
                    log.msg("MetricCache is full: self.size=%d" % size)
                    events.cacheFull()
                else:
                    size += 1
                    series[timestamp] = value
        finally:
            cache.size = size
