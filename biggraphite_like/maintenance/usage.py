"""`bgl du` and `bgl stats`: how much the store holds, and what an operator can act on.

`du` answers like `du` over a whisper tree: for each metric or directory a glob matches,
the metrics beneath it, the points their retentions can hold (capacity, whatever is
written yet) and the bytes whisper files of those retentions would take (16 bytes of
header, 12 per archive, 12 per point): the size the data would have on whisper, and an
upper bound of what it costs here before compression. What the store takes on disk is
measured for the whole store and per table with its indexes, a stage table per stage
(`store_disk_usage`; SQLite: dbstat, Cassandra: system_views.disk_usage): SQLite keeps
many metrics in a page and Cassandra spreads them over SSTables, so a per-metric figure
would be a guess.
Each row also counts the tagged series among its metrics; the tag index's own counts
(series, tags, tag=value pairs) are the whole store's (`TagIndex.counts`).

`stats` adds to the store's own facts (`Store.stats()`) the counts found by scanning:
metrics, metric rows whose metadata cannot be read, directories, metrics by time since
their last write (stale buckets), by retention and by aggregation method.
"""
from __future__ import annotations

import collections
import dataclasses
import time
from typing import TextIO

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.maintenance.progress import LOG_INTERVAL, Progress
from biggraphite_like.metric import Metric
from biggraphite_like.retention import Retention
from biggraphite_like.tags.series import is_tagged

MAX_NAMES = 10_000_000  # names `du` may gather (above the interactive glob limit)
WHISPER_HEADER_BYTES = 16
WHISPER_ARCHIVE_INFO_BYTES = 12
WHISPER_POINT_BYTES = 12
# (label, upper bound in seconds) of the buckets of time since a metric's last write
AGE_BUCKETS = [("<1h", 3600), ("1h-1d", 86400), ("1d-7d", 7 * 86400), ("7d-30d", 30 * 86400),
               ("30d-1y", 365 * 86400), (">=1y", None)]


def capacity(retention: Retention) -> int:
    """Points a metric of this retention can hold."""
    return sum(stage.points for stage in retention.stages)


def whisper_bytes(retention: Retention) -> int:
    """Size of a whisper file of this retention."""
    stages = retention.stages
    return WHISPER_HEADER_BYTES + WHISPER_ARCHIVE_INFO_BYTES * len(stages) + WHISPER_POINT_BYTES * capacity(retention)


@dataclasses.dataclass
class Usage:
    name: str
    kind: str  # "metric" or "directory"
    metrics: int = 0
    points: int = 0
    bytes: int = 0
    tagged: int = 0  # of the metrics, the Graphite tagged series (`name;tag=value`)

    def add(self, metric: Metric) -> None:
        self.metrics += 1
        self.points += capacity(metric.retention)
        self.bytes += whisper_bytes(metric.retention)
        self.tagged += is_tagged(metric.name)


def disk_usage(accessor: Accessor, pattern: str = "*",
               progress_stream: TextIO | None = None) -> tuple[list[Usage], Usage]:
    """Usage of every metric and directory matching pattern (sorted), and their total.

    A metric counts once in the total even when it lies beneath several matches.
    Progress (metrics whose metadata was read) goes to progress_stream (default stderr).
    """
    store = accessor.store
    glob = accessor.glob(pattern)
    metric_names = store.glob_metrics(glob, MAX_NAMES)
    directory_names = store.glob_directories(glob, MAX_NAMES)
    directories = {n: Usage(n, "directory") for n in directory_names}
    beneath = store.glob_metrics(accessor.glob(pattern.rstrip(".") + ".**"), MAX_NAMES) if directories else []
    wanted = sorted(set(metric_names) | set(beneath))
    total = Usage("total", "total")
    metric_rows = {n: Usage(n, "metric") for n in metric_names}
    progress = Progress("bgl du: metrics", len(wanted), progress_stream, log_interval=LOG_INTERVAL)
    for start in range(0, len(wanted), 1000):
        for name, metric in store.get_metrics(wanted[start:start + 1000]).items():
            total.add(metric)
            if name in metric_rows:
                metric_rows[name].add(metric)
            for ancestor in names_mod.ancestors(name):
                if ancestor in directories:
                    directories[ancestor].add(metric)
        progress.advance(len(wanted[start:start + 1000]))
    progress.close()
    result = sorted([*metric_rows.values(), *directories.values()], key=lambda u: (u.name, u.kind))
    return result, total


@dataclasses.dataclass
class DiskUsage:
    """Bytes the whole store takes on disk (None: this store cannot measure it), what the
    figure covers, its parts where the store can tell (points, metadata, free: name -> bytes),
    and the bytes of each table with its indexes (stage tables: one per stage)."""

    bytes: int | None
    what: str
    parts: dict[str, int] = dataclasses.field(default_factory=dict)
    tables: dict[str, int] = dataclasses.field(default_factory=dict)
    tables_note: str | None = None  # why there are no per-table figures, when there are none


_TABLE_PREFIX = "disk_bytes.table."


def store_disk_usage(accessor: Accessor) -> DiskUsage:
    """The store's own size on disk, from its facts (`Store.stats`: `disk_bytes.*`)."""
    facts = accessor.store.stats()
    tables = {key[len(_TABLE_PREFIX):]: value for key, value in facts.items()
              if key.startswith(_TABLE_PREFIX) and isinstance(value, int)}
    note = facts.get("disk_bytes.tables") if isinstance(facts.get("disk_bytes.tables"), str) else None
    parts = {key.split(".", 1)[1]: value for key, value in facts.items()
             if key in ("disk_bytes.points", "disk_bytes.metadata", "disk_bytes.free")}
    if isinstance(facts.get("file_bytes"), int):
        return DiskUsage(facts["file_bytes"], "the whole store: SQLite file and its WAL, every metric included",
                         parts, tables, note)
    if facts.get("store") == "cassandra":
        if isinstance(facts.get("disk_bytes.nodes"), int):
            return DiskUsage(sum(tables.values()), f"SSTables of the store's tables on the {facts['disk_bytes.nodes']}"
                             " node(s) that answered system_views.disk_usage (whole MiB per table and node, every"
                             " replica counted, unflushed memtables not)", parts, tables)
        return DiskUsage(None, "unknown: see `nodetool tablestats` on each node (Space used)", tables_note=note)
    return DiskUsage(None, "unknown: this store does not report its size")


def statistics(accessor: Accessor, now: int | None = None, progress_stream: TextIO | None = None) -> dict:
    """The store's facts plus counts from a full scan (see module docstring)."""
    now = int(time.time()) if now is None else now
    facts = dict(accessor.store.stats())
    ages = collections.Counter({label: 0 for label, _ in AGE_BUCKETS})
    retentions: collections.Counter = collections.Counter()
    aggregators: collections.Counter = collections.Counter()
    metrics = points = unreadable = 0
    total = facts.get("metrics") if isinstance(facts.get("metrics"), int) else None
    progress = Progress("stats: metrics", total, progress_stream)
    for page in accessor.scan_metrics():
        for metric in page.items:
            metrics += 1
            points += capacity(metric.retention)
            retentions[str(metric.retention)] += 1
            aggregators[metric.metadata.aggregator.value] += 1
            age = now - metric.updated_on
            ages[next(label for label, bound in AGE_BUCKETS if bound is None or age < bound)] += 1
        unreadable += len(page.unreadable)
        progress.advance(len(page.items) + len(page.unreadable))
    progress.close()
    directories = sum(len(page.items) for page in accessor.scan_directories())
    return {
        "store": facts,
        "metrics": metrics,
        "metrics_unreadable": unreadable,  # metadata cannot be read: `bgl repair` removes them
        "directories": directories,
        "points_capacity": points,
        "metrics_by_time_since_update": dict(ages),
        "metrics_by_retention": dict(retentions.most_common()),
        "metrics_by_aggregation": dict(aggregators.most_common()),
        **accessor.tags.index.counts(),  # tagged_series, tags, tag_values
    }
