"""Running CQL requests: bounded concurrency, paging, and failures turned into clear errors.

Every request is asynchronous (`execute_async`); at most `max_concurrency` are in flight per
store, shared by every thread. A batch of requests either returns every row of every
request (all pages) or raises: the first failure is reported with what was being done,
the hosts involved and the configured timeout. Nothing gives up silently.

The timeout bounds a whole store operation, not each request: `RequestRunner.operation()`
(the store's outermost write batch or read snapshot, a glob) sets one deadline that every
batch of requests inside it shares (each request's own timeout is what is left of it);
a batch run outside an operation is one by itself. When the deadline passes, the error
lists what the operation had completed (e.g. the raw points written) and what it had not.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Iterator, Sequence

from cassandra import (
    ConsistencyLevel,
    CoordinationFailure,
    DriverException,
    InvalidRequest,
    OperationTimedOut,
    RequestExecutionException,
    Unavailable,
)
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionException

from biggraphite_like.errors import SchemaMissing, StoreError, StoreUnavailable


class CassandraUnavailable(StoreUnavailable):
    """Cassandra did not answer a request in time, or had too few replicas alive.

    Attributes: `what` was being done, `hosts` involved (coordinator or every host tried).
    """

    def __init__(self, message: str, what: str = "", hosts: Sequence[str] = ()):
        super().__init__(message)
        self.what = what
        self.hosts = tuple(hosts)


class CassandraRequestError(StoreError):
    """Cassandra refused a request (a bug or an incompatible cluster: the message says which)."""


_MISSING_SCHEMA_WORDS = ("unconfigured table", "does not exist", "keyspace", "undefined column")


def is_missing_table(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, InvalidRequest) and any(w in text for w in _MISSING_SCHEMA_WORDS[:3])


def translate(exc: BaseException, what: str, timeout: float, url: str, host: Any = None) -> BaseException:
    """The biggraphite_like error for a driver exception raised while doing `what`."""
    where = str(getattr(host, "endpoint", host)) if host is not None else None
    if isinstance(exc, NoHostAvailable):
        tried = {str(h): e for h, e in (exc.errors or {}).items()}
        detail = "; ".join(f"{h}: {e}" for h, e in tried.items()) or "no host is up"
        return CassandraUnavailable(
            f"{what}: no Cassandra host could serve the request ({detail}); timeout {timeout:g}s", what, list(tried))
    if isinstance(exc, OperationTimedOut):
        host_text = str(getattr(exc, "last_host", None) or where or "unknown host")
        return CassandraUnavailable(
            f"{what}: no answer from {host_text} within the timeout of {timeout:g}s ({exc})", what, [host_text])
    if isinstance(exc, (Unavailable, RequestExecutionException, CoordinationFailure)) and not isinstance(exc, InvalidRequest):
        level = getattr(exc, "consistency", None)
        level_text = f" at consistency {ConsistencyLevel.value_to_name.get(level, level)}" if level is not None else ""
        return CassandraUnavailable(
            f"{what}: coordinator {where or 'unknown'} could not reach enough replicas{level_text}: {exc}",
            what, [where] if where else [])
    if isinstance(exc, (ConnectionException, OSError)):
        return CassandraUnavailable(f"{what}: connection to {where or 'Cassandra'} lost: {exc}", what,
                                    [where] if where else [])
    if is_missing_table(exc):
        return SchemaMissing(f"{what}: {exc}; run `bgl --store {url} syncdb`")
    if isinstance(exc, DriverException):
        return CassandraRequestError(f"{what}: Cassandra refused the request: {exc}")
    return exc


class _Operation:
    """One store operation's deadline and the steps (batches of requests) it completed."""

    def __init__(self, timeout: float):
        self.started = time.monotonic()
        self.deadline = self.started + timeout
        self.done: list[str] = []

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def progress(self) -> str:
        if not self.done:
            return "nothing was completed before"
        steps = self.done if len(self.done) <= 10 else [*self.done[:9], f"... ({len(self.done) - 10} more)", self.done[-1]]
        return "completed before: " + "; ".join(steps)

    def noted(self, exc: BaseException) -> BaseException:
        """A CassandraUnavailable saying what this operation completed before it (exc itself
        when nothing was, or it says so already)."""
        if isinstance(exc, CassandraUnavailable) and self.done and "completed before" not in str(exc):
            return CassandraUnavailable(f"{exc}; {self.progress()}", exc.what, exc.hosts)
        return exc


class RequestRunner:
    """Runs many statements concurrently, at most `limit` in flight (shared across threads)."""

    def __init__(self, limit: int, timeout: float, url: str):
        self.limit = limit
        self.timeout = timeout
        self.url = url
        self._slots = threading.BoundedSemaphore(limit)
        self._local = threading.local()

    @contextlib.contextmanager
    def operation(self) -> Iterator[None]:
        """Every run inside shares one deadline, `timeout` from now (the outermost one counts)."""
        if getattr(self._local, "operation", None) is not None:
            yield
            return
        self._local.operation = _Operation(self.timeout)
        try:
            yield
        finally:
            self._local.operation = None

    def _out_of_time(self, operation: _Operation, what: str, cause: str = "", host: Any = None) -> CassandraUnavailable:
        elapsed = time.monotonic() - operation.started
        where = str(getattr(host, "endpoint", host)) if host is not None else "Cassandra"
        return CassandraUnavailable(
            f"{what}: no answer from {where} within the timeout of {self.timeout:g}s, which bounds the whole"
            f" operation ({elapsed:.1f}s spent{'; ' + cause if cause else ''}); {operation.progress()}",
            what, [where] if host is not None else [])

    def with_progress(self, exc: BaseException) -> BaseException:
        """exc, saying what the operation in progress in this thread completed before it
        (a failure outside `run`, e.g. preparing its next statement, says it too)."""
        operation = getattr(self._local, "operation", None)
        return operation.noted(exc) if operation is not None else exc

    def run(self, session, requests: Sequence[tuple[Any, Any]], what: str) -> list[list[tuple]]:
        """Rows of each (statement, parameters) request, every page, in request order."""
        operation = getattr(self._local, "operation", None)
        if operation is None:
            operation = _Operation(self.timeout)
        try:
            results = self._run(session, requests, what, operation)
        except CassandraUnavailable as exc:
            noted = operation.noted(exc)
            if noted is not exc:
                raise noted from exc
            raise
        operation.done.append(what)
        return results

    def _run(self, session, requests: Sequence[tuple[Any, Any]], what: str, operation: _Operation
             ) -> list[list[tuple]]:
        count = len(requests)
        if not count:
            return []
        if operation.left() <= 0:
            raise self._out_of_time(operation, what, "nothing of this step was sent")
        results: list[list[tuple] | None] = [None] * count
        failures: list[tuple[BaseException, Any]] = []
        lock = threading.Lock()
        done = threading.Event()
        remaining = [count]

        def finish() -> None:
            self._slots.release()
            with lock:
                remaining[0] -= 1
                if remaining[0] == 0:
                    done.set()

        def on_rows(rows, index, future, collected):
            try:
                if rows:  # None for writes
                    collected.extend(rows)
                if future.has_more_pages:
                    future.start_fetching_next_page()
                    return
                results[index] = collected
            except BaseException as exc:  # pragma: no cover - defensive: never leave a request pending
                failures.append((exc, getattr(future, "_current_host", None)))
            finish()

        def on_error(exc, index, future):
            failures.append((exc, getattr(future, "_current_host", None)))
            finish()

        submitted = 0
        for index, (statement, parameters) in enumerate(requests):
            if failures:
                break
            left = operation.left()
            if left <= 0 or not self._slots.acquire(timeout=left):
                failures.append((_DeadlinePassed(f"{index} of {count} requests sent"), None))
                break
            try:
                future = session.execute_async(statement, parameters, timeout=max(operation.left(), 0.001))
            except BaseException as exc:
                self._slots.release()
                failures.append((exc, None))
                break
            submitted += 1
            future.add_callbacks(callback=on_rows, callback_args=(index, future, []),
                                 errback=on_error, errback_args=(index, future))
        with lock:
            remaining[0] -= count - submitted
            if remaining[0] == 0:
                done.set()
        # every request ends by the driver's own timeout (per page, so a paged read may
        # take longer): the operation's deadline bounds the whole
        if not done.wait(max(operation.left(), 0) + 0.5):
            with lock:
                pending = remaining[0]
            raise self._out_of_time(operation, what, f"{pending} of {count} requests unanswered")
        if failures:
            exc, host = failures[0]
            if isinstance(exc, (_DeadlinePassed, OperationTimedOut)) and operation.left() <= 0:
                host = host or getattr(exc, "last_host", None)
                raise self._out_of_time(operation, what, str(exc), host) from exc
            raise translate(exc, what, self.timeout, self.url, host) from exc
        return results  # type: ignore[return-value]


class _DeadlinePassed(Exception):
    """The operation's deadline passed before every request of a step was sent."""
