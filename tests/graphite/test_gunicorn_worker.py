"""graphite_plugin.gunicorn_worker: freed memory given back to the system, each process's
resident memory, the access log's lines, the heartbeat."""
from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.paths import REPO_ROOT

# run in a fresh interpreter: the allocator's state of a test process (what earlier tests
# left in its heap) decides whether a free gives memory back by itself
SCENARIO = """
import json
from graphite_plugin.gunicorn_worker import FreedMemory, resident_bytes

freed = FreedMemory()
freed.trimmed_at = start = resident_bytes()
small = freed.give_back(start + 1), freed.trims
held = [bytes(2048) + bytes([i % 256]) for i in range(32 * 1024)]  # 64 MiB from the C allocator
pin = [bytes(2048) for _ in range(64)]  # above them in the heap: their free cannot shrink it
grown = resident_bytes()
del held
kept = resident_bytes()
after = freed.give_back(kept)
print(json.dumps({"start": start, "small": small, "grown": grown, "kept": kept, "after": after,
                  "trims": freed.trims, "trimmed_at": freed.trimmed_at, "growth": freed.TRIM_GROWTH,
                  "found": freed._trim is not None}))
"""


def test_freed_memory_is_given_back_past_some_growth():
    """A worker that built and dropped a large answer (64 MiB of 2 KiB objects, from the C
    allocator) holds it until a trim; below TRIM_GROWTH of growth nothing is done."""
    done = subprocess.run([sys.executable, "-c", SCENARIO], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["found"], "glibc's malloc_trim is found"
    assert seen["small"] == [seen["start"] + 1, 0], "no trim below TRIM_GROWTH"
    assert seen["kept"] > seen["start"] + seen["growth"], f"the allocator kept the freed memory: {seen}"
    assert seen["trims"] == 1 and seen["after"] == seen["trimmed_at"]
    assert seen["after"] < seen["kept"] - (32 << 20), seen


FORKED = """
import json, os
from graphite_plugin.gunicorn_worker import resident_bytes

parent = resident_bytes()  # opens /proc/self/statm in the parent, as gunicorn's arbiter may
reader, writer = os.pipe()
pid = os.fork()
if pid == 0:
    held = bytearray(os.urandom(1 << 20) * 160)  # 160 MiB resident in the child only
    os.write(writer, json.dumps({"child": resident_bytes(), "direct": int(open("/proc/self/statm").read().split()[1])
                                 * os.sysconf("SC_PAGE_SIZE")}).encode())
    os._exit(0)
os.waitpid(pid, 0)
print(json.dumps(dict(json.loads(os.read(reader, 4096)), parent=parent, again=resident_bytes())))
"""


def test_resident_bytes_are_each_processs_own_after_a_fork():
    """The statm file is kept open per process: a forked worker reads its own memory, not
    the file its parent opened."""
    done = subprocess.run([sys.executable, "-c", FORKED], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["child"] > seen["parent"] + (150 << 20), seen
    assert abs(seen["child"] - seen["direct"]) < (16 << 20), seen
    assert seen["again"] < seen["parent"] + (64 << 20), seen


ACCESS_FORMATS = [
    None,  # gunicorn's default (bgl run's)
    '%(h)s %(l)s %(u)s "%(r)s" %(s)s %(m)s %(U)s %(q)s %(H)s %(b)s %(B)s %(f)s %(a)s %(T)s %(D)s %(M)s %(L)s %(p)s %(x)s',
    '%(h)s "%(r)s" %(s)s %({host}i)s %({Content-Type}o)s %({remote_addr}e)s %({missing}i)s',
]
ACCESS_REQUESTS = [
    ({}, "200 OK", 120),
    ({"HTTP_AUTHORIZATION": "Basic YWxpY2U6c2VjcmV0", "HTTP_REFERER": 'http://x/"q"', "HTTP_USER_AGENT": 'a "b"'},
     "503 Service Unavailable", 0),
    ({"RAW_URI": '/metrics/find?query=a"b'}, "404 Not Found", None),
]


@pytest.mark.parametrize("log_format", ACCESS_FORMATS, ids=["default", "plain atoms", "braced atoms"])
def test_access_log_lines_are_gunicorns(log_format, tmp_path):
    """AccessLogger writes, for every format and request, the line gunicorn's Logger writes."""
    import datetime
    import logging

    from gunicorn.config import Config
    from gunicorn.glogging import Logger

    from graphite_plugin.gunicorn_worker import AccessLogger

    lines: dict[str, list[str]] = {}
    for name, logger_class in (("gunicorn", Logger), ("ours", AccessLogger)):
        cfg = Config()
        cfg.set("accesslog", str(tmp_path / f"{name}.log"))
        if log_format:
            cfg.set("access_log_format", log_format)
        log = logger_class(cfg)
        log.now = lambda: "[28/Nov/2026:01:00:00 +0000]"
        seen = lines[name] = []
        capture = logging.Handler()
        capture.emit = lambda record, seen=seen: seen.append(record.getMessage())
        log.access_log.addHandler(capture)
        try:
            for extra, status, sent in ACCESS_REQUESTS:
                environ = {"REQUEST_METHOD": "GET", "RAW_URI": "/metrics/find?query=a.*", "SERVER_PROTOCOL": "HTTP/1.1",
                           "REMOTE_ADDR": "127.0.0.1", "PATH_INFO": "/metrics/find", "QUERY_STRING": "query=a.*",
                           "HTTP_HOST": "127.0.0.1:8080", **extra}
                resp = SimpleNamespace(status=status, sent=sent, headers=[("Content-Type", "application/json")])
                req = SimpleNamespace(headers=[("HOST", "127.0.0.1:8080"), ("USER-AGENT", "curl")])
                log.access(resp, req, environ, datetime.timedelta(seconds=1, microseconds=2345))
        finally:
            log.access_log.removeHandler(capture)
    assert len(lines["ours"]) == len(ACCESS_REQUESTS) and lines["ours"] == lines["gunicorn"]
    assert len(set(lines["ours"])) == len(ACCESS_REQUESTS)
    if "%(u)s" in (log_format or "%(u)s"):  # the user of a Basic authorization, quotes escaped
        assert "alice" in lines["ours"][1] and '\\"b\\"' in lines["ours"][1]


PID_APP = """
import os

def application(environ, start_response):
    body = str(os.getpid()).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
"""


def test_a_worker_beating_once_a_second_is_not_taken_for_stuck(tmp_path):
    """RequestFirstWorker's heartbeat, at most once a second, on /dev/shm as bgl run puts it:
    an idle worker and a busy one outlive an arbiter timeout of 3 s several times over."""
    import time
    import urllib.request

    from tests.carbon_env import free_port

    (tmp_path / "pid_app.py").write_text(PID_APP)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--worker-class", "graphite_plugin.gunicorn_worker.RequestFirstWorker",
         "--workers", "1", "--threads", "2", "--timeout", "3", "--worker-tmp-dir", "/dev/shm", "--bind",
         f"127.0.0.1:{port}", "--chdir", str(tmp_path), "pid_app:application"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def worker_pid() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as response:
            return response.read().decode()

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                first = worker_pid()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "gunicorn did not start"
                time.sleep(0.2)
        time.sleep(5)  # idle
        answers = set()
        busy_until = time.monotonic() + 5
        while time.monotonic() < busy_until:  # busy
            answers.add(worker_pid())
        assert answers == {first} and worker_pid() == first, "the arbiter replaced the worker"
    finally:
        server.terminate()
        output = server.communicate(timeout=60)[0]
    assert "WORKER TIMEOUT" not in output, output


FRONT_PATHS = frozenset({"/metrics/find", "/tags/findSeries", "/tags/autoComplete/tags", "/tags/autoComplete/values"})
LIGHT_REQUESTS = [
    b"GET /metrics/find?query=a.*&format=treejson HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: curl/8.5\r\n"
    b"Accept: */*\r\n\r\n",
    b"GET /tags/autoComplete/tags?expr=t%3Dv&limit=5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    b"Accept-Encoding: identity\r\n\r\n",
    b"GET /metrics/find?query=a.%7Bb,c%7D HTTP/1.1\r\nhost:   x  \r\nCONNECTION: Keep-Alive\r\nPragma: no-cache\r\n\r\n",
    b"GET /metrics/find HTTP/1.1\r\nHost: x\r\nConnection: upgrade, close\r\nAccept-Language: fr\r\n\r\n",
    b"GET /tags/findSeries?expr=a=b&expr=c!=d HTTP/1.1\r\n\r\n",
]
NOT_LIGHT_REQUESTS = {
    "HTTP/1.0": b"GET /metrics/find?query=a HTTP/1.0\r\nHost: x\r\n\r\n",
    "POST": b"POST /metrics/find?query=a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    "another path": b"GET /render?target=a HTTP/1.1\r\nHost: x\r\n\r\n",
    "an encoded path": b"GET /metrics/%66ind?query=a HTTP/1.1\r\nHost: x\r\n\r\n",
    "a body": b"GET /metrics/find?query=a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab",
    "a pipelined request": b"GET /metrics/find?query=a HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\n\r\n",
    "a forwarding field": b"GET /metrics/find?query=a HTTP/1.1\r\nHost: x\r\nX-Forwarded-Proto: https\r\n\r\n",
    "a cookie": b"GET /metrics/find?query=a HTTP/1.1\r\nHost: x\r\nCookie: sessionid=1\r\n\r\n",
    "a repeated field": b"GET /metrics/find?query=a HTTP/1.1\r\nHost: x\r\nAccept: a\r\nAccept: b\r\n\r\n",
    "an obsolete folding": b"GET /metrics/find?query=a HTTP/1.1\r\nHost: x\r\nAccept: a\r\n b\r\n\r\n",
    "a fragment": b"GET /metrics/find?query=a#b HTTP/1.1\r\nHost: x\r\n\r\n",
    "a byte past ASCII": b"GET /metrics/find?query=\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n",
    "a field past limit_request_field_size": b"GET /metrics/find?query=a HTTP/1.1\r\nHost: x\r\nUser-Agent: "
                                             + b"u" * 200 + b"\r\n\r\n",
    "a line past limit_request_line": b"GET /metrics/find?query=" + b"a" * 300 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "more fields than limit_request_fields": b"GET /metrics/find HTTP/1.1\r\nHost: x\r\nAccept: a\r\nPragma: b\r\n"
                                              b"Accept-Language: c\r\nUser-Agent: d\r\n\r\n",
}


def light_config():
    from gunicorn.config import Config

    cfg = Config()
    for name, value in (("limit_request_line", 256), ("limit_request_field_size", 150), ("limit_request_fields", 4)):
        cfg.set(name, value)
    return cfg


@pytest.mark.parametrize("data", LIGHT_REQUESTS)
def test_a_light_request_is_read_as_gunicorn_reads_it(data):
    """LightRequest (the worker's light path for the fronts' requests) gives the request, its
    keep-alive and its WSGI environ as gunicorn's parser and wsgi.create give them."""
    from gunicorn.http import wsgi
    from gunicorn.http.parser import RequestParser

    from graphite_plugin.gunicorn_worker import LightRequest

    cfg = light_config()
    client, server = ("127.0.0.7", 41000), ("127.0.0.1", 8080)
    request = next(RequestParser(cfg, iter([data]), client))
    _, environ = wsgi.create(request, None, client, server, cfg)
    environ["wsgi.multithread"] = True  # gthread's handle_request
    light = LightRequest.parse(data, FRONT_PATHS, cfg)
    assert light is not None
    light_environ = light.environ(cfg, SimpleNamespace(client=client, server=server, sock=None))
    objects = {"wsgi.input", "wsgi.errors", "wsgi.early_hints", "gunicorn.socket"}  # made per request
    assert {k: v for k, v in light_environ.items() if k not in objects} == \
        {k: v for k, v in environ.items() if k not in objects}
    assert light_environ.keys() == environ.keys() and light_environ["wsgi.input"].read() == b""
    for name in ("method", "uri", "path", "query", "version", "headers", "scheme", "fragment"):
        assert getattr(light, name) == getattr(request, name), name
    assert light.should_close() == request.should_close()


@pytest.mark.parametrize("data", NOT_LIGHT_REQUESTS.values(), ids=NOT_LIGHT_REQUESTS.keys())
def test_anything_else_goes_gunicorns_way(data):
    """Every other request (other methods, versions, paths, fields, a body, bytes past the
    head, gunicorn's limits) is left to gunicorn's parser."""
    from graphite_plugin.gunicorn_worker import LightRequest

    assert LightRequest.parse(data, FRONT_PATHS, light_config()) is None


def test_the_light_path_calls_pre_request_once_a_front_answers_and_never_for_a_declined_request():
    """gunicorn's pre_request hook runs once a request: a request the fronts decline goes
    gunicorn's way, which calls it, so the light path must not have called it already."""
    import socket

    from gunicorn.glogging import Logger

    from graphite_plugin.gunicorn_worker import LightRequest, RequestFirstWorker

    cfg, called = light_config(), []
    cfg.set("pre_request", lambda worker, request: called.append(request.path))
    request = LightRequest.parse(b"GET /metrics/find?query=a HTTP/1.1\r\nHost: x\r\n\r\n", FRONT_PATHS, cfg)
    ours, theirs = socket.socketpair()
    worker = SimpleNamespace(cfg=cfg, log=Logger(cfg), nr=0, max_requests=1000, alive=True, keepalived_conns=[],
                             max_keepalived=100, _front=lambda environ: None)
    conn = SimpleNamespace(sock=ours, client=("127.0.0.7", 41000), server=("127.0.0.1", 8080))
    try:
        assert RequestFirstWorker._answer_light(worker, conn, request) is None and called == []
        worker._front = lambda environ: ("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")],
                                         b"[]", None)
        assert RequestFirstWorker._answer_light(worker, conn, request) is True
        assert called == ["/metrics/find"]
        answer = theirs.recv(1 << 16)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\n[]")
    finally:
        ours.close()
        theirs.close()
