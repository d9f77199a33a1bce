"""graphite-web's tag reads `/tags/findSeries`, `/tags/autoComplete/tags` and
`/tags/autoComplete/values` answered in front of Django (graphite_plugin.wsgi calls `serve`).

Grafana asks these on every keystroke of a tag query; the store answers them in a tenth of
a millisecond or two, Django's request handling and middleware chain cost about 1.7 ms
more. As for plain finds (graphite_plugin.wsgi), the front answers only when nothing of
that chain can change the answer: a GET with no cookie, no remote user, no gzip wanted, a
Host Django accepts and does not redirect and a User-Agent it does not refuse (the same
checks as the find front's), answered 200, with the headers
the chain adds to such an answer (Content-Length; `Vary: Accept-Encoding` from gzip on a
body of 200 bytes or more; these views never read the session). Anything else, every error
answer included, goes to graphite's application, which answers it as it always does.

The answers are graphite-web's own views' (graphite.tags.views), byte for byte: findSeries
asks STORE.tagdb (graphite_plugin.tagdb.TagDB, its cache included; its log line written
once the answer is sent) as the view does; the two autocomplete views are graphite's with
Store.tagdb_auto_complete_* run in the request's thread (graphite hands the finder's call
to its worker pool and waits): the finder's answer (graphite_plugin.Finder, the only
finder: graphite then asks nothing else), sorted, distinct, cut at `limit`. Per request
the front does only what depends on the request: the query string is parsed by Django's
QueryDict rules (`_params`) and the answer encoded as graphite's `_jsonResponse` encodes
it, with the chain's headers (graphite_plugin.wsgi.chain_headers), without building a
QueryDict or an HttpResponse (about 40 us a request). An exception (graphite's view
answers it: 400 for a ValueError, else 500) or a refusal leaves the request to graphite.
"""
from __future__ import annotations

import json
from typing import Callable, Iterable

from django.conf import settings
from django.utils.datastructures import MultiValueDict
from graphite.storage import STORE
from graphite.tags.views import _requestContext

from graphite_plugin.errors import DeferredError

FIND_SERIES = "/tags/findSeries"
AUTOCOMPLETE_TAGS = "/tags/autoComplete/tags"
AUTOCOMPLETE_VALUES = "/tags/autoComplete/values"
PATHS = frozenset({FIND_SERIES, AUTOCOMPLETE_TAGS, AUTOCOMPLETE_VALUES})
CONTENT_TYPE = "application/json"  # graphite's _jsonResponse


def eligible(environ: dict) -> bool:
    """Whether the front may answer this request (graphite_plugin.wsgi.eligible on PATHS)."""
    from graphite_plugin import wsgi

    return wsgi.eligible(environ, PATHS)


def serve(environ: dict, start_response: Callable) -> Iterable[bytes] | None:
    """The front's answer to an eligible request it can answer, else None (graphite's
    application then answers, and fails or not as it does)."""
    if not eligible(environ):
        return None
    try:
        answered = answer(environ)
    except Exception:  # noqa: BLE001 - graphite's view then answers (its error, logged as it does)
        answered = None
    if answered is None:
        return None
    from graphite_plugin.wsgi import LoggedAfter, chain_headers

    body, log_lines = answered
    start_response("200 OK", chain_headers(CONTENT_TYPE, len(body)))
    return LoggedAfter(body, log_lines, STORE.tagdb.write_log) if log_lines else [body]


def answer(environ: dict) -> tuple[bytes, list[str]] | None:
    """The view's 200 answer (its body, and the log lines to write once it is sent), or None."""
    from django.core.handlers.wsgi import WSGIRequest

    from graphite_plugin.wsgi import django_would_serve

    if not _only_our_tag_index():
        return None
    request = WSGIRequest(environ)
    if not django_would_serve(request):
        return None  # Django answers (400 for a Host not in ALLOWED_HOSTS, 301 to www., 403 for a refused agent)
    log_lines: list[str] = []
    body = _VIEWS[environ["PATH_INFO"]](request, log_lines)  # these views never read the session
    return None if body is None else (body, log_lines)


_checked: tuple[object, object, bool] | None = None  # (STORE.finders, STORE.tagdb, whether ours alone): the last check


def _only_our_tag_index() -> bool:
    """Whether graphite-web answers tags from this plugin alone: its Finder the only finder
    (the autocomplete calls ask every tag-aware finder) and its TagDB (findSeries). Checked
    again when graphite's STORE has other finders or another TagDB (STORE.__init__)."""
    global _checked
    finders, tagdb = STORE.finders, STORE.tagdb
    checked = _checked
    if checked is None or checked[0] is not finders or checked[1] is not tagdb:
        from graphite_plugin.find_view import only_this_finder
        from graphite_plugin.tagdb import TagDB

        checked = _checked = (finders, tagdb, only_this_finder() and type(tagdb) is TagDB)
    return checked[2]


def _params(request) -> MultiValueDict:
    """request.GET as Django builds it (graphite_plugin.wsgi.query_pairs: a ValueError for
    too many fields, Django's 400) without QueryDict's calls per value: these views only read it."""
    from graphite_plugin.wsgi import query_pairs

    found: dict[str, list[str]] = {}
    for key, value in query_pairs(request.environ):
        if key in found:
            found[key].append(value)
        else:
            found[key] = [value]
    return MultiValueDict(found)


def _json(data, params: MultiValueDict) -> bytes:
    """graphite's _jsonResponse body (indented and sorted with `pretty`), encoded as its HttpResponse encodes it."""
    pretty = params.get("pretty")
    return json.dumps(data, indent=2 if pretty else None, sort_keys=bool(pretty)).encode(settings.DEFAULT_CHARSET)


def _find_series(request, log_lines: list[str]) -> bytes | None:
    """graphite's findSeries view: its expressions, STORE.tagdb.find_series (the TagDB's
    cache and log line), its JSON; None without expressions (graphite's 400)."""
    params = _params(request)
    expressions = _expressions(params)
    if not expressions:
        return None
    found = STORE.tagdb.find_series_logged(expressions, _requestContext(request, params), log_lines)
    return _json(found, params)


def _expressions(params) -> list[str]:
    """The view's expressions: `expr`, else jQuery's `expr[]`."""
    return params.getlist("expr") or params.getlist("expr[]")


def _completed(found, limit, params) -> bytes | None:
    """graphite's Store.tagdb_auto_complete_* on the one finder's answer, as its view
    encodes it; None when the finder refused (graphite's view answers the error)."""
    if isinstance(found, DeferredError):
        return None
    results = sorted(set(found))
    if limit:
        results = results[:int(limit)]
    return _json(results, params)


def _autocomplete_tags(request, log_lines: list[str]) -> bytes | None:
    params = _params(request)
    limit = params.get("limit")
    found = STORE.finders[0].auto_complete_tags(_expressions(params), tagPrefix=params.get("tagPrefix"), limit=limit)
    return _completed(found, limit, params)


def _autocomplete_values(request, log_lines: list[str]) -> bytes | None:
    params = _params(request)
    tag = params.get("tag")
    if not tag:
        return None  # graphite's 400
    limit = params.get("limit")
    found = STORE.finders[0].auto_complete_values(_expressions(params), tag, valuePrefix=params.get("valuePrefix"),
                                                  limit=limit)
    return _completed(found, limit, params)


_VIEWS = {FIND_SERIES: _find_series, AUTOCOMPLETE_TAGS: _autocomplete_tags, AUTOCOMPLETE_VALUES: _autocomplete_values}
