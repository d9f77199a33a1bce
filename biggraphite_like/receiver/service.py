"""The receiver as a whole: listeners, buffer, flusher, CarbonLink and self-metrics on one
accessor, run until SIGTERM or SIGINT, then drained (see listeners.py) and flushed.

On SIGTERM: stop accepting, read every open connection to its end (or until
`drain_timeout`), flush everything, record the last self-metrics, exit 0 (the exit
message says whether anything was dropped). Every byte a client sent on a connection it
closed before the signal is stored, unless the store still fails then (the flusher
retries, then drops and counts: flusher.py). A SIGKILL loses at most what was received
since the last flush started (one flush interval), or what a failing store left buffered.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Callable, TextIO

from biggraphite_like import settings
from biggraphite_like.accessor import Accessor
from biggraphite_like.ingest.buffer import PointBuffer
from biggraphite_like.ingest.points import Refusals
from biggraphite_like.receiver.carbonlink import CarbonLinkServer, CarbonLinkService
from biggraphite_like.receiver.flusher import Flusher
from biggraphite_like.receiver.framing import LineFraming, PickleFraming
from biggraphite_like.receiver.limits import raise_open_files_limit
from biggraphite_like.receiver.listeners import Listeners, listen_tcp, listen_udp
from biggraphite_like.receiver.options import ReceiverOptions
from biggraphite_like.receiver.prometheus import PrometheusServer, exposition
from biggraphite_like.receiver.rules import StorageRules
from biggraphite_like.receiver.stats import ReceiverStats, agent_prefix
from biggraphite_like.urls import redact_url

_log = logging.getLogger("biggraphite_like.receiver")



class Receiver:
    """One receiver process's parts (start, run_until_stopped, close)."""

    def __init__(self, accessor: Accessor, options: ReceiverOptions):
        options.validate()
        self.options = options
        self.accessor = accessor
        self.rules = StorageRules.load(options.storage_schemas, options.storage_aggregation)
        self.stats = ReceiverStats()
        self.buffer = PointBuffer(options.max_name_cache_bytes)
        self.listeners = Listeners(self.buffer, self.stats, options.max_buffered_points,
                                   limits=options.connection_limits)
        self.flusher = Flusher(accessor, self.buffer, self.rules, self.stats, options.flush_policy)
        self.carbonlink: CarbonLinkServer | None = None
        self.prometheus: PrometheusServer | None = None
        self.addresses: dict[str, tuple[str, int]] = {}
        self._stop = threading.Event()
        self._prefix = agent_prefix(options.host)
        self._next_stats = time.monotonic() + (options.stats_interval or float("inf"))
        umask = os.umask(0o022)  # read it (the file follows it: 0600 under `bgl run`'s umask 077)
        os.umask(umask)
        self._file_mode = 0o666 & ~umask

    def start(self) -> None:
        """Open every listener (errors name the port) and start the threads."""
        o = self.options
        raise_open_files_limit()  # before the listeners: their connection caps follow it
        try:
            if o.line_port is not None:
                sock = listen_tcp(o.bind, o.line_port)
                self.listeners.add_tcp(sock, LineFraming)
                self.addresses["plaintext"] = sock.getsockname()[:2]
            if o.pickle_port is not None:
                sock = listen_tcp(o.bind, o.pickle_port)
                self.listeners.add_tcp(sock, PickleFraming)
                self.addresses["pickle"] = sock.getsockname()[:2]
            if o.udp_port is not None:
                sock = listen_udp(o.bind, o.udp_port)
                self.listeners.add_udp(sock)
                self.addresses["udp"] = sock.getsockname()[:2]
            if o.carbonlink_port is not None:
                self.carbonlink = CarbonLinkServer(CarbonLinkService(self.buffer, self.accessor, self.rules),
                                                   settings.CARBONLINK_INTERFACE, o.carbonlink_port)
                self.addresses["carbonlink"] = (settings.CARBONLINK_INTERFACE, self.carbonlink.port)
            if o.prometheus_port is not None:
                self.prometheus = PrometheusServer(lambda: exposition(self.stats, self.buffer.buffered), o.bind,
                                                   o.prometheus_port)
                self.addresses["prometheus"] = self.prometheus.address
        except BaseException:
            self.listeners.close()
            raise
        self.flusher.start()
        if self.carbonlink is not None:
            self.carbonlink.start()
        if self.prometheus is not None:
            self.prometheus.start()
        self._write_prometheus()

    def request_stop(self, *_: object) -> None:
        self._stop.set()

    def run_until_stopped(self, ready: Callable[[], None] | None = None) -> None:
        """Serve until request_stop (SIGTERM/SIGINT when installed), then drain and flush."""
        if ready:
            ready()
        while not self._stop.is_set():
            self.listeners.run_once(0.2)
            self._maybe_record_stats()
        _log.info("stopping: reading what %d connected clients already sent (at most %gs)",
                  len(self.listeners.connections), self.options.drain_timeout)
        self.listeners.drain(self.options.drain_timeout, self.options.drain_idle)
        self.close()

    def _maybe_record_stats(self, force: bool = False) -> None:
        if not self.options.stats_interval or (not force and time.monotonic() < self._next_stats):
            return
        self._next_stats = time.monotonic() + self.options.stats_interval
        points = self.stats.self_metric_points(self._prefix, self.buffer.buffered, time.time())
        self.buffer.add(points, Refusals())
        self._write_prometheus()

    def _write_prometheus(self) -> None:
        if self.options.metrics_file:
            try:
                self.stats.write_prometheus(self.options.metrics_file, self.buffer.buffered, self._file_mode)
            except OSError as exc:
                _log.error("cannot write the metrics file %s: %s", self.options.metrics_file, exc)

    def close(self) -> None:
        """Stop CarbonLink, record the last counts, flush everything, log the totals."""
        if self.carbonlink is not None:
            self.carbonlink.stop()
        self._maybe_record_stats(force=True)
        self.flusher.stop()
        self.listeners.close()
        self._write_prometheus()
        if self.prometheus is not None:
            self.prometheus.stop()
        totals = self.stats.totals()
        _log.info("stopped; totals since start: %s", ", ".join(f"{k}={v}" for k, v in totals.items()))


def serve(accessor: Accessor, options: ReceiverOptions, out: TextIO) -> int:
    """Run a receiver in this (main) thread until SIGTERM or SIGINT; 0 after a clean stop."""
    receiver = Receiver(accessor, options)
    receiver.start()
    _log.info("store %s, flush every %gs, at most %d points buffered", redact_url(accessor.store.url),
              options.flush_interval, options.max_buffered_points)
    previous = {sig: signal.signal(sig, receiver.request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}

    def ready() -> None:
        where = ", ".join(f"{kind} {host}:{port}" for kind, (host, port) in receiver.addresses.items())
        out.write(f"bgl receive: listening: {where}\n")
        out.flush()

    try:
        receiver.run_until_stopped(ready)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    out.write(f"bgl receive: stopped, {exit_summary(receiver.stats.totals())}\n")
    out.flush()
    return 0


def exit_summary(totals: dict[str, int]) -> str:
    """What the exit message says of the points received: "everything received is stored"
    only when nothing was dropped (a store failure that outlasted the stop, UDP past the
    bound); points refused as bad input or too old are named too."""
    dropped = totals.get("droppedPoints", 0)
    refused = {"refused as bad input": totals.get("refusedLines", 0) + totals.get("rejectedPoints", 0),
               "older than their retention": totals.get("tooOldPoints", 0)}
    unstored = ", ".join(f"{count} {why}" for why, count in refused.items() if count)
    if dropped:
        return (f"{dropped} points received were NOT stored (droppedPoints: the store kept failing, or UDP past"
                f" --max-buffered-points; the log says which)" + (f"; also {unstored}" if unstored else ""))
    return "everything received is stored" + (f" except {unstored}" if unstored else "")
