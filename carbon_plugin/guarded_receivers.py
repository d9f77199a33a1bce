"""carbon's plaintext and pickle receivers, guarded (receivers.py says why): importing this
module defines them, which registers them with carbon in place of its own; it must be
imported after twistd installed its reactor (`receivers.register()` does).

`GuardedReceiver` refuses bad points instead of raising, notes when bytes last arrived and
hands a read's points over together; `GuardedLineReceiver` decodes a read's lines at once,
`GuardedPickleReceiver` decodes frames with the ingest package's bounded decoder.
"""
from __future__ import annotations

import math
import time

from carbon.protocols import MetricLineReceiver, MetricPickleReceiver

from biggraphite_like.ingest.pickles import decode_pickle
from biggraphite_like.ingest.points import Refusals
from carbon_plugin import pipeline, receivers


class GuardedReceiver:
    """Mixin: refuse bad points instead of raising; note when bytes last arrived; hand a
    read's points over together."""

    last_data = 0.0  # time.monotonic() of the last bytes received

    def dataReceived(self, data: bytes) -> None:
        self.last_data = time.monotonic()
        super().dataReceived(data)  # type: ignore[misc]

    def metricReceived(self, metric: str, datapoint: tuple) -> None:
        reason = receivers.finite_timestamp(datapoint)
        if reason is not None:
            receivers.refuse(self.peerName, reason, (metric, datapoint))  # type: ignore[attr-defined]
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
                receivers.refuse(self.peerName, receivers.finite_timestamp(datapoint), (metric, datapoint))  # type: ignore[attr-defined]
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
                    receivers.refuse(self.peerName, f"byte {exc.start} is not UTF-8", line)
        points = []
        for text in texts:
            try:
                metric, value, timestamp = text.split()
                points.append((metric, (float(timestamp), float(value))))
            except ValueError:
                receivers.refuse(self.peerName, "expected 'name value timestamp'", text)
        self.metricsReceived(points)

class GuardedPickleReceiver(GuardedReceiver, MetricPickleReceiver):
    plugin_name = "pickle"  # replaces carbon's MetricPickleReceiver

    def stringReceived(self, data: bytes) -> None:
        """carbon's pickle message, decoded by the ingest core's bounded decoder (never
        pickle's unpickler: ingest/pickles.py says why); refused points are logged and counted."""
        found = Refusals()
        points = decode_pickle(data, found)
        for reason, excerpt in found.samples:
            receivers.refuse(self.peerName, reason, excerpt)
        if found.count > len(found.samples):
            receivers.stats.increment("refusedLines", found.count - len(found.samples))
        self.metricsReceived(list(zip(points.names, zip(points.timestamps.tolist(), points.values.tolist()))))


