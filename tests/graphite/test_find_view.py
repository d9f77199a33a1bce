"""`/metrics/find` (treejson) through graphite_plugin.find_view: a cached pattern's answer
has the same bytes and headers as graphite-web's own find_view; anything else is left to
graphite's view. Both run on the same store through graphite-web's real app."""
from __future__ import annotations

import json

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.graphite_env import names_store, use_finders

NAMES = [f"srv.web{h}.{m}" for h in (1, 2, 3) for m in ("cpu", "mem", "disk:sda")] + \
        ["srv.db.cpu.user", "srv.db.cpu.sys", "srv.é+x.cpu", "top"]
# the names token is read once per backend (its first lookup), so that whether an answer is
# cached never depends on timing; a test that creates a name empties the cache itself
CACHED = {"BG_FIND_CACHE_TTL": 600, "BG_FIND_CACHE_CHECK_INTERVAL": 3600}
PATTERNS = ["*", "srv.*", "srv.web1.*", "srv.*.cpu", "srv.{web1,db}.*", "srv.web?.mem", "srv.db.cpu.*", "srv.**",
            "**.cpu", "srv.[a-w]*.*", "srv.é+x.*", "top"]


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    return names_store(tmp_path_factory.mktemp("find-fast"), NAMES)


def _get(params: dict, **extra):
    from django.contrib.auth.models import AnonymousUser
    from django.test import RequestFactory

    request = RequestFactory().get("/metrics/find", params, **extra)
    request.user = AnonymousUser()  # what AuthenticationMiddleware gives a request without a session
    return request


def _headers(response) -> dict:
    return dict(response.items())


@pytest.mark.parametrize("pattern", PATTERNS)
def test_cached_finds_answer_as_find_view(store_url, pattern):
    from graphite.metrics.views import find_view

    from graphite_plugin.find_view import find_tree

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        for extra in ({}, {"HTTP_ACCEPT": "*/*"}):  # graphite escapes non-ASCII only for application/json
            # graphite shuffles the nodes: for a name both leaf and branch (srv.*.cpu), either entry
            theirs = {_answer(find_view(_get({"query": pattern}, **extra))) for _ in range(60)}  # cached: 1st
            ours = find_tree(_get({"query": pattern}, **extra))
            assert ours is not None, "a cached pattern is answered"
            assert _answer(ours) in theirs
            assert _answer(find_tree(_get({"query": pattern, "format": "treejson"}, **extra))) == _answer(ours)
    assert json.loads(ours.content), "every pattern matches something"


def _answer(response) -> tuple:
    return response.status_code, tuple(response.items()), response.content


def test_a_name_both_metric_and_directory_gives_one_of_graphites_answers(store_url):
    """srv.db.cpu.user makes srv.db.cpu a directory; with srv.db.cpu a metric too, graphite
    answers either entry for `cpu` (its nodes are shuffled); the shortcut gives the directory."""
    from graphite.metrics.views import find_view

    from graphite_plugin.find_view import find_tree
    from graphite_plugin.finder import shared_backend

    accessor = Accessor.from_url(store_url)
    accessor.create_metrics([("srv.db.cpu", MetricMetadata.create("60s:1d", "average", 0.5))])
    accessor.close()
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        shared_backend().globs.clear()
        answers = {find_view(_get({"query": "srv.db.*"})).content for _ in range(20)}
        ours = find_tree(_get({"query": "srv.db.*"})).content
    assert ours in answers
    assert json.loads(ours) == [{"text": "cpu", "id": "srv.db.cpu", "allowChildren": 1, "expandable": 1, "leaf": 0}]


@pytest.mark.parametrize("params", [
    {"query": "srv.*", "format": "completer"}, {"query": "srv.*", "format": "json"}, {"query": "srv.*", "jsonp": "f"},
    {"query": "srv.*", "from": "-1h"}, {"query": "srv.*", "leavesOnly": "1"}, {"query": "srv.*", "wildcards": "1"},
    {"query": ""}, {}, {"query": "seriesByTag('name=top')"},
], ids=str)
def test_other_finds_are_left_to_graphite(store_url, params):
    from graphite.metrics.views import find_view

    from graphite_plugin.find_view import find_tree

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        find_view(_get({"query": "srv.*"}))
        assert find_tree(_get({"query": "srv.*"})) is not None  # cached
        assert find_tree(_get(params)) is None


def test_uncached_refused_and_shared_finds_are_left_to_graphite(store_url, tmp_path):
    from django.test import RequestFactory
    from graphite.metrics.views import find_view

    from graphite_plugin.find_view import find_tree

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        assert find_tree(_get({"query": "srv.web3.*"})) is None  # not asked before: graphite's pool and timeout
        find_view(_get({"query": "srv.web3.*"}))
        assert find_tree(_get({"query": "srv.web3.*"})) is not None
        assert find_tree(RequestFactory().post("/metrics/find", {"query": "srv.web3.*"})) is None
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, BG_FIND_CACHE_TTL=0):
        find_view(_get({"query": "srv.*"}))
        assert find_tree(_get({"query": "srv.*"})) is None  # cache off
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED, BG_MAX_GLOB_RESULTS=2):
        refused = find_view(_get({"query": "srv.*.*"}))
        assert refused.status_code == 400 and find_tree(_get({"query": "srv.*.*"})) is None
    with use_finders(["graphite_plugin.Finder", "graphite.finders.standard.StandardFinder"], BG_STORE=store_url,
                     **CACHED, STANDARD_DIRS=[str(tmp_path)]):
        find_view(_get({"query": "srv.*"}))
        assert find_tree(_get({"query": "srv.*"})) is None  # whisper files may add nodes


def test_the_middleware_answers_cached_finds(store_url):
    """Through Django's whole stack with graphite_plugin.settings' MIDDLEWARE: the same
    answer as without the shortcut, and the shortcut is what answered the second time."""
    from django.test import Client
    from graphite.metrics.views import find_view

    import graphite_plugin.settings as plugin_settings
    from graphite_plugin.finder import shared_backend
    from graphite_plugin.middleware import ViewShortcutMiddleware

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        plain = Client().get("/metrics/find", {"query": "srv.web2.*"})
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED,
                     MIDDLEWARE=plugin_settings.MIDDLEWARE, BG_SELF_METRICS_INTERVAL=0):
        client = Client()
        first = client.get("/metrics/find", {"query": "srv.web2.*"})
        globs = shared_backend().globs
        hits = globs.hits
        second = client.get("/metrics/find", {"query": "srv.web2.*"})
        assert globs.hits == hits + 1
        assert ViewShortcutMiddleware(lambda r: None).process_view(_get({"query": "srv.web2.*"}), find_view, (), {})
    for response in (first, second):
        assert (response.status_code, _headers(response), response.content) == \
               (plain.status_code, _headers(plain), plain.content)


def test_glob_cache_peek_answers_only_what_is_cached():
    from graphite_plugin.glob_cache import GlobCache

    tokens = iter(range(100))
    cache = GlobCache(600, token=lambda: next(tokens), check_interval=0)
    assert cache.peek("nodes", "a.*") is None and cache.misses == 0
    answer = cache.get("nodes", "a.*", lambda p: (("a.b",), ()))
    assert cache.misses == 1
    cache.check_interval = 3600
    cache._next_check = 0  # read the token once more (it changes: the cache empties), then not for an hour
    assert cache.peek("nodes", "a.*") is None
    cache.get("nodes", "a.*", lambda p: answer)
    assert cache.peek("nodes", "a.*") == answer and cache.hits == 1 and cache.misses == 2
    assert GlobCache(0).peek("nodes", "a.*") is None
