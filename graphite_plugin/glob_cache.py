"""A small in-process cache of glob answers, so repeated patterns cost no store query.

Grafana asks the same `/metrics/find` and `/render` patterns on every dashboard
refresh; the answers change only when metrics are created or deleted. Entries live
`ttl` seconds (a new metric shows up at most that late; 0 disables the cache) and the
least recently used go first beyond `max_entries`. Errors and empty answers (every
part empty) are never cached: a dashboard asking for a metric before carbon created it
sees it at once.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Callable


Answer = tuple[tuple[str, ...], ...]  # sorted names, in one or more parts (metrics, directories)


class GlobCache:
    """(kind, pattern) -> an answer of sorted names, with a time to live and a size bound
    (thread-safe)."""

    def __init__(self, ttl: float, max_entries: int = 10_000):
        self.ttl = ttl
        self.max_entries = max_entries
        self._entries: collections.OrderedDict[tuple[str, str], tuple[float, Answer]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, kind: str, pattern: str, compute: Callable[[str], Answer]) -> Answer:
        """The cached answer for (kind, pattern), else compute(pattern), remembered unless empty."""
        if self.ttl <= 0:
            return compute(pattern)
        key = (kind, pattern)
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] > now:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[1]
            self.misses += 1
        answer = compute(pattern)
        if not any(answer):
            return answer
        with self._lock:
            self._entries[key] = (now + self.ttl, answer)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return answer

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
