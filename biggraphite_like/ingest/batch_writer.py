"""Writing batches of points to a store that may fail: in halves, with retries, and
dropping only what cannot be written.

`write_halving`: a batch too big for the space left on a full disk (or one holding a
point that makes the store fail) is cut in two, in arrival order, and each half is
written the same way, so that as much as fits gets in, in order, and a failure that does
not go away ends up confined to a batch of at most `min_size` points. `bgl write -`
(cli/points.py) writes through it; so does `BatchWriter`.

`retry`: a call retried with exponential backoff, without limit while its error can
recover (RECOVERABLE: a full disk, a disk I/O error, a locked file, an unavailable
Cassandra: they pass with time or an operator's action) and the writer is not stopping,
`retries` times otherwise (a bug, a corrupt store), then `GiveUp`.

`BatchWriter`: the receiver's flusher and carbon's plugin write their batches with it;
each says how to insert a batch and what to count and log. Nothing is dropped for an
error that can recover while running: the writer holds the batch (its caller's buffer
fills, and back-pressure holds the senders) until the store takes it. Once stopping, a
smallest batch that still fails gets `retries` attempts; if that is not enough the rest
of the batch, and every later batch after one attempt, is dropped and counted.
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import Callable, Generic, Protocol, Self, TypeVar

from biggraphite_like.errors import StoreFull, StoreLocked, StoreUnavailable

MIN_BATCH = 1_000  # points: a failing batch is halved down to this many
RECOVERABLE = (StoreFull, StoreUnavailable)  # errors that pass with time or an operator's action

T = TypeVar("T")


class Halvable(Protocol):
    def __len__(self) -> int: ...

    def halves(self) -> tuple[Self, Self]: ...


class RetryPolicy(Protocol):
    retries: int  # attempts after a failure that cannot recover (after any failure, once stopping)
    retry_delay: float  # the first backoff, in seconds, doubled after each failure
    retry_max_delay: float


B = TypeVar("B", bound=Halvable)


def _may_split(exc: Exception) -> bool:
    """Halves help a batch too big for the space left, or one holding a point the store
    refuses; not one that waited for another writer's lock (each half would wait as long)."""
    return not isinstance(exc, StoreLocked)


class GiveUp(Exception):
    """The last attempt failed; `__cause__` is its error."""


def write_halving(batch: B, write: Callable[[B], object], min_size: int = MIN_BATCH,
                  may_split: Callable[[Exception], bool] = lambda exc: True,
                  last: Callable[[B], object] | None = None,
                  on_split: Callable[[B, Exception], None] | None = None) -> None:
    """write(batch); if it raises an error `may_split` accepts and the batch holds more
    than `min_size` points, write its halves instead, the first one first, each the same
    way (`on_split` is told, to count and log). A batch of `min_size` points or fewer, or
    one whose error `may_split` refuses, is written by `last` whole (without `last`, that
    error goes up); errors of `last` go up (the halves not written yet are then not tried)."""
    if len(batch) <= min_size:
        (last or write)(batch)
        return
    try:
        write(batch)
        return
    except Exception as exc:
        if not may_split(exc):
            if last is None:
                raise
            last(batch)  # whole: halves would fail the same way
            return
        if on_split is not None:
            on_split(batch, exc)
    for half in batch.halves():
        write_halving(half, write, min_size, may_split, last, on_split)


def retry(call: Callable[[], T], policy: RetryPolicy, stopping: threading.Event | None,
          failed: Callable[[Exception, int, float, str], None]) -> T:
    """call() until it succeeds (see the module doc). After each failed attempt,
    failed(error, attempt, delay before the next, how many more) counts and logs it.
    `stopping` None: always bounded. Raises GiveUp from the last error."""
    delay = policy.retry_delay
    failures = 0  # counted against policy.retries
    for attempt in itertools.count(1):
        try:
            return call()
        except Exception as exc:
            stopped = stopping is None or stopping.is_set()
            unlimited = isinstance(exc, RECOVERABLE) and not stopped
            failures += 0 if unlimited else 1
            if failures > policy.retries:
                failed(exc, attempt, 0.0, "giving up")
                raise GiveUp() from exc
            failed(exc, attempt, delay, "until the store takes it" if unlimited
                   else f"{policy.retries - failures + 1} more time(s)")
            if stopped:
                time.sleep(delay)
            else:
                stopping.wait(delay)  # a stop request ends the wait: the count of attempts starts
            delay = min(delay * 2, policy.retry_max_delay)
    raise AssertionError("unreachable")


class BatchWriter(Generic[B]):
    """Writes batches in halves, with retries (see the module doc); subclasses insert,
    count and log."""

    def __init__(self, policy: RetryPolicy, stopping: threading.Event):
        self.policy = policy
        self.stopping = stopping
        self.giving_up = False  # stopping, and the store still fails: one attempt a batch
        self._handled = 0  # points of the batch being written that are stored or dropped

    def write(self, batch: B) -> None:
        """Write one batch; what cannot be written is counted by `dropped`."""
        self._handled = 0
        try:
            if self.giving_up:
                self._write_smallest(batch)
            else:
                write_halving(batch, self._attempt, may_split=_may_split, last=self._write_smallest,
                              on_split=self._split)
        except GiveUp as exc:
            self.dropped(len(batch) - self._handled, batch, exc.__cause__)

    def _attempt(self, batch: B) -> None:
        started = time.perf_counter()
        result = self.insert(batch)
        self._handled += len(batch)
        self.written(batch, result, time.perf_counter() - started)

    def _split(self, batch: B, exc: Exception) -> None:
        self.failed(batch, exc, "the whole batch", "writing it in halves")

    def _write_smallest(self, batch: B) -> None:
        if self.giving_up:
            try:
                self._attempt(batch)
            except Exception as exc:
                self.failed(batch, exc, "one attempt", "stopping, the store still fails: dropped")
                self.dropped(len(batch), batch, exc)
                self._handled += len(batch)
            return

        def failed(exc: Exception, attempt: int, delay: float, more: str) -> None:
            self.failed(batch, exc, f"attempt {attempt}", f"retrying in {delay:.2f}s, {more}" if delay else more)

        try:
            retry(lambda: self._attempt(batch), self.policy, self.stopping, failed)
        except GiveUp as exc:
            if isinstance(exc.__cause__, RECOVERABLE):  # stopping: the store cannot take the rest either
                self.giving_up = True
                raise
            self.dropped(len(batch), batch, exc.__cause__)
            self._handled += len(batch)

    # -- what subclasses say --------------------------------------------------------------
    def insert(self, batch: B) -> object:
        """One attempt at writing the batch (one transaction on SQLite); its result."""
        raise NotImplementedError

    def written(self, batch: B, result: object, seconds: float) -> None:
        """The batch is stored: count it."""

    def failed(self, batch: B, exc: Exception, how: str, then: str) -> None:
        """An attempt failed (count it, log it): `how` says which, `then` what happens next."""

    def dropped(self, points: int, batch: B, exc: BaseException | None) -> None:
        """`points` of the batch will never be stored: count and log them."""
