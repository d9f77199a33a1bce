"""Which metrics exist and with what metadata, answered from memory.

carbon calls `exists` before every write, so it must cost one dict lookup. A name missing
from memory is looked up in the store once, together with the other unknown names waiting
in carbon's cache (one batched query for up to BG_LOOKUP_BATCH names), so a metric created
by an earlier run keeps its stored metadata: carbon is told it exists and never re-creates
it with what the (possibly changed) storage rules say today.
"""
from __future__ import annotations

import threading
from typing import Callable, Sequence

from carbon import log

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import InvalidMetricName
from biggraphite_like.metric import MetricMetadata
from carbon_plugin.options import PluginOptions
from carbon_plugin.retry import GaveUp, with_retries
from carbon_plugin.stats import PluginStats

MAX_ABSENT = 1_000_000  # names known to be missing from the store, forgotten beyond this


class KnownMetrics:
    """Metadata of the metrics this process knows exist (or has been asked to create)."""

    def __init__(self, accessor: Callable[[], Accessor], options: PluginOptions, stats: PluginStats,
                 waiting_names: Callable[[], Sequence[str]] = lambda: ()):
        self._accessor = accessor
        self._options = options
        self._stats = stats
        self._waiting_names = waiting_names  # other names carbon is about to ask about
        self._metadata: dict[str, MetricMetadata] = {}  # carbon's name -> metadata
        self._absent: set[str] = set()  # looked up: not in the store
        self._invalid: dict[str, str] = {}  # names the store refuses -> why
        self._interned: dict[MetricMetadata, MetricMetadata] = {}
        self._lock = threading.Lock()  # one lookup at a time

    def __len__(self) -> int:
        return len(self._metadata)

    def get(self, name: str) -> MetricMetadata | None:
        """Metadata of a known metric, or None (never touches the store)."""
        return self._metadata.get(name)

    def set(self, name: str, metadata: MetricMetadata) -> MetricMetadata:
        """Record a metric's metadata (created by carbon, or changed by setMetadata)."""
        metadata = self._interned.setdefault(metadata, metadata)
        self._metadata[name] = metadata
        self._absent.discard(name)
        return metadata

    def invalid_reason(self, name: str) -> str | None:
        return self._invalid.get(name)

    def in_memory(self, name: str) -> bool:
        """Whether exists() can answer without the store (known, absent or invalid)."""
        return name in self._metadata or name in self._absent or name in self._invalid

    def exists(self, name: str) -> bool:
        """True if the metric is known or in the store; looks up the store on a memory miss."""
        if name in self._metadata:
            return True
        if name in self._absent:
            return False
        if name in self._invalid:
            return True  # never created; write() refuses its points with the reason
        self.lookup([name])
        return name in self._metadata or name in self._invalid

    def lookup(self, names: Sequence[str]) -> None:
        """Load names (and other unknown names carbon is about to write) from the store.

        A failing store is retried; if it keeps failing the names stay unknown, carbon then
        calls `create` with the storage rules, and the first flush creates the metric only
        if the store still does not have it (insert_columns never replaces stored metadata).
        """
        with self._lock:
            wanted = [n for n in names if n not in self._metadata and n not in self._absent]
            if not wanted:
                return
            limit = self._options.lookup_batch
            if len(wanted) < limit:
                seen = set(wanted)
                for other in self._waiting_names():
                    if other not in seen and other not in self._metadata and other not in self._absent \
                            and other not in self._invalid:
                        wanted.append(other)
                        seen.add(other)
                        if len(wanted) >= limit:
                            break
            canonical: dict[str, str] = {}
            for name in wanted:
                try:
                    canonical[name] = names_mod.normalize(name)
                except InvalidMetricName as exc:
                    self._invalid[name] = str(exc)
            if not canonical:
                return
            self._stats.increment("lookups")
            try:
                found = with_retries(
                    lambda: self._accessor().get_metrics(list(dict.fromkeys(canonical.values())), canonical=True),
                    f"lookup of {len(canonical)} metrics", self._options, self._stats,
                )
            except GaveUp as exc:
                log.msg(f"biggraphite_like: {exc}; carbon will create {list(canonical)[:3]}... with its"
                        " storage rules, which the store ignores for metrics it already has")
                return
            if len(self._absent) > MAX_ABSENT:
                self._absent.clear()
            for name, normalized in canonical.items():
                metric = found.get(normalized)
                if metric is None:
                    self._absent.add(name)
                else:
                    self.set(name, metric.metadata)
