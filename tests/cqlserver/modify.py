"""INSERT, UPDATE and DELETE in the CQL test server (test tool only).

Each plan checks Cassandra's rules at compile time (full primary key for
INSERT/UPDATE, partition key plus clustering prefix or slice for DELETE), then
at run time resolves keys, the write timestamp (``USING TIMESTAMP``, else the
request's client timestamp, else the server clock) and the TTL (``USING TTL``,
else the table's ``default_time_to_live``), and applies cells and tombstones.
Lightweight transactions (``IF [NOT] EXISTS``, ``IF col = ...``) return the
``[applied]`` column, plus the current values when not applied.
"""
from __future__ import annotations

import itertools
import struct
from typing import Any

from . import cql
from .errors import InvalidRequest
from .results import UNSET, Rows
from .schema import MAX_TTL, Column, Table, checked_partition_key
from .storage import NO_DELETION
from .terms import checked_key_value, compile_in, compile_term, key_values, resolve, resolve_int, resolve_many
from .types import BIGINT, BOOLEAN, INT, CQLType

APPLIED = ("[applied]", BOOLEAN)
TRUE = b"\x01"
FALSE = b"\x00"


class WritePlan:
    """Common parts of INSERT, UPDATE and DELETE."""

    table: Table
    conditional = False

    def _attrs(self, ttl: Any, ts: Any, specs: list) -> None:
        self.ttl = compile_term(ttl, INT, "[ttl]", specs) if ttl is not None else None
        self.ts = compile_term(ts, BIGINT, "[timestamp]", specs) if ts is not None else None

    @property
    def has_timestamp(self) -> bool:
        return self.ts is not None

    def timestamp(self, values: list, default_ts: int) -> int:
        ts = resolve_int(self.ts, values, "timestamp")
        return default_ts if ts is None else ts

    def ttl_of(self, values: list) -> int:
        ttl = resolve_int(self.ttl, values, "ttl")
        if ttl is None:
            return self.table.default_ttl
        if ttl < 0:
            raise InvalidRequest(f"A TTL must be greater or equal to 0, but was {ttl}")
        if ttl > MAX_TTL:
            raise InvalidRequest(f"ttl is too large. requested ({ttl}) maximum ({MAX_TTL})")
        return ttl

    def validate(self, values: list) -> None:
        """Raise what apply() would raise on bad keys, TTL or timestamp, without writing."""
        self.partition_keys(values)
        if not isinstance(self, InsertPlan):
            self.clustering_keys(values)
        if self.ttl is not None:
            self.ttl_of(values)
        self.timestamp(values, 0)

    def _where(self, where: list, specs: list, kind: str) -> None:
        t = self.table
        self.key_terms: dict[str, tuple] = {}
        self.key_ops: dict[str, str] = {}
        self.slice: list[tuple[str, tuple]] = []
        self.slice_col: Column | None = None
        pk_bind: dict[int, int] = {}
        for rel in where:
            if rel.target[0] != "col":
                raise InvalidRequest(f"Only column relations are supported in {kind} statements")
            name = rel.target[1]
            col = t.columns.get(name)
            if col is None:
                raise InvalidRequest(f"Undefined column name {name} in table {t.keyspace}.{t.name}")
            if not col.is_primary_key:
                raise InvalidRequest(f"Non PRIMARY KEY columns found in where clause: {name} ")
            if rel.op in ("<", "<=", ">", ">="):
                if col.kind == "partition_key" or kind != "DELETE":
                    raise InvalidRequest(f"Slice restrictions are not supported on the clustering columns in {kind} statements"
                                         if col.kind == "clustering" else
                                         "Only EQ and IN relation are supported on the partition key (unless you use the token() function)")
                if self.slice_col is not None and self.slice_col is not col:
                    raise InvalidRequest(f'Clustering column "{name}" cannot be restricted (preceding column "{self.slice_col.name}" is restricted by a non-EQ relation)')
                self.slice_col = col
                self.slice.append((rel.op, compile_term(rel.value, col.type, name, specs)))
                continue
            if rel.op not in ("=", "IN"):
                raise InvalidRequest(f"Invalid operator {rel.op} for PRIMARY KEY part {name}")
            if name in self.key_terms:
                raise InvalidRequest(f"{name} cannot be restricted by more than one relation if it includes an Equal")
            self.key_ops[name] = rel.op
            if rel.op == "IN":
                self.key_terms[name] = compile_in(rel.value, col.type, name, specs)
            else:
                self.key_terms[name] = compile_term(rel.value, col.type, name, specs)
                if col.kind == "partition_key" and isinstance(rel.value, cql.Bind):
                    pk_bind[col.position] = rel.value.index
        missing = [c.name for c in t.partition_key if c.name not in self.key_terms]
        if missing:
            raise InvalidRequest("Some partition key parts are missing: " + ", ".join(missing))
        self.pk_indexes = [pk_bind[i] for i in range(len(t.partition_key))] if len(pk_bind) == len(t.partition_key) else []
        restricted = [c for c in t.clustering if c.name in self.key_terms]
        if kind != "DELETE":
            missing = [c.name for c in t.clustering if c.name not in self.key_terms]
            if missing:
                raise InvalidRequest("Some clustering keys are missing: " + ", ".join(missing))
        else:
            for i, c in enumerate(t.clustering):
                if c.name in self.key_terms and i > 0 and t.clustering[i - 1].name not in self.key_terms:
                    raise InvalidRequest(f'PRIMARY KEY column "{c.name}" cannot be restricted as preceding column '
                                         f'"{t.clustering[i - 1].name}" is not restricted')
            if self.slice_col is not None:
                pos = self.slice_col.position
                if len(restricted) != pos or any(c.position >= pos for c in restricted):
                    raise InvalidRequest(f'Clustering column "{self.slice_col.name}" cannot be restricted: the slice must be on '
                                         'the column following the restricted ones')
        self.ck_count = len(restricted)

    def _key_lists(self, values: list, columns: list[Column]) -> list[list[bytes]]:
        lists = []
        for c in columns:
            lists.append(key_values(self.key_terms[c.name], values, c.name))
        return lists

    def partition_keys(self, values: list) -> list[tuple]:
        keys = list(dict.fromkeys(itertools.product(*self._key_lists(values, self.table.partition_key))))
        for key in keys:
            checked_partition_key(key)
        return keys

    def clustering_keys(self, values: list) -> list[tuple]:
        cols = self.table.clustering[: self.ck_count]
        return list(dict.fromkeys(itertools.product(*self._key_lists(values, cols))))

    # -- LWT ---------------------------------------------------------------------------
    def _compile_conditions(self, if_exists: bool, if_not_exists: bool, conds: list, specs: list) -> None:
        self.if_exists = if_exists
        self.if_not_exists = if_not_exists
        self.conds: list[tuple[Column, str, tuple]] = []
        for rel in conds:
            if rel.target[0] != "col":
                raise InvalidRequest("Only column conditions are supported")
            col = self.table.columns.get(rel.target[1])
            if col is None:
                raise InvalidRequest(f"Undefined column name {rel.target[1]}")
            if col.is_primary_key:
                raise InvalidRequest(f"PRIMARY KEY column '{col.name}' cannot have IF conditions")
            if rel.op == "IN":
                self.conds.append((col, "IN", compile_in(rel.value, col.type, col.name, specs)))
            elif rel.op in ("=", "!=", "<", "<=", ">", ">="):
                self.conds.append((col, rel.op, compile_term(rel.value, col.type, col.name, specs)))
            else:
                raise InvalidRequest(f"Unsupported operator {rel.op} in IF conditions")
        self.conditional = if_exists or if_not_exists or bool(self.conds)

    def lwt_key(self, values: list) -> tuple[tuple, tuple]:
        pks = self.partition_keys(values)
        if len(pks) != 1:
            raise InvalidRequest("IN on the partition key is not supported with conditional updates")
        if any(self.key_ops.get(c.name) == "IN" for c in self.table.clustering):
            raise InvalidRequest("IN on the clustering key columns is not supported with conditional updates")
        if self.ck_count != len(self.table.clustering) or self.slice_col is not None:
            raise InvalidRequest("DELETE statements must restrict all PRIMARY KEY columns with equality relations in order to use IF conditions")
        return pks[0], self.clustering_keys(values)[0]

    def check(self, values: list, now: int) -> tuple[bool, list, list]:
        """(applied, extra columns, extra values) of this statement's condition."""
        t = self.table
        pk, ck = self.lwt_key(values)
        part = t.partition(pk, create=False)
        cells = None
        if part is not None:
            row = part.rows.get(ck)
            if row is not None:
                skey = t.ck_sort_key(ck)
                cells = row.live_cells(part.deletion_for(skey), now)
        if self.if_not_exists:
            if cells is None:
                return True, [], []
            cols = [(c.name, c.type) for c in t.all_columns]
            vals = []
            for c in t.all_columns:
                if c.kind == "partition_key":
                    vals.append(pk[c.position])
                elif c.kind == "clustering":
                    vals.append(ck[c.position])
                else:
                    cell = cells.get(c.name)
                    vals.append(None if cell is None else cell[0])
            return False, cols, vals
        if self.if_exists:
            return cells is not None, [], []
        applied = True
        for col, op, term in self.conds:
            cur = None if cells is None else (cells.get(col.name) or (None,))[0]
            if op == "IN":
                wanted = resolve_many(term, values)
                ok = cur in wanted
            else:
                want = resolve(term, values)
                if want is UNSET:
                    continue
                if op == "=":
                    ok = cur == want
                elif op == "!=":
                    ok = cur != want
                elif want is None:
                    raise InvalidRequest(f'Invalid comparison with null for operator "{op}"')
                elif cur is None:
                    ok = False
                else:
                    a, b = col.type.key_of_bytes(cur), col.type.key_of_bytes(want)
                    ok = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
            if not ok:
                applied = False
        if applied:
            return True, [], []
        seen = []
        for col, _, _ in self.conds:
            if col not in seen:
                seen.append(col)
        cols = [(c.name, c.type) for c in seen]
        vals = [None if cells is None else (cells.get(c.name) or (None,))[0] for c in seen]
        return False, cols, vals

    def lwt_result(self, applied: bool, cols: list, vals: list) -> Rows:
        return Rows(self.table.keyspace, self.table.name, [APPLIED] + cols, [[TRUE if applied else FALSE] + vals])


class InsertPlan(WritePlan):
    def __init__(self, table: Table, stmt: cql.Insert, specs: list):
        self.table = table
        t = table
        if len(stmt.columns) != len(stmt.values):
            raise InvalidRequest("Unmatched column names/values")
        seen = set()
        self.cols: list[tuple[Column, tuple]] = []
        pk_bind = {}
        for name, term in zip(stmt.columns, stmt.values):
            col = t.columns.get(name)
            if col is None:
                raise InvalidRequest(f"Undefined column name {name} in table {t.keyspace}.{t.name}")
            if name in seen:
                raise InvalidRequest(f"Multiple definitions found for column {name}")
            seen.add(name)
            self.cols.append((col, compile_term(term, col.type, name, specs)))
            if col.kind == "partition_key" and isinstance(term, cql.Bind):
                pk_bind[col.position] = term.index
        missing = [c.name for c in t.partition_key if c.name not in seen]
        if missing:
            raise InvalidRequest("Some partition key parts are missing: " + ", ".join(missing))
        missing = [c.name for c in t.clustering if c.name not in seen]
        if missing:
            raise InvalidRequest("Some clustering keys are missing: " + ", ".join(missing))
        self.pk_indexes = [pk_bind[i] for i in range(len(t.partition_key))] if len(pk_bind) == len(t.partition_key) else []
        self._attrs(stmt.ttl, stmt.timestamp, specs)
        self.if_not_exists = stmt.if_not_exists
        self.if_exists = False
        self.conds = []
        self.conditional = stmt.if_not_exists
        self.slice_col = None
        self.ck_count = len(t.clustering)
        self.key_ops = {}

    def _resolve_keys(self, values: list) -> tuple[tuple, tuple, list]:
        t = self.table
        pk = [None] * len(t.partition_key)
        ck = [None] * len(t.clustering)
        regular = []
        for col, term in self.cols:
            v = resolve(term, values)
            if col.kind == "regular":
                regular.append((col.name, v))
                continue
            checked_key_value(v, col.name)
            if col.kind == "partition_key":
                if not v and len(t.partition_key) == 1:
                    raise InvalidRequest("Key may not be empty")
                pk[col.position] = v
            else:
                ck[col.position] = v
        return tuple(pk), tuple(ck), regular

    def partition_keys(self, values: list) -> list[tuple]:
        return [self._resolve_keys(values)[0]]

    def lwt_key(self, values: list) -> tuple[tuple, tuple]:
        pk, ck, _ = self._resolve_keys(values)
        return pk, ck

    def apply(self, values: list, default_ts: int, now: int) -> None:
        t = self.table
        pk, ck, regular = self._resolve_keys(values)
        ts = self.timestamp(values, default_ts)
        ttl = self.ttl_of(values)
        expires = now + ttl if ttl else None
        part = t.partition(pk)
        row = part.row(ck, t.ck_sort_key)
        row.write_marker(ts, expires, ttl)
        index_data = t.index_data
        if index_data:
            t.index_clustering(part, ck)
        for name, v in regular:
            if v is UNSET:
                continue
            if v is None:
                row.write_cell(name, None, ts, None, 0)
            else:
                row.write_cell(name, v, ts, expires, ttl)
                if index_data and name in index_data:
                    index_data[name].add(v, part.key)


class UpdatePlan(WritePlan):
    def __init__(self, table: Table, stmt: cql.Update, specs: list):
        self.table = table
        t = table
        self.assigns: list[tuple[Column, str, Any]] = []
        for name, what in stmt.assignments:
            col = t.columns.get(name)
            if col is None:
                raise InvalidRequest(f"Undefined column name {name} in table {t.keyspace}.{t.name}")
            if col.is_primary_key:
                raise InvalidRequest(f"PRIMARY KEY part {name} found in SET part")
            if isinstance(what, tuple) and what and what[0] == "element":
                if col.type.name not in ("map", "list"):
                    raise InvalidRequest(f"Invalid operation ({name}[..] = ...) for non map/list column {name}")
                ktype = col.type.params[0] if col.type.name == "map" else INT
                vtype = col.type.params[-1]
                self.assigns.append((col, "element", (compile_term(what[1], ktype, f"key({name})", specs),
                                                      compile_term(what[2], vtype, f"value({name})", specs))))
            elif isinstance(what, tuple) and what and what[0] in ("add", "remove"):
                if not col.type.is_collection:
                    raise InvalidRequest(f"Invalid operation ({name} = {name} + ?) for non collection column {name}")
                ctype = col.type if what[0] == "add" or col.type.name != "map" else CQLType("set", (col.type.params[0],))
                self.assigns.append((col, what[0], compile_term(what[1], ctype, name, specs)))
            else:
                self.assigns.append((col, "set", compile_term(what, col.type, name, specs)))
        self._where(stmt.where, specs, "UPDATE")
        self._attrs(stmt.ttl, stmt.timestamp, specs)
        self._compile_conditions(stmt.if_exists, False, stmt.conditions, specs)

    def apply(self, values: list, default_ts: int, now: int) -> None:
        t = self.table
        ts = self.timestamp(values, default_ts)
        ttl = self.ttl_of(values)
        expires = now + ttl if ttl else None
        resolved = []
        for col, kind, term in self.assigns:
            if kind == "element":
                resolved.append((col, kind, (resolve(term[0], values), resolve(term[1], values))))
            else:
                resolved.append((col, kind, resolve(term, values)))
        for pk in self.partition_keys(values):
            part = t.partition(pk)
            for ck in self.clustering_keys(values):
                row = part.row(ck, t.ck_sort_key)
                index_data = t.index_data
                if index_data:
                    t.index_clustering(part, ck)
                for col, kind, v in resolved:
                    if kind == "set":
                        if v is UNSET:
                            continue
                        if v is None:
                            row.write_cell(col.name, None, ts, None, 0)
                        else:
                            row.write_cell(col.name, v, ts, expires, ttl)
                            if index_data and col.name in index_data:
                                index_data[col.name].add(v, part.key)
                        continue
                    live = row.live_cells(part.deletion_for(t.ck_sort_key(ck)), now) or {}
                    cur = col.type.deserialize((live.get(col.name) or (None,))[0])
                    if kind == "element":
                        k, val = v
                        if k is UNSET or val is UNSET:
                            continue
                        if k is None:
                            raise InvalidRequest(f"Invalid null map key for column {col.name}")
                        if col.type.name == "map":
                            cur = dict(cur or {})
                            key = col.type.params[0].deserialize(k)
                            if val is None:
                                cur.pop(key, None)
                            else:
                                cur[key] = col.type.params[1].deserialize(val)
                        else:
                            cur = list(cur or [])
                            idx = struct.unpack(">i", k)[0]
                            if not 0 <= idx < len(cur):
                                raise InvalidRequest(f"List index {idx} out of bound, list has size {len(cur)}")
                            cur[idx] = col.type.params[0].deserialize(val)
                    else:
                        if v is UNSET or v is None:
                            continue
                        if col.type.name == "map" and kind == "remove":
                            operand = CQLType("set", (col.type.params[0],)).deserialize(v)
                        else:
                            operand = col.type.deserialize(v)
                        if col.type.name == "map":
                            cur = dict(cur or {})
                            if kind == "add":
                                cur.update(operand)
                            else:
                                for k in operand:
                                    cur.pop(k, None)
                        elif col.type.name == "set":
                            cur = set(cur or ())
                            cur = cur | set(operand) if kind == "add" else cur - set(operand)
                        else:
                            cur = list(cur or [])
                            cur = cur + list(operand) if kind == "add" else [x for x in cur if x not in operand]
                    if cur is None or len(cur) == 0:
                        row.write_cell(col.name, None, ts, None, 0)
                    else:
                        row.write_cell(col.name, col.type.serialize(cur), ts, expires, ttl)


class DeletePlan(WritePlan):
    def __init__(self, table: Table, stmt: cql.Delete, specs: list):
        self.table = table
        t = table
        self.cols = []
        for name in stmt.columns:
            col = t.columns.get(name)
            if col is None:
                raise InvalidRequest(f"Undefined column name {name} in table {t.keyspace}.{t.name}")
            if col.is_primary_key:
                raise InvalidRequest(f"Invalid identifier {name} for deletion (should not be a PRIMARY KEY part)")
            self.cols.append(col)
        self._where(stmt.where, specs, "DELETE")
        if self.cols and (self.ck_count != len(t.clustering) or self.slice_col is not None):
            raise InvalidRequest("Range deletions are not supported for specific columns")
        self.ttl = None
        self.ts = compile_term(stmt.timestamp, BIGINT, "[timestamp]", specs) if stmt.timestamp is not None else None
        self._compile_conditions(stmt.if_exists, False, stmt.conditions, specs)

    def apply(self, values: list, default_ts: int, now: int) -> None:
        t = self.table
        ts = self.timestamp(values, default_ts)
        full = self.ck_count == len(t.clustering) and self.slice_col is None
        for pk in self.partition_keys(values):
            part = t.partition(pk)
            if self.cols:
                for ck in self.clustering_keys(values):
                    row = part.row(ck, t.ck_sort_key)
                    for col in self.cols:
                        row.write_cell(col.name, None, ts, None, 0)
                continue
            if full and t.clustering:
                for ck in self.clustering_keys(values):
                    part.row(ck, t.ck_sort_key).delete(ts)
                continue
            if not t.clustering or (self.ck_count == 0 and self.slice_col is None):
                part.delete(ts)
                continue
            lo_b = hi_b = None
            lo_incl = hi_incl = True
            if self.slice_col is not None:
                pos = self.slice_col.position
                desc = self.slice_col.order == "desc"
                for op, term in self.slice:
                    v = resolve(term, values)
                    if v is None or v is UNSET:
                        raise InvalidRequest(f"Invalid null value in condition for column {self.slice_col.name}")
                    k = t.ck_component_key(pos, v)
                    if desc:
                        op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
                    if op in (">", ">="):
                        lo_b, lo_incl = k, op == ">="
                    else:
                        hi_b, hi_incl = k, op == "<="
            for ck in self.clustering_keys(values):
                prefix = tuple(t.ck_component_key(i, raw) for i, raw in enumerate(ck))
                lo = prefix + ((lo_b,) if lo_b is not None else ())
                hi = prefix + ((hi_b,) if hi_b is not None else ())
                part.delete_range(lo, lo_incl if lo_b is not None else True, hi, hi_incl if hi_b is not None else True, ts)


__all__ = ["InsertPlan", "UpdatePlan", "DeletePlan", "WritePlan", "NO_DELETION"]
