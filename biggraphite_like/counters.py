"""Named counters shared by threads: counts since the last record, totals since start.

The carbon plugin's and the receiver's self-metrics both record them every interval.
"""
from __future__ import annotations

import threading
from typing import Iterable


class Counters:
    """Thread-safe counters, taken (and reset) when recorded; totals kept."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = tuple(names)
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self._names, 0)
        self._totals = dict.fromkeys(self._names, 0)

    def increment(self, name: str, count: int = 1) -> None:
        with self._lock:
            self._counts[name] += count
            self._totals[name] += count

    def take(self) -> dict[str, int]:
        """Counts since the previous take."""
        with self._lock:
            counts, self._counts = self._counts, dict.fromkeys(self._names, 0)
        return counts

    def totals(self) -> dict[str, int]:
        """Counts since start (for logs and tests)."""
        with self._lock:
            return dict(self._totals)
