"""System tables of the CQL test server (test tool only).

The driver reads ``system.local`` and ``system.peers``/``peers_v2`` on connect,
and ``system_schema.*`` when schema metadata is enabled (also after each
schema change, filtered by keyspace and table). These are ordinary ``Table``
objects rebuilt from the live schema whenever it changes, so the normal SELECT
engine answers them, WHERE clauses included. One node, one token.
"""
from __future__ import annotations

import uuid
from typing import Any

from .schema import TABLE_DEFAULTS, Column, Table
from .types import parse_type

SYSTEM_KEYSPACES = ("system", "system_schema", "system_virtual_schema", "system_auth",
                    "system_distributed", "system_traces")
RELEASE_VERSION = "4.1.3"
CQL_VERSION = "3.4.6"
CLUSTER_NAME = "CQL Test Cluster"
DATACENTER = "datacenter1"
RACK = "rack1"
TOKEN = "0"

# name: (partition key, clustering, {column: type})
_DEFS: dict[tuple[str, str], tuple[list, list, dict]] = {
    ("system", "local"): (["key"], [], {
        "key": "text", "bootstrapped": "text", "broadcast_address": "inet", "broadcast_port": "int",
        "cluster_name": "text", "cql_version": "text", "data_center": "text", "gossip_generation": "int",
        "host_id": "uuid", "listen_address": "inet", "listen_port": "int", "native_protocol_version": "text",
        "partitioner": "text", "rack": "text", "release_version": "text", "rpc_address": "inet",
        "rpc_port": "int", "schema_version": "uuid", "tokens": "set<text>"}),
    ("system", "peers"): (["peer"], [], {
        "peer": "inet", "data_center": "text", "host_id": "uuid", "preferred_ip": "inet", "rack": "text",
        "release_version": "text", "rpc_address": "inet", "schema_version": "uuid", "tokens": "set<text>"}),
    ("system", "peers_v2"): (["peer"], ["peer_port"], {
        "peer": "inet", "peer_port": "int", "data_center": "text", "host_id": "uuid", "native_address": "inet",
        "native_port": "int", "preferred_ip": "inet", "preferred_port": "int", "rack": "text",
        "release_version": "text", "schema_version": "uuid", "tokens": "set<text>"}),
    ("system_schema", "keyspaces"): (["keyspace_name"], [], {
        "keyspace_name": "text", "durable_writes": "boolean", "replication": "frozen<map<text, text>>"}),
    ("system_schema", "tables"): (["keyspace_name"], ["table_name"], {
        "keyspace_name": "text", "table_name": "text", "additional_write_policy": "text",
        "bloom_filter_fp_chance": "double", "caching": "frozen<map<text, text>>", "cdc": "boolean",
        "comment": "text", "compaction": "frozen<map<text, text>>", "compression": "frozen<map<text, text>>",
        "crc_check_chance": "double", "default_time_to_live": "int", "extensions": "frozen<map<text, blob>>",
        "flags": "frozen<set<text>>", "gc_grace_seconds": "int", "id": "uuid", "max_index_interval": "int",
        "memtable_flush_period_in_ms": "int", "min_index_interval": "int", "read_repair": "text",
        "speculative_retry": "text"}),
    ("system_schema", "columns"): (["keyspace_name"], ["table_name", "column_name"], {
        "keyspace_name": "text", "table_name": "text", "column_name": "text", "clustering_order": "text",
        "column_name_bytes": "blob", "kind": "text", "position": "int", "type": "text"}),
    ("system_schema", "indexes"): (["keyspace_name"], ["table_name", "index_name"], {
        "keyspace_name": "text", "table_name": "text", "index_name": "text", "kind": "text",
        "options": "frozen<map<text, text>>"}),
    ("system_schema", "triggers"): (["keyspace_name"], ["table_name", "trigger_name"], {
        "keyspace_name": "text", "table_name": "text", "trigger_name": "text", "options": "frozen<map<text, text>>"}),
    ("system_schema", "views"): (["keyspace_name"], ["view_name"], {
        "keyspace_name": "text", "view_name": "text", "base_table_id": "uuid", "base_table_name": "text",
        "include_all_columns": "boolean", "where_clause": "text"}),
    ("system_schema", "types"): (["keyspace_name"], ["type_name"], {
        "keyspace_name": "text", "type_name": "text", "field_names": "frozen<list<text>>",
        "field_types": "frozen<list<text>>"}),
    ("system_schema", "functions"): (["keyspace_name"], ["function_name", "argument_types"], {
        "keyspace_name": "text", "function_name": "text", "argument_types": "frozen<list<text>>",
        "argument_names": "frozen<list<text>>", "body": "text", "called_on_null_input": "boolean",
        "language": "text", "return_type": "text"}),
    ("system_schema", "aggregates"): (["keyspace_name"], ["aggregate_name", "argument_types"], {
        "keyspace_name": "text", "aggregate_name": "text", "argument_types": "frozen<list<text>>",
        "final_func": "text", "initcond": "text", "return_type": "text", "state_func": "text",
        "state_type": "text"}),
    ("system_virtual_schema", "keyspaces"): (["keyspace_name"], [], {"keyspace_name": "text"}),
    ("system_virtual_schema", "tables"): (["keyspace_name"], ["table_name"], {
        "keyspace_name": "text", "table_name": "text", "comment": "text"}),
    ("system_virtual_schema", "columns"): (["keyspace_name"], ["table_name", "column_name"], {
        "keyspace_name": "text", "table_name": "text", "column_name": "text", "clustering_order": "text",
        "column_name_bytes": "blob", "kind": "text", "position": "int", "type": "text"}),
}

_SYSTEM_REPLICATION = {
    "system": {"class": "org.apache.cassandra.locator.LocalStrategy"},
    "system_schema": {"class": "org.apache.cassandra.locator.LocalStrategy"},
    "system_auth": {"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "1"},
    "system_distributed": {"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "3"},
    "system_traces": {"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "2"},
}


def _make_table(ks: str, name: str) -> Table:
    pk, ck, cols = _DEFS[(ks, name)]
    columns = []
    for cname, tname in cols.items():
        ctype = parse_type(tname)
        if cname in pk:
            columns.append(Column(cname, ctype, "partition_key", pk.index(cname)))
        elif cname in ck:
            columns.append(Column(cname, ctype, "clustering", ck.index(cname), "asc"))
        else:
            columns.append(Column(cname, ctype, "regular"))
    table_id = uuid.uuid5(uuid.NAMESPACE_OID, f"{ks}.{name}")
    return Table(ks, name, columns, dict(TABLE_DEFAULTS), table_id)


def _put(table: Table, values: dict[str, Any]) -> None:
    pk = tuple(c.type.serialize(values[c.name]) for c in table.partition_key)
    ck = tuple(c.type.serialize(values[c.name]) for c in table.clustering)
    part = table.partition(pk)
    row = part.row(ck, table.ck_sort_key)
    row.write_marker(1, None, 0)
    for c in table.regular:
        v = values.get(c.name)
        if v is not None:
            row.write_cell(c.name, c.type.serialize(v), 1, None, 0)


class SystemTables:
    """Builds the system tables from the engine's schema (cached per schema version)."""

    def __init__(self, engine: Any):
        self.engine = engine
        self.host_id = uuid.uuid4()
        self._version = -1
        self._tables: dict[tuple[str, str], Table] = {}

    def table(self, ks: str, name: str) -> Table | None:
        if (ks, name) not in _DEFS:
            return None
        if self._version != self.engine.schema_version:
            self._rebuild()
        return self._tables[(ks, name)]

    def _rebuild(self) -> None:
        e = self.engine
        tables = {key: _make_table(*key) for key in _DEFS}
        host = e.host
        _put(tables[("system", "local")], {
            "key": "local", "bootstrapped": "COMPLETED", "broadcast_address": host, "broadcast_port": 7000,
            "cluster_name": CLUSTER_NAME, "cql_version": CQL_VERSION, "data_center": DATACENTER,
            "gossip_generation": 1, "host_id": self.host_id, "listen_address": host, "listen_port": 7000,
            "native_protocol_version": "4", "partitioner": "org.apache.cassandra.dht.Murmur3Partitioner",
            "rack": RACK, "release_version": RELEASE_VERSION, "rpc_address": host,
            "rpc_port": getattr(e, "port", 9042), "schema_version": e.schema_uuid, "tokens": {TOKEN}})
        ks_table = tables[("system_schema", "keyspaces")]
        for name, repl in _SYSTEM_REPLICATION.items():
            _put(ks_table, {"keyspace_name": name, "durable_writes": True, "replication": repl})
        for ks in e.keyspaces.values():
            _put(ks_table, {"keyspace_name": ks.name, "durable_writes": ks.durable_writes, "replication": ks.replication})
            for t in ks.tables.values():
                self._describe_table(tables, t)
        self._tables = tables
        self._version = e.schema_version

    def _describe_table(self, tables: dict, t: Table) -> None:
        row = {"keyspace_name": t.keyspace, "table_name": t.name, "id": t.id, "flags": {"compound"}}
        row.update({k: v for k, v in t.options.items()})
        _put(tables[("system_schema", "tables")], row)
        cols = tables[("system_schema", "columns")]
        for c in t.columns.values():
            _put(cols, {"keyspace_name": t.keyspace, "table_name": t.name, "column_name": c.name,
                        "clustering_order": c.order, "column_name_bytes": c.name.encode(), "kind": c.kind,
                        "position": c.position, "type": c.type.cql()})
        idx = tables[("system_schema", "indexes")]
        for i in t.indexes.values():
            _put(idx, {"keyspace_name": t.keyspace, "table_name": t.name, "index_name": i.name,
                       "kind": "CUSTOM" if i.class_name else "COMPOSITES", "options": i.schema_options()})
