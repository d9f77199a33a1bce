"""`bgl delete`: remove the metrics a glob matches, their points, and directories left empty.

Without `recursive`, only metrics matching the glob go (a glob that matches directories
says so and leaves what is beneath them). With it, everything beneath the matching
directories goes too (`GLOB` and `GLOB.**`). A deleted metric written again starts empty:
stores give it new storage, so old points never come back. Directories left empty are
removed with the cleanup's race protocol (`directories`).
"""
from __future__ import annotations

import dataclasses
import time

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.maintenance.directories import prune_empty_directories

MAX_DELETE = 10_000_000  # names a delete may gather (far above the glob limit of interactive reads)
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


def delete(accessor: Accessor, pattern: str, recursive: bool = False, dry_run: bool = False) -> DeleteReport:
    """Delete what pattern matches (see module docstring); dry_run only lists it."""
    started = time.monotonic()
    store = accessor.store
    glob = accessor.glob(pattern)  # InvalidGlob / GlobTooComplex on a bad pattern
    report = DeleteReport()
    metrics = set(store.glob_metrics(glob, MAX_DELETE))
    directories = store.glob_directories(glob, MAX_DELETE)
    if recursive and directories:
        beneath = accessor.glob(pattern.rstrip(".") + ".**")
        metrics.update(store.glob_metrics(beneath, MAX_DELETE))
        directories = sorted(set(directories) | set(store.glob_directories(beneath, MAX_DELETE)))
    report.metrics = sorted(metrics)
    report.matched_directories = directories
    if dry_run:
        report.duration_seconds = round(time.monotonic() - started, 3)
        return report
    for start in range(0, len(report.metrics), BATCH):
        accessor.delete_metrics(report.metrics[start:start + BATCH])
    candidates = {names_mod.parent(n) for n in report.metrics} - {""}
    if recursive:
        candidates.update(directories)
    pruned = prune_empty_directories(accessor, candidates)
    report.directories_removed, report.directories_restored = pruned.removed, pruned.restored
    report.duration_seconds = round(time.monotonic() - started, 3)
    return report
