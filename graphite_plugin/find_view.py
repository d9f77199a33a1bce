"""`/metrics/find` in graphite's default format (treejson: Grafana's and the UI's tree)
answered from the glob cache, without graphite's worker pool and node objects.

A dashboard asks the same patterns again and again; when graphite_plugin.Finder is the
only finder and the process's glob cache holds the pattern's answer, `find_tree` builds
the answer as graphite's `find_view` does (graphite's profile through
graphite_plugin.profiles, `tree_json` and `json_response_for`, so the same bytes and headers) from the cached names. Anything else
goes to graphite's view: another format or parameter, a `seriesByTag(...)` query, an
answer not cached (graphite then runs the finder in its worker pool, within
FIND_TIMEOUT, and the answer is cached for the next request), other finders, or a
parameter graphite would refuse. A name that is a metric and a directory gives one
entry, the directory's (graphite picks either, at random).
"""
from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from graphite.logger import log
from graphite.metrics.views import json_response_for, tree_json
from graphite.storage import STORE

from graphite_plugin.finder import TAG_CALL, Finder, shared_backend
from graphite_plugin.profiles import profile_for

PARAMETERS = frozenset({"query", "format"})  # a request with any other goes to graphite's view


class TreeEntry:
    """What tree_json reads of a node: its last component and whether it is a leaf."""

    __slots__ = ("name", "is_leaf")

    def __init__(self, name: str, is_leaf: bool):
        self.name, self.is_leaf = name, is_leaf


def only_this_finder() -> bool:
    """Whether graphite-web finds with graphite_plugin.Finder alone."""
    return len(STORE.finders) == 1 and isinstance(STORE.finders[0], Finder)


def find_tree(request) -> HttpResponse | None:
    """find_view's treejson answer for a cached pattern, or None for graphite's view to answer."""
    params = request.GET
    if request.method != "GET" or not params.keys() <= PARAMETERS or params.get("format", "treejson") != "treejson":
        return None
    query = params.get("query", "")
    if not query or query.startswith(TAG_CALL) or not only_this_finder():
        return None
    answer = shared_backend().cached_nodes(query)
    if answer is None:
        return None
    leaves, branches = answer
    if len(leaves) > settings.METRICS_FIND_WARNING_THRESHOLD or len(leaves) > settings.METRICS_FIND_FAILURE_THRESHOLD:
        return None  # graphite's view warns or fails
    count = len(leaves) + len(branches)
    log.info("find_view query=%s local_only=%s matches=%d" % (query, 0, count))
    log.info("received remote find request: pattern=%s from=%s until=%s local_only=%s format=%s matches=%d"
             % (query, None, None, 0, "treejson", count))
    entries = [TreeEntry(path.rpartition(".")[2], False) for path in branches]
    entries.extend(TreeEntry(path.rpartition(".")[2], True) for path in leaves)
    entries.sort(key=lambda entry: entry.name)
    base_path = query.rsplit(".", 1)[0] + "." if "." in query else ""
    content = tree_json(entries, base_path, wildcards=profile_for(request).advancedUI)
    response = json_response_for(request, content)
    response["Pragma"] = "no-cache"
    response["Cache-Control"] = "no-cache"
    return response
