"""carbon's plaintext and pickle receivers, guarded: a bad line is refused, not fatal.

carbon 1.1.10's line receiver lets an exception out of `lineReceived` for a line with a
NaN/inf timestamp (`int(nan)` in `metricReceived`) or a byte that is not UTF-8; Twisted then
closes the connection and every line after it is lost, the sender not told. The pickle
receiver does the same for a NaN/inf timestamp or a name that is not a string.

`register()` defines subclasses with carbon's own plugin names (`line`, `pickle`), which
carbon's PluginRegistrar puts in place of its classes (carbon's extension point for
receivers; carbon's files are not touched). They refuse such a line or point, count it
(`biggraphite_like.refusedLines` among carbon's self-metrics, and in the shutdown log),
log it (at most LOGGED_PER_MINUTE a minute) and go on with the connection. They also note
when each connection last received bytes, for the shutdown drain (drain.py).

`register()` must run after twistd installed its reactor (importing carbon.protocols
installs the default one): the launcher calls it from carbon's service maker.
"""
from __future__ import annotations

import math
import time
from typing import Any

from carbon_plugin.stats import PluginStats, record_in_carbon

LOGGED_PER_MINUTE = 10  # refused lines logged per minute (every one is counted)
RECEIVER_COUNTERS = ("refusedLines",)  # lines and pickled points refused by the receivers

stats = PluginStats(RECEIVER_COUNTERS)


class RefusalLog:
    """Logs refused lines, at most `limit` per `period` seconds, then how many were not logged."""

    def __init__(self, limit: int = LOGGED_PER_MINUTE, period: float = 60.0):
        self.limit = limit
        self.period = period
        self._window_start = -math.inf
        self._logged = 0
        self._suppressed = 0

    def refuse(self, peer: str, reason: str, data: Any) -> None:
        """Count one refused line or point; log it unless the limit was reached."""
        from carbon import log

        stats.increment("refusedLines")
        now = time.monotonic()
        if now - self._window_start >= self.period:
            if self._suppressed:
                log.listener(f"biggraphite_like: {self._suppressed} more refused lines not logged"
                             f" in the last {self.period:.0f}s")
            self._window_start, self._logged, self._suppressed = now, 0, 0
        if self._logged >= self.limit:
            self._suppressed += 1
            return
        self._logged += 1
        text = repr(data)
        if len(text) > 200:
            text = text[:200] + "..."
        log.listener(f"biggraphite_like: refused from {peer} ({reason}), connection kept: {text}")


refusals = RefusalLog()


def finite_timestamp(datapoint: tuple) -> str | None:
    """Why carbon cannot take this (timestamp, value), or None. Carbon itself drops NaN values."""
    timestamp = datapoint[0]
    if not isinstance(timestamp, float) or not math.isfinite(timestamp):
        return f"timestamp {timestamp!r} is not a finite number"
    return None


def register() -> None:
    """Put the guarded receivers in place of carbon's (before carbon builds its services)."""
    from carbon.protocols import MetricLineReceiver, MetricPickleReceiver
    from carbon.util import pickle

    class GuardedReceiver:
        """Mixin: refuse bad points instead of raising; note when bytes last arrived."""

        last_data = 0.0  # time.monotonic() of the last bytes received

        def dataReceived(self, data: bytes) -> None:
            self.last_data = time.monotonic()
            super().dataReceived(data)  # type: ignore[misc]

        def metricReceived(self, metric: str, datapoint: tuple) -> None:
            reason = finite_timestamp(datapoint)
            if reason is not None:
                refusals.refuse(self.peerName, reason, (metric, datapoint))  # type: ignore[attr-defined]
                return
            super().metricReceived(metric, datapoint)  # type: ignore[misc]

    class GuardedLineReceiver(GuardedReceiver, MetricLineReceiver):
        plugin_name = "line"  # replaces carbon's MetricLineReceiver

        def lineReceived(self, line: bytes) -> None:
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                refusals.refuse(self.peerName, f"byte {exc.start} is not UTF-8", line)
                return
            try:
                metric, value, timestamp = text.split()
                datapoint = (float(timestamp), float(value))
            except ValueError:
                refusals.refuse(self.peerName, "expected 'name value timestamp'", text)
                return
            self.metricReceived(metric, datapoint)

    class GuardedPickleReceiver(GuardedReceiver, MetricPickleReceiver):
        plugin_name = "pickle"  # replaces carbon's MetricPickleReceiver

        def stringReceived(self, data: bytes) -> None:
            try:
                datapoints = self.unpickler.loads(data)
            except (pickle.UnpicklingError, ValueError, IndexError, ImportError, KeyError, EOFError,
                    TypeError, AttributeError) as exc:
                refusals.refuse(self.peerName, f"invalid pickle: {exc}", data[:100])
                return
            if not isinstance(datapoints, (list, tuple)):
                refusals.refuse(self.peerName, "a pickle message must be a list of points", datapoints)
                return
            for raw in datapoints:
                try:
                    metric, (timestamp, value) = raw
                    datapoint = (float(timestamp), float(value))
                except (ValueError, TypeError):
                    refusals.refuse(self.peerName, "expected (name, (timestamp, value))", raw)
                    continue
                if isinstance(metric, bytes):
                    try:
                        metric = metric.decode("utf-8")
                    except UnicodeDecodeError:
                        refusals.refuse(self.peerName, "name is not UTF-8", raw)
                        continue
                if not isinstance(metric, str):
                    refusals.refuse(self.peerName, "name is not a string", raw)
                    continue
                self.metricReceived(metric, datapoint)


def record_refusals() -> None:
    """The receivers' counters as carbon self-metrics (as the database plugin records its own)."""
    record_in_carbon(stats)
