"""graphite-web's WSGI application with plain finds answered in front of Django.

Serve `graphite_plugin.wsgi:application` instead of `graphite.wsgi:application` (bgl run
does). A dashboard asks `/metrics/find?query=...` again and again; graphite_plugin.find_view
builds graphite's exact answer from the glob cache in about a tenth of a millisecond (from
the store's glob when not cached), while Django's request handling and middleware chain
(sessions, authentication, messages, gzip) cost three to four times that. This front
answers such a request itself when nothing of that chain can change the answer: a GET
to `/metrics/find` with no cookie (an anonymous user, graphite's default profile), no
remote user, no gzip wanted, only `query` and `format` (treejson, json or completer:
find_view's checks), answered 200. The answer carries the headers the chain would add
for it (Content-Length, `Vary: Cookie` from the session the treejson profile lookup
reads, `Vary: Accept-Encoding` from gzip on a body of 200 bytes or more) and is counted
in the self-metrics as a find; graphite's two log lines of the find are written, and the
find counted, once the body has been sent. Anything else goes to graphite's application unchanged;
so does a request Django would refuse or redirect before any view (a Host header not in
ALLOWED_HOSTS: DNS rebinding; one without www. under PREPEND_WWW; a User-Agent in
DISALLOWED_USER_AGENTS).

Every request first takes one of its client address's BG_MAX_CLIENT_REQUESTS slots in
this process (ClientSlots); with none left it answers 503 at once, so that one client
cannot hold every thread of a worker.

Tag reads (`/tags/findSeries`, `/tags/autoComplete/*`) are answered in front the same way
by graphite_plugin.tags_front. `front_answer` gives either front's answer without the rest
of the application: bgl run's gunicorn worker (graphite_plugin.gunicorn_worker) answers
plain requests for the fronts with it, and serves any it declines under graphite_declined.
"""
from __future__ import annotations

import threading
import time
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterable

from django.conf import settings
from graphite.wsgi import application as graphite_application

from graphite_plugin import tags_front
from graphite_plugin.options import DEFAULT_MAX_CLIENT_REQUESTS

if TYPE_CHECKING:
    from graphite_plugin.find_view import FoundText

REMOTE_USER_KEYS = ("REMOTE_USER", "HTTP_REMOTE_USER")
GZIP_MIN_LENGTH = 200  # django.middleware.gzip.GZipMiddleware leaves shorter bodies alone
FIND_PATHS = frozenset({"/metrics/find"})
FRONT_PATHS = FIND_PATHS | tags_front.PATHS  # what the fronts may answer (front_answer)


def eligible(environ: dict, paths: frozenset[str] = FIND_PATHS) -> bool:
    """Whether a front may answer this request to one of `paths` (this module's finds,
    graphite_plugin.tags_front's tag reads): a GET with no cookie, no remote user and no
    gzip wanted. django_would_serve checks the rest once the request is built."""
    return (environ.get("PATH_INFO") in paths and environ.get("REQUEST_METHOD") == "GET"
            and not environ.get("HTTP_COOKIE") and "gzip" not in environ.get("HTTP_ACCEPT_ENCODING", "")
            and not any(key in environ for key in REMOTE_USER_KEYS))


def _front_find(environ: dict) -> tuple[list[tuple[str, str]], "FoundText"] | None:
    """find_view's 200 answer (find_text) with the headers of its HttpResponse after the
    middleware chain, or None."""
    from django.contrib.auth.models import AnonymousUser
    from django.core.handlers.wsgi import WSGIRequest

    from graphite_plugin.find_view import NO_CACHE, PARAMETERS, FoundText, find_text

    params = query_parameters(environ, PARAMETERS)
    if params is None:
        return None  # graphite's view (another parameter), or Django's answer (too many fields)
    request = WSGIRequest(environ)
    if not django_would_serve(request):
        return None  # Django answers (400 for a Host not in ALLOWED_HOSTS, 301 to www., 403 for a refused agent)
    request.user = AnonymousUser()  # AuthenticationMiddleware's answer for a request without a session
    found = find_text(request, params)
    if not isinstance(found, FoundText):
        return None  # graphite's view, or its error answer through the chain (graphite_plugin.middleware)
    vary = ["Cookie"] if params.get("format", "treejson") == "treejson" else []  # SessionMiddleware: the profile lookup read the session
    if len(found.body) >= GZIP_MIN_LENGTH:
        vary.append("Accept-Encoding")  # GZipMiddleware, even when not compressing
    headers = [("Content-Type", found.content_type), *NO_CACHE]
    if vary:
        headers.append(("Vary", ", ".join(vary)))
    headers.append(("Content-Length", str(len(found.body))))  # CommonMiddleware
    return headers, found


def query_pairs(environ: dict) -> list[tuple[str, str]]:
    """The query string's (name, value) pairs as Django's QueryDict parses them for
    WSGIRequest.GET (the WSGI string's bytes, DEFAULT_CHARSET else ISO-8859-1, parse_qsl
    keeping blank values, at most DATA_UPLOAD_MAX_NUMBER_FIELDS: else a ValueError, Django's
    400) without building one: the fronts only read it."""
    from urllib.parse import parse_qsl

    text = environ.get("QUERY_STRING", "")
    if not text.isascii():
        raw = text.encode("iso-8859-1")
        try:
            text = raw.decode(settings.DEFAULT_CHARSET)
        except UnicodeDecodeError:
            text = raw.decode("iso-8859-1")
    return parse_qsl(text, keep_blank_values=True, encoding=settings.DEFAULT_CHARSET,
                     max_num_fields=settings.DATA_UPLOAD_MAX_NUMBER_FIELDS)


def query_parameters(environ: dict, names: frozenset[str]) -> dict[str, str] | None:
    """query_pairs as request.GET reads them (each name's last value); None when a name is
    not in `names` or Django would refuse the string (TooManyFieldsSent: its 400)."""
    try:
        params = dict(query_pairs(environ))
    except (ValueError, LookupError):  # too many fields (or a string Django fails on): Django answers
        return None
    return params if params.keys() <= names else None


def chain_headers(content_type: str, length: int) -> list[tuple[str, str]]:
    """The headers of a front's 200 answer of `length` bytes built without an HttpResponse:
    its Content-Type, then what the chain adds to a response without a Vary header of its
    own (`Vary: Accept-Encoding` from GZipMiddleware, Content-Length from CommonMiddleware)."""
    vary = [("Vary", "Accept-Encoding")] if length >= GZIP_MIN_LENGTH else []
    return [("Content-Type", content_type), *vary, ("Content-Length", str(length))]


def django_would_serve(request) -> bool:
    """Whether Django's request handling lets this request reach a view: a Host header in
    ALLOWED_HOSTS (HttpRequest.get_host, which answers 400 otherwise: DNS rebinding), not
    redirected to www. (CommonMiddleware's 301 under PREPEND_WWW), a User-Agent not in
    DISALLOWED_USER_AGENTS (CommonMiddleware's 403)."""
    from django.core.exceptions import DisallowedHost

    try:
        host = request.get_host()
    except DisallowedHost:
        return False
    if settings.PREPEND_WWW and host and not host.startswith("www."):
        return False
    agent = request.META.get("HTTP_USER_AGENT")
    return agent is None or not any(pattern.search(agent) for pattern in settings.DISALLOWED_USER_AGENTS)


class ClientSlots:
    """Requests in progress per client address in this process, at most BG_MAX_CLIENT_REQUESTS
    each (0: no limit): one client cannot hold every thread of a worker."""

    def __init__(self) -> None:
        self._busy: dict[str, int] = {}
        self._lock = threading.Lock()

    @staticmethod
    def limit() -> int:
        return int(getattr(settings, "BG_MAX_CLIENT_REQUESTS", DEFAULT_MAX_CLIENT_REQUESTS))

    def take(self, client: str, limit: int) -> bool:
        with self._lock:
            busy = self._busy.get(client, 0)
            if limit and busy >= limit:
                return False
            self._busy[client] = busy + 1
            return True

    def give_back(self, client: str) -> None:
        with self._lock:
            busy = self._busy.pop(client, 1) - 1
            if busy:
                self._busy[client] = busy


CLIENT_SLOTS = ClientSlots()


def application(environ: dict, start_response: Callable) -> Iterable[bytes]:
    """The WSGI entry point: a client over its share answers 503, others are served (see
    the module docstring)."""
    client = environ.get("REMOTE_ADDR", "")
    limit = CLIENT_SLOTS.limit()
    if not CLIENT_SLOTS.take(client, limit):
        body = (f"too many requests in progress from {client}: at most {limit} per graphite-web process"
                " (graphite-web setting BG_MAX_CLIENT_REQUESTS); retry when one has finished\n").encode()
        start_response("503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8"),
                                                   ("Content-Length", str(len(body))), ("Retry-After", "1")])
        return [body]
    try:
        body = _serve(environ, start_response)
    except BaseException:
        CLIENT_SLOTS.give_back(client)
        raise
    return ReleasingBody(body, lambda: CLIENT_SLOTS.give_back(client))


_END = object()


class ReleasingBody:
    """A response body that gives the client's slot back once: as it hands the server its last
    chunk, or when the server closes it (then closing the application's body: Django's
    request_finished). Not after the last chunk: the server writes it first, and a client
    that has its whole answer may send its next request before this generator resumes."""

    def __init__(self, body: Iterable[bytes], release: Callable[[], None]):
        self.body, self._release = body, release

    def __iter__(self):
        if hasattr(type(self.body), "__len__"):  # a list of chunks, the find front's answer: counted
            left = len(self.body)
            for chunk in self.body:
                left -= 1
                if left <= 0:
                    self.release()
                yield chunk
        else:  # another iterable: one chunk looked ahead to know the last one
            chunks = iter(self.body)
            chunk = next(chunks, _END)
            while chunk is not _END:
                following = next(chunks, _END)
                if following is _END:
                    self.release()
                yield chunk
                chunk = following
        self.release()

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.release()


def front_answer(environ: dict) -> tuple[str, list[tuple[str, str]], bytes, Callable[[], None] | None] | None:
    """A front's answer to a whole request without graphite's application (the gunicorn
    worker's light path: graphite_plugin.gunicorn_worker): its status, headers, body and
    what to call once the body is sent (its log lines), with the client's slot held while
    it is built; None when no front answers it (or the client has no slot left): the
    server then serves the request as any other, under graphite_declined (no front twice)."""
    client = environ.get("REMOTE_ADDR", "")
    if not CLIENT_SLOTS.take(client, CLIENT_SLOTS.limit()):
        return None  # application answers the 503
    started: list[tuple[str, list[tuple[str, str]]]] = []
    try:
        body = _front(environ, lambda status, headers, exc_info=None: started.append((status, headers)))
    finally:
        CLIENT_SLOTS.give_back(client)
    if body is None:
        return None
    status, headers = started[0]
    if isinstance(body, LoggedAfter):
        return status, headers, body.content, body.close
    return status, headers, b"".join(body), getattr(body, "close", None)


_DECLINED = threading.local()


class graphite_declined:
    """Within it, this thread's requests go to graphite's application without a front (a
    request the fronts declined in the worker's light path, served again: not asked twice)."""

    def __enter__(self) -> None:
        _DECLINED.active = True

    def __exit__(self, *exc: object) -> None:
        _DECLINED.active = False


def _serve(environ: dict, start_response: Callable) -> Iterable[bytes]:
    body = None if getattr(_DECLINED, "active", False) else _front(environ, start_response)
    return graphite_application(environ, start_response) if body is None else body


def _front(environ: dict, start_response: Callable) -> Iterable[bytes] | None:
    """The find front's or the tags front's answer, else None."""
    if eligible(environ):
        started = time.perf_counter()
        try:
            answered = _front_find(environ)
        except Exception:  # noqa: BLE001 - graphite's view then fails (or not) and logs as it does
            answered = None
        if answered is not None:
            headers, found = answered
            start_response("200 OK", headers)
            return LoggedAfter(found.body, found.log_lines, partial(_find_sent, (time.perf_counter() - started) * 1000))
    return tags_front.serve(environ, start_response)


def _find_sent(milliseconds: float, log_lines: list[str]) -> None:
    """What follows a front find's answer: graphite's log lines, the find counted in the
    self-metrics (its time the answer's, without the send)."""
    from graphite_plugin.find_view import log_info
    from graphite_plugin.self_metrics import RequestTimingMiddleware

    log_info(log_lines)
    RequestTimingMiddleware.record("find", milliseconds)


class LoggedAfter:
    """A front's body, its graphite log lines written (by `write`: find_view.log_info
    unless given) once it has been sent (after its last byte, or when the server closes
    it, whichever comes first; once): the client does not wait for log records (a file
    write each)."""

    def __init__(self, content: bytes, log_lines: list[str], write: Callable[[list[str]], None] | None = None):
        self.content, self._lines, self._write = content, log_lines, write

    def __len__(self) -> int:
        return 1  # one chunk: ReleasingBody gives the slot back as it hands it over, before the log lines

    def __iter__(self):
        yield self.content
        self.close()

    def close(self) -> None:
        lines, self._lines = self._lines, None
        if lines is None:  # written already
            return
        if self._write is not None:
            self._write(lines)
        else:
            from graphite_plugin.find_view import log_info

            log_info(lines)
