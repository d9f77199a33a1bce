"""The plugin's self-metrics recorder (carbon_plugin/stats.py) against carbon's real
instrumentation and MetricCache: two records in one second (a late timer call right before
the next on-time one) must not put two points in that second, since the store keeps one
point a second and the later one (counts 0) would replace the counts; the held counts go
out with the next record."""
from __future__ import annotations

import time

import pytest

from carbon_plugin.stats import STAT_PREFIX, PluginStats, record_in_carbon


@pytest.fixture
def carbon_cache(monkeypatch):
    """carbon's global MetricCache, emptied before and after."""
    from carbon.cache import MetricCache
    from carbon.conf import settings

    monkeypatch.setitem(settings, "instance", "a")  # what carbon-cache's --instance sets
    cache = MetricCache()
    with cache.lock:
        cache.clear()
    yield cache
    with cache.lock:
        cache.clear()


def recorded(cache, name: str) -> list[tuple[float, float]]:
    """The datapoints carbon's cache holds for one of the plugin's counters, oldest first."""
    metric = next(m for m in list(cache) if m.endswith("." + STAT_PREFIX + name))
    return sorted(cache[metric].items())


def start_of_a_second() -> None:
    """Wait until at most 0.2 s of the current second has gone, so two calls fit in it."""
    while time.time() % 1 > 0.2:
        time.sleep(0.01)


def test_two_records_in_one_second_keep_the_counts_for_the_next(carbon_cache):
    stats = PluginStats()
    start_of_a_second()
    stats.increment("storedPoints", 8)
    record_in_carbon(stats, {"storeSizeBytes": 4096})
    stats.increment("storedPoints", 3)
    record_in_carbon(stats, {"storeSizeBytes": 8192})  # same second: nothing recorded, nothing taken
    first = recorded(carbon_cache, "storedPoints")
    assert [value for _, value in first] == [8]
    assert [value for _, value in recorded(carbon_cache, "storeSizeBytes")] == [4096]

    while int(time.time()) == int(first[0][0]):
        time.sleep(0.01)
    record_in_carbon(stats)
    points = recorded(carbon_cache, "storedPoints")
    assert [value for _, value in points] == [8, 3]  # the held counts, in the next second
    assert len({int(timestamp) for timestamp, _ in points}) == 2
    assert sum(value for _, value in points) == stats.totals()["storedPoints"]
