"""Running CQL requests: bounded concurrency, paging, and failures turned into clear errors.

Every request is asynchronous (`execute_async`); at most `max_concurrency` are in flight per
store, shared by every thread. A batch of requests either returns every row of every
request (all pages) or raises: the first failure is reported with what was being done,
the hosts involved and the configured timeout. Nothing gives up silently.
"""
from __future__ import annotations

import threading
from typing import Any, Sequence

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


class RequestRunner:
    """Runs many statements concurrently, at most `limit` in flight (shared across threads)."""

    def __init__(self, limit: int, timeout: float, url: str):
        self.limit = limit
        self.timeout = timeout
        self.url = url
        self._slots = threading.BoundedSemaphore(limit)

    def run(self, session, requests: Sequence[tuple[Any, Any]], what: str) -> list[list[tuple]]:
        """Rows of each (statement, parameters) request, every page, in request order."""
        count = len(requests)
        if not count:
            return []
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
            if not self._slots.acquire(timeout=self.timeout * 4 + 10):
                failures.append((OperationTimedOut(f"{self.limit} requests in flight for too long"), None))
                break
            try:
                future = session.execute_async(statement, parameters, timeout=self.timeout)
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
        # every request ends by the driver's own timeout (per page): this bound is a safety net
        if not done.wait(self.timeout * 4 + 30):
            raise CassandraUnavailable(f"{what}: requests still pending after {self.timeout * 4 + 30:g}s", what)
        if failures:
            exc, host = failures[0]
            raise translate(exc, what, self.timeout, self.url, host) from exc
        return results  # type: ignore[return-value]
