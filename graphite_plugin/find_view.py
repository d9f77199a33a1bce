"""`/metrics/find` in graphite's treejson (Grafana's and the UI's tree), json and completer
formats, answered from the glob cache or the store's glob, without graphite's worker pool
and node objects.

graphite's find_view runs the finder in its worker pool (a thread hand-off per request),
builds a node object per match, looks the user's profile up with two database queries
(treejson) and, for json, reads each leaf's intervals one by one. `find_answer` builds
the same answer from the glob's names (graphite's profile through
graphite_plugin.profiles, `tree_json`, json_response_for's encoding, its log lines: the same bytes
and headers), in the request's thread: the pattern's answer from the glob cache, else the
store's glob (then cached for the next request), bounded by BG_MAX_GLOB_RESULTS and
BG_MAX_GLOB_EXPANSION (a pattern over them answers 400 naming the setting, as graphite's
view does); the json format's intervals from the leaves' rows (Store.metric_spans, a
chunk of leaves at a time) and its text written as json.dumps writes it (json_body).
Anything else goes to graphite's view: another format or parameter, a
`seriesByTag(...)` query, other finders, more leaves than METRICS_FIND_*_THRESHOLD.

Where graphite's answer depends on its random shuffle of the nodes, the shortcut gives
one of its answers: a name both metric and directory is the directory's entry in
treejson and both entries, the directory's first, in json and completer; completer
entries of equal last component are in path order.
"""
from __future__ import annotations

import json
import time
from typing import Mapping, NamedTuple, Sequence

from django.conf import settings
from django.http import HttpResponse, HttpResponseBadRequest
from graphite.logger import log
from graphite.metrics.views import tree_json
from graphite.storage import STORE

from graphite_plugin.finder import REFUSED, TAG_CALL, Backend, Finder, refused, shared_backend
from graphite_plugin.profiles import advanced_ui
from graphite_plugin.reader import span_interval

PARAMETERS = frozenset({"query", "format"})  # a request with any other goes to graphite's view
JSON_CHUNK = 5_000  # leaves of a json answer read and written at once


class TreeEntry:
    """What tree_json reads of a node: its last component and whether it is a leaf."""

    __slots__ = ("name", "is_leaf")

    def __init__(self, name: str, is_leaf: bool):
        self.name, self.is_leaf = name, is_leaf


def only_this_finder() -> bool:
    """Whether graphite-web finds with graphite_plugin.Finder alone."""
    return len(STORE.finders) == 1 and isinstance(STORE.finders[0], Finder)


def completer_query(query: str) -> str:
    """find_view's pattern for the completer format (without `automatic_variants`)."""
    query = query.replace("..", "*.")
    return query if query.endswith("*") else query + "*"


def tree_content(request, query: str, leaves: Sequence[str], branches: Sequence[str]) -> list:
    """find_view's treejson content. graphite's tree_json reads, of its nodes sorted by
    last component, the first of each component (the directory's, when a name is both)
    and how many there are (more than one: the wildcard entry): one entry per component
    is built, plus a copy of the only one where there were more (no object per match)."""
    first: dict[str, bool] = {}
    for path in branches:
        first.setdefault(path.rpartition(".")[2], False)
    for path in leaves:
        first.setdefault(path.rpartition(".")[2], True)
    entries = [TreeEntry(name, is_leaf) for name, is_leaf in sorted(first.items())]
    if len(entries) == 1 and len(leaves) + len(branches) > 1:
        entries.append(entries[0])  # skipped by tree_json as a repeat, counted for its wildcard entry
    base_path = query.rsplit(".", 1)[0] + "." if "." in query else ""
    return tree_json(entries, base_path, wildcards=advanced_ui(request))


def json_body(backend: Backend, leaves: Sequence[str], branches: Sequence[str], ensure_ascii: bool,
              spans: dict[str, tuple[int, int]] | None = None) -> bytes:
    """find_view's json content (json_nodes) as json.dumps encodes it: path, is_leaf and a
    leaf's intervals, in path order, a directory before a metric of its name. Each leaf's
    retention and last write come from the glob's walk (`spans`, Store.glob_node_spans),
    else are read JSON_CHUNK leaves at a time (Store.metric_spans: no Metric built, nothing
    kept); the entries are written as json.dumps writes them (strings by json's own
    encoder, numbers by repr), JSON_CHUNK at a time: no dict per node, and an answer of
    BG_MAX_GLOB_RESULTS paths holds its text about twice at most."""
    if branches:
        nodes = [(path, False) for path in branches] + [(path, True) for path in leaves]
        nodes.sort(key=lambda node: node[0])  # stable: the directory first
    else:
        nodes = None  # the leaves alone, sorted already
    quoted = json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    store, accessor, now = backend.accessor.store, backend.accessor, time.time()
    walked = spans
    written: dict[tuple[int, int], str] = {}  # a span's intervals text: leaves written at once share them
    chunks = []
    for offset in range(0, len(nodes if nodes is not None else leaves), JSON_CHUNK):
        chunk = nodes[offset:offset + JSON_CHUNK] if nodes is not None \
            else [(path, True) for path in leaves[offset:offset + JSON_CHUNK]]
        if walked is None:
            wanted = [path for path, is_leaf in chunk if is_leaf]
            spans = store.metric_spans(wanted) if wanted else {}  # not kept: bounded memory
        parts = []
        for path, is_leaf in chunk:
            if not is_leaf:
                parts.append(f'{{"path": {quoted(path)}, "is_leaf": false}}')
                continue
            span = spans.get(path)
            if span is None:  # deleted since the glob: graphite's reader gives no interval
                parts.append(f'{{"path": {quoted(path)}, "is_leaf": true, "intervals": []}}')
                continue
            intervals = written.get(span)
            if intervals is None:
                start, end = span_interval(accessor, *span, now)
                intervals = written[span] = f'"intervals": [{{"start": {start!r}, "end": {end!r}}}]'
            parts.append(f'{{"path": {quoted(path)}, "is_leaf": true, {intervals}}}')
        chunks.append(", ".join(parts).encode())
    return b"[" + b", ".join(chunks) + b"]"


def completer_content(leaves: Sequence[str], branches: Sequence[str]) -> dict:
    """find_view's completer content: in order of last component (then path), a directory's
    path ending with a dot."""
    nodes = [(path.rpartition(".")[2], path, False) for path in branches]
    nodes += [(path.rpartition(".")[2], path, True) for path in leaves]
    nodes.sort(key=lambda node: (node[0], node[1]))
    return {"metrics": [{"path": path if is_leaf else path + ".", "name": name, "is_leaf": str(int(is_leaf))}
                        for name, path, is_leaf in nodes]}


def ascii_only(request) -> bool:
    """json_response_for's choice: non-ASCII escaped unless the client accepts more than application/json."""
    return request.META.get("HTTP_ACCEPT", "application/json") == "application/json"


class FoundText(NamedTuple):
    """A find's 200 answer as find_view gives it: its Content-Type, its body, graphite's
    info log lines of it (find_view's two)."""

    content_type: str
    body: bytes
    log_lines: list[str]


NO_CACHE = [("Pragma", "no-cache"), ("Cache-Control", "no-cache")]  # find_view's headers after Content-Type


def find_text(request, params: Mapping[str, str]) -> FoundText | str | None:
    """find_view's answer to a plain find in one of the three formats (`params`: request.GET's
    values); a str for graphite's 400 (the refusal's message, logged as graphite's view logs
    it); None for graphite's view. Reads of `request`: its method, its Accept field, its user
    (graphite's profile)."""
    if request.method != "GET" or not params.keys() <= PARAMETERS:
        return None
    form = params.get("format", "treejson")
    query = params.get("query", "")
    if form not in ("treejson", "json", "completer") or not query or query.startswith(TAG_CALL) \
            or not only_this_finder():
        return None
    if form == "completer":
        query = completer_query(query)
    backend = shared_backend()
    try:
        leaves, branches, spans = backend.glob_node_spans(query) if form == "json" else (*backend.glob_nodes(query), None)
    except REFUSED as exc:  # graphite's view: InputParameterError -> 400 with its text
        message = str(refused(exc).error)
        log.warning("%s", message)
        return message
    if len(leaves) > settings.METRICS_FIND_WARNING_THRESHOLD or len(leaves) > settings.METRICS_FIND_FAILURE_THRESHOLD:
        return None  # graphite's view warns or fails
    count = len(leaves) + len(branches)
    lines = ["find_view query=%s local_only=%s matches=%d" % (query, 0, count),
             "received remote find request: pattern=%s from=%s until=%s local_only=%s format=%s matches=%d"
             % (query, None, None, 0, form, count)]
    ascii = ascii_only(request)
    if form == "json":
        body = json_body(backend, leaves, branches, ascii, spans)
    else:
        content = tree_content(request, query, leaves, branches) if form == "treejson" \
            else completer_content(leaves, branches)
        body = json.dumps(content, ensure_ascii=ascii).encode()
    return FoundText("application/json" if ascii else "application/json;charset=utf-8", body, lines)


def find_answer(request, log_lines: list[str] | None = None, params: Mapping[str, str] | None = None
                ) -> HttpResponse | None:
    """find_view's answer (find_text) as its HttpResponse, or None for graphite's view;
    graphite's info log lines of the answer are logged, or added to `log_lines` for the
    caller to log. `params`: request.GET's values when the caller has them."""
    found = find_text(request, request.GET if params is None else params)
    if found is None or isinstance(found, str):
        return None if found is None else HttpResponseBadRequest(found)
    response = HttpResponse(found.body, content_type=found.content_type)
    for name, value in NO_CACHE:
        response[name] = value
    if log_lines is None:
        log_info(found.log_lines)
    else:
        log_lines.extend(found.log_lines)
    return response


def log_info(lines: Sequence[str]) -> None:
    """graphite's info log lines of a find (find_view's two), each a record of its own."""
    for line in lines:
        log.info(line)
