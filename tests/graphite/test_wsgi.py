"""graphite_plugin.wsgi: the WSGI front that answers plain finds before Django. Its
answers must be, header for header and byte for byte, what Django's whole stack (with
graphite_plugin.settings' MIDDLEWARE) answers; everything else goes to Django untouched."""
from __future__ import annotations

import pytest

from tests.graphite.front_env import call, environ
from tests.graphite_env import names_store, use_finders

NAMES = [f"srv.web{h}.{m}" for h in range(40) for m in ("cpu", "mem")] + ["srv.db.cpu.user", "srv.é+x.cpu", "top"]
CACHED = {"BG_FIND_CACHE_TTL": 600, "BG_FIND_CACHE_CHECK_INTERVAL": 3600, "BG_SELF_METRICS_INTERVAL": 0}
# short and long answers (GZipMiddleware marks bodies of 200 bytes or more), non-ASCII, leaves, nothing
PATTERNS = ["*", "srv.*", "srv.web1.*", "srv.web1?.cpu", "srv.é+x.*", "top", "srv.db.cpu.*", "nothing.*"]


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    return names_store(tmp_path_factory.mktemp("wsgi-front"), NAMES)


@pytest.fixture
def stack(store_url, monkeypatch):
    """(front, django): the front, and Django's whole handler with our MIDDLEWARE, which the
    front falls back to (graphite.wsgi.application in production)."""
    from django.core.handlers.wsgi import WSGIHandler

    import graphite_plugin.settings as plugin_settings
    import graphite_plugin.wsgi as front

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, MIDDLEWARE=plugin_settings.MIDDLEWARE, **CACHED):
        django = WSGIHandler()
        monkeypatch.setattr(front, "graphite_application", django)
        yield front, django


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_front_find_is_answered_by_the_front_as_by_django(stack, pattern):
    front, django = stack
    for extra in ({}, {"HTTP_ACCEPT": "*/*"}, {"HTTP_ACCEPT_ENCODING": "identity"}):
        env = environ(params={"query": pattern}, **extra)
        first = call(django, env)  # fills the glob cache (graphite's view and worker pool)
        assert front.eligible(env)
        assert front._front_find(dict(env)) is not None, "the front answers the pattern itself"
        assert call(front.application, env) == first
        assert call(front.application, environ(params={"query": pattern, "format": "treejson"}, **extra)) == first
    status, headers, _ = first
    assert status == "200 OK" and ("Vary", "Cookie, Accept-Encoding" if pattern == "srv.*" else "Cookie") in headers


@pytest.mark.parametrize("extra", [
    {"HTTP_COOKIE": "sessionid=abc"}, {"HTTP_ACCEPT_ENCODING": "gzip, deflate"}, {"REMOTE_USER": "alice"},
    {"params": {"query": "srv.*", "format": "pickle"}}, {"params": {"query": "srv.*", "wildcards": "1"}},
    {"params": {"query": "srv.*", "jsonp": "cb"}}, {"method": "POST"},
], ids=str)
def test_requests_the_answer_may_differ_for_go_to_django(stack, extra):
    front, django = stack
    extra = dict(extra)
    method, params = extra.pop("method", "GET"), extra.pop("params", {"query": "srv.*"})
    call(django, environ(params={"query": "srv.*"}))  # cached
    env = environ(method, params, **extra)
    assert not front.eligible(env) or front._front_find(dict(env)) is None
    assert call(front.application, env) == call(django, env)


@pytest.mark.parametrize("form", ["treejson", "json", "completer"])
@pytest.mark.parametrize("pattern", ["srv.*", "srv.web1?.", "nothing.*"])
def test_an_uncached_find_is_answered_by_the_front_as_by_django(stack, monkeypatch, pattern, form):
    """Each format, not cached (the front's glob), then cached: Django's answer, header for
    header (json's intervals from a fixed clock)."""
    import time

    from graphite_plugin.finder import shared_backend

    front, django = stack
    monkeypatch.setattr(time, "time", lambda: 1_800_000_000.5)
    env = environ(params={"query": pattern, "format": form})
    shared_backend().globs.clear()
    served = front._front_find(dict(env))
    assert served is not None, "the front answers a pattern not cached"
    shared_backend().globs.clear()
    expected = call(django, env)
    shared_backend().globs.clear()
    assert call(front.application, env) == expected  # computed by the front
    assert call(front.application, env) == expected  # cached by then
    assert ("Vary", "Cookie") in expected[1] or form != "treejson" or len(expected[2]) >= 200


def test_a_front_find_logs_graphites_lines_once_its_body_is_sent(stack, caplog):
    """The front's find writes graphite's two info log lines, the ones graphite's view
    writes for it, once: after the body has been read, or when the server closes a body it
    did not read."""
    import logging

    front, django = stack

    def lines() -> list[str]:
        found = [r.getMessage() for r in caplog.records if r.name == "info"]
        caplog.clear()
        return found

    # graphite's default user made first: its creation logs a line of its own ("Default user
    # didn't exist, created it") in whichever view asks for it first, Django's or the front's
    call(django, environ(params={"query": "srv.*", "format": "treejson"}))
    caplog.clear()
    for form in ("treejson", "json", "completer"):
        env = environ(params={"query": "srv.web1*.cpu", "format": form})
        with caplog.at_level(logging.INFO, logger="info"):
            call(django, env)
            theirs = lines()
            body = front.application(dict(env), lambda *args: None)
            assert lines() == [], "nothing is logged before the body is sent"
            chunks = iter(body)
            assert next(chunks)  # the server has the last chunk: it writes it before resuming the body
            assert lines() == [], "nothing is logged before the server wrote the last chunk"
            assert next(chunks, None) is None and lines() == theirs and len(theirs) == 2
            body.close()
            unread = front.application(dict(env), lambda *args: None)
            assert lines() == []
            unread.close()
            assert lines() == theirs
            unread.close()
            assert lines() == []


def test_a_refused_pattern_gets_djangos_short_reason(store_url, monkeypatch):
    import graphite_plugin.settings as plugin_settings
    import graphite_plugin.wsgi as front
    from django.core.handlers.wsgi import WSGIHandler

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, MIDDLEWARE=plugin_settings.MIDDLEWARE,
                     **CACHED, BG_MAX_GLOB_RESULTS=2):
        django = WSGIHandler()
        monkeypatch.setattr(front, "graphite_application", django)
        env = environ(params={"query": "srv.*.*", "format": "json"})
        assert front._front_find(dict(env)) is None, "an error answer is the middleware chain's"
        status, headers, body = call(front.application, env)
        assert (status, headers, body) == call(django, env)
    assert status.startswith("400") and b"BG_MAX_GLOB_RESULTS" in body


def test_a_store_error_in_the_front_leaves_the_request_to_django(stack, monkeypatch):
    front, django = stack
    env = environ(params={"query": "srv.*"})
    expected = call(django, env)

    from graphite_plugin.find_view import find_text

    fronts = []  # the two front calls below fail; Django's view (through the middleware) then reads the store

    def broken(request, params):
        if len(fronts) < 2:
            fronts.append(request)
            raise RuntimeError("store unreachable")
        return find_text(request, params)

    monkeypatch.setattr("graphite_plugin.find_view.find_text", broken)
    with pytest.raises(RuntimeError):
        front._front_find(dict(env))
    assert call(front.application, env) == expected  # Django's view (not broken here) answered
    assert len(fronts) == 2, "the front asked the store (and failed) before Django answered"


@pytest.mark.parametrize("host", ["testserver", "www.testserver"])
def test_prepend_www_leaves_a_host_without_www_to_djangos_redirect(stack, host):
    """Under PREPEND_WWW, CommonMiddleware answers 301 to www.<host>: the front must not
    answer such a request 200 itself; a www. host is served as usual (by the front)."""
    from django.test import override_settings

    front, django = stack
    env = environ(params={"query": "srv.*"}, HTTP_HOST=host)
    with override_settings(PREPEND_WWW=True, ALLOWED_HOSTS=["testserver", "www.testserver"]):
        expected = call(django, env)
        served = front._front_find(dict(env))
        assert call(front.application, env) == expected
    if host == "testserver":
        assert expected[0].startswith("301") and ("Location", "http://www.testserver/metrics/find?query=srv.%2A") \
            in expected[1]
        assert served is None
    else:
        assert expected[0].startswith("200") and served is not None


def test_a_clients_slot_is_free_when_its_last_chunk_is_handed_to_the_server(stack):
    """The server writes the last chunk before the body's generator resumes; a client that has
    its whole answer may send its next request meanwhile, and must find its slot free
    (a loaded machine answered 503 to a client that never had more than its share in flight)."""
    front, _ = stack
    env = environ(params={"query": "srv.*"}, REMOTE_ADDR="127.0.0.9")
    from django.test.client import FakePayload

    env["wsgi.input"] = FakePayload(env["_body"])
    body = iter(front.application(env, lambda *args: None))
    assert front.CLIENT_SLOTS.take("127.0.0.9", 1) is False  # the request holds the client's one slot
    last = next(body)  # the front's find answer is one chunk
    assert b"srv.web1" in last
    assert front.CLIENT_SLOTS.take("127.0.0.9", 1) is True, "the slot is given back with the last chunk"
    front.CLIENT_SLOTS.give_back("127.0.0.9")
    assert next(body, None) is None


def test_a_browsers_six_connections_at_once_are_all_served(stack):
    """A browser loads a page's scripts, or a dashboard's graphs, over its six connections to
    the host at once: each of the six requests in progress together is served (the default
    limit was 4: the fifth and sixth got a 503, and the dashboard's Ext never loaded); a
    seventh is refused with its reason, and served once one of the six has finished."""
    from django.test.client import FakePayload

    from graphite_plugin.options import BROWSER_CONNECTIONS, DEFAULT_MAX_CLIENT_REQUESTS

    front, _ = stack
    assert DEFAULT_MAX_CLIENT_REQUESTS == BROWSER_CONNECTIONS == 6

    def start(params: dict) -> tuple[list, object]:
        env = environ(params=params, REMOTE_ADDR="127.0.0.10")
        env["wsgi.input"] = FakePayload(env["_body"])
        statuses: list = []
        return statuses, front.application(env, lambda status, headers, *args: statuses.append(status))

    in_progress = [start({"query": f"srv.web{index}.*"}) for index in range(BROWSER_CONNECTIONS)]
    assert [statuses for statuses, _ in in_progress] == [["200 OK"]] * BROWSER_CONNECTIONS
    refused, body = start({"query": "srv.*"})
    assert refused == ["503 Service Unavailable"] and b"at most 6" in b"".join(body)
    statuses, body = in_progress.pop()
    assert b"srv.web5.cpu" in b"".join(body)  # its last chunk handed over: its slot is free again
    served, body = start({"query": "srv.*"})
    assert served == ["200 OK"] and b"srv.web1" in b"".join(body)
    for _, body in in_progress:
        body.close()


@pytest.mark.parametrize("query_string", [
    "query=srv.*", "query=srv.%2A&format=json", "format=treejson&query=a+b", "query=x&query=srv.*", "query=",
    "query", "query=srv.%C3%A9%2Bx.*", "query=srv.\xc3\xa9.*", "query=%FF%FE", "query=srv.\xe9", "query=a;format=json",
    "query=a&&format=json", "query=a&wildcards=1", "=x", "", "query=a&" + "&".join(["format=json"] * 1000),
], ids=repr)
def test_the_fronts_parameters_are_djangos(stack, query_string):
    """query_parameters gives request.GET's last values (or None: a name the front does not
    answer, or a string Django refuses), for encoded, non-ASCII and malformed strings."""
    from django.core.exceptions import TooManyFieldsSent
    from django.core.handlers.wsgi import WSGIRequest

    from graphite_plugin.find_view import PARAMETERS

    front, _ = stack
    env = environ(params={})
    env["QUERY_STRING"] = query_string
    try:
        django = {key: WSGIRequest(dict(env)).GET[key] for key in WSGIRequest(dict(env)).GET}
    except TooManyFieldsSent:
        django = None
    ours = front.query_parameters(dict(env), PARAMETERS)
    if django is not None and not django.keys() <= PARAMETERS:
        django = None
    assert ours == django
