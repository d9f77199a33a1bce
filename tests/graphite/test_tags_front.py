"""graphite_plugin.tags_front: `/tags/findSeries` and `/tags/autoComplete/{tags,values}`
answered before Django. Its answers must be, header for header and byte for byte, what
Django's whole stack (graphite's views, graphite_plugin.settings' MIDDLEWARE) answers;
every error, and every request the chain could answer otherwise, goes to Django."""
from __future__ import annotations

import pytest

from biggraphite_like.accessor import Accessor
from tests.graphite.front_env import call, environ
from tests.graphite_env import setup_graphite_app, use_finders

SERIES = ([f"cpu.user;host=web{h};dc={'us' if h % 2 else 'eu'};core={h % 4}" for h in range(60)]
          + [f"disk.used;host=db{h};dc=ap" for h in range(5)] + ["net.rx;host=é+x;dc=us", "plain;x=1"])
OURS = {"TAGDB": "graphite_plugin.tagdb.TagDB", "BG_SELF_METRICS_INTERVAL": 0}
FIND = "/tags/findSeries"
TAGS = "/tags/autoComplete/tags"
VALUES = "/tags/autoComplete/values"
# answered by the front: short and long bodies (GZipMiddleware marks 200 bytes or more),
# non-ASCII, nothing found, both spellings of expr, limits, prefixes, pretty printing
ANSWERED = [
    (FIND, {"expr": "host=web1"}), (FIND, {"expr": "name=cpu.user"}), (FIND, {"expr": ["dc=us", "core=1"]}),
    (FIND, {"expr[]": ["dc=eu", "host=~web1"]}), (FIND, {"expr": ["name=~cpu", "host!=~web[1-4]", "core!=0"]}),
    (FIND, {"expr": "host=é+x"}), (FIND, {"expr": "host=nosuch"}), (FIND, {"expr": "dc=ap", "pretty": "1"}),
    (FIND, {"expr": ["dc=us", "dc=eu"]}), (FIND, {"expr": "x=1", "local": "1", "jsonp": "cb"}),
    (TAGS, {}), (TAGS, {"tagPrefix": "c"}), (TAGS, {"expr": "dc=ap"}), (TAGS, {"expr": ["dc=us", "core=1"]}),
    (TAGS, {"expr": "name=cpu.user", "tagPrefix": "h"}), (TAGS, {"limit": "2"}), (TAGS, {"limit": "0"}),
    (TAGS, {"expr[]": "host=~db"}), (TAGS, {"expr": "dc=nosuch"}), (TAGS, {"tagPrefix": "zz"}),
    (VALUES, {"tag": "host"}), (VALUES, {"tag": "host", "valuePrefix": "web1"}), (VALUES, {"tag": "dc", "expr": "core=2"}),
    (VALUES, {"tag": "host", "expr": ["dc=us", "name=~cpu"], "limit": "5"}), (VALUES, {"tag": "core", "expr": "dc=ap"}),
    (VALUES, {"tag": "host", "limit": "0"}), (VALUES, {"tag": "nosuch"}), (VALUES, {"tag": "host", "pretty": "1"}),
]
# errors: graphite's view (and the chain's error answer) answers them
ERRORS = [
    (FIND, {}), (FIND, {"expr": "a;b=c"}), (FIND, {"expr": "dc=~.*"}), (FIND, {"expr": "host=~(a+)+"}),
    (FIND, {"expr": ["dc!=us"]}), (TAGS, {"expr": "host!=web1"}), (TAGS, {"limit": "abc"}),
    (VALUES, {}), (VALUES, {"expr": "dc=us"}), (VALUES, {"tag": "host", "expr": "host=~[", "limit": "3"}),
    (VALUES, {"tag": "host", "limit": "x"}),
]


def _no_django(environ, start_response):
    raise AssertionError(f"{environ['PATH_INFO']} went to Django")


def _unexpected(status, headers):
    raise AssertionError(f"the front answered {status} {headers}")


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    setup_graphite_app()
    url = f"sqlite://{tmp_path_factory.mktemp('tags-front') / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    accessor.tags.tag_series(SERIES)
    accessor.close()
    return url


@pytest.fixture
def stack(store_url, monkeypatch):
    """(front, django): graphite_plugin.wsgi's application, and Django's whole handler with
    our MIDDLEWARE, which the front falls back to (graphite.wsgi.application in production)."""
    from django.core.handlers.wsgi import WSGIHandler

    import graphite_plugin.settings as plugin_settings
    import graphite_plugin.wsgi as front

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, MIDDLEWARE=plugin_settings.MIDDLEWARE, **OURS):
        django = WSGIHandler()
        monkeypatch.setattr(front, "graphite_application", django)
        yield front, django


@pytest.mark.parametrize(("path", "params"), ANSWERED, ids=str)
def test_a_tag_read_is_answered_by_the_front_as_by_django(stack, monkeypatch, path, params):
    front, django = stack
    for extra in ({}, {"HTTP_ACCEPT": "*/*"}, {"HTTP_ACCEPT_ENCODING": "identity"}):
        env = environ(params=params, path=path, **extra)
        monkeypatch.setattr(front, "graphite_application", django)
        expected = call(django, env)
        monkeypatch.setattr(front, "graphite_application", _no_django)  # the front answers it itself
        assert call(front.application, env) == expected
        assert call(front.application, env) == expected  # graphite's TagDB cache: the same again
    status, headers, body = expected
    assert status == "200 OK" and ("Content-Type", "application/json") in headers
    assert (("Vary", "Accept-Encoding") in headers) == (len(body) >= 200)


@pytest.mark.parametrize(("query", "found"), [
    ("expr=host%3D%E9%2Bx", b"[]"), ("expr=host%3D\u00c3\u00a9%2Bx", b'["net.rx;dc=us;host=\\u00e9+x"]'),
    ("expr=host%3D\u00e9%2Bx", b'["net.rx;dc=us;host=\\u00e9+x"]'),  # not UTF-8: read as ISO-8859-1
    ("expr=dc%3Dap&pretty=1&pretty=", None), ("expr=dc%3Dap;expr=core%3D1", None),
    ("expr=dc%3Dap&expr", None), ("expr=dc%3Dap&expr%5B%5D=dc%3Dus", None), ("expr%5B%5D=dc%3Dap&expr=", None),
    ("expr=x%3D1&expr=x%3D1&limit=2&limit=", b'["plain;x=1"]'),
], ids=repr)
def test_the_front_reads_a_raw_query_string_as_django_does(stack, monkeypatch, query, found):
    """The front parses the query string itself (Django's QueryDict's rules: UTF-8 else
    ISO-8859-1, a WSGI string's ISO-8859-1 bytes, `&` alone separates, blank values, the
    last of a repeated parameter, DATA_UPLOAD_MAX_NUMBER_FIELDS: Django's 400 past it)."""
    front, django = stack
    monkeypatch.setattr(front, "graphite_application", django)
    answers = []
    for path in (FIND, TAGS, VALUES):
        env = environ(path=path)
        env["QUERY_STRING"] = query
        answers.append(call(django, env))
        assert call(front.application, env) == answers[-1]
    if found is not None:  # findSeries' answer
        assert answers[0][2] == found


def test_a_query_past_djangos_number_of_fields_is_left_to_django(stack):
    """More than DATA_UPLOAD_MAX_NUMBER_FIELDS parameters: Django refuses the query string
    (TooManyFieldsSent), so the front does not answer."""
    from graphite_plugin import tags_front

    env = environ(path=FIND)
    env["QUERY_STRING"] = "expr=x%3D1&" + "&".join(f"f{i}=1" for i in range(1000))
    assert tags_front.serve(dict(env), _unexpected) is None
    env["QUERY_STRING"] = "expr=x%3D1&" + "&".join(f"f{i}=1" for i in range(998))
    assert b"".join(tags_front.serve(dict(env), lambda *a: None)) == b'["plain;x=1"]'


def test_the_answers_are_not_vacuous(stack):
    """Long and short answers, found series, values and tags: what the comparisons compare."""
    front, _ = stack
    bodies = {(path, str(params)): call(front.application, environ(params=params, path=path))[2] for path, params in ANSWERED}
    assert bodies[(FIND, str({"expr": "name=cpu.user"}))].count(b"cpu.user;") == 60
    assert bodies[(FIND, str({"expr": "host=\u00e9+x"}))] == b'["net.rx;dc=us;host=\\u00e9+x"]'
    assert bodies[(TAGS, str({"expr": "dc=ap"}))] == b'["host", "name"]'
    assert bodies[(VALUES, str({"tag": "host", "limit": "0"}))] == b"[]"
    assert sum(len(body) >= 200 for body in bodies.values()) >= 4


@pytest.mark.parametrize(("path", "params"), ERRORS, ids=str)
def test_an_error_falls_through_to_djangos_answer(stack, path, params):
    from graphite_plugin import tags_front

    front, django = stack
    env = environ(params=params, path=path)
    assert tags_front.eligible(env)
    assert tags_front.serve(dict(env), _unexpected) is None
    status, headers, body = call(front.application, env)
    assert (status, headers, body) == call(django, env)
    assert status[:3] in ("400", "500") and body


@pytest.mark.parametrize("extra", [
    {"HTTP_COOKIE": "sessionid=abc"}, {"HTTP_ACCEPT_ENCODING": "gzip, deflate"}, {"REMOTE_USER": "alice"},
    {"HTTP_REMOTE_USER": "alice"}, {"method": "POST"}, {"path": "/tags/findSeries/"}, {"path": "/tags"},
    {"HTTP_HOST": "evil.example"}, {"settings": {"PREPEND_WWW": True}},
], ids=str)
def test_requests_the_chain_may_answer_otherwise_go_to_django(stack, extra):
    from django.test import override_settings

    from graphite_plugin import tags_front

    front, django = stack
    extra = dict(extra)
    method, path, settings = extra.pop("method", "GET"), extra.pop("path", FIND), extra.pop("settings", {})
    env = environ(method, {"expr": "dc=ap"}, path, **extra)
    with override_settings(ALLOWED_HOSTS=["testserver"], **settings):
        assert tags_front.serve(dict(env), _unexpected) is None
        assert call(front.application, env) == call(django, env)


def test_another_tag_database_or_finder_is_left_to_django(store_url, monkeypatch):
    """graphite's LocalDatabaseTagDB (findSeries), or a second finder (whose autocomplete
    graphite merges): the front answers none of them."""
    import graphite_plugin.settings as plugin_settings
    import graphite_plugin.wsgi as front
    from django.core.handlers.wsgi import WSGIHandler

    from graphite_plugin import tags_front

    local = dict(OURS, TAGDB="graphite.tags.localdatabase.LocalDatabaseTagDB")
    for finders, settings in ((["graphite_plugin.Finder"], local),
                              (["graphite_plugin.Finder", "graphite.finders.standard.StandardFinder"], OURS)):
        with use_finders(finders, BG_STORE=store_url, MIDDLEWARE=plugin_settings.MIDDLEWARE, **settings):
            django = WSGIHandler()
            monkeypatch.setattr(front, "graphite_application", django)
            for path, params in ((FIND, {"expr": "dc=ap"}), (TAGS, {"expr": "dc=ap"}), (VALUES, {"tag": "dc"})):
                env = environ(params=params, path=path)
                assert tags_front.serve(dict(env), _unexpected) is None
                assert call(front.application, env) == call(django, env)


def test_a_store_error_in_the_front_leaves_the_request_to_django(stack, monkeypatch):
    from graphite_plugin import tags_front

    front, django = stack
    env = environ(params={"expr": "dc=ap"}, path=FIND)
    expected = call(django, env)

    def broken(request, log_lines):
        raise RuntimeError("store unreachable")

    monkeypatch.setitem(tags_front._VIEWS, FIND, broken)
    with pytest.raises(RuntimeError):
        tags_front.answer(dict(env))
    assert call(front.application, env) == expected  # Django's view (not broken) answered
    assert expected[0] == "200 OK"


def test_find_series_logs_as_graphite_and_keeps_its_cache(stack, monkeypatch):
    """graphite_plugin.tagdb.TagDB skips only a DummyCache (graphite's default): the same
    log line as BaseTagDB's; with a cache that keeps answers, graphite's (a series tagged
    after a query is not in its cached answer, through the front as through Django)."""
    from django.test import override_settings
    from graphite.storage import STORE

    front, django = stack
    lines = []
    monkeypatch.setattr(STORE.tagdb, "log", type("Log", (), {"info": staticmethod(lines.append)})())
    env = environ(params={"expr": "dc=ap"}, path=FIND)
    assert call(front.application, env)[2].count(b"disk.used") == 5
    assert len(lines) == 1 and lines[0].startswith("graphite_plugin.tagdb.TagDB.find_series :: completed in ")
    with pytest.raises(ValueError):
        STORE.tagdb.find_series(["a;b=c"])
    assert lines[-1].startswith("graphite_plugin.tagdb.TagDB.find_series :: failed in ")
    locmem = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tags-front"}}
    with override_settings(CACHES=locmem, TAGDB_CACHE_DURATION=60):
        answers = [call(front.application, env)]
        STORE.tagdb.tag_series("disk.used;host=db9;dc=ap")
        try:
            answers += [call(front.application, env), call(django, env)]
            assert answers[0] == answers[1] == answers[2]  # graphite's cached answer, both ways
            assert lines[-1].startswith("graphite_plugin.tagdb.TagDB.find_series :: completed (cached) in ")
            assert call(front.application, environ(params={"expr": ["dc=ap", "host!=x"]}, path=FIND))[2].count(
                b"disk.used") == 6  # another query: not cached, it has the new series
        finally:
            STORE.tagdb.del_series("disk.used;host=db9;dc=ap")
