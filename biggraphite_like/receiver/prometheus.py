"""The receiver's counters served over HTTP at `/metrics`, for Prometheus to scrape.

`bgl receive --prometheus-port PORT` (off by default) starts this small server on the
receiver's --bind address, apart from the carbon ports: a thread of Python's http.server
answering `GET /metrics` with the totals since start of ReceiverStats' counters
(`bgl_receiver_<name>_total`, TYPE counter) and its gauge (`bgl_receiver_buffered_points`),
the same numbers as the `carbon.agents.<host>.*` self-metrics and the --metrics-file.
Every other path is a 404. It holds no lock of the receiver's loop: a scrape reads the
counters under their own lock, as the self-metrics do.
"""
from __future__ import annotations

import http.server
import logging
import socket
import threading
from typing import Callable

from biggraphite_like.counters import prometheus_text
from biggraphite_like.errors import ReceiverConfigError
from biggraphite_like.receiver.stats import COUNTERS, GAUGES, ReceiverStats

_log = logging.getLogger("biggraphite_like.receiver.prometheus")

PREFIX = "bgl_receiver"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PATH = "/metrics"
REQUEST_TIMEOUT = 10.0  # seconds a connection may take to send its request (a silent one is closed)


def exposition(stats: ReceiverStats, buffered: int) -> str:
    """The receiver's counters and gauges in Prometheus text format."""
    return prometheus_text(PREFIX, stats.totals(), {"bufferedPoints": buffered}, {**COUNTERS, **GAUGES})


class _IPv6Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6


class PrometheusServer:
    """An HTTP server answering `GET /metrics` with `render()`, in a daemon thread."""

    def __init__(self, render: Callable[[], str], host: str, port: int) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = REQUEST_TIMEOUT

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.split("?", 1)[0] != PATH:
                    self.send_error(404, f"only {PATH} is served here")
                    return
                body = render().encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - http.server's name
                _log.debug("%s %s", self.address_string(), format % args)

        server_class = _IPv6Server if ":" in host else http.server.ThreadingHTTPServer
        try:
            self._server = server_class((host, port), Handler)
        except OSError as exc:
            raise ReceiverConfigError(f"--prometheus-port: cannot listen on {host}:{port}: {exc.strerror}") from None
        self._server.daemon_threads = True
        self.address: tuple[str, int] = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever, name="bgl-prometheus", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
