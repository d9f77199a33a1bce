"""graphite-web's own find and render times, written into the store as Graphite metrics.

RequestTimingMiddleware (first in MIDDLEWARE, so it times the whole request) measures
every `/metrics/find` and `/render` request of this process. Every BG_SELF_METRICS_INTERVAL
seconds (default 60, as carbon's CARBON_METRIC_INTERVAL; 0: off) a background thread
writes what it measured in that interval through the accessor, as

    bgl.web.<host>-<pid>.find.count               requests answered (aggregated by sum)
    bgl.web.<host>-<pid>.find.totalMilliseconds   their summed duration (sum)
    bgl.web.<host>-<pid>.find.maxMilliseconds     the slowest one (max)
    bgl.web.<host>-<pid>.render.{count,totalMilliseconds,maxMilliseconds}
    bgl.web.<host>-<pid>.writeErrors              failed writes of these metrics since the last one
                                                  that succeeded (sum)

(one `<host>-<pid>` per gunicorn worker; zeros are written too, so graphs have no holes).
The metrics are created on their first write with one stage of BG_SELF_METRICS_INTERVAL
seconds kept 90 days (carbon's self-metrics get 60s:90d from `bgl run`'s schemas).
A failed write is logged and counted, never raised (requests do not wait for it); its
times are kept for the next write. The
thread starts with the first timed request; what it measured after its last write is lost
when the worker stops.
"""
from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from typing import Callable

from django.conf import settings

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from graphite_plugin.middleware import app_path
from graphite_plugin.options import DEFAULT_SELF_METRICS_INTERVAL

log = logging.getLogger(__name__)

PREFIX = "bgl.web"
TIMED = {"find": re.compile(r"^/metrics/find/?$"), "render": re.compile(r"^/render/?$")}
RETENTION_DAYS = 90


class RequestTimes:
    """Per kind of request: count, total and max milliseconds since the last take (thread-safe)."""

    def __init__(self, kinds=tuple(TIMED)) -> None:
        self._kinds = tuple(kinds)
        self._lock = threading.Lock()
        self._times = {kind: [0, 0.0, 0.0] for kind in self._kinds}

    def record(self, kind: str, milliseconds: float) -> None:
        with self._lock:
            entry = self._times[kind]
            entry[0] += 1
            entry[1] += milliseconds
            entry[2] = max(entry[2], milliseconds)

    def take(self) -> dict[str, tuple[int, float, float]]:
        """{kind: (count, totalMilliseconds, maxMilliseconds)} since the previous take."""
        with self._lock:
            taken, self._times = self._times, {kind: [0, 0.0, 0.0] for kind in self._kinds}
        return {kind: (int(c), total, most) for kind, (c, total, most) in taken.items()}

    def put_back(self, taken: dict[str, tuple[int, float, float]]) -> None:
        """Add times taken but not written back, so that the next write includes them."""
        with self._lock:
            for kind, (count, total, most) in taken.items():
                entry = self._times[kind]
                entry[0] += count
                entry[1] += total
                entry[2] = max(entry[2], most)


def worker_prefix() -> str:
    """`bgl.web.<host>-<pid>` (dots of the host name become `_`, as carbon's agent names)."""
    return f"{PREFIX}.{socket.gethostname().replace('.', '_')}-{os.getpid()}"


class SelfMetricsWriter:
    """The thread writing a RequestTimes into the store every `interval` seconds."""

    def __init__(self, times: RequestTimes, interval: float, accessor: Callable[[], Accessor],
                 prefix: Callable[[], str] = worker_prefix) -> None:
        self.times = times
        self.interval = interval
        self.errors = 0  # failed writes since start
        self._unreported = 0  # failed writes since the last successful one
        self._accessor = accessor
        self._prefix = prefix
        self._step = max(1, round(interval))
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def ensure_started(self) -> None:
        """Start the thread in this process (once; again in a forked child)."""
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid != os.getpid():
                self._thread = threading.Thread(target=self._run, name="bgl-self-metrics", daemon=True)
                self._thread.start()
                self._pid = os.getpid()

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            self.write_once()

    def write_once(self, now: int | None = None) -> bool:
        """Write the times taken now; False (logged, counted) when the store refused them."""
        now = int(time.time()) if now is None else now
        prefix = self._prefix()
        sums: dict[str, list[tuple[int, float]]] = {f"{prefix}.writeErrors": [(now, float(self._unreported))]}
        maxima: dict[str, list[tuple[int, float]]] = {}
        taken = self.times.take()
        for kind, (count, total, most) in taken.items():
            sums[f"{prefix}.{kind}.count"] = [(now, float(count))]
            sums[f"{prefix}.{kind}.totalMilliseconds"] = [(now, round(total, 3))]
            maxima[f"{prefix}.{kind}.maxMilliseconds"] = [(now, round(most, 3))]
        retention = f"{self._step}s:{RETENTION_DAYS}d"
        try:
            accessor = self._accessor()
            for points, aggregator in ((sums, "sum"), (maxima, "max")):
                result = accessor.insert_points(points, now=now, create=MetricMetadata.create(retention, aggregator, 0))
                if result.rejected:
                    raise ValueError("; ".join(result.errors))
        except Exception as exc:  # noqa: BLE001 - never let the thread die or a request see it
            self.times.put_back(taken)
            self.errors += 1
            self._unreported += 1
            log.error("bgl self-metrics: could not write %s.* (%d failed writes so far): %s", prefix, self.errors, exc)
            return False
        self._unreported = 0
        return True


_writer: SelfMetricsWriter | None = None
_writer_lock = threading.Lock()


def shared_writer() -> SelfMetricsWriter | None:
    """This process's writer (None when BG_SELF_METRICS_INTERVAL is 0)."""
    global _writer
    interval = float(getattr(settings, "BG_SELF_METRICS_INTERVAL", DEFAULT_SELF_METRICS_INTERVAL))
    if interval <= 0:
        return None
    if _writer is None:
        with _writer_lock:
            if _writer is None:
                from graphite_plugin.finder import shared_accessor

                _writer = SelfMetricsWriter(RequestTimes(), interval, shared_accessor)
    return _writer


class RequestTimingMiddleware:
    """Times `/metrics/find` and `/render` requests for the self-metrics (see the module docstring)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        kind = next((k for k, path in TIMED.items() if path.match(app_path(request))), None)
        if kind is None:
            return self.get_response(request)
        started = time.perf_counter()
        try:
            return self.get_response(request)
        finally:
            self.record(kind, (time.perf_counter() - started) * 1000)

    @staticmethod
    def record(kind: str, milliseconds: float) -> None:
        """Count one request of this kind and its time (never raises)."""
        try:
            from graphite_plugin import prometheus  # (imports this module)

            prometheus.record(kind, milliseconds)
            writer = shared_writer()
            if writer is not None:
                writer.times.record(kind, milliseconds)
                writer.ensure_started()
        except Exception:  # noqa: BLE001 - measuring must never fail a request
            log.exception("bgl self-metrics: could not record a %s request", kind)
