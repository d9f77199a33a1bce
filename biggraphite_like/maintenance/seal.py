"""`bgl seal`: encode past windows of points into compressed chunks (Cassandra).

A window (720 steps of a stage, at most the stage's points) whose end is more than
`grace` ago gets its per-point rows encoded into one chunk (biggraphite_like.chunks) and
the rows deleted; see stores/cassandra/sealing.py. Reads give the same points before and
after. A point written later into a sealed window is a per-point row again, read in place
of the chunk's, and sealed with the window at the next run. Run it from cron (hourly is
plenty); it is safe to stop at any time and to run again. SQLite seals its windows as it
writes: there the job has nothing to do.

Work is split like the other scans: shard k of n seals the metrics of its shard. Before
deleting anything the job announces its horizon and waits `settle` seconds, so reads that
started before the announcement (and do not look for chunks there yet) are over.
"""
from __future__ import annotations

import dataclasses
import time
from typing import TextIO

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import InvalidMaintenanceOption
from biggraphite_like.maintenance.progress import Progress, show_total
from biggraphite_like.stores.base import SealCounts, check_shard

PAGE_SIZE = 200
GRACE = 3600  # seconds after a window's end before it is sealed: late points (carbon's buffers)


@dataclasses.dataclass
class SealReport(SealCounts):
    """Counters of one `seal` run (also written to the Prometheus text file)."""

    metrics_scanned: int = 0
    duration_seconds: float = 0.0

    def counters(self) -> dict[str, int | float]:
        return dataclasses.asdict(self)


HELP = {
    "windows_sealed": "windows encoded into a chunk",
    "windows_resealed": "sealed windows encoded again with points written after their sealing",
    "points_sealed": "points in the chunks written",
    "rows_deleted": "per-point rows deleted after their window's chunk was written",
    "rows_past_retention": "per-point rows of windows past retention, left to their TTL",
    "metrics_scanned": "metrics looked at",
    "duration_seconds": "duration of the run",
}


def seal(
    accessor: Accessor,
    now: int | None = None,
    grace: int = GRACE,
    settle: float | None = None,
    shard: int = 0,
    nshards: int = 1,
    progress_stream: TextIO | None = None,
    page_size: int = PAGE_SIZE,
) -> SealReport:
    """Seal the windows ending before now - grace of one shard's metrics (see the module docstring).

    settle: seconds to wait after announcing a new horizon (None: the store's timeout,
    which bounds every read operation)."""
    check_shard(shard, nshards)
    if grace < 0:
        raise InvalidMaintenanceOption(f"grace {grace}s: a window can only be sealed once it has ended (grace >= 0)")
    started = time.monotonic()
    now = accessor.now() if now is None else now
    store = accessor.store
    horizon = now - grace
    report = SealReport()
    if store.announce_seal(horizon):
        wait = settle if settle is not None else getattr(getattr(store, "options", None), "timeout", 0)
        time.sleep(max(0.0, wait))
    progress = Progress("seal: metrics", stream=progress_stream)
    show_total(progress, store, "metrics", nshards)
    for page in accessor.scan_metrics(shard, nshards, page_size=page_size):
        report.metrics_scanned += len(page.items) + len(page.unreadable)
        if page.items:
            report.add(store.seal_points(page.items, horizon, now))
        progress.advance(len(page.items) + len(page.unreadable))
    progress.close()
    report.duration_seconds = round(time.monotonic() - started, 3)
    return report
