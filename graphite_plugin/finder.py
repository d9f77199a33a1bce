"""graphite-web storage finder over a biggraphite_like store.

    STORAGE_FINDERS = ['graphite_plugin.Finder']
    BG_STORE = 'sqlite:///var/lib/bgl/bgl.db'   # else $BGL_STORE, else the CLI's default

Globs use the accessor's glob engine (StandardFinder's semantics); `fetch` answers many
patterns with one batched read; `get_index` scans the metrics table instead of
walking `**`. The accessor is created on first use, once per process and store URL.
"""
from __future__ import annotations

import threading

from django.conf import settings
from graphite.finders.utils import BaseFinder
from graphite.node import BranchNode, LeafNode

from biggraphite_like import glob as glob_mod
from biggraphite_like.accessor import DEFAULT_CACHE_TTL, DEFAULT_TOUCH_INTERVAL, Accessor
from biggraphite_like.errors import GlobTooComplex, InvalidGlob, TooManyResults
from biggraphite_like.settings import default_store_url
from graphite_plugin.errors import DeferredError, PatternRefused
from graphite_plugin.reader import MetadataBatch, Reader, read_series

# The BG_* settings graphite-web's local_settings may hold, and their defaults.
OPTION_DEFAULTS = {
    "BG_MAX_GLOB_EXPANSION": glob_mod.DEFAULT_MAX_EXPANSION,  # alternatives a pattern may expand to
    "BG_MAX_GLOB_RESULTS": glob_mod.DEFAULT_MAX_RESULTS,  # names one glob may match
    "BG_CACHE_TTL": DEFAULT_CACHE_TTL,  # seconds metric metadata is trusted without reading it again
    "BG_TOUCH_INTERVAL": DEFAULT_TOUCH_INTERVAL,  # seconds between two read_on updates of a metric
}
_ACCESSOR_OPTIONS = {
    "BG_MAX_GLOB_EXPANSION": "max_glob_expansion",
    "BG_MAX_GLOB_RESULTS": "max_glob_results",
    "BG_CACHE_TTL": "cache_ttl",
    "BG_TOUCH_INTERVAL": "touch_interval",
}
REFUSED = (GlobTooComplex, TooManyResults, InvalidGlob)
_SETTING_OF = {GlobTooComplex: "BG_MAX_GLOB_EXPANSION", TooManyResults: "BG_MAX_GLOB_RESULTS"}

_accessors: dict[tuple, Accessor] = {}
_accessors_lock = threading.Lock()


def store_url() -> str:
    """BG_STORE from graphite-web's settings, else $BGL_STORE, else the CLI's default file."""
    return getattr(settings, "BG_STORE", None) or default_store_url()


def shared_accessor() -> Accessor:
    """The process's accessor for the configured store and options (created once, lazily)."""
    options = {_ACCESSOR_OPTIONS[k]: getattr(settings, k, default) for k, default in OPTION_DEFAULTS.items()}
    key = (store_url(), *sorted(options.items()))
    accessor = _accessors.get(key)
    if accessor is None:
        with _accessors_lock:
            accessor = _accessors.get(key)
            if accessor is None:
                accessor = _accessors[key] = Accessor.from_url(key[0], **options)
    return accessor


def refused(exc: Exception) -> DeferredError:
    """The 400 answer to a refused pattern, naming the setting that holds the limit."""
    setting = _SETTING_OF.get(type(exc))
    where = f" (graphite-web setting {setting})" if setting else ""
    return DeferredError(PatternRefused(f"{exc}{where}"))


class Finder(BaseFinder):
    """Finds nodes and fetches series in a biggraphite_like store (thread-safe)."""

    local = True
    disabled = False
    tags = False

    @property
    def accessor(self) -> Accessor:
        return shared_accessor()

    def find_nodes(self, query):
        """Sorted BranchNodes and LeafNodes matching query.pattern (a list, computed in
        graphite's worker thread); a name both metric and directory gives both nodes,
        as StandardFinder does; `leaves_only` skips the directory lookup."""
        accessor = self.accessor
        try:
            leaves = accessor.glob_metrics(query.pattern)
            branches = [] if query.leaves_only else accessor.glob_directories(query.pattern)
        except REFUSED as exc:
            return refused(exc)
        metadata = MetadataBatch(accessor, leaves)
        nodes = [BranchNode(path) for path in branches]
        nodes.extend(LeafNode(path, Reader(accessor, path, metadata)) for path in leaves)
        nodes.sort(key=lambda node: (node.path, node.is_leaf))
        return nodes

    def fetch(self, patterns, start_time, end_time, now=None, requestContext=None):
        """graphite's fetch results for every leaf of every pattern, read in one batch.

        Returns [{'pathExpression', 'path', 'name', 'time_info', 'values'}], leaves with
        nothing in range left out (as BaseFinder.fetch does).
        """
        accessor = self.accessor
        try:
            matches = [(pattern, accessor.glob_metrics(pattern)) for pattern in patterns]
        except REFUSED as exc:
            return refused(exc)
        names = sorted({name for _, found in matches for name in found})
        series = read_series(accessor, names, start_time, end_time, now)
        results = []
        handed_out: set[str] = set()
        for pattern, found in matches:
            for name in found:
                read = series[name]
                if read is None:
                    continue
                time_info, values = read
                if name in handed_out:  # graphite functions may change a list in place
                    values = list(values)
                handed_out.add(name)
                results.append({
                    "pathExpression": pattern,
                    "path": name,
                    "name": name,
                    "time_info": time_info,
                    "values": values,
                })
        return results

    def get_index(self, requestContext=None):
        """Every metric name, sorted, from a scan of the metrics (no `**` glob)."""
        names = [metric.name for page in self.accessor.scan_metrics() for metric in page.items]
        names.sort()
        return names
