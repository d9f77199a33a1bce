"""carbon's plaintext and pickle receivers, guarded: a bad line is refused, not fatal.

carbon 1.1.10's line receiver lets an exception out of `lineReceived` for a line with a
NaN/inf timestamp (`int(nan)` in `metricReceived`) or a byte that is not UTF-8; Twisted then
closes the connection and every line after it is lost, the sender not told. The pickle
receiver does the same for a NaN/inf timestamp or a name that is not a string, and its
unpickler builds whatever a frame describes: a 200-byte "billion laughs" frame blocks the
reactor and takes hundreds of MB, `10**400` or a list nested 100,000 deep raise past its
guard. The guarded pickle receiver decodes with our receiver's bounded decoder
(biggraphite_like/receiver/pickles.py) instead: such a frame is refused, logged, counted.

`register()` defines subclasses with carbon's own plugin names (`line`, `pickle`), which
carbon's PluginRegistrar puts in place of its classes (carbon's extension point for
receivers; carbon's files are not touched). They refuse such a line or point, count it
(`biggraphite_like.refusedLines` among carbon's self-metrics, and in the shutdown log),
log it (at most LOGGED_PER_MINUTE a minute) and go on with the connection. They also note
when each connection last received bytes, for the shutdown drain (drain.py).

They also take a read at a time rather than a line (or pickled point) at a time: the
plaintext receiver splits and decodes every complete line of a read at once (Twisted's
LineOnlyReceiver rules: a line over MAX_LENGTH still drops the connection after the lines
before it), and both apply carbon's checks (NaN values dropped, a timestamp of -1 is now,
MIN_TIMESTAMP_RESOLUTION) and hand the read's points to the cache together
(pipeline.cache_many), unless a black or white list or another pipeline is configured,
where each point goes through carbon's `metricReceived` as before.

`register()` must run after twistd installed its reactor (importing carbon.protocols
installs the default one): the launcher calls it from carbon's service maker.
"""
from __future__ import annotations

import math
import time
from typing import Any

from biggraphite_like.receiver.pickles import decode_pickle
from biggraphite_like.receiver.points import Refusals, describe
from carbon_plugin import pipeline
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
        text = describe(data)
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

    class GuardedReceiver:
        """Mixin: refuse bad points instead of raising; note when bytes last arrived; hand a
        read's points over together."""

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

        def metricsReceived(self, points: list[tuple[str, tuple[float, float]]]) -> None:
            """metricReceived for each point, in order; with carbon's default pipeline and no
            black or white list, the same checks here and the points cached together
            (pipeline.cache_many)."""
            from carbon.conf import settings
            from carbon.regexlist import BlackList, WhiteList

            feeder = pipeline.bulk_feeder()
            if feeder is None or BlackList or WhiteList:
                for metric, datapoint in points:
                    self.metricReceived(metric, datapoint)
                return
            resolution = settings.MIN_TIMESTAMP_RESOLUTION
            accepted = []
            for metric, datapoint in points:
                timestamp, value = datapoint
                if not math.isfinite(timestamp):
                    refusals.refuse(self.peerName, finite_timestamp(datapoint), (metric, datapoint))  # type: ignore[attr-defined]
                    continue
                if value != value:  # carbon drops NaN values
                    continue
                if -2.0 < timestamp <= -1.0:  # carbon: int(timestamp) == -1 means now
                    timestamp = time.time()
                if resolution:
                    timestamp = int(timestamp) // resolution * resolution
                accepted.append((metric, (timestamp, value)))
            if accepted:
                pipeline.cache_many(feeder, accepted)
                self.resetTimeout()  # type: ignore[attr-defined]

    class GuardedLineReceiver(GuardedReceiver, MetricLineReceiver):
        plugin_name = "line"  # replaces carbon's MetricLineReceiver

        def dataReceived(self, data: bytes) -> None:
            """Twisted's LineOnlyReceiver.dataReceived, every complete line of the read at once
            (a line longer than MAX_LENGTH still drops the connection after the lines before it)."""
            self.last_data = time.monotonic()
            lines = (self._buffer + data).split(self.delimiter)
            self._buffer = lines.pop(-1)
            if self.transport.disconnecting:
                return
            if lines and max(map(len, lines)) > self.MAX_LENGTH:
                index = next(i for i, line in enumerate(lines) if len(line) > self.MAX_LENGTH)
                self.linesReceived(lines[:index])
                return self.lineLengthExceeded(lines[index])
            self.linesReceived(lines)
            if len(self._buffer) > self.MAX_LENGTH:
                return self.lineLengthExceeded(self._buffer)

        def lineReceived(self, line: bytes) -> None:
            self.linesReceived([line])

        def linesReceived(self, lines: list[bytes]) -> None:
            if not lines:
                return
            try:
                texts = b"\n".join(lines).decode("utf-8").split("\n")  # one decode for the read
            except UnicodeDecodeError:
                texts = []
                for line in lines:
                    try:
                        texts.append(line.decode("utf-8"))
                    except UnicodeDecodeError as exc:
                        refusals.refuse(self.peerName, f"byte {exc.start} is not UTF-8", line)
            points = []
            for text in texts:
                try:
                    metric, value, timestamp = text.split()
                    points.append((metric, (float(timestamp), float(value))))
                except ValueError:
                    refusals.refuse(self.peerName, "expected 'name value timestamp'", text)
            self.metricsReceived(points)

    class GuardedPickleReceiver(GuardedReceiver, MetricPickleReceiver):
        plugin_name = "pickle"  # replaces carbon's MetricPickleReceiver

        def stringReceived(self, data: bytes) -> None:
            """carbon's pickle message, decoded by the receiver's bounded decoder (never
            pickle's unpickler: pickles.py says why); refused points are logged and counted."""
            found = Refusals()
            points = decode_pickle(data, found)
            for reason, excerpt in found.samples:
                refusals.refuse(self.peerName, reason, excerpt)
            if found.count > len(found.samples):
                stats.increment("refusedLines", found.count - len(found.samples))
            self.metricsReceived(list(zip(points.names, zip(points.timestamps.tolist(), points.values.tolist()))))


def record_refusals() -> None:
    """The receivers' counters as carbon self-metrics (as the database plugin records its own)."""
    record_in_carbon(stats)
