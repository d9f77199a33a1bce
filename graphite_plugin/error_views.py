"""graphite-web's error answers as a short text reason: no traceback, no file path.

graphite's `handler500` (graphite.views.server_error) answers a page holding the whole
traceback, with the absolute paths of the installed code. graphite_plugin.urls points
Django's handlers here instead (graphite_plugin.settings sets ROOT_URLCONF):

* a timeout of graphite's worker pool (FETCH_TIMEOUT, FIND_TIMEOUT) answers 503 naming
  the setting;
* a request graphite's functions cannot compute from its parameters (a zero interval, a
  time shift past year 9999, a bad regular expression: ValueError, ArithmeticError,
  re.error) answers 400 with the error's message;
* anything else answers 500; when graphite's worker pool reports a finder's failure
  ("All requests failed ...") its first error's message is given without file paths;
  the traceback is in graphite-web's exception log (graphite's LogExceptionsMiddleware
  writes it there).
400, 403 and 404 answer Django's reason as text too. graphite_plugin.middleware's
ErrorAnswerMiddleware applies `has_traceback` and `short_reason` to the error answers
graphite's views build themselves.
"""
from __future__ import annotations

import re
import sys

from django.http import HttpResponse

TEXT = "text/plain; charset=utf-8"
MAX_MESSAGE = 300
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][\w.+-]+){2,}")  # a file path, not a metric name
TIMED_OUT = "Timed out after"  # graphite.storage.Store.wait_jobs' message for a pool timeout
USER_ERRORS = (ValueError, ArithmeticError, re.error)
# graphite.storage.Store.wait_jobs' "All requests failed ..." lists each failure as
# "\n\n<job>: <error>: <traceback>": the error is shown, not the traceback
_JOB_FAILURE = re.compile(r"\n\n(.*?): Traceback \(most recent call last\)", re.S)


_TRACEBACK = re.compile(rb"Traceback \(most recent call last\)|File \"|\.py\", line ")


def has_traceback(body: bytes) -> bool:
    """Whether an answer's body shows a traceback or the code's files."""
    return bool(_TRACEBACK.search(body))


def short_reason(status: int) -> str:
    """The reason answered for an error whose own text cannot be shown."""
    kind = "invalid request" if status < 500 else "internal error"
    return f"{kind} (HTTP {status}); the details are in graphite-web's exception log"


def short(message: str) -> str:
    """The message's first line, without file paths, at most MAX_MESSAGE characters."""
    first = _PATH.sub("<path>", message.strip().splitlines()[0] if message.strip() else "")
    return first if len(first) <= MAX_MESSAGE else first[:MAX_MESSAGE] + "..."


def answer_for(exc: BaseException | None) -> HttpResponse:
    """The short answer for an exception a view raised (see the module docstring)."""
    text = str(exc) if exc is not None else ""
    if text.startswith(TIMED_OUT):
        setting = "FETCH_TIMEOUT" if " fetch" in text or "fetch " in text else "FIND_TIMEOUT"
        response = HttpResponse(f"timed out: the request ran past graphite-web's {setting}; narrow the"
                                " query (fewer series, a shorter range) or raise the setting\n",
                                status=503, content_type=TEXT)
        response["Retry-After"] = "10"
        return response
    if isinstance(exc, USER_ERRORS):
        return HttpResponse(f"invalid request: {short(text) or type(exc).__name__}\n", status=400, content_type=TEXT)
    failure = _JOB_FAILURE.search(text)
    detail = f": {short(failure.group(1))}" if failure else ""
    return HttpResponse(f"internal error{detail}; the details are in graphite-web's exception log\n",
                        status=500, content_type=TEXT)


def server_error(request) -> HttpResponse:
    """handler500: Django calls it while handling the view's exception."""
    return answer_for(sys.exc_info()[1])


def bad_request(request, exception) -> HttpResponse:
    """handler400 (a disallowed Host header, a malformed request)."""
    return HttpResponse(f"bad request: {short(str(exception)) or 'refused'}\n", status=400, content_type=TEXT)


def permission_denied(request, exception) -> HttpResponse:
    """handler403."""
    return HttpResponse("forbidden\n", status=403, content_type=TEXT)


def page_not_found(request, exception) -> HttpResponse:
    """handler404: no page at this path (the path itself is not repeated)."""
    return HttpResponse("not found\n", status=404, content_type=TEXT)
