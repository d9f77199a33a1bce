"""graphite-web under `bgl run`'s own gunicorn against hostile clients (issue #30): each
hostile request gets a short, clear answer (a 4xx/503 with its reason, or a closed
connection) while other clients keep being served.

The stack serves a store of 3,000 metrics (`srv.h<i>.m<j>`, 60s:1d, a point each in the
last hour). Hostile clients use their own loopback addresses (127.0.0.<n>): graphite-web
counts requests in progress per client address (BG_MAX_CLIENT_REQUESTS).
"""
from __future__ import annotations

import http.client
import json
import re
import signal
import socket
import threading
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


def normal(stack: BglRun, source: str = "127.0.0.1", timeout: float = 60.0) -> float:
    """One normal client's render and find, each answered 200 with data; returns their time."""
    started = time.monotonic()
    status, body, _ = http_request(stack, render_path(target=NORMAL_TARGET, format="json", **{"from": "-1h"}),
                                   source, timeout=timeout)
    assert status == 200, body[:500]
    assert len(json.loads(body)) == METRICS
    status, body, _ = http_request(stack, "/metrics/find?query=srv.h2.*", source, timeout=timeout)
    assert status == 200 and len(json.loads(body)) == METRICS, body[:500]
    return time.monotonic() - started


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
