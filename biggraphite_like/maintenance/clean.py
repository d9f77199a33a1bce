"""`bgl clean`: remove stale metrics and their points, empty directories, expired points.

A metric is stale when no write can have reached it for `max_age` (without `max_age`:
for its whole retention, so no point it holds could still be read). The store only knows
`updated_on`, set at creation and refreshed by writes at most once per touch interval
(`Accessor.touch`, per writer process): a metric written a second ago may show an
`updated_on` almost one touch interval old. So the test is
`updated_on < now - age - touch_interval - CLOCK_MARGIN` (the margin covers clock skew
between writers and the cleaner and points buffered by carbon before they are written),
and a `max_age` shorter than the touch interval is refused: the store cannot tell ages
apart that finely. Stale metrics are read again just before they are deleted, in the
same write transaction as the deletion where the store has transactions (SQLite), so a
metric written since the scan stays. Directories are removed bottom-up when nothing is left
beneath them, with the race protocol of `directories` (a metric created meanwhile keeps
its parents). Points past their stage's retention are expired on stores without TTL.
Metric rows whose metadata cannot be read are counted and left alone (`bgl repair`
removes them): their age cannot be told.

Work is split like the store scans: shard k of n cleans the metrics and directories of
its shard (run the n shards in parallel, on several machines if need be); shard 0 also
expires points. A run's counters end up in a `CleanReport`.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence, TextIO

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import InvalidMaintenanceOption
from biggraphite_like.maintenance.directories import PruneResult, live_directories, prune_empty_directories
from biggraphite_like.maintenance.progress import Progress, show_total
from biggraphite_like.metric import Metric
from biggraphite_like.stores.base import check_shard

PAGE_SIZE = 1000
DELETE_CHUNK = 100  # stale metrics re-read and deleted in one write batch
CLOCK_MARGIN = 600  # seconds: clock skew between writers and the cleaner, carbon's buffering


@dataclasses.dataclass
class CleanReport:
    """Counters of one `clean` run (also written to the Prometheus text file)."""

    metrics_scanned: int = 0
    metrics_removed: int = 0
    metrics_unreadable: int = 0
    directories_scanned: int = 0
    directories_removed: int = 0
    directories_restored: int = 0
    points_expired: int = 0
    duration_seconds: float = 0.0

    def counters(self) -> dict[str, int | float]:
        return dataclasses.asdict(self)


HELP = {
    "metrics_scanned": "metrics looked at",
    "metrics_removed": "stale metrics removed with their points",
    "metrics_unreadable": "metric rows whose metadata cannot be read, left for bgl repair",
    "directories_scanned": "directories looked at",
    "directories_removed": "empty directories removed",
    "directories_restored": "directories removed then re-created because a metric appeared beneath",
    "points_expired": "points removed past their stage's retention",
    "duration_seconds": "duration of the run",
}


def check_max_age(max_age: int | None, touch_interval: int) -> None:
    """Refuse a max age the store cannot measure: updated_on is only refreshed every touch_interval."""
    if max_age is not None and max_age < touch_interval:
        raise InvalidMaintenanceOption(
            f"max age {max_age}s is shorter than the interval at which writers refresh a metric's updated_on"
            f" ({touch_interval}s): the store cannot tell a metric idle for {max_age}s from one written a second ago;"
            f" use at least {touch_interval}s (a metric goes once not written for max age plus up to"
            f" {touch_interval + CLOCK_MARGIN}s)"
        )


def clean(
    accessor: Accessor,
    max_age: int | None = None,
    now: int | None = None,
    shard: int = 0,
    nshards: int = 1,
    dry_run: bool = False,
    progress_stream: TextIO | None = None,
    page_size: int = PAGE_SIZE,
    race_hook: Callable[[Sequence[str]], None] | None = None,
) -> CleanReport:
    """Clean one shard of the store (see module docstring); dry_run changes nothing."""
    check_shard(shard, nshards)
    check_max_age(max_age, accessor.touch_interval)
    started = time.monotonic()
    now = accessor.now() if now is None else now
    report = CleanReport()
    store = accessor.store
    slack = accessor.touch_interval + CLOCK_MARGIN  # how far updated_on may lag the last write

    def is_stale(metric: Metric) -> bool:
        age = max_age if max_age is not None else metric.retention.duration
        return metric.updated_on < now - age - slack

    progress = Progress("clean: metrics", stream=progress_stream)
    show_total(progress, accessor.store, "metrics", nshards)
    emptied: set[str] = set()  # parents of the metrics removed: they may be left empty
    live: set[str] = set()  # dry run only: ancestors of the metrics that stay
    for page in accessor.scan_metrics(shard, nshards, page_size=page_size):
        report.metrics_scanned += len(page.items) + len(page.unreadable)
        report.metrics_unreadable += len(page.unreadable)
        stale = [m.name for m in page.items if is_stale(m)]
        if dry_run:
            live.update(live_directories([*(m.name for m in page.items if not is_stale(m)), *page.unreadable]))
        elif stale:
            # read again: a write since the scan refreshed updated_on (on SQLite the writer
            # lock is held from this read to the deletion: no write slips in between; the
            # chunks keep each such operation short, within a Cassandra store's timeout)
            confirmed = []
            for start in range(0, len(stale), DELETE_CHUNK):
                with store.write_batch():
                    chunk = [m.name for m in store.get_metrics(stale[start:start + DELETE_CHUNK]).values()
                             if is_stale(m)]
                    if chunk:
                        accessor.delete_metrics(chunk)
                confirmed += chunk
            stale = confirmed
        report.metrics_removed += len(stale)
        emptied.update(names_mod.parent(n) for n in stale)
        progress.advance(len(page.items) + len(page.unreadable))
    emptied.discard("")
    progress.close()

    if not dry_run and shard == 0:
        report.points_expired = accessor.expire(now)

    progress = Progress("clean: directories", stream=progress_stream)
    show_total(progress, accessor.store, "directories", nshards)
    if dry_run:
        if nshards > 1:  # directories of this shard may hold metrics of any shard
            live = live_directories(
                n for p in accessor.scan_metrics(page_size=page_size)
                for n in [*(m.name for m in p.items if not is_stale(m)), *p.unreadable])
        for page in accessor.scan_directories(shard, nshards, page_size=page_size):
            report.directories_scanned += len(page.items)
            report.directories_removed += sum(1 for d in page.items if d not in live)
            progress.advance(len(page.items))
    else:
        pruned = PruneResult()
        for page in accessor.scan_directories(shard, nshards, page_size=page_size):
            report.directories_scanned += len(page.items)
            pruned.add(prune_empty_directories(accessor, page.items, known_to_exist=True, race_hook=race_hook))
            progress.advance(len(page.items))
        # parents of the metrics this run removed may belong to another shard's directories
        pruned.add(prune_empty_directories(accessor, emptied, race_hook=race_hook))
        report.directories_removed, report.directories_restored = pruned.removed, pruned.restored
    progress.close()
    report.duration_seconds = round(time.monotonic() - started, 3)
    return report
