"""graphite-web's find and render counters at `/metrics`, for Prometheus to scrape.

Nothing is counted or served unless local_settings.py sets `BG_PROMETHEUS_METRICS = True`
(`bgl run` does). Then every `/metrics/find` and `/render` request the self-metrics time
(RequestTimingMiddleware.record, also for the finds graphite_plugin.wsgi answers in
front of Django) is counted here too, as totals since the process started, and
PrometheusMiddleware (in MIDDLEWARE through graphite_plugin.settings, after
RequestTimingMiddleware) answers `GET /metrics` *without* a `query` parameter with them
in Prometheus text format:

    bgl_web_find_requests_total{worker="<host>-<pid>"}       /metrics/find requests answered
    bgl_web_find_milliseconds_total{worker=...}              their summed duration
    bgl_web_find_max_milliseconds{worker=...}                the slowest since start (gauge)
    bgl_web_render_requests_total, ..._milliseconds_total, ..._max_milliseconds   the same for /render
    bgl_web_self_metrics_write_errors_total{worker=...}      failed writes of the bgl.web.* self-metrics

graphite-web's own `/metrics?query=...` (an alias of /metrics/find) is left to graphite:
without `query` it only answers an error, which is what this replaces. Each gunicorn
worker counts its own requests and answers with its own counts (label `worker`): a
scrape reaches one worker, see docs/monitoring.md.
"""
from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse

from biggraphite_like.counters import Counters, prometheus_text
from graphite_plugin.middleware import app_path
from graphite_plugin.self_metrics import TIMED, shared_writer, worker_prefix

SETTING = "BG_PROMETHEUS_METRICS"
PREFIX = "bgl_web"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HELP = {
    **{f"{kind}Requests": f"/{path} requests answered by this worker"
       for kind, path in (("find", "metrics/find"), ("render", "render"))},
    **{f"{kind}Milliseconds": f"summed duration of this worker's {kind} requests" for kind in TIMED},
    **{f"{kind}MaxMilliseconds": f"the slowest {kind} request of this worker since it started" for kind in TIMED},
    "selfMetricsWriteErrors": "failed writes of this worker's bgl.web.* self-metrics into the store",
}


class RequestTotals:
    """Requests and milliseconds per kind since start (thread-safe), and the slowest."""

    def __init__(self) -> None:
        self.counters = Counters([*(f"{kind}Requests" for kind in TIMED), *(f"{kind}Milliseconds" for kind in TIMED)])
        self.slowest = dict.fromkeys(TIMED, 0.0)

    def record(self, kind: str, milliseconds: float) -> None:
        self.counters.increment(f"{kind}Requests")
        self.counters.increment(f"{kind}Milliseconds", milliseconds)  # type: ignore[arg-type]
        self.slowest[kind] = max(self.slowest[kind], milliseconds)  # a lost race loses a maximum, never a count

    def exposition(self, write_errors: int) -> str:
        counters = {**self.counters.totals(), "selfMetricsWriteErrors": write_errors}
        gauges = {f"{kind}MaxMilliseconds": value for kind, value in self.slowest.items()}
        worker = worker_prefix().rsplit(".", 1)[-1]
        return prometheus_text(PREFIX, counters, gauges, HELP, {"worker": worker})


TOTALS = RequestTotals()


def enabled() -> bool:
    return bool(getattr(settings, SETTING, False))


def record(kind: str, milliseconds: float) -> None:
    """Count one find or render request and its time, when BG_PROMETHEUS_METRICS is on."""
    if enabled():
        TOTALS.record(kind, milliseconds)


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
            writer = shared_writer()
            return HttpResponse(TOTALS.exposition(writer.errors if writer else 0), content_type=CONTENT_TYPE)
        return self.get_response(request)
