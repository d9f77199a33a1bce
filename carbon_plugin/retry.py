"""Retries with exponential backoff around store calls, each failure counted and logged
(biggraphite_like.ingest.batch_writer.retry, the one retry mechanism: without limit while the error can recover and the
plugin is not stopping, BG_RETRIES times otherwise)."""
from __future__ import annotations

import threading
from typing import Callable, TypeVar

from carbon import log

from biggraphite_like.ingest.batch_writer import GiveUp, retry
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


def log_failure(what: str, how: str, exc: Exception, then: str, stats: PluginStats) -> None:
    """Count a failed store call (storeErrors) and log it: a store error (expected) in one
    line, anything else with its traceback too (call it while handling the exception)."""
    stats.increment("storeErrors")
    if not isinstance(exc, StoreError):
        log.err(None, f"biggraphite_like: unexpected error during {what}")
    log.msg(f"biggraphite_like: {what} failed ({how}): {exc}; {then}")


def with_retries(call: Callable[[], T], what: str, options: PluginOptions, stats: PluginStats,
                 stopping: threading.Event | None = None) -> T:
    """Run call(); on failure retry, waiting retry_delay, 2x, 4x... up to retry_max_delay:
    without limit while the error can recover (a full disk, an unavailable store) and
    `stopping` is given and not set, options.retries times otherwise. Raises GaveUp after
    the last attempt."""
    attempts = 0

    def failed(exc: Exception, attempt: int, delay: float, more: str) -> None:
        nonlocal attempts
        attempts = attempt
        log_failure(what, f"attempt {attempt}", exc, f"retrying in {delay:.2f}s, {more}" if delay else more, stats)

    try:
        return retry(call, options, stopping, failed)
    except GiveUp as exc:
        raise GaveUp(what, attempts, exc.__cause__) from exc.__cause__
