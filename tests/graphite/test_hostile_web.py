"""graphite-web under `bgl run`'s own gunicorn against hostile clients (issue #30): each
hostile request gets a short, clear answer (a 4xx/503 with its reason, or a closed
connection) while other clients keep being served.

The stack serves a store of 3,000 metrics (`srv.h<i>.m<j>`, 60s:1d, a point each in the
last hour). Hostile clients use their own loopback addresses (127.0.0.<n>): graphite-web
counts requests in progress per client address (BG_MAX_CLIENT_REQUESTS).
"""
from __future__ import annotations

import collections
import http.client
import json
import os
import re
import signal
import socket
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.stack_env import BglRun

pytestmark = pytest.mark.slow

HOSTS, METRICS = 100, 30  # 3,000 metrics
NORMAL_TARGET = "srv.h1.*"
TRACEBACK = re.compile(r"Traceback|File \"|site-packages|/usr/|/work/|\.py\b")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    from biggraphite_like.accessor import Accessor
    from biggraphite_like.metric import MetricMetadata

    data = tmp_path_factory.mktemp("hostile-web") / "data"
    data.mkdir()
    accessor = Accessor.from_url(f"sqlite://{data / 'bgl.db'}")
    accessor.syncdb()
    names = [f"srv.h{h}.m{m}" for h in range(HOSTS) for m in range(METRICS)]
    now = int(time.time())
    accessor.insert_points({name: [(now - 600, 1.0)] for name in names}, now=now,
                           create=MetricMetadata.create("60s:1d", "average", 0.5))
    accessor.close()
    run = BglRun(data)
    run.start()
    with ThreadPoolExecutor(6) as pool:  # both workers load graphite's functions before any timing
        list(pool.map(lambda i: normal(run, f"127.0.1.{i}", timeout=120), range(12)))
    yield run
    try:
        assert run.stop(signal.SIGTERM) == 0
    finally:
        run.kill()


def http_request(stack: BglRun, path: str, source: str = "127.0.0.1", method: str = "GET", body: bytes | None = None,
                 headers: dict | None = None, timeout: float = 60.0) -> tuple[int, bytes, str]:
    """(status, body, content type) of one request from `source` (a loopback address)."""
    connection = http.client.HTTPConnection("127.0.0.1", stack.ports["--web-port"], timeout=timeout,
                                            source_address=(source, 0))
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read(), response.getheader("Content-Type", "")
    finally:
        connection.close()


def render_path(**params: object) -> str:
    return "/render?" + urllib.parse.urlencode(params, doseq=True)


def normal_requests(stack: BglRun, source: str = "127.0.0.1", timeout: float = 60.0) -> list[float]:
    """One normal client's render and find, each answered 200 with data; returns their times."""
    times = []
    for path in (render_path(target=NORMAL_TARGET, format="json", **{"from": "-1h"}), "/metrics/find?query=srv.h2.*"):
        started = time.monotonic()
        status, body, _ = http_request(stack, path, source, timeout=timeout)
        times.append(time.monotonic() - started)
        assert status == 200, body[:500]
        assert len(json.loads(body)) == METRICS
    return times


def normal(stack: BglRun, source: str = "127.0.0.1", timeout: float = 60.0) -> float:
    """normal_requests' total time."""
    return sum(normal_requests(stack, source, timeout))


def assert_short_reason(status: int, body: bytes, content_type: str, *words: str) -> None:
    """A 4xx/5xx whose body is a short text reason holding `words`, with no traceback or path."""
    assert 400 <= status < 600, (status, body[:300])
    text = body.decode("utf-8", "replace")
    assert len(text) < 1000 and content_type.startswith(("text/plain", "application/json")), (content_type, text[:2000])
    assert not TRACEBACK.search(text), text
    for word in words:
        assert word in text, (word, text)


def served_meanwhile(stack: BglRun, hostile, count: int = 3, timeout: float = 10.0) -> list:
    """Run `hostile()` while a normal client (127.0.0.1) makes `count` requests, each within
    `timeout` seconds; returns what hostile() returned."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(hostile)
        time.sleep(0.5)
        for _ in range(count):
            normal(stack, timeout=timeout)
        return future.result(timeout=300)


# -- row 4: idle and slow connections -------------------------------------------------------------

def test_idle_and_slow_connections_hold_no_worker_thread(stack):
    port = stack.ports["--web-port"]
    idle = [socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0)) for _ in range(60)]
    slow = []
    for _ in range(20):  # a request head that never ends
        sock = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.3", 0))
        sock.sendall(b"GET /render?target=srv.h1.m1&format=json HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow.append(sock)
    try:
        time.sleep(1.0)  # every connection accepted by now
        for _ in range(3):
            assert normal(stack, timeout=10.0) < 10.0
        # the server closes connections that send no whole request (REQUEST_ARRIVAL_TIMEOUT)
        deadline = time.monotonic() + 40
        for sock in idle + slow:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                assert sock.recv(1024) == b""
            except ConnectionResetError:
                pass
    finally:
        for sock in idle + slow:
            sock.close()


def test_clients_that_keep_their_side_open_after_a_closing_answer_stop_nobody(stack):
    """Clients that ask with `Connection: close` and never close their side: each gets its
    whole answer and the server's end of stream, and other clients are served meanwhile
    (gunicorn's graceful close waited up to 2 s for each in the worker's poller thread: 20
    of them stopped both workers for about 20 s)."""
    port = stack.ports["--web-port"]
    held = []
    try:
        for i in range(20):  # each from its own address: no client over its share of requests (503)
            sock = socket.create_connection(("127.0.0.1", port), source_address=(f"127.0.2.{i + 1}", 0))
            sock.sendall(b"GET /metrics/find?query=srv.h3.* HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            held.append(sock)
        time.sleep(0.5)  # every answer sent, every connection closing on the server's side
        for _ in range(3):
            assert normal(stack, timeout=10.0) < 5.0
        for sock in held:
            sock.settimeout(10.0)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 ") and len(json.loads(body)) == METRICS, answer[:300]
    finally:
        for sock in held:
            sock.close()


# -- row 5: renders bounded by what functions build and by series counted per target ---------------

def gunicorn_pids(stack: BglRun) -> list[int]:
    """Pids of the stack's gunicorn processes (its arbiter and workers)."""
    pids = []
    for pid in stack.children():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                if b"gunicorn" in file.read():
                    pids.append(pid)
        except OSError:
            continue
    return pids


def worker_rss(stack: BglRun) -> list[int]:
    """Resident bytes of each gunicorn process of the stack."""
    sizes = []
    for pid in gunicorn_pids(stack):
        try:
            with open(f"/proc/{pid}/statm") as file:
                sizes.append(int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
        except OSError:
            continue
    return sizes


@pytest.mark.parametrize("params, setting", [
    ({"target": "summarize(srv.h1.m1, '1s')", "from": "-1y"}, "BG_MAX_RENDER_POINTS"),
    ({"target": "hitcount(srv.h1.m1, '1s')", "from": "-1y"}, "BG_MAX_RENDER_POINTS"),
    ({"target": "srv.h1.m1|summarize('1s')", "from": "-1y"}, "BG_MAX_RENDER_POINTS"),
    ({"target": "sinFunction('x', 1, 0.0001)", "from": "-1d"}, "BG_MAX_RENDER_POINTS"),
    ({"target": "summarize(srv.*.*, '10s')", "from": "-1d"}, "BG_MAX_RENDER_POINTS"),  # 3,000 x 8,641 buckets
    ({"target": ["**"] * 200, "from": "-1h"}, "BG_MAX_RENDER_SERIES"),  # 3,000 names, 600,000 series
    ({"target": "timeStack(srv.h1.m1, '1min', 0, 1000000)", "from": "-1h"}, "BG_MAX_RENDER_SERIES"),
    ({"target": "timeStack(srv.*.*, '1d', 0, 7)", "from": "-1h"}, "BG_MAX_RENDER_SERIES"),  # 21,000 series
], ids=["summarize-1s-1y", "hitcount-1s-1y", "piped-summarize", "sinFunction-step", "summarize-3000-series",
        "200-globstars", "timeStack-1000000", "timeStack-3000-series"])
def test_renders_are_bounded_by_what_they_build(stack, params, setting):
    def hostile():
        started = time.monotonic()
        answer = http_request(stack, render_path(format="json", **params), "127.0.0.4")
        return answer, time.monotonic() - started

    (status, body, content_type), elapsed = served_meanwhile(stack, hostile)
    assert status == 400, body[:500]
    assert_short_reason(status, body, content_type, setting)
    assert elapsed < 30, f"refused after {elapsed:.1f}s: the budget is checked before building anything"
    assert max(worker_rss(stack)) < 1 << 30


# -- row 5b: 12 normal clients and 8 hostile ones ---------------------------------------------------

MIX_SECONDS = 30.0
BAD_PATHS = [render_path(target="srv.h1.m1", format="json", maxDataPoints=0),
             render_path(target="summarize(srv.h1.m1, '0s')", format="json"),
             render_path(target="timeShift(srv.h1.m1, '100000y')", format="json"),
             render_path(target="srv.h1.m1", width=30000, height=30000),
             "/tags/autoComplete/tags?expr=a=~((("]


def hostile_client(stack: BglRun, kind: int, stop: float) -> list[int]:
    """One hostile client (see test_normal_clients_are_served_among_hostile_ones) until `stop`;
    returns the statuses it was answered."""
    source, port, statuses = f"127.0.3.{kind}", stack.ports["--web-port"], []

    def hold(count: int, data: bytes) -> None:
        socks = [socket.create_connection(("127.0.0.1", port), source_address=(source, 0)) for _ in range(count)]
        for sock in socks:
            sock.sendall(data)
        for sock in socks:
            sock.settimeout(max(0.1, stop - time.monotonic()))
            try:
                sock.recv(1024)
            except OSError:
                pass
            sock.close()

    def ask(path: str, **options) -> None:
        try:
            statuses.append(http_request(stack, path, source, timeout=60, **options)[0])
        except OSError:
            statuses.append(0)

    step = 0
    while time.monotonic() < stop:
        step += 1
        if kind == 0:
            hold(40, b"")  # idle connections
        elif kind == 1:
            hold(20, b"GET /render?target=srv.h1.m1 HTTP/1.1\r\n")  # a head that never ends
        elif kind == 2:
            ask(render_path(target=f"summarize(srv.h{step % HOSTS}.m1, '1s')", format="json", **{"from": "-1y"}))
        elif kind == 3:
            ask(render_path(target=["**"] * 200, format="json"))
        elif kind == 4:
            ask(BAD_PATHS[step % len(BAD_PATHS)])
        elif kind == 5:  # the largest render the limits allow: 3,000 series of a day
            ask(render_path(target="srv.*.*", format="json", **{"from": "-1d"}))
        elif kind == 6:  # a burst of parallel renders from one address
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda _: ask(render_path(target="srv.*.m1", format="json", **{"from": "-1d"})),
                              range(8)))
        else:
            ask("/metrics/find?query=srv.*", headers={"Host": "evil.example"})
    return statuses


def test_normal_clients_are_served_among_hostile_ones(stack):
    stop = time.monotonic() + MIX_SECONDS
    times: list[float] = []
    failures: list[str] = []

    def normal_client(index: int) -> None:
        while time.monotonic() < stop:
            try:
                times.extend(normal_requests(stack, f"127.0.2.{index}", timeout=30))
            except (AssertionError, OSError) as exc:
                failures.append(repr(exc)[:300])

    with ThreadPoolExecutor(20) as pool:
        hostile = [pool.submit(hostile_client, stack, kind, stop) for kind in range(8)]
        normals = [pool.submit(normal_client, index) for index in range(12)]
        for future in normals:
            future.result(timeout=MIX_SECONDS + 120)
        statuses = [status for future in hostile for status in future.result(timeout=120)]
    assert times, f"no normal request was served: {failures[:3]}"
    times.sort()
    p50, p99 = times[len(times) // 2], times[int(len(times) * 0.99)]
    print(f"normal requests: {len(times)}, p50 {p50:.3f}s, p99 {p99:.3f}s, max {times[-1]:.3f}s;"
          f" hostile answers: {sorted(collections.Counter(statuses).items())}")
    assert not failures, failures[:5]
    assert len(times) >= 12 * 2 * 5, "each normal client was served again and again"
    assert 0 not in statuses and 500 not in statuses, collections.Counter(statuses)
    assert p99 < 10.0, (p50, p99)


def test_one_client_gets_at_most_its_share_of_threads(stack):
    path = render_path(target="srv.*.m1", format="json", **{"from": "-1d"})  # 100 series of a day

    def burst():
        with ThreadPoolExecutor(16) as pool:
            return list(pool.map(lambda _: http_request(stack, path, "127.0.0.7"), range(16)))

    answers = served_meanwhile(stack, burst)
    statuses = collections.Counter(status for status, _, _ in answers)
    assert set(statuses) <= {200, 503} and statuses[503] > 0 and statuses[200] > 0, statuses
    refused = next(answer for answer in answers if answer[0] == 503)
    assert_short_reason(*refused, "BG_MAX_CLIENT_REQUESTS", "127.0.0.7")


# -- row 8: the WSGI front's cached finds apply ALLOWED_HOSTS -----------------------------------------

def test_a_foreign_host_gets_no_cached_find(stack):
    path = "/metrics/find?query=srv.h3.*"
    for _ in range(3):  # cached by now, in both workers most likely
        status, body, _ = http_request(stack, path)
        assert status == 200 and b"srv.h3.m1" in body
    for _ in range(6):
        status, body, content_type = http_request(stack, path, headers={"Host": "evil.example:8080"})
        assert status == 400, body[:300]
        assert b"m1" not in body
        assert_short_reason(status, body, content_type, "evil.example")
    normal(stack)


LIGHT_TARGETS = ["/metrics/find?query=srv.h4.*", "/metrics/find?query=srv.h1*&format=completer",
                 "/metrics/find?query=srv.*.m7&format=treejson", "/tags/autoComplete/tags?expr=name%3Dsrv.h1.m1",
                 "/tags/autoComplete/values?tag=name&valuePrefix=srv.h2", "/metrics/find?query=srv.h4.*&pretty=1",
                 "/tags/autoComplete/tags?expr=a=~(((", "/metrics/find?query=", "/metrics/find?query=seriesByTag('a=b')"]


def exchange(stack: BglRun, request: bytes) -> bytes:
    """The bytes answered to `request` on a connection of its own, until the server closes it
    (its Date field masked)."""
    with socket.create_connection(("127.0.0.1", stack.ports["--web-port"]), timeout=60) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(1 << 16):
            chunks.append(chunk)
    return re.sub(rb"\r\nDate: [^\r]*", b"\r\nDate: -", b"".join(chunks))


@pytest.mark.parametrize("target", LIGHT_TARGETS)
def test_the_workers_light_path_answers_as_gunicorns_path(stack, target):
    """A plain GET of a front's path (the worker's light path: graphite_plugin.gunicorn_worker.
    LightRequest) gets the bytes gunicorn's own path gives the same request with one more
    field (which the light path leaves to it): answers of the fronts, and those they decline."""
    plain = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".encode()
    light, full = exchange(stack, plain + b"\r\n"), exchange(stack, plain + b"X-Request-Id: 1\r\n\r\n")
    assert light.startswith(b"HTTP/1.1 ") and b"\r\nConnection: close\r\n" in light
    assert light == full


def test_a_light_answer_keeps_its_connection_alive(stack):
    """Requests on a kept-alive connection, each answered by the light path, on that connection."""
    connection = http.client.HTTPConnection("127.0.0.1", stack.ports["--web-port"], timeout=60)
    try:
        for host in range(4):
            connection.request("GET", f"/metrics/find?query=srv.h{host}.*")
            response = connection.getresponse()
            assert (response.status, response.getheader("Connection")) == (200, "keep-alive")
            assert f"srv.h{host}.m1".encode() in response.read()
            if not host:
                sock = connection.sock
            assert connection.sock is sock and sock is not None
    finally:
        connection.close()


# -- row 9: every error is a short reason ---------------------------------------------------------------

@pytest.mark.parametrize("path, status", [
    (render_path(target="srv.h1.m1", format="json", maxDataPoints=0), 400),
    (render_path(target="summarize(srv.h1.m1, '0s')", format="json"), 400),
    (render_path(target="timeShift(srv.h1.m1, '100000y')", format="json"), 400),
    (render_path(target="srv.h1.m1", width=30000, height=30000), 400),
    ("/tags/autoComplete/tags?expr=a=~(((", 400),
    (render_path(target="srv.h1.m1", format="json", **{"from": "yesterday-99999999999d"}), 400),
    ("/no/such/page/" + "x" * 50, 404),
], ids=["maxDataPoints-0", "summarize-0s", "timeShift-100000y", "image-30000x30000", "tag-regex", "from-overflow",
        "not-found"])
def test_errors_are_a_short_reason(stack, path, status):
    answer = served_meanwhile(stack, lambda: http_request(stack, path, "127.0.0.5"), count=1)
    assert answer[0] == status, answer[1][:3000]
    assert_short_reason(*answer)


def test_a_fetch_past_fetch_timeout_answers_503_naming_it(tmp_path):
    """In-process (FETCH_TIMEOUT 0 cannot be given to `bgl run`): graphite's pool timeout
    answers 503 naming the setting, not graphite's traceback page."""
    from django.test import Client, override_settings

    import graphite_plugin.settings as plugin_settings
    from tests.graphite_env import names_store, use_finders

    url = names_store(tmp_path, [f"x.m{i}" for i in range(2000)])
    with use_finders(["graphite_plugin.Finder"], BG_STORE=url, MIDDLEWARE=plugin_settings.MIDDLEWARE,
                     BG_SELF_METRICS_INTERVAL=0), override_settings(
            ROOT_URLCONF=getattr(plugin_settings, "ROOT_URLCONF", "graphite.urls"), FETCH_TIMEOUT=0.0,
            ALLOWED_HOSTS=["*"]):
        response = Client(raise_request_exception=False).get("/render", {"target": ["x.*"] * 3, "format": "json"})
    assert response.status_code == 503, response.content[:3000]
    assert_short_reason(503, response.content, response["Content-Type"], "FETCH_TIMEOUT")


# -- row 11: names that can be stored can be read -------------------------------------------------------

LONG_NAME = "long." + ".".join(f"c{i:02d}" + "x" * 197 for i in range(50))  # 10,055 characters, 51 components
UTF8_NAME = "a.日本語"


def post_render(stack: BglRun, target: str, source: str = "127.0.0.6") -> tuple[int, bytes, str]:
    body = urllib.parse.urlencode({"target": target, "format": "json", "from": "-10min"}).encode()
    return http_request(stack, "/render", source, method="POST", body=body,
                        headers={"Content-Type": "application/x-www-form-urlencoded"})


def test_a_stored_long_or_non_ascii_name_can_be_read(stack):
    assert len(LONG_NAME) > 10_000
    with socket.create_connection(("127.0.0.1", stack.line_port)) as sock:
        sock.sendall(f"{LONG_NAME} 7 {int(time.time())}\n{UTF8_NAME} 8 {int(time.time())}\n".encode())
    deadline = time.monotonic() + 60
    while True:
        answers = {name: post_render(stack, name) for name in (LONG_NAME, UTF8_NAME)}
        values = {name: [value for value, _ in series["datapoints"] if value is not None]
                  for name, (status, body, _) in answers.items() if status == 200 for series in json.loads(body)}
        if values == {LONG_NAME: [7.0], UTF8_NAME: [8.0]} or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert values == {LONG_NAME: [7.0], UTF8_NAME: [8.0]}, {name: answer[:2] for name, answer in answers.items()}
    # by GET too when the URL fits gunicorn's request line (4,094 bytes): the non-ASCII name
    status, body, _ = http_request(stack, render_path(target=UTF8_NAME, format="json", **{"from": "-10min"}))
    assert status == 200 and [v for v, _ in json.loads(body)[0]["datapoints"] if v is not None] == [8.0]
    # a find of the long name itself (POST: past gunicorn's request line) gives the leaf
    status, body, _ = http_request(stack, "/metrics/find", "127.0.0.6", method="POST",
                                   body=urllib.parse.urlencode({"query": LONG_NAME}).encode(),
                                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200 and [node["leaf"] for node in json.loads(body)] == [1], body[:300]
    # a glob that long is refused with its limit, by POST or GET (gunicorn's own short 414)
    status, body, content_type = http_request(stack, "/metrics/find", "127.0.0.6", method="POST",
                                              body=urllib.parse.urlencode({"query": LONG_NAME + "*"}).encode(),
                                              headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_short_reason(status, body, content_type, "limit 4096")
    status, body, _ = post_render(stack, "a" * (2 << 20))  # a name the store cannot hold matches nothing
    assert (status, json.loads(body)) == (200, [])
    status, body, content_type = http_request(stack, render_path(target=LONG_NAME, format="json"))
    assert status == 414 and len(body) < 1000 and not TRACEBACK.search(body.decode())
    normal(stack)


# -- row 5: a worker past its memory bound is replaced ------------------------------------------------

def test_a_worker_past_its_memory_bound_is_replaced(tmp_path, monkeypatch):
    """$BGL_WEB_MAX_RSS of 1 byte: every worker is past it after each request, finishes it
    and is replaced; every request is still answered."""
    monkeypatch.setenv("BGL_WEB_MAX_RSS", "1")
    run = BglRun(tmp_path / "data")
    run.start()
    try:
        workers = set()
        for _ in range(6):
            status, body, _ = http_request(run, "/version/")
            assert status == 200, body
            workers.update(gunicorn_pids(run))
            time.sleep(1.0)
        log = (run.data_dir / "log" / "gunicorn.log").read_text()
        assert "replaced by a new worker" in log
        assert len(workers) > 3, workers  # the arbiter, the two first workers, their successors
    finally:
        run.stop(signal.SIGTERM)
        run.kill()
