"""A small in-process cache of glob answers, so repeated patterns cost no store query.

Grafana asks the same `/metrics/find` and `/render` patterns on every dashboard
refresh; the answers change only when metrics are created or deleted. Each graphite-web
worker process has its own cache; they agree through the store's names token
(`Store.names_token`, which changes with every creation or deletion of a name by any
process): at most every `check_interval` seconds a lookup reads the token, and a new
value empties the cache, so a new or deleted metric shows up in every worker within
about that delay. Entries also live at most `ttl` seconds (0 disables the cache; with a
store that has no token, the TTL alone bounds how stale an answer gets), and the least
recently used go first beyond `max_entries` answers or `max_names` names held in all
(an answer of more names than that is not kept): the names are most of the cache's
memory, about 100 bytes each. Errors and empty answers (every part empty) are never
cached: a dashboard asking for a metric before carbon created it sees it at once.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable, Hashable

_log = logging.getLogger(__name__)

Answer = tuple[tuple[str, ...], ...]  # sorted names, in one or more parts (metrics, directories)
DEFAULT_CHECK_INTERVAL = 0.5  # seconds between two reads of the names token
DEFAULT_MAX_NAMES = 200_000  # names held by all the answers kept (about 20 MB; two answers of BG_MAX_GLOB_RESULTS)
_UNKNOWN = object()  # the token before the first read, or after a failed one


class GlobCache:
    """(kind, pattern) -> an answer of sorted names, with a time to live, a size bound and
    the store's names token (thread-safe)."""

    def __init__(self, ttl: float, max_entries: int = 10_000, token: Callable[[], Hashable] | None = None,
                 check_interval: float = DEFAULT_CHECK_INTERVAL, max_names: int = DEFAULT_MAX_NAMES):
        self.ttl = ttl
        self.max_entries = max_entries
        self.max_names = max_names
        self.names = 0  # names held by the answers kept
        self.check_interval = check_interval
        self._token = token
        self._seen: object = _UNKNOWN
        self._next_check = 0.0
        self._checking = threading.Lock()
        self._generation = 0  # bumped when the names changed: answers computed before are not kept
        self._entries: collections.OrderedDict[tuple[str, str], tuple[float, Answer]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.invalidations = 0  # times the names token changed and the cache was emptied
        self.token_errors = 0  # names token reads that failed (logged; the cache was emptied)

    def _hit(self, key: tuple[str, str], now: float) -> Answer | None:
        """The live entry's answer, counted as a hit (under the lock)."""
        entry = self._entries.get(key)
        if entry is None or entry[0] <= now:
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[1]

    def get(self, kind: str, pattern: str, compute: Callable[[str], Answer]) -> Answer:
        """The cached answer for (kind, pattern), else compute(pattern), remembered unless empty."""
        if self.ttl <= 0:
            return compute(pattern)
        key = (kind, pattern)
        now = time.monotonic()
        if self._token is not None and now >= self._next_check:
            self._check_token(now)
        with self._lock:
            answer = self._hit(key, now)
            if answer is not None:
                return answer
            self.misses += 1
            generation = self._generation
        answer = compute(pattern)
        size = sum(map(len, answer))
        if not size or size > self.max_names:
            return answer
        with self._lock:
            if generation != self._generation:
                return answer  # names changed while it was computed: it may miss them
            old = self._entries.pop(key, None)
            if old is not None:
                self.names -= sum(map(len, old[1]))
            self._entries[key] = (now + self.ttl, answer)
            self.names += size
            while len(self._entries) > self.max_entries or self.names > self.max_names:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.names -= sum(map(len, dropped))
        return answer

    def _check_token(self, now: float) -> None:
        """Read the names token (one thread at a time) and empty the cache when it changed
        or cannot be read. A thread that finds a check due while another makes it waits for
        that check (four index lookups) rather than answer from entries it may invalidate."""
        with self._checking:
            if now < self._next_check:
                return  # another thread checked while this one waited
            try:
                token: object = self._token()
            except Exception as exc:  # the store is unreachable: do not answer from what it held
                token = _UNKNOWN
                self.token_errors += 1
                _log.warning("glob cache emptied: cannot read the store's names token: %s", exc)
            if token is _UNKNOWN or token != self._seen:
                self._invalidate()
            self._seen = token
            self._next_check = time.monotonic() + self.check_interval

    def _invalidate(self) -> None:
        with self._lock:
            if self._entries:
                self.invalidations += 1
            self._entries.clear()
            self.names = 0
            self._generation += 1

    def clear(self) -> None:
        self._invalidate()
