"""Options every maintenance job shares (sharding, parallelism), checked the same way."""
from __future__ import annotations

from biggraphite_like.errors import BglError


class InvalidMaintenanceOption(BglError, ValueError):
    """A maintenance job was given an option it cannot work with (shards, ages, jobs)."""


def check_shard(shard: int, nshards: int) -> None:
    """Shard k of n: the store scans of shard k, for 0 <= k < n, see every row once."""
    if nshards < 1 or not 0 <= shard < nshards:
        raise InvalidMaintenanceOption(f"--shard {shard} --nshards {nshards}: need nshards >= 1 and 0 <= shard < nshards")


def check_jobs(jobs: int) -> None:
    if jobs < 1:
        raise InvalidMaintenanceOption(f"--jobs {jobs}: need at least one job")
