"""graphite-web's WSGI application with cached tree finds answered in front of Django.

Serve `graphite_plugin.wsgi:application` instead of `graphite.wsgi:application` (bgl run
does). A dashboard asks `/metrics/find?query=...` again and again; once the process's
glob cache holds a pattern, graphite_plugin.find_view builds graphite's exact answer in
about a tenth of a millisecond, while Django's request handling and middleware chain
(sessions, authentication, messages, gzip) cost three to four times that. This front
answers such a request itself when nothing of that chain can change the answer: a GET
to `/metrics/find` with no cookie (an anonymous user, graphite's default profile), no
remote user, no gzip wanted, only `query` and `format=treejson` (find_view's checks).
The answer carries the headers the chain would add for it (Content-Length, `Vary:
Cookie` from the session the profile lookup reads, `Vary: Accept-Encoding` from gzip on
a body of 200 bytes or more) and is counted in the self-metrics as a find.
Anything else, or a pattern not cached, goes to graphite's application unchanged.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

from graphite.wsgi import application as graphite_application

REMOTE_USER_KEYS = ("REMOTE_USER", "HTTP_REMOTE_USER")
GZIP_MIN_LENGTH = 200  # django.middleware.gzip.GZipMiddleware leaves shorter bodies alone


def _eligible(environ: dict) -> bool:
    return (environ.get("PATH_INFO") == "/metrics/find" and environ.get("REQUEST_METHOD") == "GET"
            and not environ.get("HTTP_COOKIE") and "gzip" not in environ.get("HTTP_ACCEPT_ENCODING", "")
            and not any(key in environ for key in REMOTE_USER_KEYS))


def _cached_find(environ: dict):
    """find_view's HttpResponse with the middleware chain's headers, or None."""
    from django.contrib.auth.models import AnonymousUser
    from django.core.handlers.wsgi import WSGIRequest
    from django.utils.cache import patch_vary_headers

    from graphite_plugin.find_view import find_tree

    request = WSGIRequest(environ)
    request.user = AnonymousUser()  # AuthenticationMiddleware's answer for a request without a session
    response = find_tree(request)
    if response is None:
        return None
    patch_vary_headers(response, ("Cookie",))  # SessionMiddleware: the profile lookup read the session
    if len(response.content) >= GZIP_MIN_LENGTH:
        patch_vary_headers(response, ("Accept-Encoding",))  # GZipMiddleware, even when not compressing
    response["Content-Length"] = str(len(response.content))  # CommonMiddleware
    return response


def application(environ: dict, start_response: Callable) -> Iterable[bytes]:
    """The WSGI entry point (see the module docstring)."""
    if _eligible(environ):
        started = time.perf_counter()
        try:
            response = _cached_find(environ)
        except Exception:  # noqa: BLE001 - graphite's view then fails (or not) and logs as it does
            response = None
        if response is not None:
            from graphite_plugin.self_metrics import RequestTimingMiddleware

            start_response(f"{response.status_code} {response.reason_phrase}", list(response.items()))
            RequestTimingMiddleware.record("find", (time.perf_counter() - started) * 1000)
            return [response.content]
    return graphite_application(environ, start_response)
