"""`bgl copy` and `bgl rename`: a metric or a whole subtree under another name, with its
metadata and points (BigGraphite's `bgutil copy` / `bgutil rename`).

SRC and DST are exact names (never globs: see `subtree`). SRC.x.y becomes DST.x.y. Each
destination metric is created with the source's metadata (retention, aggregation,
xFilesFactor), then every stage's points that a read can still see (the last `duration`
of each stage, up to now) are read from the source and written to the destination, stage
by stage, through the store interface: the same code on every store. A destination that
already exists is refused (nothing is merged or overwritten silently).

The count of finer points behind an aggregated slot is not part of the store's read
interface: copies store 1, as a write does; values, which reads return, are exact.

`rename` is a copy followed by the deletion of the sources (their directories left empty
are removed): a crash in between leaves both names, never neither.
"""
from __future__ import annotations

import dataclasses
import time
from typing import TextIO

import numpy as np

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import InvalidMetricName, MetricNotFound
from biggraphite_like.maintenance.delete import metrics_progress, remove_metrics
from biggraphite_like.maintenance.subtree import subtree
from biggraphite_like.metric import Metric
from biggraphite_like.stores.base import StageTable

BATCH = 1000


class DestinationExists(InvalidMetricName):
    """A copy or rename would write into a metric that already exists."""


@dataclasses.dataclass
class CopyReport:
    pairs: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (source, destination)
    points_copied: int = 0
    sources_deleted: int = 0
    duration_seconds: float = 0.0

    def counters(self) -> dict[str, int | float]:
        return {
            "metrics_copied": len(self.pairs),
            "points_copied": self.points_copied,
            "sources_deleted": self.sources_deleted,
            "duration_seconds": self.duration_seconds,
        }


def plan(accessor: Accessor, source: str, destination: str) -> list[tuple[str, str]]:
    """(source metric, destination name) of everything SRC names; errors if nothing or clashes."""
    found = subtree(accessor, source)
    target = names_mod.normalize(destination)
    if not found.metrics:
        raise MetricNotFound(f"{found.root!r} is neither a metric nor a directory holding metrics")
    if target == found.root or target.startswith(found.root + names_mod.SEPARATOR):
        raise InvalidMetricName(f"destination {target!r} is {found.root!r} or beneath it: choose a name outside it")
    pairs = [(name, names_mod.normalize(target + name[len(found.root):])) for name in found.metrics]
    clashes = sorted(accessor.get_metrics([dst for _, dst in pairs]))
    if clashes:
        raise DestinationExists(
            f"{len(clashes)} destination metric(s) already exist, e.g. {clashes[0]!r}:"
            " delete them first or choose another destination"
        )
    return pairs


def _copy_points(accessor: Accessor, metrics: list[tuple[Metric, str]], now: int) -> int:
    """Copy what reads can see of every stage of the metrics to their destinations."""
    store = accessor.store
    groups: dict[StageTable, list[tuple[Metric, str]]] = {}
    for metric, target in metrics:
        for index in range(len(metric.retention.stages)):
            groups.setdefault(StageTable.of(metric, index), []).append((metric, target))
    copied = 0
    for table, group in groups.items():
        precision, oldest = table.stage.precision, now - table.stage.duration
        first, last = oldest - oldest % precision + precision, now - now % precision + precision
        reads = store.read_points(table, [m.name for m, _ in group], np.full(len(group), first, np.int64),
                                  np.full(len(group), last, np.int64))
        if len(reads.timestamps):
            targets = [target for _, target in group]
            store.write_points(table, [targets[i] for i in reads.request.tolist()], reads.timestamps, reads.values)
            copied += len(reads.timestamps)
    return copied


def copy(accessor: Accessor, source: str, destination: str, dry_run: bool = False, now: int | None = None,
         remove_source: bool = False, progress_stream: TextIO | None = None) -> CopyReport:
    """Copy SRC (a metric or a subtree) to DST; remove_source makes it a rename. Progress
    (metrics copied, then sources deleted) goes to progress_stream (default stderr)."""
    started = time.monotonic()
    now = int(time.time()) if now is None else now
    report = CopyReport(plan(accessor, source, destination))
    job = "bgl rename" if remove_source else "bgl copy"
    if not dry_run:
        progress = metrics_progress(job + " (copy)" if remove_source else job, progress_stream, len(report.pairs))
        for start in range(0, len(report.pairs), BATCH):
            batch = report.pairs[start:start + BATCH]
            sources = accessor.get_metrics([src for src, _ in batch])
            missing = [src for src, _ in batch if src not in sources]
            if missing:
                raise MetricNotFound(f"{missing[0]!r} was deleted while being copied; nothing of it was copied")
            with accessor.store.write_batch():
                accessor.create_metrics([(dst, sources[src].metadata) for src, dst in batch], now)
                report.points_copied += _copy_points(accessor, [(sources[src], dst) for src, dst in batch], now)
            progress.advance(len(batch))
        progress.close()
        if remove_source:  # only what was copied: a metric created meanwhile under SRC stays
            found = subtree(accessor, source)
            remove_metrics(accessor, [src for src, _ in report.pairs],
                           ([found.root] if found.is_directory else []) + found.directories_beneath,
                           metrics_progress(job + " (delete sources)", progress_stream))
            report.sources_deleted = len(report.pairs)
    elif remove_source:
        report.sources_deleted = len(report.pairs)
    report.duration_seconds = round(time.monotonic() - started, 3)
    return report


def rename(accessor: Accessor, source: str, destination: str, dry_run: bool = False,
           now: int | None = None, progress_stream: TextIO | None = None) -> CopyReport:
    """Move SRC (a metric or a subtree) to DST: copy, then delete the sources."""
    return copy(accessor, source, destination, dry_run=dry_run, now=now, remove_source=True,
                progress_stream=progress_stream)
