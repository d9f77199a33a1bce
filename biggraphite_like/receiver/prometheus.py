"""The receiver's counters served over HTTP at `/metrics`, for Prometheus to scrape.

`bgl receive --prometheus-port PORT` (off by default) starts this small server on the
receiver's --bind address, apart from the carbon ports: a thread of Python's http.server
answering `GET /metrics` with the totals since start of ReceiverStats' counters
(`bgl_receiver_<name>_total`, TYPE counter) and its gauge (`bgl_receiver_buffered_points`),
the same numbers as the `carbon.agents.<host>.*` self-metrics and the --metrics-file.
Every other path is a 404. It holds no lock of the receiver's loop: a scrape reads the
counters under their own lock, as the self-metrics do. At most MAX_CLIENTS connections
are served at once (a thread each, closed after REQUEST_TIMEOUT seconds of silence); more
are closed at once, so a flood of connections costs no more than that many threads.
"""
from __future__ import annotations

import http.server
import logging
import socket
import threading
from typing import Callable

from biggraphite_like.counters import prometheus_text
from biggraphite_like.errors import ReceiverConfigError
from biggraphite_like.receiver.stats import HELP, ReceiverStats

_log = logging.getLogger("biggraphite_like.receiver.prometheus")

PREFIX = "bgl_receiver"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PATH = "/metrics"
REQUEST_TIMEOUT = 10.0  # seconds a connection may take to send its request (a silent one is closed)
MAX_CLIENTS = 16  # connections served at once; more are closed unanswered


def exposition(stats: ReceiverStats, buffered: int) -> str:
    """The receiver's counters and gauges in Prometheus text format."""
    return prometheus_text(PREFIX, stats.totals(), {"bufferedPoints": buffered}, HELP)


class _BoundedServer(http.server.ThreadingHTTPServer):
    """A thread per connection, MAX_CLIENTS of them at most."""

    daemon_threads = True

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CLIENTS)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def process_request(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        if not self._slots.acquire(blocking=False):
            _log.debug("%s: %d scrapes under way, connection closed", client_address, MAX_CLIENTS)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _IPv6Server(_BoundedServer):
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

        server_class = _IPv6Server if ":" in host else _BoundedServer
        try:
            self._server = server_class((host, port), Handler)
        except OSError as exc:
            raise ReceiverConfigError(f"--prometheus-port: cannot listen on {host}:{port}: {exc.strerror}") from None
        self.address: tuple[str, int] = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever, name="bgl-prometheus", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
