"""Opening a store from its URL (`sqlite:///path.db`, `cassandra://host1,host2:9042/keyspace?...`).

Store modules are imported only when their scheme is used: the SQLite path works without
the Cassandra driver installed.
"""
from __future__ import annotations

from biggraphite_like.errors import InvalidStoreURL, MissingDependency
from biggraphite_like.stores.base import Store


def open_store(url: str) -> Store:
    """The store a URL names; InvalidStoreURL for anything else."""
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme == "sqlite":
        from biggraphite_like.stores.sqlite import SQLiteStore

        return SQLiteStore.from_url(url)
    if scheme == "cassandra":
        from biggraphite_like.stores.cassandra.options import parse_url

        options = parse_url(url)  # URL errors do not need the driver
        try:
            import cassandra  # noqa: F401  (the DataStax driver, an optional extra)
        except ImportError as exc:
            raise MissingDependency(
                f"the cassandra store needs the cassandra-driver package ({exc}):"
                " pip install 'biggraphite_like[cassandra]'"
            ) from None
        from biggraphite_like.stores.cassandra import CassandraStore

        return CassandraStore(options, url)
    raise InvalidStoreURL(
        f"unknown store URL {url!r}: expected sqlite:///path/to/file.db or cassandra://host1,host2:9042/keyspace"
    )
