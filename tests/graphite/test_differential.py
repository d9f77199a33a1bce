"""Differential tests: graphite-web answers the same over whisper + StandardFinder and over
our store + graphite_plugin.Finder.

The same points go into whisper files (`whisper.update_many`) and into the store
(`Accessor.insert_points`) with the same retentions, aggregation methods and
xFilesFactors, at a fixed `now`. Then every request below goes through graphite-web's
real Django app once per finder (graphite.storage.STORE rebuilt in place, see
`graphite_env.use_finders`), and the parsed JSON answers must be equal.

Normalisations, each for a reason graphite-web itself gives:
* `/metrics/find`: graphite shuffles the nodes of each path (Store._list_nodes) before a
  stable sort by name, so a name that is both a leaf and a branch comes out in either
  order: entries are compared sorted. treejson keeps only the first entry per name, so
  for those names only the ids are compared.
* `format=json` leaf `intervals` are left out: whisper's come from `time.time()` and the
  file's mtime.
"""
from __future__ import annotations

import json
import os
import random

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.graphite_env import setup_graphite_app, use_finders, whisper_path

NOW = 1_700_000_000 - 1_700_000_000 % 3600 + 1234  # not aligned on any step
RETENTION = "60s:3h,300s:1d,3600s:30d"
WHISPER_ARCHIVES = [(60, 180), (300, 288), (3600, 720)]

# name -> (aggregation method, xFilesFactor)
METRICS = {
    **{f"srv.web{h}.cpu.{k}": ("average", 0.5) for h in (1, 2, 3) for k in ("user", "system")},
    "srv.web1.cpu": ("average", 0.5),  # a metric and a directory
    "srv.web1.requests": ("sum", 0.0),
    "srv.web2.requests": ("sum", 0.3),
    "srv.db-1.disk:sda.io": ("max", 0.5),
    **{f"agg.{m}.x": (m, 0.5) for m in ("average", "sum", "last", "max", "min", "avg_zero", "absmax", "absmin")},
    "sparse.one": ("average", 0.0),  # a few points far apart
    "sparse.empty": ("average", 0.5),  # no point at all
}

TARGETS = [
    ["srv.*.cpu.user", "srv.web1.cpu.*", "srv.{web1,web2}.cpu.system", "srv.web1.cpu"],
    ["agg.*.x", "srv.*.requests", "sparse.*", "srv.db-1.disk:sda.io", "no.such.metric"],
    ["sumSeries(srv.*.cpu.user)", "aliasByNode(srv.*.cpu.*, 1, 3)", "maxSeries(srv.*.cpu.system)",
     "averageSeries(agg.*.x)"],
    ["summarize(srv.web1.requests, '1h', 'sum')", "movingAverage(srv.web2.cpu.user, 5)",
     "nonNegativeDerivative(srv.web1.requests)", "groupByNode(srv.*.cpu.*, 3, 'sumSeries')"],
    ["asPercent(srv.web1.cpu.user, srv.web1.cpu.system)", "keepLastValue(srv.web1.cpu.user)",
     "highestMax(srv.*.cpu.*, 2)", "transformNull(srv.web3.cpu.user, 0)", "scale(agg.absmin.x, 2)"],
]

# (from, until, maxDataPoints): stage 0, 1 and 2 ranges, stage boundaries, clamping, future
RANGES = [
    ("-1h", "now", None),
    ("-3h", "-1h", None),
    ("-5h", "-2h", None),
    ("-6h", "now", 40),
    ("-25h", "-20h", None),
    ("-3d", "-1d", None),
    ("-40d", "now", 100),
    ("-10min", "-9min", None),
    ("+1h", "+2h", None),
]

FIND_PATTERNS = [
    "*", "srv.*", "srv.web1.*", "srv.web1.cpu", "srv.*.cpu.*", "srv.{web1,db-1}.*", "agg.a*.x",
    "agg.[a-m]*", "srv.web?.cpu.user", "**.x", "srv.**", "nothing.*", "sparse.*", "srv.web1.cpu.*",
]


def _points(name: str, rng: random.Random) -> list[tuple[int, float]]:
    if name == "sparse.empty":
        return []
    if name == "sparse.one":
        return [(NOW - age, float(age)) for age in (30, 7300, 90_000, 1_000_000)]
    points = []
    for age in range(0, 2 * 86400, 60):
        if rng.random() < 0.2:
            continue  # gaps
        value = round(rng.uniform(-50, 100), 3) if name.startswith("agg.") else float(rng.randint(0, 1000))
        points.append((NOW - age, value))
    return points


@pytest.fixture(scope="module")
def two_backends(tmp_path_factory):
    """(whisper directory, store URL) holding the same points."""
    setup_graphite_app()
    import whisper

    root = tmp_path_factory.mktemp("graphite-differential")
    whisper_dir = str(root / "whisper")
    url = f"sqlite://{root / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    rng = random.Random(20261121)
    for name, (method, xff) in METRICS.items():
        points = _points(name, rng)
        path = whisper_path(whisper_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        whisper.create(path, WHISPER_ARCHIVES, xff, method)
        accessor.create_metric(name, MetricMetadata.create(RETENTION, method, xff), now=NOW)
        if points:
            whisper.update_many(path, points, now=NOW)
            result = accessor.insert_points({name: points}, now=NOW)
            assert result.rejected == 0, result.errors
    accessor.close()
    return whisper_dir, url


def _standard(whisper_dir: str):
    # get_index strips WHISPER_DIR (with its slash); `**` strips the STANDARD_DIRS entry plus one character
    return use_finders(["graphite.finders.standard.StandardFinder"],
                       STANDARD_DIRS=[whisper_dir], WHISPER_DIR=whisper_dir + "/")


def _ours(url: str):
    return use_finders(["graphite_plugin.Finder"], BG_STORE=url)


def _client():
    from django.test import Client

    return Client(raise_request_exception=False)


def _render_requests() -> list[dict]:
    requests = []
    for targets in TARGETS:
        for start, until, max_points in RANGES:
            form = {"target": targets, "format": "json", "from": start, "until": until, "now": str(NOW)}
            if max_points:
                form["maxDataPoints"] = str(max_points)
            requests.append(form)
    return requests


def _answers(render_requests: list[dict]) -> dict:
    client = _client()
    answers = {}
    for index, form in enumerate(render_requests):
        response = client.post("/render", form)  # Grafana POSTs its form
        assert response.status_code == 200, (form, response.content[:500])
        answers[("render", index)] = json.loads(response.content)
    for pattern in FIND_PATTERNS:
        for fmt in ("treejson", "completer", "json"):
            response = client.get("/metrics/find", {"query": pattern, "format": fmt})
            assert response.status_code == 200, (pattern, fmt, response.content[:500])
            answers[("find", pattern, fmt)] = _normalize_find(fmt, json.loads(response.content))
    response = client.get("/metrics/expand", {"query": FIND_PATTERNS, "groupByExpr": "1"})
    assert response.status_code == 200
    answers[("expand",)] = json.loads(response.content)
    response = client.get("/metrics/index.json")
    assert response.status_code == 200
    answers[("index",)] = json.loads(response.content)
    return answers


def _normalize_find(fmt: str, content):
    if fmt == "treejson":
        ids = [entry["id"] for entry in content]
        if len(set(ids)) == len(ids) and len({e["text"] for e in content}) == len(content):
            return content
        return sorted(set(ids))  # a name both leaf and branch: graphite keeps either
    if fmt == "completer":
        return sorted(content["metrics"], key=lambda e: (e["path"], e["is_leaf"]))
    for entry in content:
        entry.pop("intervals", None)
    return sorted(content, key=lambda e: (e["path"], e["is_leaf"]))


def test_render_and_find_answers_are_identical(two_backends):
    whisper_dir, url = two_backends
    requests = _render_requests()
    with _standard(whisper_dir):
        expected = _answers(requests)
    with _ours(url):
        actual = _answers(requests)
    assert actual.keys() == expected.keys()
    for key in expected:
        assert actual[key] == expected[key], (key, requests[key[1]] if key[0] == "render" else None)
    # the comparison is not vacuous: data in every stage, gaps, empty answers
    nonempty = [a for k, a in expected.items() if k[0] == "render" and a]
    assert len(nonempty) >= len(requests) - len(TARGETS)  # only the future range is empty
    steps = set()
    has_gap = False
    for answer in nonempty:
        for series in answer:
            points = series["datapoints"]
            if len(points) > 1:
                steps.add(points[1][1] - points[0][1])
            has_gap |= any(v is None for v, _ in points)
    assert {60, 300, 3600} <= steps and has_gap
    assert expected[("index",)] == sorted(METRICS)
    assert {"srv.web1.cpu", "srv.web1.cpu.user"} <= set(expected[("expand",)]["results"]["srv.web1.*"] +
                                                       expected[("expand",)]["results"]["srv.web1.cpu.*"])


def test_maxdatapoints_and_csv_identical(two_backends):
    """Consolidated JSON and CSV of a whole-retention request."""
    whisper_dir, url = two_backends
    form = {"target": ["srv.web1.cpu.*", "sumSeries(agg.*.x)"], "from": "-30d", "now": str(NOW)}
    bodies = []
    for backend in (_standard(whisper_dir), _ours(url)):
        with backend:
            client = _client()
            json_answer = client.post("/render", {**form, "format": "json", "maxDataPoints": "77"})
            csv_answer = client.post("/render", {**form, "format": "csv"})
            assert json_answer.status_code == csv_answer.status_code == 200
            bodies.append((json.loads(json_answer.content), csv_answer.content))
    assert bodies[0] == bodies[1]
    assert len(bodies[0][0][0]["datapoints"]) <= 77 and bodies[0][1].count(b"\n") > 700
