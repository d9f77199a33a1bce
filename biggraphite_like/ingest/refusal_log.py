"""The rate-limited log of bad input, for both ingest paths: a flood of refusals or other
events of hostile or broken clients writes at most `per_minute` lines a minute, then one
line saying how many were not logged (every one is still counted by its caller).

The receiver logs through `logging`; carbon's plugin through carbon's listener log (any
object with a `warning(message, *args)` method will do).
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Protocol

from biggraphite_like.ingest.points import Refusals

LOGGED_PER_MINUTE = 10  # lines of refusals logged a minute, at most


class WarningLog(Protocol):
    def warning(self, message: str, *args: object) -> None: ...


class RateLimitedLog:
    """Log refusals or other events of hostile or broken clients, at most `per_minute` lines
    a minute (every one is still counted by its caller); `what` names them in the line
    saying how many were not logged."""

    def __init__(self, logger: WarningLog, per_minute: int = LOGGED_PER_MINUTE,
                 clock: Callable[[], float] = time.monotonic, what: str = "refusals"):
        self._logger = logger
        self._per_minute = per_minute
        self._clock = clock
        self._what = what
        self._window = clock()
        self._logged = 0
        self._suppressed = 0
        self._lock = threading.Lock()

    def _may_log(self, events: int) -> bool:
        """Whether one more line fits this minute (else `events` are added to the suppressed);
        call with the lock held."""
        now = self._clock()
        if now - self._window >= 60:
            if self._suppressed:
                self._logger.warning("%d more %s were not logged in the last minute", self._suppressed, self._what)
            self._window, self._logged, self._suppressed = now, 0, 0
        if self._logged >= self._per_minute:
            self._suppressed += events
            return False
        self._logged += 1
        return True

    def warning(self, message: str, *args: object) -> None:
        """Log one line (%-formatted with args) unless this minute's lines are spent."""
        with self._lock:
            if self._may_log(1):
                self._logger.warning(message, *args)

    def refused(self, peer: str, refusals: Refusals, what: str = "refused") -> None:
        """Log a read's refusals, a line per sample kept (the connection goes on)."""
        if not refusals.count:
            return
        with self._lock:
            samples = refusals.samples or [("", "")]
            for index, (reason, excerpt) in enumerate(samples):
                if not self._may_log(refusals.count if index == 0 else 0):
                    break
                more = f" ({refusals.count} in this read)" if index == 0 and refusals.count > 1 else ""
                self._logger.warning("%s from %s%s: %s: %s; the rest of the connection is read", what, peer, more,
                                     reason, excerpt)
