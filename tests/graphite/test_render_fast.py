"""Wide renders on the store's arrays (graphite_plugin.render_fast): a plain pattern or its
sumSeries answers graphite-web's renderView bytes and headers, without graphite's
evaluator where the arrays suffice, with it where graphite would do more (several
windows, tagged names, consolidation, carbon-cache); a read past FETCH_TIMEOUT answers
a one-line 503. graphite-web's real app and views on a real SQLite store."""
from __future__ import annotations

import random
import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.graphite_env import setup_graphite_app, use_finders

NOW = 1_700_000_000 - 1_700_000_000 % 60
MINUTE = MetricMetadata.create("60s:1d,600s:30d", "average", 0.5)
TEN_SECONDS = MetricMetadata.create("10s:1d", "average", 0.5)
TWO_DAYS = MetricMetadata.create("60s:2d", "average", 0.5)  # the window of MINUTE, another table


def _values(rng: random.Random, kind: int) -> list[tuple[int, float]]:
    """An hour of points: gaps, -0.0 and 0.0, magnitudes far apart (the sum's order shows), repeats."""
    points = []
    for age in range(60):
        if rng.random() < 0.2 * (kind % 3):
            continue
        value = [rng.uniform(-1, 1) * 10 ** rng.choice([-12, 0, 12]), -0.0, 0.0, round(rng.uniform(0, 100), 2)][
            rng.randrange(4) if kind % 4 else 3]
        points.append((NOW - 60 * age, value))
    return points


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    rng = random.Random(7)
    wide = {f"wide.h{h:02d}.c{c}": _values(rng, h + c) for h in range(40) for c in range(5)}
    wide["wide.h99.zero"] = [(NOW - 60, -0.0)]  # alone in its column
    tagged = {"tagged.cpu;dc=eu": _values(rng, 1), "tagged.mem;dc=us": _values(rng, 2)}
    batches = [(wide, MINUTE), (tagged, MINUTE), ({"mix.a": _values(rng, 1)}, MINUTE),
               ({"mix.b": _values(rng, 2)}, TEN_SECONDS),  # two steps under mix.*
               ({f"order.{name}": _values(rng, 5) for name in "acegi"}, TWO_DAYS),  # one window, two grids:
               ({f"order.{name}": _values(rng, 5) for name in "bdfhj"}, MINUTE)]  # read out of name order
    setup_graphite_app()
    url = f"sqlite://{tmp_path_factory.mktemp('render-wide') / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    for points, metadata in batches:
        assert accessor.insert_points(points, now=NOW, create=metadata).rejected == 0
    accessor.create_metrics([("wide.empty.c0", MINUTE)])  # nothing in range
    accessor.close()
    return url


def _request(params: dict):
    from django.test import RequestFactory

    return RequestFactory().get("/render", {"format": "json", "now": str(NOW), "from": "-1h", **params})


def _answer(response) -> tuple:
    return response.status_code, {k: v for k, v in response.items() if k != "Expires"}, response.content


FAST = [
    {"target": "wide.*.*"},
    {"target": "sumSeries(wide.*.*)"},
    {"target": "sumSeries(wide.*.*)", "xFilesFactor": "0.6"},
    {"target": "sumSeries( wide.h0*.c{1,2} )"},
    {"target": "sumSeries(wide.h01.c1)"},  # one series: its name is the sum's name tag
    {"target": "sumSeries(wide.h99.zero)"},  # -0.0 alone: graphite's sum starts from 0
    {"target": "wide.h0*.*", "noNullPoints": "1"},
    {"target": "wide.*.*", "maxDataPoints": "1000"},
    {"target": "sumSeries(wide.*.*)", "maxDataPoints": "7"},  # the one sum consolidated by the encoder
    {"target": "wide.empty.*"},
    {"target": "sumSeries(wide.empty.*)"},
    {"target": "nothing.*"},
    {"target": "sumSeries(nothing.*)"},
    {"target": "sumSeries(order.*)"},
    {"target": "order.*"},
]
SHARED = [  # graphite's objects and sumSeries, built from the same read
    {"target": "wide.*.*", "maxDataPoints": "7"},
    {"target": "sumSeries(mix.*)"},
    {"target": "mix.*"},
    {"target": "tagged.*"},
    {"target": "sumSeries(tagged.*)"},
]
GRAPHITE = [  # graphite's evaluator answers
    {"target": "sumSeries(wide.*.*, wide.h01.*)"},
    {"target": "sumSeries(wide.h0*.c1)|scale(2)"},
    {"target": "averageSeries(wide.*.*)"},
    {"target": ["wide.h01.*", "wide.h02.*"]},
]


@pytest.mark.parametrize("params", FAST + SHARED + GRAPHITE, ids=str)
def test_wide_renders_answer_as_renderView(store_url, params, monkeypatch):
    from graphite.render.views import renderView

    import graphite_plugin.render_fast as render_fast
    import graphite_plugin.render_view as render_view

    evaluated, built = [], []
    evaluate, build = render_view.evaluateTarget, render_fast._graphite_series
    monkeypatch.setattr(render_view, "evaluateTarget", lambda *a: evaluated.append(1) or evaluate(*a))
    monkeypatch.setattr(render_fast, "_graphite_series", lambda *a: built.append(1) or build(*a))
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url):
        for extra in ({}, {"noCache": "1"}):
            ours = render_view.render_json(_request({**params, **extra}))
            theirs = renderView(_request({**params, **extra}))
            assert _answer(ours) == _answer(theirs)
    assert ours.status_code == 200
    assert bool(evaluated) == (params in GRAPHITE), "graphite's evaluator only for targets it alone knows"
    assert bool(built) == (params in SHARED), "graphite's objects only where the arrays do not suffice"


@pytest.mark.parametrize("since, columns", [("-1h", 60), ("-2min", 2), ("-1min", 1)])
def test_a_sum_of_many_series_is_graphites_to_the_bit(store_url, since, columns):
    """The sum over 201 series of values twelve orders of magnitude apart: the same float
    bits as graphite's safeSum in name order (any other order of additions differs), on
    grids of many columns, two, and one (numpy would sum a single column pairwise)."""
    import json

    from graphite.render.views import renderView

    from graphite_plugin.render_view import render_json

    request = {"target": "sumSeries(wide.*.*)", "from": since}
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url):
        ours = json.loads(render_json(_request(request)).content)
        theirs = json.loads(renderView(_request(request)).content)
    [series] = ours
    values = [value for value, _ in series["datapoints"]]
    assert [value.hex() for value in values if value is not None] == \
           [value.hex() for value, _ in theirs[0]["datapoints"] if value is not None]
    assert len(values) == columns and sum(value is not None for value in values) > 0.8 * columns


def test_a_render_past_fetch_timeout_answers_a_one_line_503(store_url):
    from django.test import Client

    import graphite_plugin.settings as plugin_settings

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, MIDDLEWARE=plugin_settings.MIDDLEWARE,
                     BG_SELF_METRICS_INTERVAL=0, FETCH_TIMEOUT=0):
        response = Client(raise_request_exception=False).get(
            "/render", {"target": "sumSeries(wide.*.*)", "format": "json", "now": str(NOW), "from": "-1h"})
    assert response.status_code == 503, response.content[:300]
    assert response["Content-Type"].startswith("text/plain") and response.content.count(b"\n") == 1
    assert b"FETCH_TIMEOUT" in response.content and b"Traceback" not in response.content


@pytest.mark.parametrize("block", [1, 2, 3, 7])
def test_series_laid_out_in_blocks_give_renderViewJson_bytes(store_url, block, monkeypatch):
    """Many short series are encoded together, BODY_BLOCK points at a time, never splitting a
    series (one longer than a block goes alone): graphite's bytes whatever the block."""
    import copy

    from graphite.render.views import renderViewJson

    from graphite_plugin import render_json
    from tests.graphite.render_cases import OPTION_SETS, hand_made

    monkeypatch.setattr(render_json, "BODY_BLOCK", block)
    for options in OPTION_SETS[:1] + OPTION_SETS[3:5]:
        data = hand_made()
        expected = renderViewJson(dict(options), copy.deepcopy(data)).content
        assert render_json.encode(copy.deepcopy(data), dict(options)).encode() == expected


def test_points_from_carbon_cache_are_merged_as_graphite_merges_them(carbon_and_data, monkeypatch):
    """With CARBONLINK_HOSTS (a real carbon-cache holding unwritten points), a wide render
    of a plain pattern or its sum: graphite's objects from the shared read, carbon-cache's
    points merged in, graphite's renderView bytes; the cached points are in the answer."""
    import json

    from graphite.render.views import renderView

    import graphite_plugin.render_fast as render_fast
    from graphite_plugin.carbonlink import cached_points
    from graphite_plugin.render_view import render_json

    carbon, _, url, now, cached = carbon_and_data
    built = []
    build = render_fast._graphite_series
    monkeypatch.setattr(render_fast, "_graphite_series", lambda *a: built.append(1) or build(*a))
    with use_finders(["graphite_plugin.Finder"], BG_STORE=url, CARBONLINK_HOSTS=[f"127.0.0.1:{carbon.query_port}"]):
        deadline = time.monotonic() + 30
        while not all(cached_points(["cl.avg", "cl.max"]).values()):  # carbon-cache has them all
            assert time.monotonic() < deadline, "carbon-cache never held the points sent"
            time.sleep(0.2)
        for target in ("cl.*", "sumSeries(cl.*)"):
            request = {"target": target, "now": str(now), "from": "-30min"}
            ours = render_json(_request(request))
            assert _answer(ours) == _answer(renderView(_request(request)))
    assert len(built) == 2
    last = {series["target"]: dict((t, v) for v, t in series["datapoints"]) for series in json.loads(ours.content)}
    name, timestamp, value = cached[0]
    assert last["sumSeries(cl.*)"][timestamp - timestamp % 60] is not None, "a cached point is in the sum"
