"""Points still in a real carbon-cache are merged into our series as graphite-web merges
them into whisper's (CARBONLINK_HOSTS set).

carbon-cache (stock `carbon-cache.py`, whisper database) runs with MIN_TIMESTAMP_LAG and the
timesorted write strategy (the only one that heeds the lag), so that its writer leaves
recent points in the cache, where only CarbonLink can see them.
The same older points are in a whisper file and in our store; /render through
StandardFinder and through our finder must then agree, cached points included, in the
raw stage and in a coarser one (where graphite consolidates the cached points with the
metric's aggregation method).
"""
from __future__ import annotations

import json

from tests.graphite.carbonlink_env import METRICS
from tests.graphite_env import use_finders


def render(form: dict) -> list:
    from django.test import Client

    response = Client(raise_request_exception=False).post("/render", form)
    assert response.status_code == 200, response.content[:500]
    return json.loads(response.content)


def test_cached_points_merged_like_whisper_reader(carbon_and_data, monkeypatch):
    from graphite_plugin import carbonlink as plugin_carbonlink

    carbon, whisper_dir, url, now, cached = carbon_and_data
    hosts = [f"127.0.0.1:{carbon.query_port}"]
    forms = [{"target": list(METRICS), "format": "json", "from": start, "now": str(now)} for start in ("-30min", "-3h")]
    with use_finders(["graphite.finders.standard.StandardFinder"], STANDARD_DIRS=[whisper_dir],
                     CARBONLINK_HOSTS=hosts):
        expected = [render(form) for form in forms]
    answers = []  # every CarbonLink answer our finder reads (over graphite's pool, with the bounded unpickler)
    ask = plugin_carbonlink._ask
    monkeypatch.setattr(plugin_carbonlink, "_BULK_ONLY", {})
    monkeypatch.setattr(plugin_carbonlink, "_ask", lambda *args: answers.append(ask(*args)) or answers[-1])
    with use_finders(["graphite_plugin.Finder"], BG_STORE=url, CARBONLINK_HOSTS=hosts):
        actual = [render(form) for form in forms]
    # carbon-cache refuses our compact query once (remembered), then one bulk request per
    # render for both series, not one request per series
    refused = [a for a in answers if "error" in a]
    assert len(refused) == 1 and refused[0]["error"].startswith("Invalid request type")
    bulk = [a for a in answers if "error" not in a]
    assert len(bulk) == len(forms) and all(set(a["datapointsByMetric"]) == set(METRICS) for a in bulk)
    monkeypatch.setattr(plugin_carbonlink, "BULK_ONLY_SECONDS", -1.0)  # the refusal forgotten at once:
    answers.clear()  # each render asks the compact query again, then the bulk one
    plugin_carbonlink._BULK_ONLY.clear()
    with use_finders(["graphite_plugin.Finder"], BG_STORE=url, CARBONLINK_HOSTS=hosts):
        assert [render(forms[0]) for _ in range(2)] == [expected[0]] * 2
    assert ["error" in a for a in answers] == [True, False, True, False]
    with use_finders(["graphite_plugin.Finder"], BG_STORE=url, CARBONLINK_HOSTS=[]):
        without = render(forms[0])
    assert actual == expected
    raw = {series["target"]: dict((t, v) for v, t in series["datapoints"]) for series in actual[0]}
    for name, timestamp, value in cached:  # every cached point is in the answer
        assert raw[name][timestamp - timestamp % 60] == value
    assert all(v is None for series in without for v, t in series["datapoints"] if t > now - 600)
    coarse = {series["target"]: series["datapoints"] for series in actual[1]}
    assert {b[1] - a[1] for a, b in zip(coarse["cl.max"], coarse["cl.max"][1:])} == {300}
    assert not list(carbon.whisper_dir.rglob("*.wsp")), "carbon-cache's writer took the points out of its cache"
