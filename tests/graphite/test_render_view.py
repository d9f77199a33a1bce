"""`/render?format=json` through graphite_plugin.render_view: the same bytes, status and
cache headers as graphite-web's own renderView / renderViewJson.

Two levels, both against graphite-web's real code:
* the encoder on hand-made series (graphite's TimeSeries) that json.dumps and graphite's
  replacements make awkward: NaN, infinities, -0.0, the largest and smallest floats, ints,
  `None`/`NaN,`/`Infinity,` inside names and tags, empty series;
* whole requests on a store through graphite-web's app with graphite_plugin.Finder:
  `render_json` and graphite's `renderView` answer the same request (functions,
  maxDataPoints, noNullPoints, jsonp, caching, errors), and the middleware is what
  answers when graphite_plugin.settings' MIDDLEWARE is in effect.
"""
from __future__ import annotations

import copy

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.graphite.render_cases import NOW, OPTION_SETS, hand_made, series
from tests.graphite_env import setup_graphite_app, use_finders

RETENTION = "60s:1d,600s:30d"
# name -> value at each minute (None: a gap)
NAMES = {
    "fast.web1.cpu": lambda age: None if age % 7 == 3 else round(age * 0.37 % 100, 2),
    "fast.web2.cpu": lambda age: None if age % 11 == 0 else (age % 13) * 1e300 / 7,
    "fast.web3.cpu": lambda age: [0.1 + 0.2, -0.0, 5e-324, 1e16, 1.5e-5, 123456789012345.67, -2.5][age % 7],
    "fast.web1.requests": lambda age: float(age * 3),
    "fast.sparse": lambda age: 1.0 if age in (10, 500) else None,
    "fast.None.NaN,x": lambda age: float(age),
    "fast.tagged;dc=eu;env=None": lambda age: age / 3,
}
@pytest.fixture(scope="module")
def graphite_app():
    setup_graphite_app()


def outcome(call):
    """What the call returns, or the type and text of what it raised."""
    try:
        return call()
    except Exception as error:  # noqa: BLE001 (graphite's errors are what is compared)
        return type(error), str(error)


@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(o) or "plain")
def test_encoder_writes_renderViewJson_bytes(graphite_app, options):
    from graphite.render.views import renderViewJson

    from graphite_plugin.render_json import encode

    data = hand_made()
    expected = outcome(lambda: renderViewJson(dict(options), copy.deepcopy(data)).content)
    assert outcome(lambda: encode(copy.deepcopy(data), dict(options)).encode()) == expected
    # graphite fails on series too short for maxDataPoints' nudge (IndexError) or empty with
    # maxDataPoints=1 (a step of 0): so does the encoder. Then series long enough:
    data = [series(s.name, [s[i % len(s)] for i in range(600 * 60 // s.step if s else 0)], start=NOW - 36000,
                   step=s.step, tags=dict(s.tags)) for s in data if s or "maxDataPoints" not in options]
    expected = renderViewJson(dict(options), copy.deepcopy(data)).content
    assert encode(copy.deepcopy(data), dict(options)).encode() == expected
    if not options:  # the cases are there: the answer has every special value
        for text in (b"null", b"1e9999", b"-1e9999", b"-0.0", b"5e-324", b"1e+16", b"sumSeries(x.null,y.1e9999,z)",
                     b"\\u00e9", b"[1, ", b"true", b'"datapoints": []'):
            assert text in expected, text


@pytest.mark.parametrize("options", OPTION_SETS[:1] + OPTION_SETS[4:5], ids=["plain", "noNullPoints"])
def test_encoder_on_empty_answers(graphite_app, options):
    from graphite.render.views import renderViewJson

    from graphite_plugin.render_json import encode

    for data in ([], [series("empty", [])], [series("empty", []), series("none", [None])]):
        expected = renderViewJson(dict(options), copy.deepcopy(data)).content
        assert encode(copy.deepcopy(data), dict(options)).encode() == expected


def test_timestamp_texts_are_python_ints():
    from graphite_plugin.render_json import stamp_texts

    for start, step, count in ((NOW, 60, 100), (0, 1, 12), (-125, 10, 30), (9_999_999_990, 5, 4)):
        rows = stamp_texts(start, step, count)
        texts = [bytes(row[row != 0]).decode() for row in rows]
        assert texts == [str(t) for t in range(start, start + step * count, step)]


# -- whole requests ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store_url(tmp_path_factory, graphite_app):
    url = f"sqlite://{tmp_path_factory.mktemp('render-fast') / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    points = {name: [(NOW - 60 * age, value(age)) for age in range(0, 24 * 60) if value(age) is not None]
              for name, value in NAMES.items()}
    result = accessor.insert_points(points, now=NOW, create=MetricMetadata.create(RETENTION, "average", 0.5))
    assert result.rejected == 0
    accessor.close()
    return url


REQUESTS = [
    {"target": "fast.*.*"},
    {"target": ["fast.web1.cpu", "fast.web2.cpu", "fast.sparse"], "from": "-3h"},
    {"target": "sumSeries(fast.*.cpu)", "maxDataPoints": "100"},
    {"target": ["alias(fast.web1.cpu, 'None NaN, Infinity,')", "aliasByNode(fast.*.cpu, 1)"]},
    {"target": "summarize(fast.web1.requests, '1h', 'sum')", "maxDataPoints": "10"},
    {"target": "transformNull(fast.sparse, 0)", "from": "-1h"},  # ints among the floats
    {"target": "fast.*", "noNullPoints": "1"},
    {"target": "fast.*.*", "maxDataPoints": "1"},
    {"target": "fast.web3.cpu", "jsonp": "callback", "from": "-20min"},
    {"target": "fast.None.*", "from": "-20min"},
    {"target": "fast.web1.cpu", "from": "-30d", "maxDataPoints": "500"},
    {"target": "no.such.metric"},
    {"target": "seriesByTag('dc=eu')", "from": "-10min"},
    {"target": "fast.web1.cpu", "from": "-10min", "noCache": "1"},
]


def _request(params: dict, method: str = "get"):
    from django.test import RequestFactory

    return getattr(RequestFactory(), method)("/render", {"format": "json", "now": str(NOW), "from": "-1d", **params})


def _headers(response) -> dict:
    return {key: value for key, value in response.items() if key != "Expires"}


@pytest.mark.parametrize("params", REQUESTS, ids=lambda p: str(p["target"])[:40])
def test_render_json_answers_as_renderView(store_url, params):
    from graphite.render.views import renderView

    from graphite_plugin.render_view import render_json

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url):
        for method in ("get", "post"):
            ours = render_json(_request(params, method))
            assert ours is not None, "graphite_plugin answers every JSON line render"
            theirs = renderView(_request(params, method))
            assert (ours.status_code, _headers(ours)) == (theirs.status_code, _headers(theirs))
            assert ours.content == theirs.content
    assert ours.status_code == 200 and len(ours.content) > 2 or params["target"] == "no.such.metric"


@pytest.mark.parametrize("params", [{"target": "fast.*", "pretty": "1"}, {"target": "fast.*", "format": "csv"},
                                    {"target": "fast.*", "graphType": "pie"}, {"target": "fast.*", "from": "bogus"}])
def test_other_renders_are_left_to_graphite(store_url, params):
    from graphite_plugin.render_view import render_json

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url):
        assert render_json(_request(params)) is None


def test_errors_and_cache_as_graphite(store_url):
    from graphite.render.views import renderView

    from graphite_plugin.render_view import render_json

    locmem = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "render-fast"}}
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, BG_MAX_RENDER_SERIES=2, CACHES=locmem):
        params = {"target": "sumSeries(fast.*.*)"}
        ours, theirs = render_json(_request(params)), renderView(_request(params))
        assert ours.status_code == theirs.status_code == 400
        assert ours.content == theirs.content and b"BG_MAX_RENDER_SERIES" in ours.content
        params = {"target": "fast.web1.*", "cacheTimeout": "120"}
        first = render_json(_request(params))
        assert first["Cache-Control"] == "max-age=120"
        cached = renderView(_request(params))  # graphite's view finds the answer ours cached
        assert cached.content == first.content and cached is not first
        assert render_json(_request(params)).content == first.content


def test_the_middleware_answers_json_renders(store_url):
    """With graphite_plugin.settings' MIDDLEWARE, /render?format=json goes through render_json:
    Django resolves /render to graphite's renderView, which the middleware's process_view
    answers; the answer over Django's whole stack is graphite's."""
    from django.test import Client
    from django.urls import resolve
    from graphite.render.views import renderView

    import graphite_plugin.settings as plugin_settings
    from graphite_plugin.middleware import ViewShortcutMiddleware

    assert resolve("/render").func is renderView and resolve("/render/").func is renderView
    assert "graphite_plugin.middleware.ViewShortcutMiddleware" in plugin_settings.MIDDLEWARE
    params = {"target": ["fast.web1.cpu", "sumSeries(fast.*.cpu)"], "format": "json", "now": str(NOW),
              "maxDataPoints": "200", "jsonp": "cb"}
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, MIDDLEWARE=plugin_settings.MIDDLEWARE,
                     BG_SELF_METRICS_INTERVAL=0):
        ours = Client().get("/render", params)
        middleware = ViewShortcutMiddleware(lambda request: None)
        direct = middleware.process_view(_request(params), renderView, (), {})
        assert direct is not None and direct.content == ours.content
        assert middleware.process_view(_request(params), lambda request: None, (), {}) is None
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url):
        theirs = Client().get("/render", params)
    assert ours.status_code == theirs.status_code == 200
    assert ours.content == theirs.content and ours["Content-Type"] == theirs["Content-Type"] == "text/javascript"


def test_fetched_arrays_serve_only_unchanged_series():
    """The finder's float64 array stands for a series only while it holds the very objects
    read: a value replaced by an equal one (0.0 for -0.0) is converted again."""
    import numpy as np

    from graphite_plugin.reader import graphite_values
    from graphite_plugin.render_json import float_values

    array = np.array([1.5, np.nan, -0.0, 2.0])
    read = graphite_values(type("Series", (), {"values": array})())
    assert float_values(list(read), (read, array)) is array
    changed = list(read)
    changed[2] = 0.0
    converted = float_values(changed, (read, array))
    assert converted is not array and not np.signbit(converted[2])
    assert float_values(read[:3], (read, array)) is not array


@pytest.mark.parametrize("gaps", [0.0, 0.02, 0.6, 1.0])
def test_graphite_lists_are_floats_with_none_for_gaps(gaps):
    """graphite_lists (a tolist per row) gives what a value-by-value conversion gives:
    Python floats (-0.0 kept), None for NaN; grids with rows mostly gaps included."""
    import math

    import numpy as np

    from tests.graphite_env import configure

    configure()
    from graphite_plugin.reader import graphite_lists

    rng = np.random.default_rng(3)
    grid = np.round(rng.uniform(-100, 100, (7, 50)), 2)
    grid[0, :3] = -0.0
    grid[rng.random(grid.shape) < gaps] = np.nan
    grid[5] = np.nan  # one empty series whatever the rest
    lists = graphite_lists(grid)
    expected = [[None if math.isnan(v) else float(v) for v in row] for row in grid.tolist()]
    assert lists == expected
    assert all(type(v) in (float, type(None)) for row in lists for v in row)
    assert all(math.copysign(1, v) == -1 for v in lists[0][:3] if v is not None)


def test_graphite_lists_leave_no_middle_collection_to_the_filled_lists():
    """The collector's middle generation is collected (cheaply) before the lists are made,
    so the collections their filling sets off are of the youngest generation only: none
    scans the filled lists item by item, whatever the collector's counts were before."""
    import gc

    import numpy as np

    from tests.graphite_env import configure

    configure()
    from graphite_plugin.reader import graphite_lists

    grid = np.arange(1000 * 20, dtype=np.float64).reshape(1000, 20)
    thresholds = gc.get_threshold()
    started: list[int] = []

    def record(phase, info):
        if phase == "start":
            started.append(info["generation"])

    gc.set_threshold(700, 10, 10)
    gc.collect()  # no full collection due from what ran before (the oldest generation's count at 0)
    gc.collect(1)
    for _ in range(10):
        gc.collect(0)  # the middle generation's count at its threshold: the second young collection takes it
    gc.callbacks.append(record)
    try:
        lists = graphite_lists(grid)
    finally:
        gc.callbacks.remove(record)
        gc.set_threshold(*thresholds)
    assert lists[-1] == grid[-1].tolist()
    assert started[0] == 1 and set(started[1:]) == {0}, started


def test_render_json_reads_the_finders_arrays(store_url):
    """A render through render_json hands its context to the finder, which records each
    series' array there."""
    from graphite.render.evaluator import evaluateTarget
    from graphite.render.views import parseOptions

    from graphite_plugin.reader import FETCHED_ARRAYS
    from graphite_plugin.render_view import request_context

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url):
        context = request_context(parseOptions(_request({"target": "fast.web1.*", "from": "-10min"}))[1])
        data = evaluateTarget(context, ["fast.web1.*"])
    assert sorted(context[FETCHED_ARRAYS]) == sorted(s.name for s in data) == ["fast.web1.cpu", "fast.web1.requests"]
    for s in data:
        values, array = context[FETCHED_ARRAYS][s.name]
        assert list(s) == values and len(array) == len(values)


def test_a_failing_render_fails_as_graphites(store_url, tmp_path, caplog):
    """An unreachable store: 500 with graphite's error page either way, and graphite's
    exception log line (LogExceptionsMiddleware's) written for the shortcut too."""
    from django.test import Client

    import graphite_plugin.settings as plugin_settings

    params = {"target": "fast.web1.cpu", "format": "json", "now": str(NOW), "from": "-10min"}
    missing = f"sqlite://{tmp_path / 'missing.db'}"
    answers = {}
    for side, middleware in (("ours", plugin_settings.MIDDLEWARE), ("graphite", None)):
        overrides = {"MIDDLEWARE": middleware, "BG_SELF_METRICS_INTERVAL": 0} if middleware else {}
        caplog.clear()
        with use_finders(["graphite_plugin.Finder"], BG_STORE=missing, **overrides):
            response = Client(raise_request_exception=False).get("/render", params)
        answers[side] = response.status_code, b"does not exist" in response.content
        assert any("Exception encountered in <GET http://testserver/render?" in r.getMessage() for r in caplog.records)
    assert answers["ours"] == answers["graphite"] == (500, True)


def test_encoder_on_many_distinct_values(graphite_app):
    """More distinct values than one block of the token table (render_json.TABLE_BLOCK), of
    every magnitude, as renderViewJson writes them."""
    import random

    from graphite.render.views import renderViewJson

    from graphite_plugin import render_json

    rng = random.Random(3)
    values = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-320, 308) if i % 97 else None
              for i in range(render_json.TABLE_BLOCK + 5000)]
    data = [series("many", values), series("few", [round(v, 2) if v is not None else v for v in values[:3000]])]
    expected = renderViewJson({}, copy.deepcopy(data)).content
    assert render_json.encode(copy.deepcopy(data), {}).encode() == expected
