"""Counters of the plugin, published among carbon's own self-metrics.

Carbon's instrumentation records a fixed list of stats for carbon-cache, so the plugin keeps
its own counters and records them itself every CARBON_METRIC_INTERVAL, next to carbon's, as
`<CARBON_METRIC_PREFIX>.agents.<host>-<instance>.biggraphite_like.<name>` (the count since
the previous record), and its gauges (a value at the time of the record, e.g. the store's
size: store_size.py). Store failures also increment carbon's own `errors` stat.
"""
from __future__ import annotations

import time

from biggraphite_like.counters import Counters

STAT_PREFIX = "biggraphite_like."

# Every counter the plugin keeps (recorded even when zero, so graphs have no holes).
COUNTERS = (
    "storedPoints",  # points the store accepted
    "tooOldPoints",  # points older than their metric's whole retention (whisper drops them too)
    "rejectedPoints",  # points the accessor refused: NaN/inf value, bad timestamp, invalid name
    "droppedPoints",  # points given up after the store failed every retry
    "storeErrors",  # failed store operations (each retry counts)
    "flushes",  # store batches written
    "flushMilliseconds",  # time spent in those writes
    "lookups",  # store lookups made because exists() missed memory
    "metadataUpdates",  # setMetadata calls persisted
    "taggedSeries",  # series carbon's tag queue passed to tag() (indexed at creation anyway)
    "invalidTags",  # names tag() refused by graphite's tag rules (logged with the reason)
)


class PluginStats(Counters):
    """Thread-safe counters, taken (and reset) when recorded."""

    def __init__(self, names: tuple[str, ...] = COUNTERS) -> None:
        super().__init__(names)
        self.recorded_second: int | None = None  # the second of the last record (record_in_carbon)


def count_carbon_error(count: int = 1) -> None:
    """Add to carbon's own `errors` self-metric (what carbon counts for a failed whisper write)."""
    from carbon import instrumentation

    instrumentation.increment("errors", count)


def record_in_carbon(stats: PluginStats, gauges: dict[str, int] | None = None) -> None:
    """Store the counters (and gauges) as carbon self-metrics (reactor thread, like carbon's
    own recorder), at most once a second: the store keeps one point a second per metric, so a
    second record in the same second (a late timer call right before the next one, on a
    loaded machine) would replace the first's counts with its own; those counts wait for
    the next record instead."""
    from carbon import instrumentation

    second = int(time.time())
    if stats.recorded_second == second:
        return
    stats.recorded_second = second
    for name, value in {**stats.take(), **(gauges or {})}.items():
        instrumentation.cache_record(STAT_PREFIX + name, value)
