"""How the finder's errors reach graphite-web's HTTP answers.

graphite-web runs finders in a worker pool (`graphite.storage.Store.wait_jobs`): an
exception raised there is logged and, when every finder failed, replaced by a plain
`Exception("All requests failed ...")` that carries the text but not the type; a
partial failure is tolerated unless STORE_FAIL_ON_ERROR. That policy is right for an
unreachable store (500 with the message, or the other finders' results), so store
errors are raised in the worker as they are.

A pattern over a glob limit is the user's mistake, not a backend failure: it must
answer 400 with the limit's name whatever the other finders did. `/metrics/find` and
`/render` turn `graphite.errors.InputParameterError` into 400 with its text, so the
finder returns `DeferredError(PatternRefused(...))` from the worker: graphite iterates
it in the request's thread, which raises the error with its type intact.
"""
from __future__ import annotations

from typing import Iterator, NoReturn

from graphite.errors import InputParameterError


class PatternRefused(InputParameterError):
    """A pattern the store refuses: over a glob limit, or unparsable (answers 400)."""


class RenderTooLarge(PatternRefused):
    """A render over the series or points budget of one request (answers 400, naming the
    graphite-web setting that holds the limit)."""


class FetchAbandoned(Exception):
    """A fetch that ran past graphite-web's FETCH_TIMEOUT: graphite has already answered the
    request with an error, so the finder stops reading instead of finishing for no one."""


class DeferredError:
    """An iterable that raises `error` when iterated (in graphite-web's request thread)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException):
        self.error = error

    def __bool__(self) -> bool:  # `result or []` in Store._find must still iterate it
        return True

    def __iter__(self) -> Iterator[NoReturn]:
        raise self.error
