"""Django middleware of the plugin, added to graphite-web's MIDDLEWARE by settings.py.

* ErrorAnswerMiddleware keeps every error answer a short reason: graphite answers some
  400s as text/html with the request's target in them (a browser would render it) and
  some 500s as JSON holding a whole traceback (`{"error": "All requests failed ..."}`).
  An error's text/html becomes text/plain; a body with a traceback or past 2,000 bytes is
  replaced by graphite_plugin.error_views' short reason for its status.
* PatternRefusedMiddleware answers 400 with the text for a pattern the store refused.
  `/metrics/find` and `/render` already turn `InputParameterError` into 400; views that do
  not (`/metrics/expand`) would answer graphite's 500 page.
* CrossSiteWriteMiddleware refuses (403) a request that a browser sent from another origin
  to an endpoint that writes. graphite-web 1.1.10 has no CSRF protection (its MIDDLEWARE
  lacks CsrfViewMiddleware and its APIs take no token), so any web page a user visits could
  save or delete dashboards, tag or delete series, or post events through the user's
  browser. A browser says where a request comes from (`Sec-Fetch-Site`, `Origin`,
  `Referer`); clients that are not browsers (curl, scripts, Grafana's server access) send
  none of them and are not affected, nor are Grafana's reads from the browser (`/render`,
  `/metrics/find`, `/tags/autoComplete/*`, ...).
* RenderBudgetMiddleware answers 400 with the reason for a render graphite would fail on or
  that would build more than the limits allow (graphite_plugin.render_budget), before
  graphite's view (or a shortcut) runs.
* ViewShortcutMiddleware answers two of graphite's views the way they would, faster:
  JSON renders (graphite_plugin.render_view) and finds in the treejson, json and completer
  formats (graphite_plugin.find_view), through Django's `process_view` hook; each shortcut
  returns None for a request it does not answer exactly as graphite, which then does.
"""
from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpResponseBadRequest, HttpResponseForbidden

from graphite_plugin.errors import PatternRefused

GRAPHITE_EXCEPTION_LOGGER = "graphite.middleware.LogExceptionsMiddleware"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Endpoints that change something whatever the method (graphite's GET /composer/mygraph saves
# and deletes; dashboard save/delete, tag writes, the URL shortener, posting events)
WRITE_PATHS = re.compile(r"^/(dashboard/(save|save_template|delete|delete_template|create-temporary|email)\b"
                         r"|composer/mygraph|tags/(tagSeries|tagMultiSeries|delSeries)\b|s/|events/?$)")
# Reads a browser may POST from another origin (Grafana's browser access)
CROSS_SITE_READS = re.compile(r"^/(render|metrics/(find|expand)|tags/(autoComplete/|findSeries)|functions)")


MAX_ERROR_BODY = 2000


class ErrorAnswerMiddleware:
    """Error answers as a short reason (see the module docstring)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code < 400 or response.streaming:
            return response
        from graphite_plugin.error_views import TEXT, has_traceback, short_reason

        if response.get("Content-Type", "").startswith("text/html"):
            response["Content-Type"] = TEXT
        body = response.content
        if len(body) > MAX_ERROR_BODY or has_traceback(body):
            reason = short_reason(response.status_code)
            if response.get("Content-Type", "").startswith("application/json"):
                response.content = json.dumps({"error": reason})
            else:
                response.content = reason + "\n"
                response["Content-Type"] = TEXT
            response["Content-Length"] = str(len(response.content))
        return response

    def process_exception(self, request, exception):
        """A view's exception (after graphite's middleware logged it): the short answer."""
        from graphite_plugin.error_views import answer_for

        return answer_for(exception)


class PatternRefusedMiddleware:
    """Answer 400 (text/plain, the error's message) for PatternRefused raised by a view."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, PatternRefused):
            return HttpResponseBadRequest(str(exception), content_type="text/plain; charset=utf-8")
        return None


class RenderBudgetMiddleware:
    """process_view: a render over the budget answers 400 (graphite_plugin.render_budget)."""

    def __init__(self, get_response):
        from graphite.render.views import renderView

        from graphite_plugin import utf8_targets

        utf8_targets.install()  # targets naming non-ASCII metrics parse
        self.get_response = get_response
        self.render_view = renderView

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if view_func is not self.render_view:
            return None
        from graphite.render.views import parseOptions

        from graphite_plugin.options import OPTION_DEFAULTS
        from graphite_plugin.render_budget import check_request

        try:
            graph_options, request_options = parseOptions(request)
        except Exception:  # noqa: BLE001 - graphite's view answers its own error
            return None
        limits = {name: int(getattr(settings, name, OPTION_DEFAULTS[name]))
                  for name in ("BG_MAX_RENDER_POINTS", "BG_MAX_RENDER_PIXELS", "BG_MAX_RENDER_SERIES")}
        try:
            check_request(graph_options, request_options, limits["BG_MAX_RENDER_POINTS"],
                          limits["BG_MAX_RENDER_PIXELS"], limits["BG_MAX_RENDER_SERIES"])
        except PatternRefused as exc:
            return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
        return None


class ViewShortcutMiddleware:
    """process_view: graphite's view -> a shortcut with the same answer (see the module docstring)."""

    def __init__(self, get_response):
        from graphite.metrics.views import find_view
        from graphite.render.views import renderView

        from graphite_plugin.find_view import find_answer
        from graphite_plugin.render_view import render_json

        self.get_response = get_response
        self.shortcuts = {renderView: render_json, find_view: find_answer}
        # an exception raised here skips the process_exception hooks: log and answer it here
        self.log_exceptions = GRAPHITE_EXCEPTION_LOGGER in settings.MIDDLEWARE

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        shortcut = self.shortcuts.get(view_func)
        if shortcut is None or view_args or view_kwargs:
            return None
        try:
            return shortcut(request)
        except Exception as exc:
            if self.log_exceptions:
                from graphite.logger import log

                log.exception(f"Exception encountered in <{request.method} {request.build_absolute_uri()}>")
            from graphite_plugin.error_views import answer_for

            return answer_for(exc)  # as the view's exception would be answered (graphite_plugin.urls)


def app_path(request) -> str:
    """The request's path inside graphite-web (without its URL_PREFIX)."""
    path = request.path_info
    prefix = "/" + getattr(settings, "URL_PREFIX", "").strip("/")
    if prefix != "/" and path.startswith(prefix):
        path = path[len(prefix):] or "/"
    return path


def foreign_origin(request) -> str | None:
    """The other origin a browser says this request comes from, or None (same origin, or
    not sent by a browser)."""
    own = f"{request.scheme}://{request.get_host()}"
    origin = request.headers.get("Origin")
    if origin and origin != "null":
        return None if origin == own else origin
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site in ("cross-site", "same-site"):
        return origin or fetch_site
    if origin == "null":  # sandboxed frames, file:// pages
        return origin
    referer = urlsplit(request.headers.get("Referer", ""))
    if referer.scheme and referer.netloc and f"{referer.scheme}://{referer.netloc}" != own:
        return f"{referer.scheme}://{referer.netloc}"
    return None


def writes(method: str, path: str) -> bool:
    """Whether a request may change something: a write endpoint, or any method but
    GET/HEAD/OPTIONS outside the reads Grafana makes."""
    if WRITE_PATHS.match(path):
        return not (path.startswith("/events") and method in SAFE_METHODS)
    return method not in SAFE_METHODS and not CROSS_SITE_READS.match(path)


class CrossSiteWriteMiddleware:
    """Answer 403 for a write a browser sent from another origin (see the module docstring)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        path = app_path(request)
        if writes(request.method, path):
            origin = foreign_origin(request)
            if origin is not None:
                return HttpResponseForbidden(
                    f"cross-site request refused: {request.method} {request.path} comes from {origin}, not from"
                    " graphite-web's own pages; its writes (dashboards, tags, events) accept requests from its"
                    " own pages and from clients that are not browsers",
                    content_type="text/plain; charset=utf-8")
        return self.get_response(request)
