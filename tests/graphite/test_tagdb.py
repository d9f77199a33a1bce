"""Differential tests of tags through graphite-web's real Django app: whisper +
StandardFinder + LocalDatabaseTagDB on one side, our store + graphite_plugin.Finder +
graphite_plugin.tagdb.TagDB on the other, the same tagged series with the same points.

Every tags endpoint, both autocomplete calls (with and without expressions and prefixes)
and renders of seriesByTag, groupByTags and aliasByTags must answer the same. Ours has no
`id` fields (LocalDatabaseTagDB's row ids): they are removed from graphite's answers.
One documented difference: after delSeries, LocalDatabaseTagDB keeps listing a tag no
series has any more (it never deletes tag rows); ours lists only tags some series has
(asserted separately below).
"""
from __future__ import annotations

import json
import os
import random

import pytest
from django.test import override_settings

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.graphite_env import setup_graphite_app, use_finders

NOW = 1_700_000_000 - 1_700_000_000 % 3600 + 1234
RETENTION = "60s:3h,300s:1d"
WHISPER_ARCHIVES = [(60, 180), (300, 288)]
SERIES = sorted({
    f"{name};host={host};dc={dc}{extra}"
    for name in ("disk.used", "cpu.user", "net.rx")
    for host, dc in (("web1", "us"), ("web2", "us"), ("web10", "eu"), ("db1", "eu"), ("db.2", "ap"))
    for extra in ("", ";core=0", ";core=1;env=prod")
    if not (name == "net.rx" and extra)
} | {"plain;x=1", "~tilde.name;x=2", 'om.metric{host="web1",dc="us"}'})
# sent in carbon's order (any order of tags): the answers must give canonical paths

EXPRESSIONS = [
    ["host=web1"], ["name=cpu.user"], ["name=cpu.user", "host!=web1"], ["dc=eu", "core="], ["dc=eu", "core!="],
    ["host=~web"], ["host=~web1"], ["host=~^web1$"], ["host=~.*1", "name!=~disk"], ["host=~db\\.", "name=~net"],
    ["env=prod", "dc!=us"], ["x=~."], ["core=0", "env="], ["host!=", "dc=ap"], ["name=~(cpu|net)", "host=~^d"],
    ["host=nosuch"], ["nosuch=~a"], ["dc=us", "host!=~web1"], ["host=~^web|x"], ["name=om.metric"],
    # several = terms: their postings are intersected, the rarest driving
    ["name=cpu.user", "dc=us"], ["dc=eu", "core=0", "name=cpu.user"], ["dc=us", "env=prod", "host=~web1", "core!=0"],
    ["dc=us", "host=db1"], ["dc=us", "dc=eu"], ["name=net.rx", "name=net.rx", "host!=web2"],
]
REFUSED = [["dc=~.*"], ["a!=b", "c="], ["a;b=c"]]  # 400 on both sides
TAG_CALLS = [
    "seriesByTag('name=cpu.user')", "seriesByTag('host=~web', 'core=')", "seriesByTag('dc=eu', 'name=~n')",
    "sumSeries(seriesByTag('name=disk.used'))",
    "groupByTags(seriesByTag('name=cpu.user'), 'sum', 'dc')",
    "groupByTags(seriesByTag('host=~.*1', 'core!='), 'max', 'name', 'core')",
    "aliasByTags(seriesByTag('name=net.rx'), 'host', 'name')",
    "aliasByTags(seriesByTag('dc=us', 'env=prod'), 1, 'host')",
]


def _points(rng: random.Random) -> list[tuple[int, float]]:
    return [(NOW - age, float(rng.randint(0, 100))) for age in range(0, 3 * 3600, 60) if rng.random() > 0.1]


@pytest.fixture(scope="module")
def two_backends(tmp_path_factory):
    """(whisper directory, store URL) with the same tagged series and points."""
    setup_graphite_app()
    import whisper
    from graphite.tags.utils import TaggedSeries

    root = tmp_path_factory.mktemp("tags-differential")
    whisper_dir = str(root / "whisper")
    url = f"sqlite://{root / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    rng = random.Random(17)
    for name in SERIES:
        points = _points(rng)
        path = TaggedSeries.parse(name).path
        file = os.path.join(whisper_dir, TaggedSeries.encode(path, os.sep) + ".wsp")  # as carbon names it
        os.makedirs(os.path.dirname(file), exist_ok=True)
        whisper.create(file, WHISPER_ARCHIVES, 0.5, "average")
        whisper.update_many(file, points, now=NOW)
        accessor.create_metric(name, MetricMetadata.create(RETENTION, "average", 0.5), now=NOW)
        assert accessor.insert_points({name: points}, now=NOW).rejected == 0
    accessor.close()
    return whisper_dir, url


def _graphite(whisper_dir: str):
    return use_finders(["graphite.finders.standard.StandardFinder"], STANDARD_DIRS=[whisper_dir],
                       WHISPER_DIR=whisper_dir + "/", TAGDB="graphite.tags.localdatabase.LocalDatabaseTagDB",
                       TAGDB_CACHE_DURATION=0)


def _ours(url: str):
    return use_finders(["graphite_plugin.Finder"], BG_STORE=url, TAGDB="graphite_plugin.tagdb.TagDB",
                       TAGDB_CACHE_DURATION=0)


def _client():
    from django.test import Client

    return Client(raise_request_exception=False)


def _clear_graphite_tagdb():
    from graphite.tags.models import Series, SeriesTag, Tag, TagValue

    for model in (SeriesTag, Series, Tag, TagValue):
        model.objects.all().delete()


def _strip_ids(content):
    if isinstance(content, list):
        return [_strip_ids(c) for c in content]
    if isinstance(content, dict):
        return {k: _strip_ids(v) for k, v in content.items() if k != "id"}
    return content


def _json(response):
    """The answer without ids; an error answer is compared by its status alone (the
    messages differ: ours says more)."""
    if response.status_code != 200:
        return ("status", response.status_code)
    return _strip_ids(json.loads(response.content))


def _answers(client) -> dict:
    answers = {}
    # tagging (the same calls both sides: LocalDatabaseTagDB learns the series here)
    answers["tagMultiSeries"] = _json(client.post("/tags/tagMultiSeries", {"path": SERIES}))
    answers["tagSeries"] = _json(client.post("/tags/tagSeries", {"path": "cpu.user;host=web1;dc=us;core=0"}))
    answers["tags"] = _json(client.get("/tags"))
    for form in ({"filter": "^h"}, {"filter": "o"}, {"limit": "2"}, {"filter": "e", "limit": "1"}):
        answers[("tags", str(form))] = _json(client.get("/tags", form))
    for tag in ("host", "dc", "name", "core", "nosuch"):
        for form in ({}, {"filter": "web"}, {"filter": "^d"}, {"limit": "2"}, {"filter": "1$"}):
            answers[("tag", tag, str(form))] = _json(client.get(f"/tags/{tag}", form))
    for exprs in EXPRESSIONS + REFUSED:
        answers[("findSeries", *exprs)] = _json(client.get("/tags/findSeries", {"expr": exprs}))
    for exprs in ([], ["name=cpu.user"], ["host=~web", "dc=us"], ["dc=nosuch"], ["dc=eu", "name=cpu.user"],
                  ["core=0", "dc=us", "name=cpu.user"]):
        for prefix in (None, "", "c", "h", "zz"):
            form = {"expr": exprs, **({"tagPrefix": prefix} if prefix is not None else {})}
            answers[("autoTags", *exprs, prefix)] = _json(client.get("/tags/autoComplete/tags", form))
            for tag in ("host", "core", "name"):
                vform = {"expr": exprs, "tag": tag, **({"valuePrefix": prefix} if prefix is not None else {})}
                answers[("autoValues", tag, *exprs, prefix)] = _json(client.get("/tags/autoComplete/values", vform))
        answers[("autoTags", "limit", *exprs)] = _json(client.get("/tags/autoComplete/tags", {"expr": exprs,
                                                                                            "limit": "2"}))
    for target in TAG_CALLS:
        form = {"target": target, "format": "json", "from": "-2h", "until": "now", "now": str(NOW)}
        answers[("render", target)] = _json(client.post("/render", form))
    # deletion of series whose tags other series still have: same answers afterwards
    gone = ["net.rx;host=db.2;dc=ap", "cpu.user;dc=eu;host=db1;core=1;env=prod"]
    answers["delSeries"] = _json(client.post("/tags/delSeries", {"path": gone}))
    answers["after delete: tags"] = _json(client.get("/tags"))
    answers["after delete: host"] = _json(client.get("/tags/host"))
    answers["after delete: env"] = _json(client.get("/tags/env"))
    answers["after delete: find"] = _json(client.get("/tags/findSeries", {"expr": ["dc=~."]}))
    return answers


def test_every_tags_endpoint_and_tag_render_is_identical(two_backends):
    whisper_dir, url = two_backends
    with _graphite(whisper_dir):
        _clear_graphite_tagdb()
        expected = _answers(_client())
    with _ours(url):
        actual = _answers(_client())
    assert actual.keys() == expected.keys()
    for key in expected:
        assert actual[key] == expected[key], key
    errors = [k for k, a in expected.items() if isinstance(a, tuple)]
    assert errors == [("findSeries", *exprs) for exprs in REFUSED]
    assert {expected[k] for k in errors} == {("status", 400)}
    # not vacuous: real series, counts, renders with points
    assert len(expected["tagMultiSeries"]) == len(SERIES)
    in_us = sum(1 for s in SERIES if "dc=us" in s or 'dc="us"' in s)
    assert {"value": "us", "count": in_us} in expected[("tag", "dc", "{}")]["values"]
    assert len(expected[("findSeries", "host=web1")]) == sum(1 for s in SERIES if "host=web1;" in s or 'host="web1"' in s)
    renders = [a for k, a in expected.items() if k[0] == "render"]
    assert all(renders) and all(any(v is not None for v, _ in s["datapoints"]) for r in renders for s in r)
    assert expected[("render", "aliasByTags(seriesByTag('name=net.rx'), 'host', 'name')")][0]["target"] == "db.2.net.rx"


def test_a_tag_no_series_has_any_more_is_not_listed(two_backends):
    """LocalDatabaseTagDB lists tags forever (it never deletes tag rows); ours forgets a
    tag once no series has it (Grafana's autocomplete stops offering it)."""
    whisper_dir, url = two_backends
    listed = []
    for is_graphite, backend in ((True, _graphite(whisper_dir)), (False, _ours(url))):
        with backend:
            if is_graphite:
                _clear_graphite_tagdb()
            client = _client()
            _json(client.post("/tags/tagSeries", {"path": "lonely;only=here"}))
            _json(client.post("/tags/delSeries", {"path": "lonely;only=here"}))
            listed.append("only" in [t["tag"] for t in _json(client.get("/tags"))])
    assert listed == [True, False]


def _reads() -> list[tuple[str, dict]]:
    """The GET reads graphite_plugin.tags_front answers: findSeries, both autocompletes."""
    reads = [("/tags/findSeries", {"expr": exprs}) for exprs in EXPRESSIONS + REFUSED]
    for exprs in ([], ["name=cpu.user"], ["host=~web", "dc=us"], ["dc=nosuch"], ["core=0", "dc=us", "name=cpu.user"]):
        for prefix in (None, "c", "h", "zz"):
            reads.append(("/tags/autoComplete/tags", {"expr": exprs, **({"tagPrefix": prefix} if prefix else {})}))
            for tag in ("host", "core", "name"):
                reads.append(("/tags/autoComplete/values",
                              {"expr": exprs, "tag": tag, **({"valuePrefix": prefix} if prefix else {})}))
        reads.append(("/tags/autoComplete/tags", {"expr": exprs, "limit": "2"}))
    return reads


def test_the_front_answers_tag_reads_as_graphite_with_its_local_tagdb(two_backends, monkeypatch):
    """Our front (graphite_plugin.wsgi, Django never reached) against Django's whole stack
    over LocalDatabaseTagDB and StandardFinder: the same status, headers and bytes for every
    read graphite answers 200; its refusals are Django's on our side too (400 both)."""
    from django.core.handlers.wsgi import WSGIHandler

    import graphite_plugin.settings as plugin_settings
    import graphite_plugin.wsgi as front
    from tests.graphite.front_env import call, environ

    def no_django(env, start_response):
        raise AssertionError(f"{env['PATH_INFO']} went to Django")

    whisper_dir, url = two_backends
    chain = {"MIDDLEWARE": plugin_settings.MIDDLEWARE, "BG_SELF_METRICS_INTERVAL": 0}
    answers = []
    for backend, graphite in ((_graphite(whisper_dir), True), (_ours(url), False)):
        with backend:
            with override_settings(**chain):
                if graphite:
                    _clear_graphite_tagdb()
                django = WSGIHandler()
                assert call(django, environ("POST", {"path": SERIES}, path="/tags/tagMultiSeries"))[0] == "200 OK"
                side = []
                for path, params in _reads():
                    env = environ(params=params, path=path)
                    if graphite or params.get("expr") in REFUSED:
                        side.append(call(django, env))
                    else:
                        monkeypatch.setattr(front, "graphite_application", no_django)
                        side.append(call(front.application, env))
                answers.append(side)
    expected, actual = answers
    for read, theirs, ours in zip(_reads(), expected, actual):
        if read[1].get("expr") in REFUSED:
            assert theirs[0] == ours[0] == "400 Bad Request", read
        else:
            assert ours == theirs, read
    bodies = [body for status, _, body in expected if status == "200 OK"]
    assert len(bodies) == len(_reads()) - len(REFUSED) and sum(len(body) > 2 for body in bodies) > 40
    assert any(len(body) >= 200 for body in bodies)
