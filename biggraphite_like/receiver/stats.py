"""The receiver's counters, its self-metrics and its Prometheus text file.

Counters are named as carbon names its own where carbon has one, and as the carbon plugin's
where the meaning is the plugin's (`storedPoints`: points the store accepted; carbon's own
`committedPoints` counts points handed to its database plugin, not stored). Every `interval` seconds
(60 by default, as carbon's CARBON_METRIC_INTERVAL) they are written as metrics
`carbon.agents.<host>.<name>` (the count over the interval, as carbon records them;
`bufferedPoints` is the number held at that time), through the receiver's own buffer, and
the totals since start are written to the Prometheus text file if one was asked for.
`committedPoints`, this receiver's name for `storedPoints` until this release, is still
written with the same value (ALIASES) and goes in the next release.
"""
from __future__ import annotations

import socket

import numpy as np

from biggraphite_like.counters import Counters
from biggraphite_like.maintenance import metrics_file
from biggraphite_like.ingest.points import ReceivedPoints

COUNTERS = {
    "metricsReceived": "points received (before checks)",
    "storedPoints": "points the store accepted",
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
# deprecated name -> the counter whose value it repeats (written until the next release)
ALIASES = {"committedPoints": "storedPoints"}
HELP = {**COUNTERS, **{old: f"deprecated: {new} under its former name (same value; removed in the next release)"
                       for old, new in ALIASES.items()}, **GAUGES}


def agent_prefix(host: str | None = None) -> str:
    """carbon's `carbon.agents.<host>` (dots of the host name become underscores)."""
    return "carbon.agents." + (host or socket.gethostname()).replace(".", "_")


class ReceiverStats(Counters):
    """The receiver's counters (thread-safe): counts since the last record, totals since start."""

    def __init__(self) -> None:
        super().__init__(COUNTERS)
        self._last_record: tuple[int, dict[str, int]] = (-1, {})  # second and counts of the last record

    def take(self) -> dict[str, int]:
        """Counts since the previous take, the deprecated aliases included."""
        return _with_aliases(super().take())

    def totals(self) -> dict[str, int]:
        """Counts since start, the deprecated aliases included."""
        return _with_aliases(super().totals())

    def self_metric_points(self, prefix: str, buffered: int, now: float) -> ReceivedPoints:
        """The counts since the last call, and the gauges, as points to store. A record in the
        same second as the previous one (the last record at shutdown, soon after the interval's)
        replaces it in the store, so it carries the previous one's counts too."""
        second, counts = int(now), self.take()
        last_second, last_counts = self._last_record
        if second == last_second:
            counts = {name: count + last_counts.get(name, 0) for name, count in counts.items()}
        self._last_record = (second, counts)
        values = {**counts, "bufferedPoints": buffered}
        names = [f"{prefix}.{name}" for name in values]
        return ReceivedPoints(names, np.full(len(names), float(second)), np.array(list(values.values()), dtype=np.float64))

    def write_prometheus(self, path: str, buffered: int, mode: int = 0o644) -> None:
        metrics_file.write(path, "receiver", {**self.totals(), "bufferedPoints": buffered}, HELP, mode)


def _with_aliases(counts: dict[str, int]) -> dict[str, int]:
    return {**counts, **{old: counts[new] for old, new in ALIASES.items()}}
