"""`bgl repair`: make the metadata tables consistent again, and say what changed.

What "consistent" means for our schema, and what repair does about each breach:

1. Every ancestor of a metric is a directory. A missing one (a crash between writes on a
   store without transactions, a cleanup by an older version without the race protocol,
   rows edited by hand) hides the metric from globs: repair re-creates it.
2. Every directory's parent is a directory. A directory whose parent is missing is
   re-created with its ancestors when a metric lives beneath it (rule 1), and otherwise
   left to `bgl clean`, which removes empty directories.
3. Every directory name is a valid, normalised metric name (`names.normalize` returns it
   unchanged). Any other row can only come from outside this code (hand edits, another
   tool), matches no glob as expected, and can hold nothing: repair deletes it.
4. Every metric name is valid and normalised. A metric row with a bad name cannot be
   written to or read by name: repair deletes it with its points.
5. Every metric row has readable metadata (retention, aggregation, xFilesFactor). A row
   that has not (a hand edit, a foreign tool, a partial row left by an update racing a
   deletion) is treated as missing by reads and writes (logged each time): repair
   deletes it with whatever points it has. No metadata is guessed in its place.

6. Every tagged metric (`name;tag=value`) is in the tag index, every indexed series has
   its postings, every posting has its series, and the counts per tag value are those of
   the postings: repair indexes what is missing, removes postings without series and
   recounts (biggraphite_like.tags.index.TagIndex.repair; the index part runs in shard 0).

Work is sharded like the store scans; `dry_run` only counts.
"""
from __future__ import annotations

import dataclasses
import time
from typing import TextIO

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import InvalidMetricName
from biggraphite_like.maintenance.progress import Progress, show_total
from biggraphite_like.stores.base import check_shard
from biggraphite_like.tags.series import is_tagged

PAGE_SIZE = 1000
MAX_LISTED = 20  # names listed per kind of change in the report


@dataclasses.dataclass
class RepairReport:
    metrics_scanned: int = 0
    directories_scanned: int = 0
    directories_created: int = 0
    directories_invalid_removed: int = 0
    metrics_invalid_removed: int = 0
    metrics_unreadable_removed: int = 0
    tagged_metrics_indexed: int = 0
    tag_postings_without_series_removed: int = 0
    tag_series_without_postings_fixed: int = 0
    tag_counts_fixed: int = 0
    duration_seconds: float = 0.0
    examples: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def counters(self) -> dict[str, int | float]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "examples"}

    def note(self, kind: str, names: list[str]) -> None:
        listed = self.examples.setdefault(kind, [])
        listed.extend(names[: MAX_LISTED - len(listed)])


def _is_valid(name: str) -> bool:
    try:
        return names_mod.normalize(name) == name
    except InvalidMetricName:
        return False


def repair(accessor: Accessor, shard: int = 0, nshards: int = 1, dry_run: bool = False,
           progress_stream: TextIO | None = None, page_size: int = PAGE_SIZE) -> RepairReport:
    """Repair one shard of the store (see module docstring)."""
    check_shard(shard, nshards)
    started = time.monotonic()
    store = accessor.store
    report = RepairReport()

    progress = Progress("repair: metrics", stream=progress_stream)
    show_total(progress, accessor.store, "metrics", nshards)
    for page in accessor.scan_metrics(shard, nshards, page_size=page_size):
        report.metrics_scanned += len(page.items) + len(page.unreadable)
        invalid = [m.name for m in page.items if not _is_valid(m.name)]
        if invalid:
            report.metrics_invalid_removed += len(invalid)
            report.note("invalid metric names removed", invalid)
        unreadable = sorted(page.unreadable)
        if unreadable:
            report.metrics_unreadable_removed += len(unreadable)
            report.note("metrics with unreadable metadata removed",
                        [f"{n}: {page.unreadable[n]}" for n in unreadable])
        if not dry_run and (invalid or unreadable):
            store.delete_metrics(invalid + unreadable)
        wanted = sorted({a for m in page.items if m.name not in invalid for a in names_mod.ancestors(m.name)})
        missing = sorted(set(wanted) - store.existing_directories(wanted)) if wanted else []
        if missing:
            report.directories_created += len(missing)
            report.note("missing directories created", missing)
            if not dry_run:
                accessor.create_directories(missing)
        _index_tagged(accessor, [m.name for m in page.items if is_tagged(m.name) and m.name not in invalid], report,
                      dry_run)
        progress.advance(len(page.items) + len(page.unreadable))
    progress.close()

    progress = Progress("repair: directories", stream=progress_stream)
    show_total(progress, accessor.store, "directories", nshards)
    for page in accessor.scan_directories(shard, nshards, page_size=page_size):
        report.directories_scanned += len(page.items)
        invalid = [d for d in page.items if not _is_valid(d)]
        if invalid:
            report.directories_invalid_removed += len(invalid)
            report.note("invalid directory names removed", invalid)
            if not dry_run:
                store.delete_directories(invalid)
        progress.advance(len(page.items))
    progress.close()
    if shard == 0:
        found = accessor.tags.index.repair(dry_run)
        report.tag_postings_without_series_removed = found["postings_without_series"]
        report.tag_series_without_postings_fixed = found["series_without_postings"]
        report.tag_counts_fixed = found["counts_fixed"]
    report.duration_seconds = round(time.monotonic() - started, 3)
    return report


def _index_tagged(accessor: Accessor, tagged: list[str], report: RepairReport, dry_run: bool) -> None:
    """Index the tagged metrics of a page that the tag index lacks (rule 6)."""
    if not tagged:
        return
    missing = sorted(set(tagged) - set(accessor.tags.index.series_times(tagged)))
    if missing:
        report.tagged_metrics_indexed += len(missing)
        report.note("tagged metrics indexed", missing)
        if not dry_run:
            accessor.tags.tag_series(missing)
