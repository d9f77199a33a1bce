"""The Cassandra store class, composed of its parts (imports the driver: see the package)."""
from __future__ import annotations


try:  # the driver is an optional dependency: the registry imports this package only for cassandra://
    import cassandra  # noqa: F401 - fail here, with the install hint, before the parts import it
except ImportError as _exc:  # pragma: no cover - exercised only without the driver
    raise ImportError(
        "the cassandra:// store needs the DataStax driver: pip install cassandra-driver"
        " (or this package's [cassandra] extra)") from _exc

from biggraphite_like.stores.base import Store  # noqa: E402
from biggraphite_like.stores.cassandra.connection import ConnectionMixin  # noqa: E402
from biggraphite_like.stores.cassandra.globs import GlobMixin  # noqa: E402
from biggraphite_like.stores.cassandra.metadata import MetadataMixin  # noqa: E402
from biggraphite_like.stores.cassandra.points import PointsMixin  # noqa: E402
from biggraphite_like.stores.cassandra.schema_sync import SchemaMixin  # noqa: E402
from biggraphite_like.stores.cassandra.sealing import SealingMixin  # noqa: E402


class CassandraStore(MetadataMixin, GlobMixin, PointsMixin, SealingMixin, SchemaMixin, ConnectionMixin, Store):
    """Metrics and points in two Cassandra keyspaces (see the package docstring)."""
