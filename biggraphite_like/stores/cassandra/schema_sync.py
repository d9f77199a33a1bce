"""The Cassandra store's schema methods: syncdb (keyspaces, tables, the index mode chosen
and recorded once, the chunk table of every stage table there is), schema checks, stage
tables created on first use (their chunk tables by the first `bgl seal` that needs them)."""
from __future__ import annotations

import re

from cassandra import InvalidRequest, RequestValidationException
from cassandra.query import SimpleStatement

from biggraphite_like.errors import SchemaMissing, StoreError
from biggraphite_like.retention import Stage
from biggraphite_like.stores.base import StageTable
from biggraphite_like.stores.cassandra import schema
from biggraphite_like.stores.cassandra.connection import DDL_TIMEOUT
from biggraphite_like.stores.cassandra.requests import (
    CassandraRequestError,
    translate,
)
from biggraphite_like.stores.cassandra.tags import CassandraTagIndex


_STAGE_TABLE = re.compile(r"datapoints_(\d+)p_(\d+)s_(0|aggr)")


class SchemaMixin:
    """syncdb and the checks that the schema is there."""

    def schema_statements(self) -> list[str]:
        kind = self.options.index if self.options.index != "auto" else (self._index_kind or "sasi")
        return schema.schema_statements(self.options, kind)

    def syncdb(self) -> None:
        cluster = self._conn.cluster
        # one schema agreement wait and one metadata refresh at the end rather than after each
        # of the hundreds of statements
        cluster.schema_metadata_enabled = False
        agreement_wait = cluster.max_schema_agreement_wait
        try:
            self._syncdb()
        finally:
            cluster.schema_metadata_enabled = True
            cluster.max_schema_agreement_wait = agreement_wait
        try:
            cluster.refresh_schema_metadata(max_schema_agreement_wait=max(agreement_wait, self.options.timeout))
        except Exception:  # routing falls back to round robin until the next refresh: not an error
            pass

    def _syncdb(self) -> None:
        stored = self._stored_index_kind()
        kind = stored or (self.options.index if self.options.index != "auto" else "sasi")
        self._check_index_option(kind)
        statements = [s for s in schema.schema_statements(self.options, kind) if not schema.is_comment(s)]
        first_index = next(i for i, s in enumerate(statements) if "INDEX" in s)
        for statement in statements[:first_index]:
            self._ddl(statement)
        # The keyspaces and tables above were each awaited on every node (on a real multi-node
        # cluster the next statement's coordinator may otherwise not know them yet: "Keyspace ...
        # doesn't exist"); the indexes on them are not, one wait at the end of syncdb instead.
        self._conn.cluster.max_schema_agreement_wait = 0
        try:
            self._ddl(statements[first_index])
        except CassandraRequestError as exc:
            kind = self._index_fallback(kind, stored, exc)
            statements = [s for s in schema.schema_statements(self.options, kind) if not schema.is_comment(s)]
        for statement in statements[first_index:]:
            self._ddl(statement)
        self._index_kind = kind
        for table in self._existing_stage_tables():
            self._ddl(schema.chunk_table_cql(self.keyspace, table))

    def _existing_stage_tables(self) -> list[StageTable]:
        """The stage tables of the data keyspace (from system_schema)."""
        rows = self._execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?", [self.keyspace],
                             "metadata_read", "list the stage tables")
        tables = []
        for (name,) in rows:
            match = _STAGE_TABLE.fullmatch(name)
            if match:
                stage = Stage(int(match.group(2)), int(match.group(1)))
                tables.append(StageTable(stage, match.group(3) == "aggr"))
        return tables

    def _index_fallback(self, kind: str, stored: str | None, exc: Exception) -> str:
        """The index kind to use after the cluster refused the first index of `kind`."""
        if kind == "sasi" and self.options.index == "auto" and stored is None:
            try:
                self._ddl(schema.index_cql(self.metadata_keyspace, "metrics", "parent", "sai"))
                return "sai"
            except CassandraRequestError as sai_exc:
                raise StoreError(
                    f"syncdb: the cluster accepts neither SASI nor SAI indexes (SASI: {exc}; SAI: {sai_exc}):"
                    " enable SASI in cassandra.yaml (`sasi_indexes_enabled: true` on Cassandra 4.1+,"
                    " `enable_sasi_indexes: true` on 4.0) or use Cassandra 5.0+ for SAI") from sai_exc
        if kind == "sasi":
            raise StoreError(
                f"syncdb: the cluster refuses SASI indexes ({exc}): set `sasi_indexes_enabled: true` in"
                " cassandra.yaml on every node (`enable_sasi_indexes: true` on 4.0), or use index=sai"
                " (Cassandra 5.0+)") from exc
        raise StoreError(
            f"syncdb: the cluster refuses SAI indexes ({exc}): SAI needs Cassandra 5.0+; on 3.11/4.x use"
            " index=sasi (with `sasi_indexes_enabled: true` / `enable_sasi_indexes: true` in cassandra.yaml on 4.x)"
        ) from exc

    def _ddl(self, statement: str) -> None:
        """Run one schema statement (schema changes may take longer than requests: DDL_TIMEOUT at least)."""
        query = SimpleStatement(statement.rstrip(";"), consistency_level=self._levels["metadata_write"])
        what, timeout = f"schema: {statement.splitlines()[0][:100]}", max(DDL_TIMEOUT, self.options.timeout)
        try:
            self._conn.session.execute(query, timeout=timeout)
        except (InvalidRequest, RequestValidationException) as exc:
            raise CassandraRequestError(f"{what}: {exc}") from exc
        except Exception as exc:
            raise translate(exc, what, timeout, self._display_url) from exc

    def _stored_index_kind(self) -> str | None:
        """The index kind syncdb recorded, or None without a schema.

        A simple statement: preparing one against a missing keyspace makes the driver log an error.
        """
        query = SimpleStatement(
            f"SELECT value FROM {self.metadata_keyspace}.{schema.SETTINGS_TABLE} WHERE name = 'index'",
            consistency_level=self._levels["metadata_read"])
        try:
            rows = self._run([(query, None)], "read the store settings")[0]
        except SchemaMissing:
            return None
        return rows[0][0] if rows else None

    def _check_index_option(self, kind: str) -> None:
        if self.options.index not in ("auto", kind):
            raise StoreError(
                f"the store {self._display_url} was created with {kind.upper()} indexes but the URL says"
                f" index={self.options.index}: drop the option (or use index={kind})")

    def _check_schema(self) -> str:
        """The index kind of the store; SchemaMissing when syncdb never ran."""
        kind = self._index_kind
        if kind is None:
            kind = self._stored_index_kind()
            if kind is None:
                raise SchemaMissing(f"the store {self._display_url} has no schema: run"
                                    f" `bgl --store {self._display_url} syncdb`")
            self._check_index_option(kind)
            self._index_kind = kind
        return kind

    def _ensure_table(self, table: StageTable) -> None:
        if table.name in self._tables:
            return
        self._ddl(schema.stage_table_cql(self.keyspace, table))
        self._tables.add(table.name)

    def tag_index(self) -> CassandraTagIndex:
        return CassandraTagIndex(self)

