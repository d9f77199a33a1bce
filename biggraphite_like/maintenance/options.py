"""Options every maintenance job shares (parallelism), checked the same way (shards: stores.base.check_shard)."""
from __future__ import annotations

from biggraphite_like.errors import InvalidMaintenanceOption


def check_jobs(jobs: int) -> None:
    if jobs < 1:
        raise InvalidMaintenanceOption(f"--jobs {jobs}: need at least one job")
