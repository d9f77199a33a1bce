"""The Cassandra store: metadata and datapoints on an Apache Cassandra cluster (3.11, 4.x, 5.0).

Modules: options (URL), connection, requests, schema (CQL) and schema_sync (syncdb),
metadata, glob_planner (plans) and globs (their execution), points, sealing (`bgl seal`:
past windows of per-point rows become compressed chunks), tags.

- One driver Session per process (protocol v4, token-aware and DC-aware routing), opened
  on first use and opened again in a forked child (carbon forks after loading plugins).
- Prepared statements everywhere; metadata statements use the metadata consistency levels,
  datapoint statements the data ones (URL options, see options.py).
- Requests run asynchronously, at most `max_concurrency` in flight; a failure raises an
  error saying what failed, against which hosts, within which timeout
  (requests.py).
- Schema and data layout: schema.py. Glob planning: glob_planner.py.

Deleting a metric writes a new *generation* for its name (metric_generations) before
removing its row. A metric's data id (the partition key of its points) is uuid5 of its
name, or of name and generation once it was deleted, so a metric written again starts
empty; the old partitions are no longer read and expire with their TTL. A deletion also
changes a marker that every process reads once per write batch and read snapshot, and
then forgets the data ids it cached (see `_check_deletions`).

`expire_points` returns 0: Cassandra expires points itself (TTL of each stage table).
"""
from __future__ import annotations
from __future__ import annotations

from typing import Any

_LAZY = {"CassandraStore": "store", "data_id": "connection", "token_range": "connection"}


def __getattr__(name: str) -> Any:
    """CassandraStore and friends, imported on first use so that `options` (URL parsing)
    works without the driver installed."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CassandraStore", "data_id", "token_range"]
