"""The receiver's counters, its self-metrics and its Prometheus text file.

Counters are named as carbon names its own where carbon has one. Every `interval` seconds
(60 by default, as carbon's CARBON_METRIC_INTERVAL) they are written as metrics
`carbon.agents.<host>.<name>` (the count over the interval, as carbon records them;
`bufferedPoints` is the number held at that time), through the receiver's own buffer, and
the totals since start are written to the Prometheus text file if one was asked for.

`RateLimitedLog` keeps bad input from flooding the log: at most `per_minute` lines a
minute, then one line saying how many were not logged.
"""
from __future__ import annotations

import logging
import socket
import threading
import time

import numpy as np

from biggraphite_like.counters import Counters
from biggraphite_like.maintenance import metrics_file
from biggraphite_like.receiver.points import Points, Refusals

COUNTERS = {
    "metricsReceived": "points received (before checks)",
    "committedPoints": "points the store accepted",
    "refusedLines": "lines, pickle items or points refused as bad input (malformed, not UTF-8, NaN/inf,"
                    " too long, invalid name)",
    "droppedPoints": "points lost: UDP datagrams while the buffer was full, batches the store failed every retry",
    "tooOldPoints": "points older than their metric's whole retention",
    "rejectedPoints": "points the accessor refused",
    "creates": "metrics created",
    "flushes": "store batches written",
    "flushMilliseconds": "time spent writing store batches",
    "storeErrors": "failed store batches (each retry counts)",
    "readPauses": "times the receiver stopped reading its connections because the store fell behind",
    "closedConnections": "connections the receiver closed: the longest silent at --max-connections, an incomplete"
                         " line or frame silent for --partial-timeout or past --max-partial-bytes, a pickle length"
                         " over the limit",
    "refusedConnections": "new connections closed at once: their listener was at --max-connections and no"
                          " connection could make room (each had data waiting to be read)",
    "acceptErrors": "failed accepts (EMFILE, ENFILE...): the listener stops accepting for a second",
}
GAUGES = {"bufferedPoints": "points held in memory, waiting for or in a flush"}


def agent_prefix(host: str | None = None) -> str:
    """carbon's `carbon.agents.<host>` (dots of the host name become underscores)."""
    return "carbon.agents." + (host or socket.gethostname()).replace(".", "_")


class ReceiverStats(Counters):
    """The receiver's counters (thread-safe): counts since the last record, totals since start."""

    def __init__(self) -> None:
        super().__init__(COUNTERS)

    def self_metric_points(self, prefix: str, buffered: int, now: float) -> Points:
        """The counts since the last call, and the gauges, as points to store."""
        values = {**self.take(), "bufferedPoints": buffered}
        names = [f"{prefix}.{name}" for name in values]
        return Points(names, np.full(len(names), float(int(now))), np.array(list(values.values()), dtype=np.float64))

    def write_prometheus(self, path: str, buffered: int, mode: int = 0o644) -> None:
        metrics_file.write(path, "receiver", {**self.totals(), "bufferedPoints": buffered}, {**COUNTERS, **GAUGES},
                           mode)


class RateLimitedLog:
    """Log refusals or other events of hostile or broken clients, at most `per_minute` lines
    a minute (every one is still counted by its caller); `what` names them in the line
    saying how many were not logged."""

    def __init__(self, logger: logging.Logger, per_minute: int = 10, clock=time.monotonic, what: str = "refusals"):
        self._logger = logger
        self._per_minute = per_minute
        self._clock = clock
        self._what = what
        self._window = clock()
        self._logged = 0
        self._suppressed = 0
        self._lock = threading.Lock()

    def _may_log(self, events: int) -> bool:
        """Whether one more line fits this minute (else `events` are added to the suppressed);
        call with the lock held."""
        now = self._clock()
        if now - self._window >= 60:
            if self._suppressed:
                self._logger.warning("%d more %s were not logged in the last minute", self._suppressed, self._what)
            self._window, self._logged, self._suppressed = now, 0, 0
        if self._logged >= self._per_minute:
            self._suppressed += events
            return False
        self._logged += 1
        return True

    def warning(self, message: str, *args: object) -> None:
        """Log one line (%-formatted with args) unless this minute's lines are spent."""
        with self._lock:
            if self._may_log(1):
                self._logger.warning(message, *args)

    def refused(self, peer: str, refusals: Refusals, what: str = "refused") -> None:
        """Log a read's refusals, a line per sample kept (the connection goes on)."""
        if not refusals.count:
            return
        with self._lock:
            samples = refusals.samples or [("", "")]
            for index, (reason, excerpt) in enumerate(samples):
                if not self._may_log(refusals.count if index == 0 else 0):
                    break
                more = f" ({refusals.count} in this read)" if index == 0 and refusals.count > 1 else ""
                self._logger.warning("%s from %s%s: %s: %s; the rest of the connection is read", what, peer, more,
                                     reason, excerpt)
