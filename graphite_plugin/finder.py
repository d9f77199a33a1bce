"""graphite-web storage finder over a biggraphite_like store.

    STORAGE_FINDERS = ['graphite_plugin.Finder']
    BG_STORE = 'sqlite:///var/lib/bgl/bgl.db'   # else $BGL_STORE, else the CLI's default

Globs use the accessor's glob engine (StandardFinder's semantics), their answers kept
until the store's names token changes (read every BG_FIND_CACHE_CHECK_INTERVAL seconds)
or BG_FIND_CACHE_TTL seconds have passed; `fetch` answers many patterns with one batched read;
`get_index` scans the metrics table instead of walking `**`. A render over
BG_MAX_RENDER_SERIES series (counted per target, as graphite copies them) or
BG_MAX_RENDER_POINTS points (read, or built by its functions: graphite_plugin.render_budget)
answers 400 naming the setting, before reading anything; a fetch still running past
FETCH_TIMEOUT stops. A plain name longer than a glob pattern may be is looked up as is. The accessor is created on
first use, once per process, store URL and options. The finder is tags-aware: it answers
`seriesByTag(...)` in find and fetch and the two autocomplete calls from the store's tag
index (limits BG_MAX_TAG_SERIES, BG_MAX_TAG_VALUES).
"""
from __future__ import annotations

import dataclasses
import operator
import threading
import time
from typing import Sequence

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from graphite.finders.utils import BaseFinder
from graphite.node import BranchNode, LeafNode

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import GlobTooComplex, InvalidGlob, InvalidMetricName, InvalidTagExpression, TooManyResults
from biggraphite_like.glob import MAX_PATTERN_LENGTH, is_glob
from biggraphite_like.settings import default_store_url
from biggraphite_like.urls import with_default_option
from graphite_plugin.errors import DeferredError, PatternRefused, RenderTooLarge
from graphite_plugin.glob_cache import GlobCache
from graphite_plugin.options import ACCESSOR_ARGUMENTS, OPTION_DEFAULTS
from graphite_plugin.reader import FETCHED_ARRAYS, MetadataBatch, ReadLimits, Reader, read_series
from graphite_plugin.render_budget import function_points, path_expressions, series_copies

REFUSED = (GlobTooComplex, TooManyResults, InvalidGlob, InvalidTagExpression)
TAG_CALL = "seriesByTag("
_SETTING_OF = {GlobTooComplex: "BG_MAX_GLOB_EXPANSION", TooManyResults: "BG_MAX_GLOB_RESULTS"}

backends: dict[tuple, "Backend"] = {}
_backends_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Backend:
    """What one process shares for one store and set of options: the accessor, the glob cache."""

    accessor: Accessor
    globs: GlobCache
    trees: "NodeTrees" = dataclasses.field(default_factory=lambda: NodeTrees(), compare=False)

    def glob_metrics(self, pattern: str) -> Sequence[str]:
        """The metrics matching the pattern (what render fetches); a `seriesByTag(...)`
        call gives the series matching its expressions."""
        if pattern.startswith(TAG_CALL):  # cached like globs (graphite caches its TagDB's answers too)
            return self.globs.get("tags", pattern, lambda p: (tuple(self.accessor.tags.find_series(tag_expressions(p))),))[0]
        return self.globs.get("metrics", pattern, lambda p: (tuple(self._glob_metrics(p)),))[0]

    def _glob_metrics(self, pattern: str) -> list[str]:
        """The accessor's glob, or for a plain name longer than a glob may be (a metric the
        store accepted: names have no length limit), whether it is a metric."""
        if long_plain_name(pattern):
            try:
                return [pattern] if self.accessor.has_metric(pattern) else []
            except InvalidMetricName:  # a name the store cannot hold matches nothing
                return []
        return self.accessor.glob_metrics(pattern)

    def glob_nodes(self, pattern: str) -> tuple[Sequence[str], Sequence[str]]:
        """(metrics, directories) matching the pattern, cached as one answer: most patterns
        match only one kind, and an empty part must not keep the other from the cache."""
        def compute(p: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
            if long_plain_name(p):
                return tuple(self._glob_metrics(p)), ()  # metrics only
            metrics, directories = self.accessor.glob_nodes(p)
            return tuple(metrics), tuple(directories)

        return self.globs.get("nodes", pattern, compute)

    def glob_node_spans(self, pattern: str) -> tuple[Sequence[str], Sequence[str], dict[str, tuple[int, int]] | None]:
        """glob_nodes and, when the answer was not cached and the store read them in its
        walk, each metric's (retention seconds, last write) (Store.glob_node_spans); else None."""
        spans = None

        def compute(p: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
            nonlocal spans
            if long_plain_name(p):
                return tuple(self._glob_metrics(p)), ()  # metrics only
            metrics, directories, spans = self.accessor.glob_node_spans(p)
            return tuple(metrics), tuple(directories)

        return (*self.globs.get("nodes", pattern, compute), spans)



_NODE_ORDER = operator.attrgetter("path", "is_leaf")


def long_plain_name(pattern: str) -> bool:
    """A name without wildcards longer than a glob may be (the store's names are not
    limited in length): looked up as a metric, not globbed."""
    return len(pattern) > MAX_PATTERN_LENGTH and not is_glob(pattern)


class NodeTrees:
    """The nodes of recent tree finds, reused while the glob cache gives the same answer
    object for the pattern (building graphite's nodes is most of a cached find). Small
    answers only, a bounded total: dashboards ask the same small finds again and again.
    The readers' metadata is reloaded as the accessor's cache would (MetadataBatch)."""

    MAX_NODES_PER_FIND = 2_000
    MAX_NODES = 100_000  # past this, everything kept is dropped (about 20 MB of nodes)

    def __init__(self) -> None:
        self._trees: dict[str, tuple[object, list]] = {}
        self._nodes = 0
        self._lock = threading.Lock()

    def get(self, pattern: str, answer: object) -> list | None:
        """A new list of the nodes built for this very answer, or None."""
        tree = self._trees.get(pattern)
        if tree is None or tree[0] is not answer:
            return None
        return list(tree[1])  # graphite does not change nodes; the list is the caller's

    def put(self, pattern: str, answer: object, nodes: list) -> None:
        if len(nodes) > self.MAX_NODES_PER_FIND:
            return
        with self._lock:
            if self._nodes + len(nodes) > self.MAX_NODES:
                self._trees.clear()
                self._nodes = 0
            old = self._trees.get(pattern)
            self._nodes += len(nodes) - (len(old[1]) if old else 0)
            self._trees[pattern] = (answer, list(nodes))


READ_MMAP_SIZE = 1 << 30  # graphite-web's SQLite connections read the file's first GiB through mmap


def store_url() -> str:
    """BG_STORE from graphite-web's settings, else $BGL_STORE, else the CLI's default file;
    an SQLite store read through mmap (`mmap_size`, READ_MMAP_SIZE unless the URL sets it:
    a page not in SQLite's own cache costs no read() copy, for the chunks of a fetch and
    the tag index's pages alike)."""
    url = getattr(settings, "BG_STORE", None) or default_store_url()
    return with_default_option(url, "mmap_size", READ_MMAP_SIZE) if url.startswith("sqlite:") else url


def shared_backend() -> Backend:
    """The process's accessor and glob cache for the configured store and options
    (created once, lazily, under a lock). The last one is kept for its store URL until a
    setting changes (Django's setting_changed): most requests read no option."""
    url = store_url()
    last = _last_backend
    if last is not None and last[0] == url:
        return last[1]
    options = {k: getattr(settings, k, default) for k, default in OPTION_DEFAULTS.items()}
    key = (url, *sorted(options.items()))
    backend = backends.get(key)
    if backend is None:
        with _backends_lock:
            backend = backends.get(key)
            if backend is None:
                accessor = Accessor.from_url(key[0], **{ACCESSOR_ARGUMENTS[k]: v for k, v in options.items()
                                                        if k in ACCESSOR_ARGUMENTS})
                accessor.tags.max_series = int(options["BG_MAX_TAG_SERIES"])
                accessor.tags.max_values = int(options["BG_MAX_TAG_VALUES"])
                globs = GlobCache(float(options["BG_FIND_CACHE_TTL"]), int(options["BG_FIND_CACHE_SIZE"]),
                                  accessor.names_token, float(options["BG_FIND_CACHE_CHECK_INTERVAL"]),
                                  int(options["BG_FIND_CACHE_NAMES"]))
                backend = backends[key] = Backend(accessor, globs)
    _remember_backend((url, backend))
    return backend


_last_backend: tuple[str, Backend] | None = None  # (store URL, its backend): shared_backend's last answer


def _remember_backend(last: tuple[str, Backend] | None) -> None:
    global _last_backend
    _last_backend = last


@receiver(setting_changed)
def _forget_last_backend(**_) -> None:
    """A setting changed (override_settings): the next shared_backend reads the options again."""
    _remember_backend(None)


def shared_accessor() -> Accessor:
    """The process's accessor for the configured store and options."""
    return shared_backend().accessor


def tag_expressions(call: str) -> list[str]:
    """The expressions of a `seriesByTag('a=b', ...)` call, parsed as graphite-web does."""
    from graphite.render.grammar import grammar

    return [t.string[1:-1] for t in grammar.parseString(call).expression.call.args if t.string]


def refused(exc: Exception) -> DeferredError:
    """The 400 answer to a refused pattern, naming the setting that holds the limit."""
    setting = None if "BG_MAX_TAG" in str(exc) else _SETTING_OF.get(type(exc))
    where = f" (graphite-web setting {setting})" if setting else ""
    return DeferredError(PatternRefused(f"{exc}{where}"))


class Finder(BaseFinder):
    """Finds nodes and fetches series in a biggraphite_like store (thread-safe)."""

    local = True
    disabled = False
    tags = True

    @property
    def accessor(self) -> Accessor:
        return shared_backend().accessor

    def find_nodes(self, query):
        """Sorted BranchNodes and LeafNodes matching query.pattern (a list, computed in
        graphite's worker thread); a name both metric and directory gives both nodes,
        as StandardFinder does; `leaves_only` skips the directory lookup."""
        backend = shared_backend()
        accessor = backend.accessor
        try:
            if query.pattern.startswith(TAG_CALL):
                leaves, branches = backend.glob_metrics(query.pattern), ()
            elif query.leaves_only:
                leaves, branches = backend.glob_metrics(query.pattern), ()
            else:
                answer = backend.glob_nodes(query.pattern)
                nodes = backend.trees.get(query.pattern, answer)
                if nodes is not None:
                    return nodes
                leaves, branches = answer
        except REFUSED as exc:
            return refused(exc)
        metadata = MetadataBatch(accessor, leaves)
        nodes = [BranchNode(path) for path in branches]
        nodes += [LeafNode(path, Reader(accessor, path, metadata)) for path in leaves]
        nodes.sort(key=_NODE_ORDER)
        if not query.leaves_only and not query.pattern.startswith(TAG_CALL):
            backend.trees.put(query.pattern, answer, nodes)  # keeps its own copy
        return nodes

    def fetch(self, patterns, start_time, end_time, now=None, requestContext=None):
        """graphite's fetch results for every leaf of every pattern, read in one batch.

        Returns [{'pathExpression', 'path', 'name', 'time_info', 'values'}], leaves with
        nothing in range left out (as BaseFinder.fetch does).
        """
        backend = shared_backend()
        try:
            matches, names, limits = fetch_plan(backend, patterns, requestContext or {})
            series = read_series(backend.accessor, names, start_time, end_time, now, limits,
                                 (requestContext or {}).get(FETCHED_ARRAYS))
        except REFUSED as exc:
            return refused(exc)
        except RenderTooLarge as exc:
            return DeferredError(exc)
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

    def auto_complete_tags(self, exprs, tagPrefix=None, limit=None, requestContext=None):
        """Tags of the series matching exprs (every tag without), from the tag index; an
        expression the index refuses answers 400."""
        try:
            return self.accessor.tags.auto_complete_tags(list(exprs), tagPrefix, _autocomplete_limit(limit))
        except REFUSED as exc:
            return refused(exc)

    def auto_complete_values(self, exprs, tag, valuePrefix=None, limit=None, requestContext=None):
        """Values of tag among the series matching exprs, from the tag index (400 as above)."""
        try:
            return self.accessor.tags.auto_complete_values(list(exprs), tag, valuePrefix, _autocomplete_limit(limit))
        except REFUSED as exc:
            return refused(exc)

    def get_index(self, requestContext=None):
        """Every metric name, sorted, from a scan of the metrics (no `**` glob)."""
        names = [metric.name for page in self.accessor.scan_metrics() for metric in page.items]
        names.sort()
        return names


def fetch_plan(backend: Backend, patterns: Sequence[str], context: dict
               ) -> tuple[list[tuple[str, Sequence[str]]], list[str], ReadLimits]:
    """What one fetch of these patterns reads: (pattern, its metrics) each, the distinct
    metrics sorted, and the read's limits (points left by the render budget, FETCH_TIMEOUT
    from now). Raises the glob's refusal (REFUSED) or RenderTooLarge."""
    deadline = time.monotonic() + float(getattr(settings, "FETCH_TIMEOUT", 6.0))
    matches = [(pattern, backend.glob_metrics(pattern)) for pattern in patterns]
    names = sorted({name for _, found in matches for name in found})
    max_points = int(getattr(settings, "BG_MAX_RENDER_POINTS", OPTION_DEFAULTS["BG_MAX_RENDER_POINTS"]))
    handed = check_render_budget(context, dict(matches), len(names), max_points)
    return matches, names, ReadLimits(max_points * len(names) // max(handed, 1), deadline)


def check_render_budget(context: dict, matches: dict[str, Sequence[str]], read: int, max_points: int) -> int:
    """The series graphite will build from this fetch (each target its own copy of what its
    patterns match; `read` when the targets are unknown); RenderTooLarge when they exceed
    BG_MAX_RENDER_SERIES, or their points per series from functions (render_budget) exceed
    BG_MAX_RENDER_POINTS."""
    max_series = int(getattr(settings, "BG_MAX_RENDER_SERIES", OPTION_DEFAULTS["BG_MAX_RENDER_SERIES"]))
    handed, produced = read, 0
    targets = context.get("targets") or ()
    if targets and "startTime" in context and "endTime" in context:
        handed = 0
        for target in targets:
            count = sum(len(matches.get(pattern, ())) for pattern in path_expressions(target)) * series_copies(target)
            handed += count
            produced += count * function_points(target, context["startTime"], context["endTime"])
        handed = max(handed, read)
    if handed > max_series:
        copies = f" ({read} distinct, each target gets its own copy)" if handed > read else ""
        raise RenderTooLarge(f"this render reads {handed} series{copies}, more than {max_series} (graphite-web"
                             " setting BG_MAX_RENDER_SERIES); narrow the targets or raise the setting")
    if produced > max_points:
        raise RenderTooLarge(f"this render's functions build {produced} points, more than {max_points}"
                             " (graphite-web setting BG_MAX_RENDER_POINTS); use longer intervals, fewer series"
                             " or a shorter range")
    return handed


def _autocomplete_limit(limit) -> int:
    return int(limit) if limit is not None else int(getattr(settings, "TAGDB_AUTOCOMPLETE_LIMIT", 100))
