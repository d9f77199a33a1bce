"""carbon's plaintext and pickle receivers, guarded: a bad line is refused, not fatal.

carbon 1.1.10's line receiver lets an exception out of `lineReceived` for a line with a
NaN/inf timestamp (`int(nan)` in `metricReceived`) or a byte that is not UTF-8; Twisted then
closes the connection and every line after it is lost, the sender not told. The pickle
receiver does the same for a NaN/inf timestamp or a name that is not a string, and its
unpickler builds whatever a frame describes: a 200-byte "billion laughs" frame blocks the
reactor and takes hundreds of MB, `10**400` or a list nested 100,000 deep raise past its
guard. The guarded pickle receiver decodes with the ingest core's bounded decoder
(biggraphite_like/ingest/pickles.py, `bgl receive`'s too) instead: such a frame is
refused, logged, counted.

`register()` puts the subclasses of guarded_receivers.py, which have carbon's own plugin
names (`line`, `pickle`), in place of carbon's classes (carbon's extension point for
receivers; carbon's files are not touched). They refuse such a line or
point (`refuse` here: counted as `biggraphite_like.refusedLines` among carbon's
self-metrics and in the shutdown log, logged at most 10 lines a minute by the ingest
package's RateLimitedLog) and go on with the connection. They also note when each
connection last received bytes, for the shutdown drain (connection_drain.py).

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
from typing import Any

from biggraphite_like.ingest.points import describe
from biggraphite_like.ingest.refusal_log import RateLimitedLog
from carbon_plugin.stats import PluginStats, record_in_carbon

RECEIVER_COUNTERS = ("refusedLines",)  # lines and pickled points refused by the receivers
EXCERPT = 200  # characters of a refused line or point logged

stats = PluginStats(RECEIVER_COUNTERS)


class _ListenerLog:
    """carbon's listener log, as the refusal log writes to a log."""

    @staticmethod
    def warning(message: str, *args: object) -> None:
        from carbon import log

        log.listener("biggraphite_like: " + (message % args if args else message))


class _Excerpt:
    """A refused line or point, described (`describe`) only if it is logged."""

    def __init__(self, data: Any):
        self.data = data

    def __str__(self) -> str:
        text = describe(self.data)
        return text[:EXCERPT] + "..." if len(text) > EXCERPT else text


refusal_log = RateLimitedLog(_ListenerLog(), what="refused lines")


def refuse(peer: str, reason: str, data: Any) -> None:
    """Count one refused line or point; log it unless this minute's lines are spent."""
    stats.increment("refusedLines")
    refusal_log.warning("refused from %s (%s), connection kept: %s", peer, reason, _Excerpt(data))


def finite_timestamp(datapoint: tuple) -> str | None:
    """Why carbon cannot take this (timestamp, value), or None. Carbon itself drops NaN values."""
    timestamp = datapoint[0]
    if not isinstance(timestamp, float) or not math.isfinite(timestamp):
        return f"timestamp {timestamp!r} is not a finite number"
    return None


def register() -> None:
    """Put the guarded receivers in place of carbon's (before carbon builds its services), as
    carbon's PluginRegistrar does when a class is defined (again on every call: a caller
    may have put carbon's back)."""
    from carbon_plugin.guarded_receivers import GuardedLineReceiver, GuardedPickleReceiver

    for receiver in (GuardedLineReceiver, GuardedPickleReceiver):
        receiver.plugins[receiver.plugin_name] = receiver


def record_refusals() -> None:
    """The receivers' counters as carbon self-metrics (as the database plugin records its own)."""
    record_in_carbon(stats)
