"""SELECT planning and execution in the CQL test server (test tool only).

Planning applies Cassandra's rules (what needs ALLOW FILTERING, which index can
serve a restriction, clustering slices in clustering order, ORDER BY limits);
execution walks partitions in token order (or in key order for ``pk IN``),
rows in clustering order by bisecting the sorted clustering keys, and pages
with a paging state that records the last row returned, as Cassandra does.
"""
from __future__ import annotations

import itertools
import json
import struct
from bisect import bisect_left, bisect_right
from typing import Any, Callable

from . import cql
from .errors import REQUIRES_ALLOW_FILTERING, InvalidRequest
from .results import UNSET, Rows
from .schema import Column, Table, checked_partition_key, token_of
from .terms import compile_in, compile_term, key_values, resolve, resolve_int, resolve_many
from .types import BIGINT, INT, CQLType

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


class Restriction:
    __slots__ = ("column", "op", "term", "text")

    def __init__(self, column: Column, op: str, term: tuple, text: str):
        self.column = column
        self.op = op
        self.term = term
        self.text = text


def _term_text(value: Any) -> str:
    if isinstance(value, cql.Bind):
        return "?"
    if isinstance(value, cql.Literal):
        lit = value.lit
        return f"'{lit[1]}'" if lit[0] == "str" else str(lit[2])
    if isinstance(value, list):
        return "(" + ", ".join(_term_text(v) for v in value) + ")"
    return "?"


def like_kind(pattern: str) -> tuple[str, str]:
    """(kind, term) of a LIKE pattern: prefix, suffix, contains or matches."""
    if len(pattern) >= 2 and pattern.startswith("%") and pattern.endswith("%"):
        return "contains", pattern[1:-1]
    if pattern.endswith("%"):
        return "prefix", pattern[:-1]
    if pattern.startswith("%"):
        return "suffix", pattern[1:]
    return "matches", pattern


class SelectPlan:
    """A compiled SELECT over one table."""

    def __init__(self, engine: Any, table: Table, stmt: cql.Select, specs: list):
        self.engine = engine
        self.table = table
        self.stmt = stmt
        t = table
        af = stmt.allow_filtering
        self.pk_restr: dict[int, Restriction] = {}
        self.token_restr: list[tuple[str, tuple]] = []
        self.ck_restr: dict[int, list[Restriction]] = {}
        self.other: list[Restriction] = []  # regular columns
        self.pk_indexes: list[int] = []
        pk_bind_index: dict[int, int] = {}

        for rel in stmt.where:
            kind = rel.target[0]
            if kind == "multi":
                raise InvalidRequest("Multi-column relations are not supported by the CQL test server")
            if kind == "token":
                names = rel.target[1]
                if names != [c.name for c in t.partition_key]:
                    raise InvalidRequest("The token function arguments must be in the partition key order: "
                                         + ", ".join(c.name for c in t.partition_key))
                if rel.op not in ("=", "<", "<=", ">", ">="):
                    raise InvalidRequest(f"{rel.op} cannot be used with the token function")
                term = compile_term(rel.value, BIGINT, "partition key token", specs)
                self.token_restr.append((rel.op, term))
                continue
            name = rel.target[1]
            col = t.columns.get(name)
            if col is None:
                raise InvalidRequest(f"Undefined column name {name} in table {t.keyspace}.{t.name}")
            if rel.op == "IN":
                term = compile_in(rel.value, col.type, col.name, specs)
            elif rel.op in ("CONTAINS", "CONTAINS_KEY"):
                if not col.type.is_collection:
                    raise InvalidRequest(f"Cannot use {rel.op.replace('_', ' ')} on non-collection column {name}")
                etype = col.type.params[0] if (rel.op == "CONTAINS_KEY" or col.type.name != "map") else col.type.params[1]
                term = compile_term(rel.value, etype, col.name, specs)
            else:
                term = compile_term(rel.value, col.type, col.name, specs)
            r = Restriction(col, rel.op, term, f"{name} {rel.op.replace('_', ' ')} {_term_text(rel.value)}")
            if rel.op == "LIKE":
                idx = [i for i in t.index_on(name) if i.kind == "sasi"]
                if not idx:
                    raise InvalidRequest(f"LIKE restriction is only supported on properly indexed columns. {r.text} is not valid.")
            if col.kind == "partition_key":
                if rel.op not in ("=", "IN"):
                    if not af:
                        raise InvalidRequest("Only EQ and IN relation are supported on the partition key "
                                             "(unless you use the token() function or allow filtering)")
                    self.other.append(r)
                    continue
                if col.position in self.pk_restr:
                    raise InvalidRequest(f"{name} cannot be restricted by more than one relation if it includes an Equal")
                self.pk_restr[col.position] = r
                if rel.op == "=" and isinstance(rel.value, cql.Bind):
                    pk_bind_index[col.position] = rel.value.index
            elif col.kind == "clustering":
                lst = self.ck_restr.setdefault(col.position, [])
                if any(x.op in ("=", "IN") for x in lst) or (lst and rel.op in ("=", "IN")):
                    raise InvalidRequest(f"{name} cannot be restricted by more than one relation if it includes an Equal")
                if rel.op in ("<", "<=") and any(x.op in ("<", "<=") for x in lst):
                    raise InvalidRequest(f"More than one restriction was found for the end bound on {name}")
                if rel.op in (">", ">=") and any(x.op in (">", ">=") for x in lst):
                    raise InvalidRequest(f"More than one restriction was found for the start bound on {name}")
                lst.append(r)
            else:
                self.other.append(r)

        if self.token_restr and self.pk_restr:
            raise InvalidRequest('Columns "%s" cannot be restricted by both a normal relation and a token relation'
                                 % ", ".join(t.partition_key[i].name for i in sorted(self.pk_restr)))
        if len(pk_bind_index) == len(t.partition_key):
            self.pk_indexes = [pk_bind_index[i] for i in range(len(t.partition_key))]

        npk = len(t.partition_key)
        self.pk_full = len(self.pk_restr) == npk
        # -- clustering: usable prefix (EQ/IN ... then one slice) -------------
        prefix_ok = True
        self.ck_prefix: list[Restriction] = []  # EQ/IN restrictions, positions 0..p-1
        self.ck_slice: list[Restriction] = []  # slice restrictions on position p
        ck_error = None
        slice_seen = None
        for pos in range(len(t.clustering)):
            lst = self.ck_restr.get(pos)
            if not lst:
                for later in range(pos + 1, len(t.clustering)):
                    if later in self.ck_restr:
                        prefix_ok = False
                        ck_error = ('PRIMARY KEY column "%s" cannot be restricted as preceding column "%s" is not restricted'
                                    % (t.clustering[later].name, t.clustering[pos].name))
                        break
                break
            if slice_seen is not None:
                prefix_ok = False
                ck_error = ('Clustering column "%s" cannot be restricted (preceding column "%s" is restricted by a non-EQ relation)'
                            % (t.clustering[pos].name, slice_seen))
                break
            if any(x.op not in ("=", "IN", "<", "<=", ">", ">=") for x in lst):
                prefix_ok = False
                break
            if lst[0].op in ("=", "IN"):
                self.ck_prefix.append(lst[0])
            else:
                self.ck_slice = lst
                slice_seen = t.clustering[pos].name
        if not prefix_ok:
            self.ck_prefix, self.ck_slice = [], []

        # -- indexes -----------------------------------------------------------
        def usable(r: Restriction) -> bool:
            return any(i.supports(r.op) for i in t.index_on(r.column.name))

        ck_list = [r for lst in self.ck_restr.values() for r in lst]
        candidates = [r for r in self.other + ck_list if usable(r)]
        unindexed_other = [r for r in self.other if not usable(r)]
        self.uses_index = bool(candidates) and (bool(self.other) or not self.pk_full or not prefix_ok)
        if self.uses_index:
            counted = list(self.other)
            if not self.pk_full:
                counted += list(self.pk_restr.values()) + ck_list
            elif not prefix_ok:
                counted += ck_list
            # Cassandra 5.0: one SAI query intersects several SAI-indexed restrictions itself.
            all_sai = all(any(i.kind == "sai" and i.supports(r.op) for i in t.index_on(r.column.name)) for r in counted)
            needs_filtering = (len(counted) > 1 and not all_sai) or bool(unindexed_other)
        else:
            needs_filtering = bool(self.other)
            if not self.pk_full and (self.pk_restr or ck_list):
                needs_filtering = True
            if not prefix_ok:
                if not af and ck_error and self.pk_full:
                    raise InvalidRequest(ck_error)
                needs_filtering = True
        if needs_filtering and not af:
            if ck_error and not self.uses_index and not self.other and self.pk_full:
                raise InvalidRequest(ck_error)
            raise InvalidRequest(REQUIRES_ALLOW_FILTERING)

        # -- what becomes a row filter ------------------------------------------
        self.filters: list[Restriction] = list(self.other)
        if not self.pk_full:
            self.filters += list(self.pk_restr.values())
        used_ck = set(id(r) for r in self.ck_prefix + self.ck_slice)
        self.filters += [r for r in ck_list if id(r) not in used_ck]
        self.like_checks = [r for r in self.filters if r.op == "LIKE"]

        # -- ORDER BY -----------------------------------------------------------
        self.reverse = False
        if stmt.order_by:
            if self.uses_index:
                raise InvalidRequest("ORDER BY with 2ndary indexes is not supported.")
            if not self.pk_full:
                raise InvalidRequest("ORDER BY is only supported when the partition key is restricted by an EQ or an IN.")
            flags = []
            for i, (name, direction) in enumerate(stmt.order_by):
                col = t.columns.get(name)
                if col is None:
                    raise InvalidRequest(f"Undefined column name {name} in table {t.keyspace}.{t.name}")
                if col.kind != "clustering":
                    raise InvalidRequest(f"Order by is currently only supported on the clustered columns of the PRIMARY KEY, got {name}")
                if col.position != i:
                    raise InvalidRequest("Order by currently only supports the ordering of columns following their declared order in the PRIMARY KEY")
                flags.append((direction == "DESC") != (col.order == "desc"))
            if len(set(flags)) > 1:
                raise InvalidRequest("Unsupported order by relation")
            self.reverse = flags[0]
        self.post_order = bool(stmt.order_by) and self.pk_restr and any(r.op == "IN" for r in self.pk_restr.values())

        # -- LIMIT ------------------------------------------------------------------
        self.limit = self._limit_term(stmt.limit, "[limit]", specs)
        self.ppl = self._limit_term(stmt.per_partition_limit, "[per_partition_limit]", specs)

        # -- selection ---------------------------------------------------------------
        self.aggregate = False
        self.columns: list[tuple[str, CQLType]] = []
        self.getters: list[Callable] = []
        sels = stmt.selectors
        if stmt.distinct:
            for s in sels:
                if s.kind == "col" and t.columns.get(s.arg) is not None and t.columns[s.arg].kind != "partition_key":
                    raise InvalidRequest(f"SELECT DISTINCT queries must only request partition key columns and/or static columns (not {s.arg})")
            if sels[0].kind == "col":
                missing = [c.name for c in t.partition_key if c.name not in {s.arg for s in sels if s.kind == "col"}]
                if missing:
                    raise InvalidRequest("SELECT DISTINCT queries must request all the partition key columns (missing %s)" % ", ".join(missing))
        for s in sels:
            self._add_selector(s)
        kinds = {s.kind for s in sels}
        self.aggregate = bool(kinds & {"count", "max", "min", "sum", "avg"})

    def _limit_term(self, term: Any, name: str, specs: list) -> tuple | None:
        if term is None:
            return None
        return compile_term(term, INT, name, specs)

    def _column(self, name: str) -> Column:
        col = self.table.columns.get(name)
        if col is None:
            raise InvalidRequest(f"Undefined column name {name} in table {self.table.keyspace}.{self.table.name}")
        return col

    def _add_selector(self, s: cql.Selector) -> None:
        t = self.table
        if s.kind == "star":
            for c in t.all_columns:
                self.columns.append((c.name, c.type))
                self.getters.append(_column_getter(c))
            return
        if s.kind == "col":
            c = self._column(s.arg)
            self.columns.append((s.alias or c.name, c.type))
            self.getters.append(_column_getter(c))
            return
        if s.kind == "token":
            if s.arg != [c.name for c in t.partition_key]:
                raise InvalidRequest("Type error: the token function arguments must be the partition key columns in order: "
                                     + ", ".join(c.name for c in t.partition_key))
            self.columns.append((s.alias or f"system.token({', '.join(s.arg)})", BIGINT))
            self.getters.append(lambda p, ck, cells, now: struct.pack(">q", p.token))
            return
        if s.kind in ("ttl", "writetime"):
            c = self._column(s.arg)
            if c.is_primary_key:
                raise InvalidRequest(f"Cannot use selection function {s.kind} on PRIMARY KEY part {c.name}")
            name = c.name
            if s.kind == "ttl":
                def ttl_getter(p, ck, cells, now, name=name):
                    cell = cells.get(name)
                    if cell is None or cell[2] is None:
                        return None
                    return struct.pack(">i", cell[2] - now)
                self.columns.append((s.alias or f"ttl({name})", INT))
                self.getters.append(ttl_getter)
            else:
                def wt_getter(p, ck, cells, now, name=name):
                    cell = cells.get(name)
                    return None if cell is None else struct.pack(">q", cell[1])
                self.columns.append((s.alias or f"writetime({name})", BIGINT))
                self.getters.append(wt_getter)
            return
        if s.kind == "count":
            self.columns.append((s.alias or "count", BIGINT))
            self.getters.append(("count", None))
            return
        # max, min, sum, avg
        c = self._column(s.arg)
        self.columns.append((s.alias or f"system.{s.kind}({c.name})", c.type))
        self.getters.append((s.kind, c))

    # -- execution --------------------------------------------------------------
    def run(self, values: list, page_size: int, paging_state: bytes | None, now: int) -> Rows:
        t = self.table
        limit = resolve_int(self.limit, values, "limit")
        if limit is not None and limit <= 0:
            raise InvalidRequest("LIMIT must be strictly positive")
        ppl = resolve_int(self.ppl, values, "per partition limit")
        if ppl is not None and ppl <= 0:
            raise InvalidRequest("PER PARTITION LIMIT must be strictly positive")
        if self.stmt.distinct:
            ppl = 1
        filters = self._filters(values)
        ranges = self._ck_ranges(values)
        if self.aggregate:
            page_size = -1
        paging = page_size > 0 and not (limit is not None and limit <= page_size)
        if self.post_order:
            if paging:
                raise InvalidRequest("Cannot page queries with both ORDER BY and a IN restriction on the partition key; "
                                     "you must either remove the ORDER BY or the IN and sort client side, "
                                     "or disable paging for this query")
            return self._run_post_ordered(values, filters, ranges, limit, ppl, now)
        state = None
        if paging_state:
            try:
                state = json.loads(paging_state.decode())
                state["pk"] = bytes.fromhex(state["pk"])
                state["ck"] = tuple(bytes.fromhex(x) for x in state["ck"])
            except Exception:
                raise InvalidRequest("Invalid value for the paging state") from None
        count = state["n"] if state else 0
        out: list = []
        last = None
        more = False
        getters = self.getters
        agg_rows: list = []
        for part in self._partitions(values, state["pk"] if state else None):
            resume_ck = None
            pcount = 0
            if state is not None and part.key == state["pk"]:
                resume_ck = state["ck"]
                pcount = state["pn"]
                state = None
                if resume_ck == () and t.clustering:
                    continue
                if not t.clustering:
                    continue
            state = None
            if ppl is not None and pcount >= ppl:
                continue
            pdel = part.deleted_at
            has_rt = bool(part.range_tombstones)
            for ck, skey, row in self._rows(part, ranges, resume_ck):
                cells = row.live_cells(part.deletion_for(skey) if has_rt else pdel, now)
                if cells is None:
                    continue
                if filters:
                    ok = True
                    for f in filters:
                        if not f(part, ck, cells):
                            ok = False
                            break
                    if not ok:
                        continue
                if self.aggregate:
                    agg_rows.append((part, ck, cells))
                else:
                    out.append([g(part, ck, cells, now) for g in getters])
                count += 1
                pcount += 1
                last = (part.key, ck, count, pcount)
                if limit is not None and count >= limit:
                    break
                if paging and len(out) >= page_size:
                    more = True
                    break
                if ppl is not None and pcount >= ppl:
                    break
            if (limit is not None and count >= limit) or more:
                break
        if self.aggregate:
            out = [self._aggregate(agg_rows, now)]
        new_state = None
        if more and last is not None:
            new_state = json.dumps({"pk": last[0].hex(), "ck": [c.hex() for c in last[1]],
                                    "n": last[2], "pn": last[3]}).encode()
        return Rows(t.keyspace, t.name, self.columns, out, new_state)

    def _aggregate(self, rows: list, now: int) -> list:
        out = []
        for (name, _), g in zip(self.columns, self.getters):
            if isinstance(g, tuple):
                kind, col = g
                if kind == "count":
                    out.append(struct.pack(">q", len(rows)))
                    continue
                getter = _column_getter(col)
                vals = [col.type.deserialize(v) for v in (getter(p, ck, c, now) for p, ck, c in rows) if v is not None]
                if kind in ("max", "min"):
                    if not vals:
                        out.append(None)
                        continue
                    pick = max if kind == "max" else min
                    out.append(col.type.serialize(pick(vals, key=col.type.key)))
                elif kind == "sum":
                    out.append(col.type.serialize(sum(vals) if vals else 0))
                else:
                    if not vals:
                        out.append(col.type.serialize(0))
                    else:
                        avg = sum(vals) / len(vals)
                        if col.type.name in ("int", "bigint", "smallint", "tinyint", "varint"):
                            avg = int(sum(vals) // len(vals))
                        out.append(col.type.serialize(avg))
            else:
                if rows:
                    p, ck, c = rows[0]
                    out.append(g(p, ck, c, now))
                else:
                    out.append(None)
        return out

    def _run_post_ordered(self, values, filters, ranges, limit, ppl, now) -> Rows:
        collected = []
        for part in self._partitions(values, None):
            pcount = 0
            pdel = part.deleted_at
            for ck, skey, row in self._rows(part, ranges, None):
                cells = row.live_cells(part.deletion_for(skey) if part.range_tombstones else pdel, now)
                if cells is None or (filters and not all(f(part, ck, cells) for f in filters)):
                    continue
                collected.append((skey, part, ck, cells))
                pcount += 1
                if ppl is not None and pcount >= ppl:
                    break
        collected.sort(key=lambda x: x[0], reverse=self.reverse)
        if limit is not None:
            collected = collected[:limit]
        out = [[g(p, ck, cells, now) for g in self.getters] for _, p, ck, cells in collected]
        return Rows(self.table.keyspace, self.table.name, self.columns, out, None)

    # -- partitions -----------------------------------------------------------------
    def _partitions(self, values: list, start_key: bytes | None):
        t = self.table
        if self.pk_full:
            lists = []
            for i, col in enumerate(t.partition_key):
                lists.append(key_values(self.pk_restr[i].term, values, col.name))
            combos = list(dict.fromkeys(itertools.product(*lists)))
            if len(combos) > 1:
                combos.sort(key=t.pk_sort_key)
            started = start_key is None
            keys = [checked_partition_key(comp) for comp in combos]  # all refused before any is read
            for key in keys:
                if not started:
                    if key != start_key:
                        continue
                    started = True
                part = t.partitions.get(key)
                if part is not None:
                    yield part
            return
        lo, lo_incl, hi, hi_incl = None, True, None, True
        for op, term in self.token_restr:
            v = resolve(term, values)
            if v is None or v is UNSET:
                raise InvalidRequest("Invalid null value for partition key token")
            tok = struct.unpack(">q", v)[0]
            if op in (">", ">="):
                if lo is None or tok > lo or (tok == lo and op == ">"):
                    lo, lo_incl = tok, op == ">="
            elif op in ("<", "<="):
                if hi is None or tok < hi or (tok == hi and op == "<"):
                    hi, hi_incl = tok, op == "<="
            else:
                lo = hi = tok
                lo_incl = hi_incl = True
        ring = t.ring
        candidates = self._index_candidates(values) if t.index_data else None
        if candidates is not None:
            parts = t.partitions
            ring = sorted((parts[k].token, k) for k in candidates if k in parts)
        if start_key is not None:
            i = bisect_left(ring, (token_of(start_key), start_key))
        elif lo is not None:
            i = bisect_left(ring, (lo if lo_incl else lo + 1, b""))
        else:
            i = 0
        parts = t.partitions
        n = len(ring)
        while i < n:
            tok, key = ring[i]
            i += 1
            if lo is not None and (tok < lo or (tok == lo and not lo_incl)):
                continue
            if hi is not None and (tok > hi or (tok == hi and not hi_incl)):
                break
            yield parts[key]

    def _index_candidates(self, values: list) -> set | None:
        """Partition keys that may match, from the indexed restrictions (None: scan all)."""
        t = self.table
        found = None
        for r in self.filters:
            ix = t.index_data.get(r.column.name)
            if ix is None:
                continue
            keys = None
            if r.op == "=":
                v = resolve(r.term, values)
                if isinstance(v, bytes):
                    keys = ix.equal(v)
            elif r.op == "IN":
                keys = set()
                for v in resolve_many(r.term, values):
                    if isinstance(v, bytes):
                        keys |= ix.equal(v)
            elif r.op == "LIKE" and ix.text and all(i.case_sensitive for i in t.index_on(r.column.name)):
                v = resolve(r.term, values)
                if isinstance(v, bytes):
                    kind, term = like_kind(v.decode("utf-8", "replace"))
                    if kind == "prefix" and term:
                        keys = ix.prefix(term)
                    elif kind == "matches":
                        keys = ix.equal(term.encode("utf-8"))
            if keys is not None:
                found = set(keys) if found is None else found & keys
        return found

    # -- rows -------------------------------------------------------------------------
    def _ck_ranges(self, values: list) -> list | None:
        """Sort-key ranges [(lo, lo_incl, hi, hi_incl)] for the clustering prefix/slice."""
        if not self.ck_prefix and not self.ck_slice:
            return None
        t = self.table
        lists = []
        for r in self.ck_prefix:
            lists.append([t.ck_component_key(r.column.position, v) for v in key_values(r.term, values, r.column.name)])
        lo_b = hi_b = None
        lo_incl = hi_incl = True
        if self.ck_slice:
            pos = self.ck_slice[0].column.position
            desc = t.clustering[pos].order == "desc"
            for r in self.ck_slice:
                v = resolve(r.term, values)
                if v is None:
                    raise InvalidRequest(f"Invalid null value in condition for column {r.column.name}")
                if v is UNSET:
                    continue
                k = t.ck_component_key(pos, v)
                op = _FLIP[r.op] if desc else r.op
                if op in (">", ">="):
                    lo_b, lo_incl = k, op == ">="
                else:
                    hi_b, hi_incl = k, op == "<="
        ranges = []
        for prefix in itertools.product(*lists):
            prefix = tuple(prefix)
            lo = prefix + ((lo_b,) if lo_b is not None else ())
            hi = prefix + ((hi_b,) if hi_b is not None else ())
            ranges.append((lo, lo_incl if lo_b is not None else True, hi, hi_incl if hi_b is not None else True))
        return ranges

    def _rows(self, part, ranges: list | None, resume_ck: tuple | None):
        reverse = self.reverse
        if ranges is None:
            spans = [(0, len(part.keys))]
        else:
            spans = sorted(set(part.index_range(lo or None, li, hi or None, hi_) for lo, li, hi, hi_ in ranges))
        if resume_ck is not None:
            skey = self.table.ck_sort_key(resume_ck)
            if reverse:
                cut = bisect_left(part.keys, skey)
                spans = [(a, min(b, cut)) for a, b in spans if a < cut]
            else:
                cut = bisect_right(part.keys, skey)
                spans = [(max(a, cut), b) for a, b in spans if b > cut]
        if reverse:
            spans.reverse()
        for a, b in spans:
            yield from part.iter_range(a, b, reverse)

    def _filters(self, values: list) -> list:
        out = []
        for r in self.filters:
            out.append(self._filter(r, values))
        return out

    def _filter(self, r: Restriction, values: list) -> Callable:
        col = r.column
        getter = _raw_getter(col)
        op = r.op
        if op == "IN":
            vals = set(v for v in resolve_many(r.term, values) if v is not None and v is not UNSET)
            return lambda p, ck, cells: getter(p, ck, cells) in vals
        v = resolve(r.term, values)
        if v is UNSET:
            raise InvalidRequest(f"Invalid unset value for column {col.name}")
        if v is None:
            raise InvalidRequest(f"Unsupported null value for column {col.name}")
        if op == "=":
            if not v and col.kind != "partition_key" and self.uses_index:
                kinds = {i.kind for i in self.table.index_on(col.name)}
                if kinds and not kinds - {"sasi", "sai"}:
                    return lambda p, ck, cells: False  # SASI and SAI do not index empty values
            return lambda p, ck, cells: getter(p, ck, cells) == v
        if op == "!=":
            return lambda p, ck, cells: (x := getter(p, ck, cells)) is not None and x != v
        ctype = col.type
        if op in ("<", "<=", ">", ">="):
            kv = ctype.key_of_bytes(v)
            keyf = ctype.key_of_bytes
            cmp = {"<": lambda a: a < kv, "<=": lambda a: a <= kv, ">": lambda a: a > kv, ">=": lambda a: a >= kv}[op]
            return lambda p, ck, cells: (x := getter(p, ck, cells)) is not None and cmp(keyf(x))
        if op == "LIKE":
            pattern = ctype.deserialize(v)
            kind, term = like_kind(pattern)
            if term == "":
                raise InvalidRequest("LIKE value can't be empty.")
            indexes = [i for i in self.table.index_on(col.name) if i.kind == "sasi"]
            if kind in ("contains", "suffix") and not any(i.mode == "CONTAINS" for i in indexes):
                shape = "%<term>%" if kind == "contains" else "%<term>"
                raise InvalidRequest(f"{col.name} LIKE '{shape}' {term} is only supported on properly indexed columns")
            case_sensitive = all(i.case_sensitive for i in indexes)
            if not case_sensitive:
                term = term.lower()

            def like(p, ck, cells):
                x = getter(p, ck, cells)
                if x is None:
                    return False
                s = x.decode("utf-8", "replace")
                if not case_sensitive:
                    s = s.lower()
                if kind == "prefix":
                    return s.startswith(term)
                if kind == "suffix":
                    return s.endswith(term)
                if kind == "contains":
                    return term in s
                return s == term
            return like
        if op in ("CONTAINS", "CONTAINS_KEY"):
            etype = ctype.params[0] if (op == "CONTAINS_KEY" or ctype.name != "map") else ctype.params[1]
            needle = etype.deserialize(v)

            def contains(p, ck, cells):
                x = getter(p, ck, cells)
                if x is None:
                    return False
                coll = ctype.deserialize(x)
                if ctype.name == "map":
                    return needle in (coll.keys() if op == "CONTAINS_KEY" else coll.values())
                return needle in coll
            return contains
        raise InvalidRequest(f"Unsupported operator {op}")


def _column_getter(c: Column) -> Callable:
    if c.kind == "partition_key":
        i = c.position
        return lambda p, ck, cells, now: p.components[i]
    if c.kind == "clustering":
        i = c.position
        return lambda p, ck, cells, now: ck[i]
    name = c.name

    def get(p, ck, cells, now):
        cell = cells.get(name)
        return None if cell is None else cell[0]
    return get


def _raw_getter(c: Column) -> Callable:
    if c.kind == "partition_key":
        i = c.position
        return lambda p, ck, cells: p.components[i]
    if c.kind == "clustering":
        i = c.position
        return lambda p, ck, cells: ck[i]
    name = c.name

    def get(p, ck, cells):
        cell = cells.get(name)
        return None if cell is None else cell[0]
    return get
