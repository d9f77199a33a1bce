"""carbon's writer loop, draining its cache many metrics per lock instead of one.

carbon 1.1.10's writer thread (`carbon.writer.writeCachedDataPoints`) takes one metric at
a time from its cache: the cache lock, the write strategy's choice (`sorted` sorts every
metric's count under that lock once per pass), a sort of the metric's points, then
`exists`, `write`, two clock reads and the counters, per metric. With 100,000 metrics
and 1-2 points each per pass, that and the receiving thread waiting for the same lock
were about half of carbon-cache's GIL time (py-spy, issue 21).

`write_cached_datapoints` does what carbon's function does, in batches: it takes up to
BATCH_POINTS points' metrics from the cache under one lock (everything, usually), creates
the unknown metrics with carbon's storage and aggregation rules exactly as carbon does
(same logs, `creates`, `errors`, tag queue), and hands the rest to the database in one
`write_many(metrics, datapoints)` call when it has one (our plugin), else one `write` a
metric. The counters keep their meaning: `committedPoints` points handed over,
`updateOperations` (the length of `updateTimes`) metrics written, `avgUpdateTime` the
batch's time shared among its metrics. Flow control is carbon's: after each take the cache
checks its low watermark and resumes the receivers.

The order metrics are written in is the cache's (every metric of a take is written in the
same pass, so no strategy's order matters). carbon's own function is kept where batching
would change what carbon does: rate limits on creates or updates (`MAX_CREATES_PER_MINUTE`,
`MAX_UPDATES_PER_SECOND` below infinity) and `timesorted` with `MIN_TIMESTAMP_LAG`, which
leaves recent metrics in the cache on purpose.

When the cache is empty the database is told (`pass_ended`: our plugin flushes what it
was handed at once; carbon's writer sleeps a second before its next pass, so nothing more
would come to batch with).

`install()` puts it in place of carbon's function in `carbon.writer`, where carbon's writer
thread and the plugin's shutdown drain look it up.
"""
from __future__ import annotations

import itertools
import time

from carbon_plugin.stats import count_carbon_error

BATCH_POINTS = 500_000  # points taken from carbon's cache under one lock, at most about
_KEYS_AT_ONCE = 1_000  # names read from the cache between pops when taking part of it

_carbons_function = None  # carbon.writer.writeCachedDataPoints, once installed


def install() -> None:
    """Put the batched writer loop in place of carbon's (after carbon read its settings)."""
    global _carbons_function
    from carbon import writer

    if _carbons_function is None:
        _carbons_function = writer.writeCachedDataPoints
    writer.writeCachedDataPoints = write_cached_datapoints


def batched(settings, writer) -> bool:
    """Whether batching keeps carbon's behaviour under these settings (see the module doc)."""
    if writer.CREATE_BUCKET is not None or writer.UPDATE_BUCKET is not None:
        return False
    return not (settings.CACHE_WRITE_STRATEGY == "timesorted" and settings.MIN_TIMESTAMP_LAG)


def write_cached_datapoints() -> None:
    """Write datapoints until carbon's MetricCache is empty (carbon's writeCachedDataPoints)."""
    from carbon import state, writer
    from carbon.cache import MetricCache
    from carbon.conf import settings

    if not batched(settings, writer):
        return _carbons_function()
    cache = MetricCache()
    taken = False
    while cache:
        metrics = take(cache, BATCH_POINTS)
        if not metrics:
            break
        taken = True
        _write_batch(metrics, settings, writer)
    pass_ended = getattr(state.database, "pass_ended", None)
    if taken and pass_ended is not None:
        pass_ended()


def take(cache, max_points: int) -> list[tuple[str, dict]]:
    """Metrics and their {timestamp: value} taken out of carbon's cache, about `max_points`
    points' worth at most (at least one metric), under one hold of its lock."""
    with cache.lock:
        if cache.size <= max_points:
            metrics = list(dict.items(cache))
            dict.clear(cache)
            cache.size = 0
        else:
            metrics, taken = [], 0
            pop = dict.pop
            while taken < max_points and len(cache):
                for metric in list(itertools.islice(dict.keys(cache), _KEYS_AT_ONCE)):
                    points = pop(cache, metric)
                    metrics.append((metric, points))
                    taken += len(points)
                    if taken >= max_points:
                        break
            cache.size -= taken
    cache._check_available_space()  # carbon's flow control: resume the receivers below the watermark
    return metrics


def _write_batch(metrics: list[tuple[str, dict]], settings, writer) -> None:
    from carbon import instrumentation, log, state

    database = state.database
    metrics = [(metric, points) for metric, points in metrics if points]
    names, datapoints = [], []
    for (metric, points), present in zip(metrics, _exist(database, [metric for metric, _ in metrics])):
        if not present and not _create(metric, settings, writer):
            continue
        names.append(metric)
        datapoints.append(points)
    if not names:
        return
    started = time.time()
    written = _write(database, names, datapoints)
    elapsed = time.time() - started
    if not written:
        return
    share = elapsed / len(written)
    if settings.ENABLE_TAGS:
        skip_plain = settings.SKIP_TAGS_FOR_NONTAGGED
        for metric, _ in written:
            if not skip_plain or ";" in metric:
                writer.tagQueue.update(metric)
    if settings.LOG_UPDATES:
        for metric, points in written:
            log.updates("wrote %d datapoints for %s in %.5f seconds" % (len(points), metric, share))
    instrumentation.increment("committedPoints", sum(len(points) for _, points in written))
    instrumentation.stats.setdefault("updateTimes", []).extend([share] * len(written))


def _exist(database, names: list[str]):
    """database.exists of each name, in order: from one `exists_many` call when the
    database has it (our plugin looks the unknown names up in the store in batches; one
    at a time, a take that emptied carbon's cache of 100,000 new names cost 100,000 store
    lookups), else lazily, one `exists` a metric, as carbon's loop asks."""
    exists_many = getattr(database, "exists_many", None)
    return exists_many(names) if exists_many is not None else map(database.exists, names)


def _failed(message: str, count: int = 1) -> None:
    """carbon's report of a failed database call, from its `except`: the traceback, a line,
    and `count` in carbon's `errors` self-metric."""
    from carbon import log

    log.err()
    log.msg(message)
    count_carbon_error(count)


def _write(database, names: list[str], datapoints: list[dict]) -> list[tuple[str, dict]]:
    """Hand the points to the database; the (metric, points) it took (carbon logs and counts
    a failed write as an error and goes on with the next metric)."""
    write_many = getattr(database, "write_many", None)
    if write_many is not None:
        try:
            write_many(names, datapoints)
        except Exception as exc:  # carbon's loop survives any database error
            _failed("Error writing to %d metrics (%s...): %s" % (len(names), ", ".join(names[:3]), exc), len(names))
            return []
        return list(zip(names, datapoints))
    written = []
    for metric, points in zip(names, datapoints):
        try:
            database.write(metric, sorted(points.items()))  # as carbon's pop gives them
        except Exception as exc:
            _failed("Error writing to %s: %s" % (metric, exc))
        else:
            written.append((metric, points))
    return written


def _create(metric: str, settings, writer) -> bool:
    """Create a metric as carbon's writer does: first matching storage and aggregation rules."""
    from carbon import instrumentation, log, state

    archive_config = None
    xfilesfactor, aggregation_method = None, None
    for schema in writer.SCHEMAS:
        if schema.matches(metric):
            if settings.LOG_CREATES:
                log.creates("new metric %s matched schema %s" % (metric, schema.name))
            archive_config = [archive.getTuple() for archive in schema.archives]
            break
    for schema in writer.AGGREGATION_SCHEMAS:
        if schema.matches(metric):
            if settings.LOG_CREATES:
                log.creates("new metric %s matched aggregation schema %s" % (metric, schema.name))
            xfilesfactor, aggregation_method = schema.archives
            break
    if not archive_config:
        # carbon raises here, which ends its pass and loses this metric's points; the
        # other metrics of the batch are written
        log.msg("No storage schema matched the metric '%s', check your storage-schemas.conf file." % metric)
        return False
    if settings.LOG_CREATES:
        log.creates("creating database metric %s (archive=%s xff=%s agg=%s)"
                    % (metric, archive_config, xfilesfactor, aggregation_method))
    try:
        state.database.create(metric, archive_config, xfilesfactor, aggregation_method)
        if settings.ENABLE_TAGS and (not settings.SKIP_TAGS_FOR_NONTAGGED or ";" in metric):
            writer.tagQueue.add(metric)
        instrumentation.increment("creates")
    except Exception as exc:
        _failed("Error creating %s: %s" % (metric, exc))
        return False
    return True
