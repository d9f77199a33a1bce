"""One store per index mode on a real node, created once and emptied between tests.

Real Cassandra takes 20-45 s to create a store's schema (two keyspaces, 130 SASI or SAI
indexes), so each mode's keyspaces are created on first use and every test starts from
emptied tables instead of fresh keyspaces. A table with a few partitions has them deleted
(a few ms); one with more, or with many tombstones since its last TRUNCATE, is truncated
(0.1-0.5 s: a flush; auto_snapshot is off). store_settings is kept: it records the index mode.
"""
from __future__ import annotations

import time

from tests.cassandra_node.node import CassandraNode, progress

MODES = ("sasi", "sai")
KEPT_TABLES = ("store_settings",)
TRUNCATE_TIMEOUT = 120.0
DELETE_AT_MOST = 300  # partitions a table may have to be emptied by DELETEs rather than TRUNCATE
TOMBSTONES_AT_MOST = 3000  # partition tombstones a table may gather before it is truncated instead


class RealKeyspaces:
    """The node's stores `real_sasi` and `real_sai` (keyspace and `_metadata`)."""

    def __init__(self, node: CassandraNode):
        self.node = node
        self.created: dict[str, float] = {}  # mode -> seconds its syncdb took
        self.truncate_seconds = 0.0
        self.truncations = 0
        self.deletions = 0
        self._tombstones: dict[str, int] = {}  # table -> partitions deleted since its last TRUNCATE
        self._keys: dict[str, tuple[str, ...]] = {}  # table -> its partition key columns
        self._cluster = None
        self._session = None

    @staticmethod
    def keyspace(mode: str) -> str:
        return f"real_{mode}"

    def url(self, mode: str) -> str:
        """The store URL (no options: tests append theirs) of this mode's emptied store."""
        url = f"cassandra://{self.node.address}/{self.keyspace(mode)}"
        if mode not in self.created:
            self._create(mode, url)
        else:
            self.empty(mode)
        return url

    @property
    def session(self):
        """A driver session on the node (for TRUNCATE and for tests' hand edits)."""
        if self._session is None:
            from cassandra.cluster import Cluster

            host, port = self.node.config.address, self.node.config.native_port
            self._cluster = Cluster([host], port=port, protocol_version=4)
            self._session = self._cluster.connect()
        return self._session

    def _create(self, mode: str, url: str) -> None:
        from biggraphite_like.accessor import Accessor

        started = time.monotonic()
        progress(f"creating the {mode.upper()} store {self.keyspace(mode)} (schema DDL, once per session)")
        accessor = Accessor.from_url(f"{url}?index={mode}")
        try:
            accessor.syncdb()
        finally:
            accessor.close()
        self.created[mode] = time.monotonic() - started
        progress(f"{self.keyspace(mode)} created in {self.created[mode]:.0f} s")

    def empty(self, mode: str) -> None:
        """Empties every table of the mode's two keyspaces but store_settings."""
        started = time.monotonic()
        session = self.session
        for keyspace in (self.keyspace(mode), f"{self.keyspace(mode)}_metadata"):
            tables = session.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
                                     (keyspace,))
            for (table,) in tables:
                if table not in KEPT_TABLES:
                    self._empty_table(f"{keyspace}.{table}")
        session.execute(f"DELETE FROM {self.keyspace(mode)}_metadata.store_settings WHERE name = 'deletions'")
        self.truncate_seconds += time.monotonic() - started

    def _partition_key(self, table: str) -> tuple[str, ...]:
        if table not in self._keys:
            keyspace, name = table.split(".")
            rows = self.session.execute(
                "SELECT column_name, kind, position FROM system_schema.columns"
                " WHERE keyspace_name = %s AND table_name = %s", (keyspace, name))
            self._keys[table] = tuple(r[0] for r in sorted((r for r in rows if r[1] == "partition_key"), key=lambda r: r[2]))
        return self._keys[table]

    def _empty_table(self, table: str) -> None:
        from cassandra.concurrent import execute_concurrent_with_args

        session, key = self.session, self._partition_key(table)
        columns = ", ".join(key)
        partitions = list(session.execute(f"SELECT DISTINCT {columns} FROM {table} LIMIT {DELETE_AT_MOST + 1}"))
        if not partitions:
            return
        tombstones = self._tombstones.get(table, 0) + len(partitions)
        if len(partitions) > DELETE_AT_MOST or tombstones > TOMBSTONES_AT_MOST:
            session.execute(f"TRUNCATE {table}", timeout=TRUNCATE_TIMEOUT)
            self.truncations += 1
            self._tombstones[table] = 0
            return
        where = " AND ".join(f"{c} = ?" for c in key)
        delete = session.prepare(f"DELETE FROM {table} WHERE {where}")
        execute_concurrent_with_args(session, delete, [tuple(row) for row in partitions], concurrency=32,
                                     raise_on_first_error=True)
        self.deletions += len(partitions)
        self._tombstones[table] = tombstones

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = self._session = None
