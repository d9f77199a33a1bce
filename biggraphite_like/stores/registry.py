"""Opening a store from its URL (`sqlite:///path.db`, `cassandra://host1,host2:9042/keyspace?...`),
and which URL: the one given (`--store`), else $BGL_STORE, else the default SQLite file
(`store_url`; what `bgl` and the receiver open, a password in $BGL_STORE never in `ps`).

Store modules are imported only when their scheme is used: the SQLite path works without
the Cassandra driver installed.
"""
from __future__ import annotations

import os

from biggraphite_like import settings
from biggraphite_like.errors import InvalidStoreURL, MissingDependency
from biggraphite_like.stores.base import Store

STORE_URL_HELP = (f"store URL (default: ${settings.STORE_ENV}, else sqlite://<data dir>/{settings.DB_FILE_NAME};"
                  f" data dir: ${settings.DATA_DIR_ENV} or ~/.local/share/biggraphite_like)")


def store_url(given: str | None = None) -> str:
    """The URL given, else $BGL_STORE, else the default SQLite store (its data directory is
    created, so that a first `bgl syncdb` or `bgl receive` can make the file)."""
    url = given or settings.default_store_url()
    if url == f"sqlite://{os.path.join(settings.default_data_dir(), settings.DB_FILE_NAME)}":
        os.makedirs(settings.default_data_dir(), exist_ok=True)
    return url


def missing_store_message(given: str | None = None) -> str | None:
    """When the SQLite store to open does not exist: where that path came from and how to
    point bgl at the right store (None when the file exists or is no SQLite file)."""
    url = given or settings.default_store_url()
    if not url.startswith("sqlite://"):
        return None
    path = os.path.abspath(url.split("?", 1)[0].removeprefix("sqlite://"))
    if os.path.exists(path):
        return None
    if given:
        source = "given with --store"
    elif os.environ.get(settings.STORE_ENV):
        source = f"from ${settings.STORE_ENV}"
    elif os.environ.get(settings.DATA_DIR_ENV):
        source = f"the default store of the data directory ${settings.DATA_DIR_ENV}"
    elif os.environ.get("XDG_DATA_HOME"):
        source = "the default store, in $XDG_DATA_HOME/biggraphite_like ($BGL_DATA_DIR is not set)"
    else:
        source = "the default store, in ~/.local/share/biggraphite_like ($BGL_DATA_DIR and $XDG_DATA_HOME are not set)"
    return (f"no store at {path} ({source}). Point bgl at yours: --store sqlite:///PATH/bgl.db (or ${settings.STORE_ENV}),"
            f" or ${settings.DATA_DIR_ENV}=DIR for DIR/bgl.db (what `bgl run --data-dir DIR` uses);"
            " `bgl syncdb` creates an empty store there")


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
