"""Opening a store from its URL (`sqlite:///path.db`, later `cassandra://...`)."""
from __future__ import annotations

from biggraphite_like.errors import InvalidStoreURL
from biggraphite_like.stores.base import Store


def open_store(url: str) -> Store:
    """The store a URL names; InvalidStoreURL for anything else."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme == "sqlite":
        from biggraphite_like.stores.sqlite import SQLiteStore

        return SQLiteStore.from_url(url)
    raise InvalidStoreURL(f"unknown store URL {url!r}: expected sqlite:///path/to/file.db")
