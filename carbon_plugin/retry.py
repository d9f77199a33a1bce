"""Bounded retries with exponential backoff around store calls, each failure counted."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

from carbon import log

from biggraphite_like.errors import StoreError
from carbon_plugin.options import PluginOptions
from carbon_plugin.stats import PluginStats

T = TypeVar("T")


class GaveUp(Exception):
    """Every attempt of a store call failed; `__cause__` is the last error."""

    def __init__(self, what: str, attempts: int, last: BaseException):
        super().__init__(f"{what} failed {attempts} times, last error: {last}")
        self.attempts = attempts
        self.last = last


def with_retries(call: Callable[[], T], what: str, options: PluginOptions, stats: PluginStats) -> T:
    """Run call(); on failure retry up to options.retries times, waiting retry_delay, 2x, 4x...

    Store errors (StoreError) are expected and logged in one line; anything else is logged
    with its traceback. Both are retried: the store may recover, a bug fails every attempt.
    Raises GaveUp after the last attempt.
    """
    delay = options.retry_delay
    attempts = options.retries + 1
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            stats.increment("storeErrors")
            if not isinstance(exc, StoreError):
                log.err(None, f"biggraphite_like: unexpected error during {what}")
            if attempt == attempts:
                raise GaveUp(what, attempts, exc) from exc
            log.msg(f"biggraphite_like: {what} failed (attempt {attempt}/{attempts}): {exc};"
                    f" retrying in {delay:.2f}s")
            time.sleep(delay)
            delay = min(delay * 2, options.retry_max_delay)
    raise AssertionError("unreachable")
