"""`/metrics` for Prometheus: the receiver's (`bgl receive --prometheus-port`) and
graphite-web's (BG_PROMETHEUS_METRICS, on under `bgl run`), parsed with prometheus_client's
own text parser after real traffic, and compared with what the test sent."""
from __future__ import annotations

import http.client
import socket
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.carbon_env import free_port
from tests.receiver_env import BglReceive
from tests.stack_env import BglRun

METRICS = 10
POINTS_PER_METRIC = 7
BAD_LINES = [b"no.value\n", b"bad.value 12abc 1700000000\n", b"nan.value nan 1700000000\n"]


def scrape(url: str) -> tuple[dict[str, float], dict[str, str], str]:
    """{sample name: value}, {family name: type} and the Content-Type of a /metrics answer."""
    with urllib.request.urlopen(url, timeout=60) as response:
        text, content_type = response.read().decode(), response.headers["Content-Type"]
    samples, types = {}, {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            samples[sample.name] = sample.value
    return samples, types, content_type


def wait_for(url: str, name: str, value: float, timeout: float = 60.0, refused_for: float = 0.0) -> dict[str, float]:
    """The samples once `name` has `value` (or at the timeout); a connection closed unanswered
    (every slot busy) is tried again during the first `refused_for` seconds only."""
    started = time.monotonic()
    while True:
        try:
            samples = scrape(url)[0]
        except (ConnectionError, http.client.HTTPException):
            if time.monotonic() - started > refused_for:
                raise
            time.sleep(0.2)
            continue
        if samples.get(name) == value or time.monotonic() - started > timeout:
            return samples
        time.sleep(0.2)


def send_lines(port: int, now: int) -> int:
    """The good lines (METRICS x POINTS_PER_METRIC distinct points) and BAD_LINES, on one connection."""
    lines = [f"prom.m{m} {m + p} {now - 60 * p}\n".encode() for m in range(METRICS) for p in range(POINTS_PER_METRIC)]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"".join(lines[:20] + BAD_LINES + lines[20:]))
    return len(lines)


def test_receiver_serves_its_counters_to_prometheus(tmp_path):
    prometheus_port = free_port()
    receiver = BglReceive(tmp_path / "r", f"sqlite://{tmp_path / 'bgl.db'}", "--prometheus-port",
                          str(prometheus_port)).start()
    url = f"http://127.0.0.1:{prometheus_port}/metrics"
    try:
        assert f"prometheus 127.0.0.1:{prometheus_port}" in receiver.output()
        sent = send_lines(receiver.line_port, int(time.time()))
        samples = wait_for(url, "bgl_receiver_stored_points_total", sent)
        _, types, content_type = scrape(url)
        assert content_type.startswith("text/plain; version=0.0.4")
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(f"http://127.0.0.1:{prometheus_port}/other", timeout=30)
        assert error.value.code == 404
    finally:
        assert receiver.stop() == 0
    assert samples["bgl_receiver_stored_points_total"] == sent
    assert samples["bgl_receiver_refused_lines_total"] == len(BAD_LINES)
    assert samples["bgl_receiver_creates_total"] == METRICS
    assert samples["bgl_receiver_dropped_points_total"] == 0
    assert samples["bgl_receiver_buffered_points"] == 0
    assert types["bgl_receiver_stored_points"] == "counter"  # the parser's family name, without _total
    # the deprecated name of storedPoints, served with the same value until the next release
    assert samples["bgl_receiver_committed_points_total"] == sent
    assert types["bgl_receiver_committed_points"] == "counter"
    assert types["bgl_receiver_buffered_points"] == "gauge"
    assert samples["bgl_receiver_metrics_received_total"] == sent + len(BAD_LINES)  # counted before checks
    assert samples["bgl_receiver_flushes_total"] >= 1


def test_receiver_prometheus_port_serves_a_bounded_number_of_connections(tmp_path):
    """MAX_CLIENTS silent connections hold every slot: the next is closed unanswered (no
    more threads), the carbon ports go on, and once they leave a scrape is answered."""
    from biggraphite_like.receiver.prometheus import MAX_CLIENTS, REQUEST_TIMEOUT

    prometheus_port = free_port()
    receiver = BglReceive(tmp_path / "r", f"sqlite://{tmp_path / 'bgl.db'}", "--prometheus-port",
                          str(prometheus_port)).start()
    url = f"http://127.0.0.1:{prometheus_port}/metrics"
    silent = [socket.create_connection(("127.0.0.1", prometheus_port), timeout=30) for _ in range(MAX_CLIENTS)]
    try:
        time.sleep(1)  # accepted, each in its thread, waiting for a request line
        with pytest.raises((ConnectionError, urllib.error.URLError, http.client.HTTPException)):
            urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT / 2).read()
        sent = send_lines(receiver.line_port, int(time.time()))
    finally:
        for sock in silent:
            sock.close()
    try:
        # the receiver's threads free their slots as they see the clients leave: well before
        # REQUEST_TIMEOUT, which would free them anyway
        samples = wait_for(url, "bgl_receiver_stored_points_total", sent, refused_for=REQUEST_TIMEOUT / 2)
    finally:
        assert receiver.stop() == 0
    assert samples["bgl_receiver_stored_points_total"] == sent


def test_receiver_prometheus_port_is_off_by_default(tmp_path):
    receiver = BglReceive(tmp_path / "r", f"sqlite://{tmp_path / 'bgl.db'}").start()
    try:
        listening = next(line for line in receiver.output().splitlines() if "listening:" in line)
        assert "plaintext 127.0.0.1" in listening and "prometheus" not in listening
    finally:
        assert receiver.stop() == 0


def test_graphite_web_serves_find_and_render_counts_to_prometheus(tmp_path):
    run = BglRun(tmp_path / "data", options=("--web-workers", "3"))  # a scrape reaches one; it sums all
    run.start()
    try:
        sent = send_lines(run.line_port, int(time.time()))
        run.wait_for_values("prom.m3", [3.0 + p for p in reversed(range(POINTS_PER_METRIC))], **{"from": "-1h"})
        finds, renders = 4, 3
        for _ in range(finds):
            assert run.get_json("/metrics/find", query="prom.*")
        for _ in range(renders - 1):  # wait_for_values made one
            assert run.get_json("/render", target="prom.m1", format="json")
        scrapes = [scrape(run.web + "/metrics") for _ in range(6)]  # any worker may answer: each sums all
        samples, types, content_type = scrapes[-1]
        counts_files = sorted(path.name for path in (run.data_dir / "run" / "prometheus").iterdir())
        # graphite's own /metrics?query= (find's alias) still answers finds
        names = {entry["text"] for entry in run.get_json("/metrics", query="prom.*")}
    finally:
        assert run.stop() == 0
    assert sent == METRICS * POINTS_PER_METRIC
    assert names == {f"m{m}" for m in range(METRICS)}
    assert content_type.startswith("text/plain; version=0.0.4")
    assert [answer[0]["bgl_web_find_requests_total"] for answer in scrapes] == [finds] * len(scrapes), counts_files
    assert counts_files and all(name.startswith("web-") and name.endswith(".counts") for name in counts_files)
    assert samples["bgl_web_render_requests_total"] >= renders  # and the polls of wait_for_values
    assert samples["bgl_web_find_milliseconds_total"] > 0
    assert 0 < samples["bgl_web_find_max_milliseconds"] <= samples["bgl_web_find_milliseconds_total"]
    assert samples["bgl_web_self_metrics_write_errors_total"] == 0
    assert types["bgl_web_find_requests"] == "counter"


def test_graphite_web_metrics_only_when_asked(tmp_path):
    """Without BG_PROMETHEUS_METRICS, /metrics is graphite's (find's alias: no counters);
    with it, finds are counted and a Host outside ALLOWED_HOSTS is refused."""
    from django.conf import settings
    from django.test import Client

    from tests.graphite_env import names_store, use_finders

    store = names_store(tmp_path, ["a.b", "a.c"])
    middleware = ("graphite_plugin.self_metrics.RequestTimingMiddleware", "graphite_plugin.prometheus.PrometheusMiddleware",
                  *settings.MIDDLEWARE)
    client = Client(raise_request_exception=False)
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store, MIDDLEWARE=middleware):
        off = client.get("/metrics")
        assert off.status_code == 400 and b"Missing required parameter 'query'" in off.content  # graphite's answer
        found = client.get("/metrics/find", {"query": "a.*"})
        assert found.status_code == 200, found.content
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store, MIDDLEWARE=middleware, BG_PROMETHEUS_METRICS=True,
                     ALLOWED_HOSTS=["testserver"]):
        before = _find_requests(client.get("/metrics").content.decode())
        assert client.get("/metrics/find", {"query": "a.*"}).status_code == 200
        assert {entry["text"] for entry in client.get("/metrics", {"query": "a.*"}).json()} == {"b", "c"}
        assert _find_requests(client.get("/metrics").content.decode()) == before + 1
        assert client.get("/metrics", HTTP_HOST="evil.example").status_code == 400
    # with BG_PROMETHEUS_DIR, the answer is the sum over every worker's file (another worker's
    # written here as its own mapping would), maxima the largest
    from graphite_plugin.prometheus import FIELDS, LAYOUT

    shared = tmp_path / "prometheus"
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store, MIDDLEWARE=middleware, BG_PROMETHEUS_METRICS=True,
                     BG_PROMETHEUS_DIR=str(shared)):
        assert client.get("/metrics/find", {"query": "a.*"}).status_code == 200
        mine = _samples(client.get("/metrics").content.decode())
        assert "worker" not in client.get("/metrics").content.decode()
        other = dict.fromkeys(FIELDS, 0.0) | {"findRequests": 5, "findMilliseconds": 2.5, "findMaxMilliseconds": 1e6}
        (shared / "web-1-1.counts").write_bytes(LAYOUT.pack(*(other[name] for name in FIELDS)))
        both = _samples(client.get("/metrics").content.decode())
    assert len(list(shared.iterdir())) == 2
    assert both["bgl_web_find_requests_total"] == mine["bgl_web_find_requests_total"] + 5
    assert both["bgl_web_find_milliseconds_total"] == mine["bgl_web_find_milliseconds_total"] + 2.5
    assert both["bgl_web_find_max_milliseconds"] == 1e6


def _samples(text: str) -> dict[str, float]:
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}


def _find_requests(text: str) -> float:
    return _samples(text)["bgl_web_find_requests_total"]
