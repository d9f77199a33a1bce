"""`/metrics/find` (treejson, json, completer) through graphite_plugin.find_view: a
pattern's answer, cached or not, has the same bytes and headers as graphite-web's own
find_view (one of its answers where it shuffles); anything else is left to graphite's
view. Both run on the same store through graphite-web's real app."""
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

    from graphite_plugin.find_view import find_answer

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        for extra in ({}, {"HTTP_ACCEPT": "*/*"}):  # graphite escapes non-ASCII only for application/json
            # graphite shuffles the nodes: for a name both leaf and branch (srv.*.cpu), either entry
            theirs = {_answer(find_view(_get({"query": pattern}, **extra))) for _ in range(60)}  # cached: 1st
            ours = find_answer(_get({"query": pattern}, **extra))
            assert ours is not None, "a cached pattern is answered"
            assert _answer(ours) in theirs
            assert _answer(find_answer(_get({"query": pattern, "format": "treejson"}, **extra))) == _answer(ours)
    assert json.loads(ours.content), "every pattern matches something"


def _answer(response) -> tuple:
    return response.status_code, tuple(response.items()), response.content


def test_a_name_both_metric_and_directory_gives_one_of_graphites_answers(store_url):
    """srv.db.cpu.user makes srv.db.cpu a directory; with srv.db.cpu a metric too, graphite
    answers either entry for `cpu` (its nodes are shuffled); the shortcut gives the directory."""
    from graphite.metrics.views import find_view

    from graphite_plugin.find_view import find_answer
    from graphite_plugin.finder import shared_backend

    accessor = Accessor.from_url(store_url)
    accessor.create_metrics([("srv.db.cpu", MetricMetadata.create("60s:1d", "average", 0.5))])
    accessor.close()
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        shared_backend().globs.clear()
        answers = {find_view(_get({"query": "srv.db.*"})).content for _ in range(20)}
        ours = find_answer(_get({"query": "srv.db.*"})).content
    assert ours in answers
    assert json.loads(ours) == [{"text": "cpu", "id": "srv.db.cpu", "allowChildren": 1, "expandable": 1, "leaf": 0}]


@pytest.fixture
def frozen_clock(monkeypatch):
    """time.time() fixed: the json format's intervals are computed from it, by both views."""
    import time

    monkeypatch.setattr(time, "time", lambda: 1_800_000_000.25)


def _in_graphite_order(body: bytes, form: str, ensure_ascii: bool) -> bytes:
    """graphite's answer with the entries its shuffle leaves in any order put in the
    shortcut's: json by path (a directory first), completer by last component then path."""
    content = json.loads(body)
    if form == "json":
        content.sort(key=lambda node: (node["path"], node["is_leaf"]))
    else:
        content["metrics"].sort(key=lambda node: (node["name"], node["path"].rstrip("."), node["is_leaf"]))
    return json.dumps(content, ensure_ascii=ensure_ascii).encode()


@pytest.mark.parametrize("form", ["json", "completer"])
@pytest.mark.parametrize("pattern", PATTERNS + ["srv.web1.", "srv..cpu", "nothing.*"])
def test_uncached_json_and_completer_finds_answer_as_find_view(store_url, frozen_clock, pattern, form):
    from graphite.metrics.views import find_view

    from graphite_plugin.find_view import find_answer
    from graphite_plugin.finder import shared_backend

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        for extra in ({}, {"HTTP_ACCEPT": "*/*"}):
            request = {"query": pattern, "format": form}
            shared_backend().globs.clear()
            ours = find_answer(_get(request, **extra))
            assert ours is not None, "answered without the glob cache"
            theirs = find_view(_get(request, **extra))
            assert (ours.status_code, _headers(ours)) == (theirs.status_code, _headers(theirs))
            assert ours.content == _in_graphite_order(theirs.content, form, not extra)
            assert _answer(find_answer(_get(request, **extra))) == _answer(ours)  # cached now
    if pattern != "nothing.*" and (form == "completer" or pattern not in ("srv.web1.", "srv..cpu")):
        assert json.loads(ours.content), "the pattern matches something"


def test_json_intervals_are_the_readers(store_url, frozen_clock):
    """A leaf's intervals in the json format: its retention up to its last write, as
    graphite's nodes give them (graphite_plugin.reader.Reader.get_intervals)."""
    from graphite.metrics.views import find_view

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        nodes = json.loads(find_view(_get({"query": "srv.web1.cpu", "format": "json"})).content)
    [node] = nodes
    assert node["intervals"] == [{"start": 1_800_000_000.25 - 86400, "end": 1_800_000_000.25 - 86400}], \
        "created long ago, never written: an empty interval at the retention's start"


@pytest.mark.parametrize("params", [
    {"query": "srv.*", "jsonp": "f"}, {"query": "srv.*", "format": "pickle"},
    {"query": "srv.*", "from": "-1h"}, {"query": "srv.*", "leavesOnly": "1"}, {"query": "srv.*", "wildcards": "1"},
    {"query": ""}, {}, {"query": "seriesByTag('name=top')"},
], ids=str)
def test_other_finds_are_left_to_graphite(store_url, params):
    from graphite.metrics.views import find_view

    from graphite_plugin.find_view import find_answer

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        find_view(_get({"query": "srv.*"}))
        assert find_answer(_get({"query": "srv.*"})) is not None  # cached
        assert find_answer(_get(params)) is None


def test_uncached_refused_and_shared_finds(store_url, tmp_path):
    """Not cached: answered from the store's glob (then cached); a POST, other finders: graphite's
    view; a pattern over a glob limit: graphite's 400 with the same text."""
    from django.test import RequestFactory
    from graphite.metrics.views import find_view

    from graphite_plugin.find_view import find_answer
    from graphite_plugin.finder import shared_backend

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        globs = shared_backend().globs
        misses = globs.misses
        assert _answer(find_answer(_get({"query": "srv.web3.*"}))) == _answer(find_view(_get({"query": "srv.web3.*"})))
        assert globs.misses == misses + 1, "graphite's view answered from what the shortcut cached"
        assert find_answer(RequestFactory().post("/metrics/find", {"query": "srv.web3.*"})) is None
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, BG_FIND_CACHE_TTL=0):
        assert _answer(find_answer(_get({"query": "srv.*"}))) == _answer(find_view(_get({"query": "srv.*"})))
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED, BG_MAX_GLOB_RESULTS=2):
        for form in ("treejson", "json", "completer"):
            request = {"query": "srv.*.*", "format": form}
            refused, ours = find_view(_get(request)), find_answer(_get(request))
            assert refused.status_code == 400 and b"BG_MAX_GLOB_RESULTS" in refused.content
            assert _answer(ours) == _answer(refused)
    with use_finders(["graphite_plugin.Finder", "graphite.finders.standard.StandardFinder"], BG_STORE=store_url,
                     **CACHED, STANDARD_DIRS=[str(tmp_path)]):
        find_view(_get({"query": "srv.*"}))
        assert find_answer(_get({"query": "srv.*"})) is None  # whisper files may add nodes


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


@pytest.mark.parametrize("pattern", ["srv.*", "srv.*.cpu", "srv.**", "srv.web?.*"])
def test_json_finds_written_a_few_leaves_at_a_time_answer_as_find_view(store_url, frozen_clock, monkeypatch, pattern):
    """The json answer read and written JSON_CHUNK leaves at a time (here 2: chunks that
    split a directory from a metric of its name) is graphite's, byte for byte."""
    from graphite.metrics.views import find_view

    from graphite_plugin import find_view as shortcut
    from graphite_plugin.finder import shared_backend

    monkeypatch.setattr(shortcut, "JSON_CHUNK", 2)
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        for extra in ({}, {"HTTP_ACCEPT": "*/*"}):
            request = {"query": pattern, "format": "json"}
            shared_backend().globs.clear()
            ours = shortcut.find_answer(_get(request, **extra))
            theirs = find_view(_get(request, **extra))
            assert (ours.status_code, _headers(ours)) == (theirs.status_code, _headers(theirs))
            assert ours.content == _in_graphite_order(theirs.content, "json", not extra)
            assert len(json.loads(ours.content)) > 2


@pytest.mark.parametrize("pattern", ["srv.*.cpu", "srv.web?.cpu", "srv.*", "srv.**", "top", "srv.db.cpu.*"])
def test_treejson_with_the_wildcard_entry_answers_as_find_view(store_url, pattern):
    """With the profile's advancedUI, graphite's tree_json adds a `*` entry when it has more
    than one node, a directory when any is one: counted on every match, while the shortcut
    builds one entry per last component (srv.*.cpu: three metrics and a directory, one `cpu`)."""
    from graphite.metrics.views import find_view
    from graphite.user_util import default_profile

    from graphite_plugin import profiles
    from graphite_plugin.find_view import find_answer

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        profile = default_profile()
        profile.advancedUI = True
        profile.save()
        profiles.forget()
        try:
            theirs = {_answer(find_view(_get({"query": pattern}))) for _ in range(30)}
            ours = find_answer(_get({"query": pattern}))
        finally:
            profile.advancedUI = False
            profile.save()
            profiles.forget()
    assert _answer(ours) in theirs
    texts = [entry["text"] for entry in json.loads(ours.content)]
    assert texts[0] == "*" if pattern != "top" else texts == ["top"]
    if pattern == "srv.*.cpu":
        assert texts == ["*", "cpu"]


def test_the_shared_backend_follows_the_settings(store_url, tmp_path):
    """shared_backend keeps its last answer while no setting changes, and reads the store
    URL and options again when one does (override_settings, graphite-web's own settings)."""
    from django.test import override_settings

    from graphite_plugin.finder import shared_backend

    other = names_store(tmp_path, ["other.metric"])
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, BG_MAX_GLOB_RESULTS=7):
        first = shared_backend()
        assert shared_backend() is first and first.accessor.max_glob_results == 7
        with override_settings(BG_MAX_GLOB_RESULTS=9):
            assert shared_backend().accessor.max_glob_results == 9
        assert shared_backend() is first
        with override_settings(BG_STORE=other):
            assert shared_backend().accessor.glob_metrics("other.*") == ["other.metric"]
        assert shared_backend() is first and first.accessor.glob_metrics("other.*") == []
