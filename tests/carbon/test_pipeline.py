"""The plugin's `write` processor (carbon_plugin/pipeline.py) against carbon's own: every
name lands in carbon's cache under the same name, plain names without the tag parse."""
from __future__ import annotations

import pytest

from carbon_plugin import pipeline

NAMES = [
    "a.b.c", "host01.cpu.user", "x", "a-b_c.d:e", "é.ü",  # plain: stored as given
    "a.b;z=1;y=2", "cpu;host=h1", "~weird.name", 'metric{tag="v"}',  # carbon parses (and reorders) these
    "a.b;bad", "~",  # carbon cannot parse these: logged and stored as given
]


@pytest.fixture
def processors():
    """carbon's CacheFeedingProcessor and ours, on carbon's real (singleton) MetricCache;
    carbon's registry is put back afterwards."""
    from carbon.cache import CacheFeedingProcessor, MetricCache
    from carbon.pipeline import Processor

    carbons = Processor.plugins["write"]
    pipeline.register()
    ours = Processor.plugins["write"]
    Processor.plugins["write"] = carbons
    cache = MetricCache()
    cache.clear()
    cache.size = 0
    yield CacheFeedingProcessor(), ours(), cache
    cache.clear()
    cache.size = 0


def test_every_name_is_cached_as_carbon_would_cache_it(processors):
    carbons, ours, cache = processors
    for name in NAMES:
        assert list(carbons.process(name, (100.0, 1.0))) == []
        expected = set(cache)
        cache.clear()
        assert list(ours.process(name, (100.0, 1.0))) == []
        assert set(cache) == expected, name
        assert cache[next(iter(expected))] == {100.0: 1.0}
        cache.clear()
    assert [pipeline.is_plain(n) for n in NAMES] == [True] * 5 + [False] * 6
