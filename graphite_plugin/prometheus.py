"""graphite-web's find and render counters at `/metrics`, for Prometheus to scrape.

Nothing is counted or served unless local_settings.py sets `BG_PROMETHEUS_METRICS = True`
(`bgl run` does). Then every `/metrics/find` and `/render` request the self-metrics time
(RequestTimingMiddleware.record, also for the finds graphite_plugin.wsgi answers in
front of Django) is counted here too, as totals, and PrometheusMiddleware (in MIDDLEWARE
through graphite_plugin.settings, after RequestTimingMiddleware) answers `GET /metrics`
*without* a `query` parameter with them in Prometheus text format:

    bgl_web_find_requests_total              /metrics/find requests answered
    bgl_web_find_milliseconds_total          their summed duration
    bgl_web_find_max_milliseconds            the slowest (gauge)
    bgl_web_render_requests_total, ..._milliseconds_total, ..._max_milliseconds   the same for /render
    bgl_web_self_metrics_write_errors_total  failed writes of the bgl.web.* self-metrics

gunicorn's workers are processes and a scrape reaches one of them. With
`BG_PROMETHEUS_DIR` (a directory; `bgl run` sets `run/prometheus` of its data directory)
each worker also keeps its totals in a small file of its own there, mapped in memory
(`web-<pid>-<start>.counts`, rewritten in place at each request: no system call), and a
scrape answers the sum over every file, so any worker gives the totals of all (workers
that stopped included: the counters never go back). Without it each worker answers its
own counts, labelled `worker="<host>-<pid>"`.

graphite-web's own `/metrics?query=...` (an alias of /metrics/find) is left to graphite:
without `query` it only answers an error (400), which is what this replaces.
"""
from __future__ import annotations

import logging
import mmap
import os
import struct
import threading
import time
from pathlib import Path

from django.conf import settings
from django.http import HttpResponse

from biggraphite_like.counters import prometheus_text
from graphite_plugin.middleware import app_path
from graphite_plugin.self_metrics import TIMED, shared_writer, worker_prefix

log = logging.getLogger(__name__)

SETTING = "BG_PROMETHEUS_METRICS"
DIR_SETTING = "BG_PROMETHEUS_DIR"
PREFIX = "bgl_web"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
COUNTERS = (*(f"{kind}{what}" for kind in TIMED for what in ("Requests", "Milliseconds")), "selfMetricsWriteErrors")
GAUGES = tuple(f"{kind}MaxMilliseconds" for kind in TIMED)  # maxima: the largest of the files, not their sum
FIELDS = COUNTERS + GAUGES
LAYOUT = struct.Struct(f"<{len(FIELDS)}d")  # a worker's file: its values in FIELDS' order
HELP = {
    **{f"{kind}Requests": f"/{path} requests answered"
       for kind, path in (("find", "metrics/find"), ("render", "render"))},
    **{f"{kind}Milliseconds": f"summed duration of the {kind} requests" for kind in TIMED},
    **{f"{kind}MaxMilliseconds": f"the slowest {kind} request" for kind in TIMED},
    "selfMetricsWriteErrors": "failed writes of the bgl.web.* self-metrics into the store",
}


class RequestTotals:
    """This process's totals (thread-safe), mirrored into its file of BG_PROMETHEUS_DIR."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = dict.fromkeys(FIELDS, 0.0)
        self._pid = os.getpid()
        self._map: mmap.mmap | None = None
        self._mapped_dir: str | None = None

    def record(self, kind: str, milliseconds: float, write_errors: int) -> None:
        with self._lock:
            self._forked()
            values = self._values
            values[f"{kind}Requests"] += 1
            values[f"{kind}Milliseconds"] += milliseconds
            values[f"{kind}MaxMilliseconds"] = max(values[f"{kind}MaxMilliseconds"], milliseconds)
            values["selfMetricsWriteErrors"] = write_errors
            self._mirror()

    def _forked(self) -> None:
        """In a forked child, start from zero with a file of its own."""
        if self._pid != os.getpid():
            self._pid, self._values, self._map, self._mapped_dir = os.getpid(), dict.fromkeys(FIELDS, 0.0), None, None

    def _mirror(self) -> None:
        directory = getattr(settings, DIR_SETTING, None)
        if not directory:
            return
        if self._mapped_dir != directory:
            self._mapped_dir = directory
            try:
                self._map = _map_file(Path(directory), self._pid)
            except OSError as exc:  # logged once; /metrics then answers this worker's own counts
                self._map = None
                log.error("bgl prometheus: cannot keep this worker's counts in %s=%r: %s; /metrics answers each"
                          " worker's own", DIR_SETTING, directory, exc)
        if self._map is not None:
            LAYOUT.pack_into(self._map, 0, *(self._values[name] for name in FIELDS))

    def exposition(self, write_errors: int) -> str:
        with self._lock:
            self._forked()
            self._values["selfMetricsWriteErrors"] = write_errors
            self._mirror()
            own, shared = dict(self._values), self._map is not None
        directory = getattr(settings, DIR_SETTING, None)
        if not directory or not shared:
            return prometheus_text(PREFIX, {name: own[name] for name in COUNTERS},
                                   {name: own[name] for name in GAUGES}, HELP,
                                   {"worker": worker_prefix().rsplit(".", 1)[-1]})
        totals = dict.fromkeys(FIELDS, 0.0)
        for path in Path(directory).glob("web-*.counts"):
            data = path.read_bytes()
            if len(data) != LAYOUT.size:  # being created
                continue
            for name, value in zip(FIELDS, LAYOUT.unpack(data)):
                totals[name] = max(totals[name], value) if name in GAUGES else totals[name] + value
        return prometheus_text(PREFIX, {name: totals[name] for name in COUNTERS},
                               {name: totals[name] for name in GAUGES}, HELP)


def _map_file(directory: Path, pid: int) -> mmap.mmap:
    """This worker's file in `directory`, created (0600) at its full size and mapped."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"web-{pid}-{time.time_ns()}.counts"
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(descriptor, bytes(LAYOUT.size))
        return mmap.mmap(descriptor, LAYOUT.size)
    finally:
        os.close(descriptor)


TOTALS = RequestTotals()


def enabled() -> bool:
    return bool(getattr(settings, SETTING, False))


def record(kind: str, milliseconds: float) -> None:
    """Count one find or render request and its time, when BG_PROMETHEUS_METRICS is on."""
    if enabled():
        TOTALS.record(kind, milliseconds, _write_errors())


def _write_errors() -> int:
    writer = shared_writer()
    return writer.errors if writer is not None else 0


def is_scrape(request) -> bool:
    """`GET /metrics` without `query` (graphite's find alias answers only an error to it)."""
    return request.method == "GET" and app_path(request).rstrip("/") == "/metrics" and "query" not in request.GET


class PrometheusMiddleware:
    """Answers Prometheus' scrapes (see the module docstring)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if enabled() and is_scrape(request):
            request.get_host()  # a Host outside ALLOWED_HOSTS is refused (400), as on every other path
            return HttpResponse(TOTALS.exposition(_write_errors()), content_type=CONTENT_TYPE)
        return self.get_response(request)
