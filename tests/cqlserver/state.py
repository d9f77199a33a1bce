"""Saving and loading the CQL test server's data (test tool only).

The state file is JSON: the schema (keyspaces, tables with column types as CQL
text, options, indexes) and every partition with its tombstones, row markers and
cells (values as hex of their serialized bytes). Writes go to a temporary file
renamed over the target, so a crash never leaves half a file.
"""
from __future__ import annotations

import ipaddress
import json
import os
import uuid
from typing import Any

from .schema import Column, Index, Keyspace, Table
from .types import parse_type

FORMAT = 1


def _hex(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def _unhex(s: str | None) -> bytes | None:
    return None if s is None else bytes.fromhex(s)




def dump_engine(engine: Any) -> dict:
    out: dict = {"format": FORMAT, "clock_offset": engine.clock_offset, "keyspaces": []}
    for ks in engine.keyspaces.values():
        kd: dict = {"name": ks.name, "replication": ks.replication, "durable_writes": ks.durable_writes, "tables": []}
        for t in ks.tables.values():
            td: dict = {
                "name": t.name, "id": str(t.id), "options": t.options,
                "columns": [[c.name, c.type.cql(), c.kind, c.position, c.order] for c in t.columns.values()],
                "indexes": [[i.name, i.column, i.kind, i.class_name, i.options, i.target] for i in t.indexes.values()],
                "partitions": [],
            }
            for part in t.partitions.values():
                rows = []
                for ck, row in part.rows.items():
                    rows.append([[c.hex() for c in ck], row.marker and list(row.marker), row.deleted_at,
                                 {n: [_hex(c[0]), c[1], c[2], c[3]] for n, c in row.cells.items()}])
                td["partitions"].append({
                    "key": [c.hex() for c in part.components], "deleted_at": part.deleted_at,
                    "range_tombstones": [[_raw_bound(t, lo), li, _raw_bound(t, hi), hi_, ts]
                                         for lo, li, hi, hi_, ts in part.range_tombstones],
                    "rows": rows,
                })
            kd["tables"].append(td)
        out["keyspaces"].append(kd)
    return out


def _raw_bound(t: Table, bound: tuple) -> list:
    """Range tombstone bounds are sort keys; store them as serialized clustering values."""
    out = []
    for i, k in enumerate(bound):
        col = t.clustering[i]
        v = getattr(k, "v", k)
        out.append(col.type.serialize(_value_from_key(col, v)).hex())
    return out


def _value_from_key(col: Column, key: Any) -> Any:
    name = col.type.name
    if name == "uuid":
        return uuid.UUID(bytes=key[2])
    if name == "timeuuid":
        return uuid.UUID(bytes=key[1])
    if name == "inet":
        return str(ipaddress.ip_address(key))
    return key


def load_engine(engine: Any, data: dict) -> None:
    if data.get("format") != FORMAT:
        raise ValueError(f"Unknown CQL test server state format {data.get('format')!r}")
    engine.clock_offset = float(data.get("clock_offset", 0.0))
    engine.keyspaces.clear()
    max_ts = 0
    for kd in data["keyspaces"]:
        ks = Keyspace(kd["name"], kd["replication"], kd["durable_writes"])
        engine.keyspaces[ks.name] = ks
        for td in kd["tables"]:
            cols = [Column(n, parse_type(ty), kind, pos, order) for n, ty, kind, pos, order in td["columns"]]
            t = Table(ks.name, td["name"], cols, td["options"], uuid.UUID(td["id"]))
            for name, column, kind, class_name, options, target in td["indexes"]:
                t.indexes[name] = Index(name, column, kind, class_name, options, target)
            for pd in td["partitions"]:
                part = t.partition(tuple(bytes.fromhex(c) for c in pd["key"]))
                part.deleted_at = pd["deleted_at"]
                for lo, li, hi, hi_, ts in pd["range_tombstones"]:
                    part.range_tombstones.append((
                        tuple(t.ck_component_key(i, bytes.fromhex(x)) for i, x in enumerate(lo)), li,
                        tuple(t.ck_component_key(i, bytes.fromhex(x)) for i, x in enumerate(hi)), hi_, ts))
                for ck_hex, marker, deleted_at, cells in pd["rows"]:
                    ck = tuple(bytes.fromhex(c) for c in ck_hex)
                    row = part.row(ck, t.ck_sort_key)
                    row.marker = tuple(marker) if marker else None
                    row.deleted_at = deleted_at
                    for n, (v, ts, exp, ttl) in cells.items():
                        row.cells[n] = (_unhex(v), ts, exp, ttl)
                        max_ts = max(max_ts, ts)
            t.refresh_index_data()
            ks.tables[t.name] = t
    engine._last_ts = max(engine._last_ts, max_ts)
    engine.schema_changed()


def save_state(engine: Any, path: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(dump_engine(engine), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_state(engine: Any, path: str) -> bool:
    """Load ``path`` if it exists; returns whether something was loaded."""
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    with engine.lock:
        load_engine(engine, data)
    return True
