"""Received points as flat arrays, and what was refused while decoding them.

Each protocol decoder (lines.py, pickles.py) turns bytes into one
`ReceivedPoints`: names as a list of str (as received, not normalised), timestamps and
values as float64 arrays. `Refusals` collects what was refused and why (counted always, a
few samples kept for the rate-limited log, refusal_log.py).
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from biggraphite_like.point_check import invalid_points, point_problem

SAMPLES = 5  # refusals kept per batch for the log
EXCERPT = 120  # characters of a refused line or object kept for the log
_SHOWN_ITEMS = 4  # items of a list or tuple `describe` shows
_SHOWN_DEPTH = 3  # levels of nesting `describe` shows


def describe(obj: object, depth: int = _SHOWN_DEPTH) -> str:
    """A short text for a refused object, in bounded time and size whatever it is (repr()
    of a 5000-digit int raises, of a 100,000-deep list recurses, of a billion-laughs list
    runs for minutes): strings and bytes cut to EXCERPT characters, big ints by their
    size, containers by a few items of a few levels."""
    kind = type(obj)
    if kind in (str, bytes, bytearray):
        text = repr(obj[:EXCERPT])
        return text if len(obj) <= EXCERPT else text + f"... ({len(obj)} long)"
    if kind is int:
        return repr(obj) if obj.bit_length() <= 64 else f"<an integer of {obj.bit_length()} bits>"
    if kind in (float, bool, type(None)):
        return repr(obj)
    if kind in (list, tuple):
        if depth <= 0:
            return f"<a {kind.__name__} of {len(obj)} items>"
        shown = ", ".join(describe(item, depth - 1) for item in obj[:_SHOWN_ITEMS])
        more = f", ... ({len(obj)} items)" if len(obj) > _SHOWN_ITEMS else ("," if kind is tuple and len(obj) == 1 else "")
        return ("[%s%s]" if kind is list else "(%s%s)") % (shown, more)
    if kind is dict:
        return f"<a dict of {len(obj)} items>"
    return f"<a {kind.__name__}>"


@dataclasses.dataclass
class Refusals:
    """Lines or points refused while decoding one read: a count and a few (reason, excerpt)."""

    count: int = 0
    samples: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def add(self, reason: str, excerpt: object, count: int = 1) -> None:
        """Count `count` refusals; keep the reason and a short excerpt (bytes as received,
        anything else as `describe` shows it) while fewer than SAMPLES are kept."""
        self.count += count
        if len(self.samples) < SAMPLES:
            if isinstance(excerpt, (bytes, bytearray)):
                text = bytes(excerpt[:EXCERPT + 1]).decode("utf-8", "backslashreplace")
            else:
                text = describe(excerpt)
            self.samples.append((reason, text[:EXCERPT] + ("..." if len(text) > EXCERPT else "")))

    def extend(self, other: "Refusals") -> None:
        self.count += other.count
        self.samples.extend(other.samples[: max(0, SAMPLES - len(self.samples))])


@dataclasses.dataclass
class ReceivedPoints:
    """Point i is (timestamps[i], values[i]) of names[i] (names as received, not normalised)."""

    names: list[str]
    timestamps: np.ndarray
    values: np.ndarray

    @classmethod
    def empty(cls) -> "ReceivedPoints":
        return cls([], np.empty(0), np.empty(0))

    def __len__(self) -> int:
        return len(self.names)

    def checked(self, refusals: Refusals, now: float | None = None) -> "ReceivedPoints":
        """The points `point_check.invalid_points` accepts (the one point check), their
        timestamps truncated to whole seconds (int64, as `insert_columns` stores them: the
        flusher's batch needs no copy); the rest refused. A timestamp of -1 means "now", as
        carbon's receivers have it.
        """
        timestamps = self.timestamps
        if len(timestamps) and (timestamps == -1).any():
            timestamps = np.where(timestamps == -1, float(int(time.time() if now is None else now)), timestamps)
        bad_time, bad = invalid_points(timestamps, self.values)
        if not bad.any():
            return ReceivedPoints(self.names, timestamps.astype(np.int64), self.values)
        for index in np.flatnonzero(bad)[:SAMPLES].tolist():
            refusals.add(point_problem(timestamps[index], self.values[index], bad_time[index]), self.names[index], 0)
        refusals.count += int(bad.sum())
        keep = np.flatnonzero(~bad)
        return ReceivedPoints([self.names[i] for i in keep.tolist()], timestamps[keep].astype(np.int64),
                              self.values[keep])


def concatenate(parts: list[ReceivedPoints]) -> ReceivedPoints:
    parts = [p for p in parts if len(p)]
    if not parts:
        return ReceivedPoints.empty()
    if len(parts) == 1:
        return parts[0]
    names: list[str] = []
    for part in parts:
        names.extend(part.names)
    return ReceivedPoints(names, np.concatenate([p.timestamps for p in parts]), np.concatenate([p.values for p in parts]))
