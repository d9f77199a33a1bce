"""What a graphite-web worker keeps per name after finds: the glob cache holds at most
BG_FIND_CACHE_NAMES names, a find's leaves' metadata (json intervals, graphite's nodes)
is not kept in the accessor's metadata cache. Through graphite-web's real app and view."""
from __future__ import annotations

import json

import pytest

from tests.graphite_env import names_store, use_finders

NAMES = [f"big.h{h:03d}.m{m}" for h in range(200) for m in range(5)]  # 1,000 metrics
CACHED = {"BG_FIND_CACHE_TTL": 600, "BG_FIND_CACHE_CHECK_INTERVAL": 3600}


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    return names_store(tmp_path_factory.mktemp("find-memory"), NAMES)


def _find(params: dict):
    from django.contrib.auth.models import AnonymousUser
    from django.test import RequestFactory
    from graphite.metrics.views import find_view

    request = RequestFactory().get("/metrics/find", params)
    request.user = AnonymousUser()
    response = find_view(request)  # graphite's view; the shortcut is the middleware's (below)
    assert response.status_code == 200, response.content[:300]
    return json.loads(response.content)


def held(cache, pattern: str) -> bool:
    return ("nodes", pattern) in cache._entries


def test_the_glob_cache_holds_at_most_its_names():
    from graphite_plugin.glob_cache import GlobCache

    cache = GlobCache(600, max_names=10)
    for pattern, size in (("a", 4), ("b", 4), ("c", 3)):
        cache.get("nodes", pattern, lambda p, size=size: (tuple(f"{p}.{i}" for i in range(size)), ()))
    assert cache.names == 7 and not held(cache, "a"), "the least recently used went first"
    assert held(cache, "b") and held(cache, "c")
    cache.get("nodes", "big", lambda p: (tuple(map(str, range(11))), ()))
    assert not held(cache, "big") and cache.names == 7, "an answer past the bound is not kept"
    cache.get("nodes", "d", lambda p: (("d.0", "d.1"), ("d.x",)))  # both parts count
    assert cache.names == 10
    cache.clear()
    assert cache.names == 0


@pytest.mark.parametrize("form", ["json", "treejson", "completer", "pickle"])
def test_a_finds_leaves_are_not_kept_in_the_metadata_cache(store_url, form):
    """A find of 1,000 leaves, through the middleware's shortcut or graphite's own view
    (pickle): the accessor's metadata cache holds none of them afterwards, the glob cache
    holds the answer's names, and the answer is whole."""
    from django.test import Client

    import graphite_plugin.settings as plugin_settings
    from graphite_plugin.finder import shared_backend

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED,
                     MIDDLEWARE=plugin_settings.MIDDLEWARE, BG_SELF_METRICS_INTERVAL=0):
        backend = shared_backend()
        backend.accessor._cache.clear()
        backend.globs.clear()
        response = Client().get("/metrics/find", {"query": "big.*.*", "format": form})
        assert response.status_code == 200
        if form == "json":
            nodes = json.loads(response.content)
            assert len(nodes) == 1000 and all(len(node["intervals"]) == 1 for node in nodes)
        elif form == "pickle":
            import pickle

            assert len([node for node in pickle.loads(response.content) if node["intervals"]]) == 1000
        assert len(backend.accessor._cache) == 0, "no metadata kept per leaf of a find"
        assert backend.globs.names == 1000


def test_a_request_that_grew_the_worker_gives_back_its_threads_mapped_pages(tmp_path):
    """A find reads the file through the process's shared reader (one mapping, kept for
    the next find); after a request that grew the process by RELEASE_GROWTH, the
    post_request hook's FreedMemory makes this thread's own store connection (a render's
    points) map the file afresh: the pages it read through mmap leave the RSS (SQLite maps
    the file once per connection, so a worker's threads would each hold the pages they
    touched). Below it, nothing is done."""
    from django.test import Client

    import graphite_plugin.settings as plugin_settings
    from graphite_plugin.finder import shared_backend
    from graphite_plugin.gunicorn_worker import FreedMemory
    from tests.stores.sqlite.test_mapped_pages import mappings_kib

    store_url = names_store(tmp_path, NAMES)  # mapped by this test's connections alone
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, BG_FIND_CACHE_TTL=0,
                     MIDDLEWARE=plugin_settings.MIDDLEWARE, BG_SELF_METRICS_INTERVAL=0):
        store = shared_backend().accessor.store
        assert store.mmap_size, "graphite-web reads the SQLite store through mmap"
        response = Client().get("/metrics/find", {"query": "big.h00*.*", "format": "json"})  # 50 names
        assert response.status_code == 200 and len(json.loads(response.content)) == 50
        shared = [kib for kib in mappings_kib(store.path) if kib]
        assert len(shared) == 1, "the find's pages are mapped once, in the shared reader"
        assert store._conn.execute("SELECT count(*) FROM (SELECT * FROM metrics)").fetchone()[0] == len(NAMES)
        held = sorted(kib for kib in mappings_kib(store.path) if kib)
        assert len(held) == 2, "and this thread's own connection's read in its own mapping"
        freed = FreedMemory()
        freed.seen_at = rss = 1 << 30
        freed.give_back(rss + freed.RELEASE_GROWTH - 4096)
        assert freed.releases == 0 and sorted(kib for kib in mappings_kib(store.path) if kib) == held, \
            "a request that did not grow keeps them"
        freed.give_back(freed.seen_at + freed.RELEASE_GROWTH)
        assert freed.releases == 1 and [kib for kib in mappings_kib(store.path) if kib] == shared, \
            "this thread's pages given back, the shared reader's kept"
        response = Client().get("/metrics/find", {"query": "big.h00*.*", "format": "json"})
        assert response.status_code == 200 and len(json.loads(response.content)) == 50, "read again through mmap"
