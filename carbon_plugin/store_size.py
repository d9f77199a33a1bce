"""The store's size on disk, recorded as a gauge among the plugin's self-metrics.

Every CARBON_METRIC_INTERVAL the plugin records `biggraphite_like.storeBytes`: for SQLite
the bytes of the database file and its write-ahead log (`-wal`), by `os.stat` (cheap,
unlike the store's `stats()`, which counts rows and reads dbstat). Cassandra keeps its
size on its own nodes (`nodetool tablestats`): nothing is recorded there.
"""
from __future__ import annotations

import os

from biggraphite_like.stores.base import Store

GAUGE = "storeBytes"


def measurable(store_url: str) -> bool:
    """Whether store_bytes can know the size (checked first, so that asking never opens a
    connection to a remote store from carbon's reactor thread)."""
    return store_url.startswith("sqlite:")


def store_bytes(store: Store) -> int | None:
    """Bytes the store occupies on this machine's disk; None when unknown (not SQLite)."""
    from biggraphite_like.stores.sqlite import SQLiteStore

    if not isinstance(store, SQLiteStore):
        return None
    total = 0
    for path in (store.path, store.path + "-wal"):
        try:
            total += os.stat(path).st_size
        except FileNotFoundError:
            pass
    return total
