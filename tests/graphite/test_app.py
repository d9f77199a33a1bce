"""graphite_plugin.Finder through graphite-web's real Django app (test client), and the
finder, reader and settings module directly.

Data: `app.<host>.<metric>` with known values at 60 s steps, written at a fixed NOW.
"""
from __future__ import annotations

import html
import importlib
import json
import os
import pickle
import threading
import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.graphite_env import setup_graphite_app, use_finders, whisper_path

NOW = 1_700_000_000 - 1_700_000_000 % 60  # aligned: the last point is at NOW
RETENTION = "60s:1d,3600s:30d"
HOSTS = ["web1", "web2", "web3"]
NAMES = [f"app.{h}.{m}" for h in HOSTS for m in ("cpu", "mem")] + ["app.web1", "app.web1.cpu.steal"]
PLUGIN = ["graphite_plugin.Finder"]


def value_of(name: str, age_minutes: int) -> float | None:
    """The value written `age_minutes` before NOW (None: a gap every 7th minute)."""
    if age_minutes % 7 == 3:
        return None
    return float(sum(map(ord, name)) % 100 + age_minutes)


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    setup_graphite_app()
    url = f"sqlite://{tmp_path_factory.mktemp('graphite-app') / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    points = {name: [(NOW - 60 * age, value_of(name, age)) for age in range(0, 24 * 60)
                     if value_of(name, age) is not None] for name in NAMES}
    result = accessor.insert_points(points, now=NOW, create=MetricMetadata.create(RETENTION, "average", 0.5))
    assert result.rejected == 0
    accessor.close()
    return url


@pytest.fixture
def client(store_url):
    from django.test import Client

    with use_finders(PLUGIN, BG_STORE=store_url):
        yield Client(raise_request_exception=False)


def get_json(client, path, **params):
    response = client.get(path, params)
    assert response.status_code == 200, response.content[:300]
    return json.loads(response.content)


# -- /metrics ----------------------------------------------------------------------------
def test_find_treejson_completer_json(client):
    tree = get_json(client, "/metrics/find", query="app.*")
    assert [(e["id"], e["leaf"]) for e in tree] == [("app.web1", 0), ("app.web2", 0), ("app.web3", 0)]
    completer = get_json(client, "/metrics/find", query="app.web1.", format="completer")["metrics"]
    assert sorted((e["path"], e["is_leaf"]) for e in completer) == [
        ("app.web1.cpu", "1"), ("app.web1.cpu.", "0"), ("app.web1.mem", "1")]
    nodes = get_json(client, "/metrics/find", query="app.web1*", format="json")
    assert sorted((n["path"], n["is_leaf"]) for n in nodes) == [("app.web1", False), ("app.web1", True)]
    leaf = next(n for n in nodes if n["is_leaf"])
    # (NOW - retention, last write): the last write (NOW) is long past here, so empty
    assert len(leaf["intervals"]) == 1 and leaf["intervals"][0]["start"] == leaf["intervals"][0]["end"]
    leaves = get_json(client, "/metrics/find", query="app.web1.*", format="completer", leavesOnly="1")
    assert sorted(e["path"] for e in leaves["metrics"]) == ["app.web1.cpu", "app.web1.mem"]


def test_the_finder_reads_an_sqlite_store_through_mmap_unless_the_url_says_otherwise(client, store_url):
    from graphite_plugin.finder import READ_MMAP_SIZE, shared_accessor

    assert get_json(client, "/metrics/find", query="app.*")
    store = shared_accessor().store
    assert store.mmap_size == READ_MMAP_SIZE == 1 << 30
    assert store._conn.execute("PRAGMA mmap_size").fetchone()[0] == READ_MMAP_SIZE
    with use_finders(PLUGIN, BG_STORE=store_url + "?mmap_size=0"):
        assert shared_accessor().store.mmap_size == 0


def test_cached_finds_read_the_default_profile_from_the_database_once_in_a_while(store_url):
    """treejson finds need the default profile's advancedUI: graphite's view reads it with
    two queries a request; the find shortcut (ViewShortcutMiddleware) reads it once per
    PROFILE_TTL, through graphite's own default_profile, which stays as it is."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from graphite import user_util

    from graphite_plugin import profiles

    original = user_util.default_profile
    middleware = (*_middleware_with_plugin(), "graphite_plugin.middleware.ViewShortcutMiddleware")
    with use_finders(PLUGIN, BG_STORE=store_url, MIDDLEWARE=middleware, BG_FIND_CACHE_TTL=600,
                     BG_FIND_CACHE_CHECK_INTERVAL=3600):
        client = Client(raise_request_exception=False)

        def profile_queries() -> list[str]:
            with CaptureQueriesContext(connection) as queries:
                found = get_json(client, "/metrics/find", query="app.*")
            assert [node["id"] for node in found] == ["app.web1", "app.web2", "app.web3"]
            return [q["sql"] for q in queries if "auth_user" in q["sql"] or "account_profile" in q["sql"]]

        profiles.forget()
        assert len(profile_queries()) == 2  # the shortcut reads the profile once
        for _ in range(4):
            assert profile_queries() == []
        profiles.forget()  # as when its PROFILE_TTL has passed
        assert len(profile_queries()) == 2  # get_or_create of the default user, then of its profile
    assert user_util.default_profile is original  # nothing of graphite replaced


def test_find_pickle_and_expand_and_index(client):
    response = client.get("/metrics/find", {"query": "app.*.mem", "format": "pickle"})
    nodes = pickle.loads(response.content)
    assert sorted(n["path"] for n in nodes) == [f"app.{h}.mem" for h in HOSTS]
    assert all(n["is_leaf"] and len(n["intervals"]) == 1 for n in nodes)
    expanded = get_json(client, "/metrics/expand", query=["app.web[12].mem", "app.*"], groupByExpr="1")
    assert expanded["results"] == {"app.web[12].mem": ["app.web1.mem", "app.web2.mem"],
                                   "app.*": ["app.web1", "app.web2", "app.web3"]}
    assert get_json(client, "/metrics/index.json") == sorted(NAMES)


def test_index_does_not_glob(store_url):
    """get_index scans the metrics: a glob limit below the number of metrics does not matter."""
    from django.test import Client

    with use_finders(PLUGIN, BG_STORE=store_url, BG_MAX_GLOB_RESULTS=2):
        client = Client(raise_request_exception=False)
        assert get_json(client, "/metrics/index.json") == sorted(NAMES)
        assert client.get("/metrics/find", {"query": "app.*.*"}).status_code == 400


# -- /render -----------------------------------------------------------------------------
def grafana_render(client, targets, **extra):
    form = {"target": targets, "format": "json", "from": "-1h", "until": "now", "now": str(NOW),
            "maxDataPoints": "1000", **extra}
    response = client.post("/render", form)
    assert response.status_code == 200, response.content[:500]
    return json.loads(response.content)


def test_render_json_values(client):
    [series] = grafana_render(client, "app.web2.cpu", **{"from": "-10min"})
    assert series["target"] == "app.web2.cpu"
    # whisper's window: (from, until] aligned up to the step
    assert [t for _, t in series["datapoints"]] == [NOW - 60 * a for a in range(9, -1, -1)]
    assert [v for v, _ in series["datapoints"]] == [value_of("app.web2.cpu", a) for a in range(9, -1, -1)]


def test_render_functions_over_globs(client):
    answer = grafana_render(client, ["sumSeries(app.*.cpu)", "aliasByNode(app.*.mem, 1)",
                                     "summarize(app.web1.cpu, '10min', 'max')",
                                     "movingAverage(app.web3.cpu, 3)"], **{"from": "-30min"})
    by_target = {s["target"]: s["datapoints"] for s in answer}
    assert set(by_target) == {"sumSeries(app.*.cpu)", "web1", "web2", "web3",
                              "summarize(app.web1.cpu, \"10min\", \"max\")", "movingAverage(app.web3.cpu,3)"}
    for value, timestamp in by_target["sumSeries(app.*.cpu)"]:
        age = (NOW - timestamp) // 60
        parts = [value_of(f"app.{h}.cpu", age) for h in HOSTS]
        assert value == (None if all(p is None for p in parts) else sum(p for p in parts if p is not None))
    assert by_target["web3"][-1] == [value_of("app.web3.mem", 0), NOW]
    assert len(by_target["movingAverage(app.web3.cpu,3)"]) == 30  # earlier points were fetched for the window


def test_render_max_data_points_consolidates(client):
    [series] = grafana_render(client, "app.web1.mem", **{"from": "-1d", "maxDataPoints": "100"})
    assert 50 <= len(series["datapoints"]) <= 100
    steps = {b[1] - a[1] for a, b in zip(series["datapoints"], series["datapoints"][1:])}
    assert steps == {60 * 15}


def test_render_csv_pickle_png(client):
    form = {"target": "app.web1.cpu", "from": "-5min", "now": str(NOW)}
    csv_text = client.get("/render", {**form, "format": "csv"}).content.decode()
    rows = [line.split(",") for line in csv_text.strip().splitlines()]
    assert [r[0] for r in rows] == ["app.web1.cpu"] * 5
    assert [float(r[2]) if r[2] else None for r in rows] == [value_of("app.web1.cpu", a) for a in range(4, -1, -1)]
    [info] = pickle.loads(client.get("/render", {**form, "format": "pickle"}).content)
    assert (info["name"], info["step"], info["end"]) == ("app.web1.cpu", 60, NOW + 60)
    png = client.get("/render", {**form, "from": "-1d", "width": "400", "height": "200"})
    assert png["Content-Type"] == "image/png"
    assert png.content.startswith(b"\x89PNG\r\n\x1a\n") and 3_000 < len(png.content) < 200_000
    svg = client.get("/render", {**form, "format": "svg"})
    assert svg.status_code == 200 and b"<svg" in svg.content


# -- /functions ----------------------------------------------------------------------------
def test_functions_endpoints(client):
    from graphite_plugin import compat

    compat.install()
    functions = get_json(client, "/functions")
    assert functions["sumSeries"]["function"] == "sumSeries(*seriesLists)"
    assert functions["summarize"]["function"].startswith("summarize(seriesList, intervalString, func='sum'")
    assert len(functions) > 100
    detail = get_json(client, "/functions/movingAverage")
    assert detail["name"] == "movingAverage" and detail["params"][0]["name"] == "seriesList"
    assert client.get("/functions/noSuchFunction").status_code == 404


# -- errors --------------------------------------------------------------------------------
TOO_COMPLEX = "app." + "{a,b,c,d,e,f,g,h,i,j}" * 5  # one component of 100,000 alternatives


def test_glob_limits_answer_400_with_the_limit(store_url):
    from django.test import Client

    with use_finders(PLUGIN, BG_STORE=store_url, BG_MAX_GLOB_RESULTS=4,
                     MIDDLEWARE=_middleware_with_plugin()):
        client = Client(raise_request_exception=False)
        find = client.get("/metrics/find", {"query": TOO_COMPLEX})
        assert find.status_code == 400 and b"10000" in find.content and b"BG_MAX_GLOB_EXPANSION" in find.content
        render = client.post("/render", {"target": "sumSeries(app.*.*)", "format": "json"})
        assert render.status_code == 400 and b"max_results=4" in render.content and b"BG_MAX_GLOB_RESULTS" in render.content
        expand = client.get("/metrics/expand", {"query": "app.*.*"})
        assert expand.status_code == 400 and b"max_results=4" in expand.content
        assert client.get("/metrics/find", {"query": "app.*"}).status_code == 200  # 3 names: under the limit


def test_render_budgets_answer_400_naming_the_setting(store_url):
    from django.test import Client

    with use_finders(PLUGIN, BG_STORE=store_url, BG_MAX_RENDER_SERIES=3, MIDDLEWARE=_middleware_with_plugin()):
        client = Client(raise_request_exception=False)
        render = client.post("/render", {"target": "sumSeries(app.*.*)", "format": "json", "from": "-1d"})
        assert render.status_code == 400 and b"BG_MAX_RENDER_SERIES" in render.content, render.content
        assert b"reads 6 series" in render.content
        assert client.post("/render", {"target": "app.web1.*", "format": "json"}).status_code == 200
    with use_finders(PLUGIN, BG_STORE=store_url, BG_MAX_RENDER_POINTS=100, MIDDLEWARE=_middleware_with_plugin()):
        client = Client(raise_request_exception=False)
        render = client.post("/render", {"target": "app.web1.cpu", "format": "json", "from": "-3h", "now": NOW})
        assert render.status_code == 400 and b"BG_MAX_RENDER_POINTS" in render.content, render.content
        assert b"reads 180 points" in render.content
        assert client.post("/render", {"target": "app.web1.cpu", "format": "json", "from": "-1h",
                                       "now": NOW}).status_code == 200


def test_a_fetch_past_its_deadline_stops_reading(store_url, monkeypatch):
    import time

    from graphite_plugin import reader
    from graphite_plugin.errors import FetchAbandoned

    accessor = Accessor.from_url(store_url)
    reads = []
    fetch_grids = accessor.fetch_grids

    def slow_fetch(names, *args):
        reads.append(list(names))
        time.sleep(0.2)
        return fetch_grids(names, *args)

    monkeypatch.setattr(accessor, "fetch_grids", slow_fetch)
    monkeypatch.setattr(reader, "FETCH_CHUNK", 2)
    names = sorted(NAMES)
    limits = reader.ReadLimits(deadline=time.monotonic() + 0.1)
    with pytest.raises(FetchAbandoned, match=f"fetch of {len(names)} series stopped after 2: past .*FETCH_TIMEOUT"):
        reader.read_series(accessor, names, NOW - 3600, NOW, NOW, limits)
    assert reads == [names[:2]]  # the chunk under way finished, no other was read
    assert len(reader.read_series(accessor, names, NOW - 3600, NOW, NOW)) == len(names)
    accessor.close()


def _middleware_with_plugin() -> tuple:
    from django.conf import settings

    return tuple(settings.MIDDLEWARE) + ("graphite_plugin.middleware.PatternRefusedMiddleware",)


@pytest.mark.parametrize("where, message", [
    ("no-such-directory/bgl.db", b"does not exist"),
    ("bgl.db", b"syncdb"),
])
def test_unreachable_store_is_an_error(tmp_path, where, message):
    from django.test import Client

    setup_graphite_app()  # the other tests get it from their fixtures
    url = f"sqlite://{tmp_path / where}"
    with use_finders(PLUGIN, BG_STORE=url):
        client = Client(raise_request_exception=False)
        render = client.post("/render", {"target": "app.*.cpu", "format": "json"})
        assert render.status_code == 500 and message in render.content
        assert str(tmp_path).encode() in html.unescape(render.content.decode()).encode()
        find = client.get("/metrics/find", {"query": "app.*"})
        assert find.status_code == 500 and message in find.content
        assert client.get("/metrics/index.json").status_code == 500
    assert not os.path.exists(tmp_path / "bgl.db")  # reads never create an empty store


# -- finder and reader directly ------------------------------------------------------------
def test_find_nodes_both_kinds_sorted(store_url):
    from graphite.finders.utils import FindQuery

    from graphite_plugin import Finder

    with use_finders(PLUGIN, BG_STORE=store_url):
        finder = Finder()
        nodes = finder.find_nodes(FindQuery("app.web1*", None, None))
        assert [(n.path, n.is_leaf) for n in nodes] == [("app.web1", False), ("app.web1", True)]
        nodes = finder.find_nodes(FindQuery("app.web1.*", None, None, leaves_only=True))
        assert [(n.path, n.is_leaf) for n in nodes] == [("app.web1.cpu", True), ("app.web1.mem", True)]
        nodes = finder.find_nodes(FindQuery("app.web1.*", None, None))
        assert [n.path for n in nodes] == ["app.web1.cpu", "app.web1.cpu", "app.web1.mem"]


def test_batched_fetch_reads_once(store_url, monkeypatch):
    from graphite_plugin import Finder
    from graphite_plugin.finder import shared_accessor

    with use_finders(PLUGIN, BG_STORE=store_url):
        accessor = shared_accessor()
        calls = []
        original = accessor.fetch_grids
        monkeypatch.setattr(accessor, "fetch_grids", lambda names, *a: calls.append(list(names)) or original(names, *a))
        results = Finder().fetch(["app.*.cpu", "app.web1.*", "nothing.*"], NOW - 600, NOW, NOW)
        assert calls == [["app.web1.cpu", "app.web1.mem", "app.web2.cpu", "app.web3.cpu"]]
        assert [(r["pathExpression"], r["path"]) for r in results] == [
            ("app.*.cpu", "app.web1.cpu"), ("app.*.cpu", "app.web2.cpu"), ("app.*.cpu", "app.web3.cpu"),
            ("app.web1.*", "app.web1.cpu"), ("app.web1.*", "app.web1.mem")]
        first, again = results[0], results[3]
        assert first["time_info"] == (NOW - 540, NOW + 60, 60) and first["name"] == first["path"]
        assert first["values"] == again["values"] and first["values"] is not again["values"]


def test_reader_matches_whisper(store_url, tmp_path):
    """Reader.fetch and get_intervals against whisper's reader on the same points."""
    import whisper
    from graphite.readers.whisper import WhisperReader

    from graphite_plugin.finder import shared_accessor
    from graphite_plugin.reader import Reader

    name = "app.web3.mem"
    path = whisper_path(tmp_path, name)
    os.makedirs(os.path.dirname(path))
    whisper.create(path, [(60, 1440), (3600, 720)], 0.5, "average")
    whisper.update_many(path, [(NOW - 60 * a, value_of(name, a)) for a in range(1440)
                               if value_of(name, a) is not None], now=NOW)
    with use_finders(PLUGIN, BG_STORE=store_url):
        reader = Reader(shared_accessor(), name)
        reference = WhisperReader(path, name)
        for start, end in [(NOW - 3600, NOW), (NOW - 86400 * 3, NOW - 86400), (NOW - 90, NOW - 89),
                           (NOW + 10, NOW + 100)]:
            assert reader.fetch(start, end, NOW) == reference.fetch(start, end, NOW)
        [ours], [theirs] = reader.get_intervals(), reference.get_intervals()
        assert abs(ours.start - theirs.start) < 5 and ours.end == ours.start  # last write at NOW, long ago
        fresh = Accessor.from_url(store_url)
        fresh.insert_points({"app.fresh": [(time.time(), 1.0)]}, create=MetricMetadata.create(RETENTION))
        [interval] = Reader(shared_accessor(), "app.fresh").get_intervals()
        assert interval.end - interval.start == pytest.approx(30 * 86400, abs=5)
        fresh.delete_metrics(["app.fresh"])


def test_one_accessor_per_process_under_threads(store_url):
    from graphite_plugin import Finder
    from graphite_plugin.finder import backends, shared_accessor

    with use_finders(PLUGIN, BG_STORE=store_url, BG_CACHE_TTL=17):  # a key no other test used
        seen, answers, errors = [], [], []

        def work():
            try:
                seen.append(shared_accessor())
                answers.append(Finder().fetch(["app.*.*"], NOW - 3600, NOW, NOW))
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert len({id(a) for a in seen}) == 1 and seen[0].cache_ttl == 17
        assert all(a == answers[0] for a in answers) and len(answers[0]) == 6
    assert sum(1 for key in backends if key[0].split("?")[0] == store_url) >= 2  # (mmap_size added)


@pytest.fixture
def cache_store(tmp_path):
    """(store URL, an accessor writing to it, metadata, paths(pattern) found by the finder),
    the store holding `c.one`."""
    setup_graphite_app()
    from graphite.finders.utils import FindQuery

    from graphite_plugin import Finder

    url = f"sqlite://{tmp_path / 'bgl.db'}"
    writer = Accessor.from_url(url)  # another process's accessor, as far as the finder can tell
    writer.syncdb()
    metadata = MetricMetadata.create(RETENTION)
    writer.create_metric("c.one", metadata)

    def paths(pattern="c.*"):
        return [n.path for n in Finder().find_nodes(FindQuery(pattern, None, None))]

    yield url, writer, metadata, paths
    writer.close()


def test_glob_cache_reuses_answers_for_its_ttl(cache_store):
    from graphite_plugin.finder import shared_backend

    url, writer, metadata, paths = cache_store
    with use_finders(PLUGIN, BG_STORE=url, BG_FIND_CACHE_TTL=3600, BG_FIND_CACHE_CHECK_INTERVAL=3600):
        assert paths("new.*") == []
        writer.create_metric("new.metric", metadata)
        assert paths("new.*") == ["new.metric"]  # an empty answer is not kept
        assert paths() == ["c.one"]
        writer.create_metric("c.two", metadata)
        assert paths() == ["c.one"]  # answered from the cache
        globs = shared_backend().globs
        assert globs.hits >= 1
        misses = globs.misses
        assert paths() == ["c.one"] and globs.misses == misses  # no directory either: still one cached answer
        globs.clear()
        assert paths() == ["c.one", "c.two"]
    with use_finders(PLUGIN, BG_STORE=url, BG_FIND_CACHE_TTL=0):
        writer.create_metric("c.three", metadata)
        assert paths() == ["c.one", "c.three", "c.two"]
        assert shared_backend().globs.hits == 0


def test_glob_cache_drops_its_answers_when_the_names_token_changes(cache_store):
    from graphite_plugin.finder import shared_backend

    url, writer, metadata, paths = cache_store
    with use_finders(PLUGIN, BG_STORE=url, BG_FIND_CACHE_TTL=3600, BG_FIND_CACHE_CHECK_INTERVAL=0):
        globs = shared_backend().globs
        assert paths() == ["c.one"]
        hits = globs.hits
        assert paths() == ["c.one"] and globs.hits == hits + 1  # unchanged token: from the cache
        writer.create_metric("c.two", metadata)
        assert paths() == ["c.one", "c.two"] and globs.invalidations == 1
        writer.delete_metrics(["c.one"])
        assert paths() == ["c.two"] and globs.invalidations == 2


def test_glob_cache_keeps_no_answer_computed_across_a_change_and_survives_token_errors():
    from graphite_plugin.glob_cache import GlobCache

    tokens = [1]

    def token():
        if tokens[0] is None:
            raise ConnectionError("store unreachable")
        return tokens[0]

    cache = GlobCache(ttl=3600, token=token, check_interval=0)

    def computed_while_names_change(pattern):
        tokens[0] = 2  # another process creates a metric while this answer is computed
        cache.get("nodes", "other", lambda p: (("x",),))  # a lookup that reads the new token
        return (("stale",),)

    assert cache.get("nodes", "a.*", computed_while_names_change) == (("stale",),)
    assert cache.get("nodes", "a.*", lambda p: (("fresh",),)) == (("fresh",),)  # the stale answer was not kept
    assert cache.get("nodes", "a.*", lambda p: (("again",),)) == (("fresh",),)
    tokens[0] = None
    assert cache.get("nodes", "a.*", lambda p: (("unreachable",),)) == (("unreachable",),)
    assert cache.token_errors >= 1



def test_glob_cache_answers_nothing_cached_while_a_due_token_check_is_in_progress():
    from graphite_plugin.glob_cache import GlobCache

    tokens, reading, release = [1], threading.Event(), threading.Event()

    def token():
        if tokens[0] == 2:  # the names changed: this read is slow (a loaded machine)
            reading.set()
            assert release.wait(10)
        return tokens[0]

    cache = GlobCache(ttl=3600, token=token, check_interval=0.05)
    assert cache.get("nodes", "a.*", lambda p: (("old",),)) == (("old",),)
    tokens[0] = 2  # another process creates a.new
    time.sleep(0.1)  # a check is due
    checker = threading.Thread(target=cache.get, args=("nodes", "b.*", lambda p: (("b",),)))
    checker.start()
    assert reading.wait(10)  # the checker reads the new token ...
    answers = []
    other = threading.Thread(target=lambda: answers.append(cache.get("nodes", "a.*", lambda p: (("old", "new"),))))
    other.start()  # ... while another request asks a.*
    other.join(0.3)
    release.set()
    checker.join(10)
    other.join(10)
    assert answers == [(("old", "new"),)]  # not the entry the check is about to drop

# -- settings module and compat shim ---------------------------------------------------------
def test_settings_module(monkeypatch):
    import sys

    monkeypatch.setenv("BGL_STORE", "sqlite:///srv/bgl/bgl.db")
    import graphite_plugin.settings as plugin_settings

    plugin_settings = importlib.reload(plugin_settings)
    exported = {name: getattr(plugin_settings, name) for name in plugin_settings.__all__}
    assert exported["STORAGE_FINDERS"] == ("graphite_plugin.Finder",)
    assert exported["BG_STORE"] == "sqlite:///srv/bgl/bgl.db"
    assert exported["BG_FIND_CACHE_TTL"] == 60 and exported["BG_MAX_GLOB_RESULTS"] == 100_000
    assert exported["MIDDLEWARE"][-1] == "graphite_plugin.middleware.PatternRefusedMiddleware"
    assert exported["GRAPHITE_WEB_APP_SETTINGS_LOADED"] is True and "graphite.render" in exported["INSTALLED_APPS"]
    content = os.path.join(sys.prefix, "webapp", "content")
    assert exported.get("STATIC_ROOT") == (content if os.path.isdir(content) else None)
    assert all(name.isupper() for name in exported)


def test_compat_formats_like_python_310():
    from graphite_plugin.compat import formatargspec, getargspec

    def f(requestContext, seriesList, n=5, label="x", *rest, **options):
        pass

    spec = getargspec(f)
    assert spec.args == ["requestContext", "seriesList", "n", "label"] and spec.defaults == (5, "x")
    assert formatargspec(spec.args[1:], spec.varargs, spec.keywords, spec.defaults) == \
        "(seriesList, n=5, label='x', *rest, **options)"
    assert formatargspec([]) == "()"
    with pytest.raises(ValueError):
        getargspec(lambda *, k: k)
