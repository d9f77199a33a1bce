"""A small in-process cache of glob answers, so repeated patterns cost no store query.

Grafana asks the same `/metrics/find` and `/render` patterns on every dashboard
refresh; the answers change only when metrics are created or deleted. Entries live
`ttl` seconds (a new metric shows up at most that late; 0 disables the cache) and the
least recently used go first beyond `max_entries`. Errors and empty answers are never
cached: a dashboard asking for a metric before carbon created it sees it at once.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Callable


class GlobCache:
    """(kind, pattern) -> sorted names, with a time to live and a size bound (thread-safe)."""

    def __init__(self, ttl: float, max_entries: int = 10_000):
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: collections.OrderedDict[tuple[str, str], tuple[float, tuple[str, ...]]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, kind: str, pattern: str, compute: Callable[[str], list[str]]) -> tuple[str, ...]:
        """The cached answer for (kind, pattern), else compute(pattern), remembered."""
        if self.ttl <= 0:
            return tuple(compute(pattern))
        key = (kind, pattern)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] > now:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[1]
            self.misses += 1
        names = tuple(compute(pattern))
        if not names:
            return names
        with self._lock:
            self._entries[key] = (now + self.ttl, names)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return names

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
