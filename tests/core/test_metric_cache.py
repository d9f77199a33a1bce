"""The accessor's metric cache (biggraphite_like/metric_cache.py): an entry is trusted for
at most its ttl, and at least half of it."""
from __future__ import annotations

from biggraphite_like.metric import MetricMetadata, make_metric
from biggraphite_like.metric_cache import MetricCache


def _metric(name: str):
    return make_metric(name, MetricMetadata.create("60s:1d"), 1_700_000_000)


def test_entries_are_trusted_between_half_the_ttl_and_the_ttl():
    cache = MetricCache(ttl=100)
    cache.put([_metric("a.b")], now=1000.0)
    for now, expected in ((1049.0, True), (1090.0, True), (1099.9, True), (1100.0, False)):
        cache.rotate(now)
        assert (cache.get("a.b") is not None) == expected, now
    cache.put([_metric("c.d")], now=1200.0)
    cache.put([_metric("e.f")], now=1260.0)  # a new generation: c.d is in the old one
    cache.rotate(1299.0)
    assert cache.get("c.d") is not None and cache.get("e.f") is not None
    cache.rotate(1300.0)  # c.d was loaded 100 s ago: dropped even without a rotation due
    assert cache.get("c.d") is None and cache.get("e.f") is not None
    cache.rotate(10_000.0)  # a long silence: everything goes
    assert len(cache) == 0


def test_a_reload_replaces_the_old_generation_s_entry():
    cache = MetricCache(ttl=100)
    first = _metric("a.b")
    cache.put([first], now=0.0)
    second = _metric("a.b")
    cache.put([second], now=60.0)  # rotated: first sits in the old generation
    assert cache.get("a.b") is second and len(cache) == 1
    cache.pop("a.b")
    assert "a.b" not in cache and cache.get("a.b") is None
