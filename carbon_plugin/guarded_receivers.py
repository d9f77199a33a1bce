"""carbon's plaintext and pickle receivers, guarded (receivers.py says why): importing this
module defines them, which registers them with carbon in place of its own; it must be
imported after twistd installed its reactor (`receivers.register()` does).

`GuardedReceiver` refuses bad points instead of raising, notes when bytes last arrived and
hands a read's points over together; `GuardedLineReceiver` decodes a read's lines at once,
`GuardedPickleReceiver` decodes frames with the ingest package's bounded decoder.
"""
from __future__ import annotations

import re
import time

import numpy as np
from carbon.protocols import MetricLineReceiver, MetricPickleReceiver

from biggraphite_like.ingest.lines import decode_lines
from biggraphite_like.ingest.pickles import decode_pickle
from biggraphite_like.ingest.points import Refusals
from carbon_plugin import pipeline, receivers

_STR_ONLY_WHITESPACE = re.compile(rb"[\x1c-\x1f]")  # whitespace to str.split(), not to bytes.split()


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

    def pointsReceived(self, names: list[str], timestamps: np.ndarray, values: np.ndarray) -> None:
        """metricReceived for each point, in order; with carbon's default pipeline and no
        black or white list, the same checks on the read's arrays here and the points
        cached together (pipeline.cache_many)."""
        from carbon.conf import settings
        from carbon.regexlist import BlackList, WhiteList

        feeder = pipeline.bulk_feeder()
        if feeder is None or BlackList or WhiteList:
            for metric, timestamp, value in zip(names, timestamps.tolist(), values.tolist()):
                self.metricReceived(metric, (timestamp, value))
            return
        finite = np.isfinite(timestamps)
        if not finite.all():
            for index in np.flatnonzero(~finite).tolist():
                datapoint = (float(timestamps[index]), float(values[index]))
                receivers.refuse(self.peerName, receivers.finite_timestamp(datapoint), (names[index], datapoint))  # type: ignore[attr-defined]
        keep = finite & (values == values)  # carbon drops NaN values
        if not keep.all():
            kept = np.flatnonzero(keep)
            names, timestamps, values = [names[i] for i in kept.tolist()], timestamps[kept], values[kept]
        if not names:
            return
        now = (timestamps > -2.0) & (timestamps <= -1.0)  # carbon: int(timestamp) == -1 means now
        if now.any():
            timestamps = np.where(now, time.time(), timestamps)
        stamps = timestamps.tolist()
        resolution = settings.MIN_TIMESTAMP_RESOLUTION
        if resolution:
            stamps = [int(timestamp) // resolution * resolution for timestamp in stamps]
        pipeline.cache_many(feeder, list(zip(names, zip(stamps, values.tolist()))))
        self.resetTimeout()  # type: ignore[attr-defined]

    def refused(self, found: Refusals) -> None:
        """Log and count what a decoder refused (its samples logged, the rest counted)."""
        for reason, excerpt in found.samples:
            receivers.refuse(self.peerName, reason, excerpt)  # type: ignore[attr-defined]
        if found.count > len(found.samples):
            receivers.stats.increment("refusedLines", found.count - len(found.samples))


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
        """carbon's lineReceived for each line: the line decoded as UTF-8, `str.split()`
        into three fields, float() of two. For ASCII without the four bytes that are
        whitespace to `str.split()` only (0x1c-0x1f), those are the ingest core's decoder's
        rules (ingest/lines.py, compiled): the read goes through it; otherwise line by line here."""
        if not lines:
            return
        data = b"\n".join(lines)
        if data.isascii() and _STR_ONLY_WHITESPACE.search(data) is None:
            found = Refusals()
            points = decode_lines(data, found)
            self.refused(found)
            self.pointsReceived(points.names, points.timestamps, points.values)
            return
        names, timestamps, values = [], [], []
        for line in lines:
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                receivers.refuse(self.peerName, f"byte {exc.start} is not UTF-8", line)
                continue
            try:
                metric, value, timestamp = text.split()
                point = float(timestamp), float(value)
            except ValueError:
                receivers.refuse(self.peerName, "expected 'name value timestamp'", text)
                continue
            names.append(metric)
            timestamps.append(point[0])
            values.append(point[1])
        self.pointsReceived(names, np.array(timestamps, dtype=np.float64), np.array(values, dtype=np.float64))


class GuardedPickleReceiver(GuardedReceiver, MetricPickleReceiver):
    plugin_name = "pickle"  # replaces carbon's MetricPickleReceiver

    def stringReceived(self, data: bytes) -> None:
        """carbon's pickle message, decoded by the ingest core's bounded decoder (never
        pickle's unpickler: ingest/pickles.py says why); refused points are logged and counted."""
        found = Refusals()
        points = decode_pickle(data, found)
        self.refused(found)
        self.pointsReceived(points.names, points.timestamps, points.values)


