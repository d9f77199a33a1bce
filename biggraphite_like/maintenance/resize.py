"""`bgl set-metadata`: change the retention, aggregation or xFilesFactor of existing
metrics, and rewrite their points as whisper-resize.py does.

whisper-resize (its default path, without --aggregate) reads every archive of the old
file, coarsest first, with whisper.fetch(now - retention + secondsPerPoint, now), creates
a new file with the new archives, and writes what each read returned (its non-None
points) with one update_many per old archive, in that order: a point goes to the finest
new archive that keeps it, replaces what its slot held, and propagates to the coarser
ones with the new aggregation and xFilesFactor; points older than the new retention are
dropped. This module does the same with the store's reads and writes, whose semantics
are whisper's (a differential test compares both on the same points):

1. the metrics' points are read, one read per old stage, coarsest first;
2. the metrics are deleted and created again with the new metadata (and their old
   created/updated/read times): they hold no point, as whisper-resize's new file;
3. the points read are written back, one write per old stage, in the same order.

Each batch of metrics is one transaction: a crash leaves each metric either as it was or
fully rewritten, and running the command again finishes the job (metrics that already
have the asked metadata are left as they are). Only stores whose write batches are
transactions (SQLite) are supported. The job needs the store to itself: a writer that
keeps a metric's old metadata in its cache would write points the new retention cannot
read (see `exclusive`).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Iterator, Sequence, TextIO

import numpy as np

from biggraphite_like.accessor import Accessor
from biggraphite_like.aggregation import Aggregator
from biggraphite_like.errors import BglError, InvalidMaintenanceOption, MetricNotFound
from biggraphite_like.maintenance.exclusive import refuse_if_in_use
from biggraphite_like.maintenance.progress import LOG_INTERVAL, Progress
from biggraphite_like.maintenance.subtree import MAX_NAMES
from biggraphite_like.aggregation import parse_xfilesfactor
from biggraphite_like.metric import Metric, MetricMetadata
from biggraphite_like.receiver.rules import StorageRules
from biggraphite_like.retention import Retention

BATCH = 100  # metrics a transaction


class NothingToChange(InvalidMaintenanceOption):
    """set-metadata was given nothing to change (a usage error: exit status 2 in `bgl`)."""

    exit_status = 2


class ResizeUnsupported(BglError):
    """The store cannot rewrite a metric in one transaction (Cassandra)."""


@dataclasses.dataclass(frozen=True)
class MetadataChange:
    """What to change; None keeps the metric's own. `rules` (carbon's storage-schemas.conf
    and storage-aggregation.conf): each metric gets what they would give its name as a new
    metric, the retention when the schemas were given, the aggregation and xFilesFactor when
    the aggregation rules were; an explicit value wins over the rules."""

    retention: Retention | None = None
    aggregator: Aggregator | None = None
    xfilesfactor: float | None = None
    rules: StorageRules | None = None
    rules_retention: bool = False  # the rules' schemas were given
    rules_aggregation: bool = False  # the rules' aggregations were given

    @classmethod
    def parse(cls, retention: str | None, aggregation: str | None, xff: str | None,
              storage_schemas: str | None = None, storage_aggregation: str | None = None) -> "MetadataChange":
        if retention is None and aggregation is None and xff is None and not (storage_schemas or storage_aggregation):
            raise NothingToChange("give --retention, --aggregation, --xff, --storage-schemas or"
                                  " --storage-aggregation: what should change?")
        rules = StorageRules.load(storage_schemas, storage_aggregation) if storage_schemas or storage_aggregation \
            else None
        return cls(None if retention is None else Retention.parse(retention),
                   None if aggregation is None else Aggregator.parse(aggregation),
                   None if xff is None else parse_xfilesfactor(xff),
                   rules, bool(storage_schemas), bool(storage_aggregation))

    def applied_to(self, old: MetricMetadata, name: str) -> MetricMetadata:
        retention, aggregator, xff = old.retention, old.aggregator, old.xfilesfactor
        if self.rules is not None:
            wanted = self.rules.metadata_for(name)
            if self.rules_retention:
                retention = wanted.retention
            if self.rules_aggregation:
                aggregator, xff = wanted.aggregator, wanted.xfilesfactor
        return MetricMetadata(self.retention or retention, self.aggregator or aggregator,
                              xff if self.xfilesfactor is None else self.xfilesfactor)


@dataclasses.dataclass
class ResizeReport:
    changes: list[tuple[str, MetricMetadata, MetricMetadata]] = dataclasses.field(default_factory=list)
    unchanged: int = 0  # metrics that already had the asked metadata
    points_read: int = 0
    points_written: int = 0
    points_dropped: int = 0  # older than the new retention keeps (whisper-resize drops them too)
    duration_seconds: float = 0.0

    def counters(self, dry_run: bool = False) -> dict[str, int | float]:
        """The job's counters (a dry run reads no point: it has none of them)."""
        points = {} if dry_run else {"points_read": self.points_read, "points_written": self.points_written,
                                     "points_dropped": self.points_dropped}
        return {"metrics_changed": len(self.changes), "metrics_unchanged": self.unchanged, **points,
                "duration_seconds": self.duration_seconds}


def set_metadata(accessor: Accessor, pattern: str, change: MetadataChange, dry_run: bool = False,
                 now: int | None = None, progress_stream: TextIO | None = None, batch: int = BATCH) -> ResizeReport:
    """Apply `change` to every metric `pattern` (a glob) matches; see the module."""
    started = time.monotonic()
    store = accessor.store
    if not store.atomic_write_batch:
        raise ResizeUnsupported(
            "set-metadata rewrites each metric's points in one transaction; this store has none (Cassandra):"
            " nothing was changed")
    names = store.glob_metrics(accessor.glob(pattern), MAX_NAMES)
    if not names:
        raise MetricNotFound(f"no metric matches {pattern!r}: nothing to change")
    path = getattr(store, "path", None)
    if not dry_run and path is not None:
        refuse_if_in_use(path, "a writer keeps a metric's metadata in its cache for minutes and would write points"
                               " the new retention cannot read")
    report = ResizeReport()
    progress = Progress("bgl set-metadata: metrics", total=len(names), stream=progress_stream,
                        log_interval=LOG_INTERVAL)
    ttl, accessor.cache_ttl = accessor.cache_ttl, 0  # every lookup reads the metadata of the moment
    try:
        for start in range(0, len(names), batch):
            part = names[start:start + batch]
            with store.write_batch():
                metrics = accessor.get_metrics(part)
                changes = [(metric, change.applied_to(metric.metadata, metric.name)) for metric in metrics.values()]
                changes = [(metric, new) for metric, new in changes if new != metric.metadata]
                report.unchanged += len(metrics) - len(changes)
                report.changes += [(metric.name, metric.metadata, new) for metric, new in changes]
                if changes and not dry_run:
                    _rewrite(accessor, changes, accessor.now() if now is None else now, report)
            progress.advance(len(part))
    finally:
        accessor.cache_ttl = ttl
        progress.close()
    report.duration_seconds = round(time.monotonic() - started, 3)
    return report


def _rewrite(accessor: Accessor, changes: list[tuple[Metric, MetricMetadata]], now: int,
             report: ResizeReport) -> None:
    """whisper-resize's default path for these metrics, inside the caller's transaction."""
    reads = [list(_whisper_resize_reads(accessor, [m for m, _ in group], now))
             for group in _by_retention(changes)]
    store = accessor.store
    store.delete_metrics([metric.name for metric, _ in changes])
    store.create_metrics([Metric(metric.name, new, metric.created_on, metric.updated_on, metric.read_on)
                          for metric, new in changes])
    for group in reads:
        for names, owner, timestamps, values in group:  # one old stage, coarsest first
            report.points_read += len(owner)
            if len(owner):
                result = accessor.insert_columns(names, owner, timestamps, values, now=now)
                report.points_written += result.stored
                report.points_dropped += result.too_old


def _by_retention(changes: list[tuple[Metric, MetricMetadata]]) -> list[list[tuple[Metric, MetricMetadata]]]:
    groups: dict[Retention, list[tuple[Metric, MetricMetadata]]] = {}
    for metric, new in changes:
        groups.setdefault(metric.retention, []).append((metric, new))
    return list(groups.values())


def _whisper_resize_reads(accessor: Accessor, metrics: Sequence[Metric], now: int
                          ) -> Iterator[tuple[list[str], np.ndarray, np.ndarray, np.ndarray]]:
    """For each old stage, coarsest first: the points whisper.fetch(now - duration +
    precision, now) returns of the metrics (which share one retention), the Nones left out,
    as insert_columns takes them (names, owner, timestamps, values)."""
    names = [metric.name for metric in metrics]
    for stage in sorted(metrics[0].retention.stages, key=lambda s: s.precision, reverse=True):
        series = accessor.fetch(names, now - stage.duration + stage.precision, now, now)
        owners, stamps, values = [], [], []
        for index, name in enumerate(names):
            result = series.get(name)
            if result is None:
                continue
            known = np.flatnonzero(~np.isnan(result.values))
            owners.append(np.full(len(known), index, np.int64))
            stamps.append(result.start + known * result.step)
            values.append(result.values[known])
        if not owners:
            yield names, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
            continue
        yield names, np.concatenate(owners), np.concatenate(stamps).astype(np.float64), np.concatenate(values)
