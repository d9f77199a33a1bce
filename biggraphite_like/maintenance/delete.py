"""`bgl delete`: remove the metrics a glob matches, their points, and directories left empty.

Without `recursive`, only metrics matching the glob go (a glob that matches directories
says so and leaves what is beneath them). With it, everything beneath the matching
directories goes too (`GLOB` and `GLOB.**`). A deleted metric written again starts empty:
stores give it new storage, so old points never come back. Directories left empty are
removed with the cleanup's race protocol (`directories`).

With `exact`, the pattern is a name, not a glob: only the metric of that very name goes
(and, recursive, what is beneath the directory of that very name), even when the name
holds glob characters such as `*`, `{a,b}` or `[x]` (see `subtree`).
"""
from __future__ import annotations

import dataclasses
import time
from typing import TextIO

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.maintenance.directories import prune_empty_directories
from biggraphite_like.maintenance.progress import LOG_INTERVAL, Progress
from biggraphite_like.maintenance.subtree import MAX_NAMES as MAX_DELETE
from biggraphite_like.maintenance.subtree import subtree
BATCH = 1000


@dataclasses.dataclass
class DeleteReport:
    metrics: list[str] = dataclasses.field(default_factory=list)  # deleted (or that would be)
    matched_directories: list[str] = dataclasses.field(default_factory=list)
    directories_removed: int = 0
    directories_restored: int = 0
    duration_seconds: float = 0.0

    def counters(self) -> dict[str, int | float]:
        return {
            "metrics_removed": len(self.metrics),
            "directories_matched": len(self.matched_directories),
            "directories_removed": self.directories_removed,
            "directories_restored": self.directories_restored,
            "duration_seconds": self.duration_seconds,
        }


def delete(accessor: Accessor, pattern: str, recursive: bool = False, dry_run: bool = False,
           exact: bool = False, progress_stream: TextIO | None = None) -> DeleteReport:
    """Delete what pattern matches (or, exact, the name it is: see module docstring);
    dry_run only lists it. Progress (metrics deleted) goes to progress_stream (default stderr)."""
    started = time.monotonic()
    store = accessor.store
    report = DeleteReport()
    if exact:
        found = subtree(accessor, pattern, recursive)
        metrics = set(found.metrics)
        directories = sorted(([found.root] if found.is_directory else []) + found.directories_beneath)
    else:
        glob = accessor.glob(pattern)  # InvalidGlob / GlobTooComplex on a bad pattern
        metrics = set(store.glob_metrics(glob, MAX_DELETE))
        directories = store.glob_directories(glob, MAX_DELETE)
        if recursive and directories:
            # GLOB.** can match more than what lies beneath GLOB's directories (`a.{,b}`
            # matches `a.b` only, `a.{,b}.**` all of `a`): keep names under a matched one
            beneath = accessor.glob(pattern.rstrip(".") + ".**")
            matched = set(directories)
            metrics.update(n for n in store.glob_metrics(beneath, MAX_DELETE) if _under(n, matched))
            directories = sorted(matched | {n for n in store.glob_directories(beneath, MAX_DELETE) if _under(n, matched)})
    report.metrics = sorted(metrics)
    report.matched_directories = directories
    if dry_run:
        report.duration_seconds = round(time.monotonic() - started, 3)
        return report
    report.directories_removed, report.directories_restored = remove_metrics(
        accessor, report.metrics, directories if recursive else [], metrics_progress("bgl delete", progress_stream))
    report.duration_seconds = round(time.monotonic() - started, 3)
    return report


def _under(name: str, directories: set[str]) -> bool:
    """Whether one of name's ancestors is in directories."""
    return any(ancestor in directories for ancestor in names_mod.ancestors(name))


def metrics_progress(job: str, stream: TextIO | None, total: int | None = None) -> Progress:
    """The progress of a job over metrics (a bar on a terminal, else a line every LOG_INTERVAL)."""
    return Progress(f"{job}: metrics", total, stream, log_interval=LOG_INTERVAL)


def remove_metrics(accessor: Accessor, metrics: list[str], directories: list[str],
                   progress: Progress | None = None) -> tuple[int, int]:
    """Delete these metrics (progress counting them), then those of their parents and of
    directories left empty; returns (directories removed, directories restored by a
    concurrent creation)."""
    progress = progress or Progress("", enabled=False)
    progress.total = len(metrics)
    for start in range(0, len(metrics), BATCH):
        part = metrics[start:start + BATCH]
        accessor.delete_metrics(part)
        progress.advance(len(part))
    progress.close()
    candidates = ({names_mod.parent(n) for n in metrics} | set(directories)) - {""}
    pruned = prune_empty_directories(accessor, candidates)
    return pruned.removed, pruned.restored
