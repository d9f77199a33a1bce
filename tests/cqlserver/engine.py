"""The CQL test server's engine: schema, statements, prepared statements, batches.

Test tool only. One lock serializes every statement (the data structures are
plain dicts and lists); the clock can be moved forward (``advance``) so TTL
expiry is tested without sleeping.
"""
from __future__ import annotations

import hashlib
import re
import threading
import time
import uuid
from collections import OrderedDict
from typing import Any

from . import cql
from .errors import (AlreadyExists, ConfigurationError, CQLError, InvalidRequest, ServerError,
                     Unprepared)
from .modify import APPLIED, DeletePlan, InsertPlan, UpdatePlan, WritePlan, TRUE, FALSE
from .results import (Compiled, Options, Prepared, Rows, SchemaChange, SetKeyspace, UNSET, Void)
from .schema import (SAI_CLASS, SASI_CLASS, Column, Index, Keyspace, Table, normalize_replication,
                     table_options)
from .select import SelectPlan
from .system import SYSTEM_KEYSPACES, SystemTables
from .terms import compile_term, resolve_int
from .types import BIGINT

_NAME_RE = re.compile(r"^\w{1,48}$")
_SAI_NAMES = {"sai", "storageattachedindex", SAI_CLASS.lower()}


class Session:
    """Per-connection state: the current keyspace (USE)."""

    def __init__(self) -> None:
        self.keyspace: str | None = None


class _UsePlan:
    def __init__(self, keyspace: str):
        self.keyspace = keyspace


class _DDLPlan:
    def __init__(self, stmt: Any, keyspace: str | None):
        self.stmt = stmt
        self.keyspace = keyspace


class _BatchPlan:
    def __init__(self, kind: str, plans: list, ts: tuple | None):
        self.kind = kind
        self.plans = plans
        self.ts = ts


class Engine:
    """Holds keyspaces and executes statements with Cassandra's rules."""

    def __init__(self, host: str = "127.0.0.1", sasi: bool = True, sai: bool = True):
        self.host = host
        self.sasi = sasi
        self.sai = sai
        self.lock = threading.RLock()
        self.keyspaces: dict[str, Keyspace] = {}
        self.schema_version = 0
        self.schema_uuid = uuid.uuid4()
        self.clock_offset = 0.0
        self._last_ts = 0
        self.prepared: dict[bytes, tuple[str, str | None, Compiled | None]] = {}
        self._cache: OrderedDict = OrderedDict()
        self.system = SystemTables(self)

    # -- clock -------------------------------------------------------------------
    def now(self) -> float:
        return time.time() + self.clock_offset

    def now_seconds(self) -> int:
        return int(self.now())

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.clock_offset += seconds

    def next_timestamp(self) -> int:
        ts = int(self.now() * 1_000_000)
        if ts <= self._last_ts:
            ts = self._last_ts + 1
        self._last_ts = ts
        return ts

    def schema_changed(self) -> None:
        self.schema_version += 1
        self.schema_uuid = uuid.uuid5(uuid.NAMESPACE_OID, f"cqlserver-schema-{id(self)}-{self.schema_version}")
        self._cache.clear()

    def drop_all(self) -> None:
        with self.lock:
            self.keyspaces.clear()
            self.prepared.clear()
            self.schema_changed()

    # -- lookups -----------------------------------------------------------------
    def _ks_name(self, ks: str | None, session_ks: str | None) -> str:
        name = ks or session_ks
        if not name:
            raise InvalidRequest("No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename")
        return name

    def table(self, ks: str | None, name: str, session_ks: str | None) -> Table:
        ksn = self._ks_name(ks, session_ks)
        if ksn in SYSTEM_KEYSPACES:
            t = self.system.table(ksn, name)
            if t is None:
                raise InvalidRequest(f"unconfigured table {name}")
            return t
        keyspace = self.keyspaces.get(ksn)
        if keyspace is None:
            raise InvalidRequest(f"Keyspace {ksn} does not exist")
        t = keyspace.tables.get(name)
        if t is None:
            raise InvalidRequest(f"unconfigured table {name}")
        return t

    # -- compiling -----------------------------------------------------------------
    def compile(self, text: str, session_ks: str | None) -> Compiled:
        key = (session_ks, text)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        stmt, nmarkers, _names = cql.parse(text)
        compiled = self._compile_stmt(stmt, nmarkers, session_ks)
        compiled.schema_version = self.schema_version
        self._cache[key] = compiled
        if len(self._cache) > 4096:
            self._cache.popitem(last=False)
        return compiled

    def _compile_stmt(self, stmt: Any, nmarkers: int, session_ks: str | None) -> Compiled:
        specs: list = [None] * nmarkers
        if isinstance(stmt, cql.Use):
            return Compiled(_UsePlan(stmt.keyspace), [])
        if isinstance(stmt, cql.Select):
            table = self.table(stmt.keyspace, stmt.table, session_ks)
            plan = SelectPlan(self, table, stmt, specs)
            return self._done(Compiled(plan, specs, plan.pk_indexes, table.keyspace, table.name, plan.columns))
        if isinstance(stmt, cql.MODIFICATIONS):
            plan = self._write_plan(stmt, specs, session_ks)
            return self._done(Compiled(plan, specs, plan.pk_indexes, plan.table.keyspace, plan.table.name))
        if isinstance(stmt, cql.Batch):
            plans = []
            for s in stmt.statements:
                p = self._write_plan(s, specs, session_ks)
                if stmt.timestamp is not None and p.has_timestamp:
                    raise InvalidRequest("Timestamp must be set either on BATCH or individual statements")
                plans.append(p)
            ts = compile_term(stmt.timestamp, BIGINT, "[timestamp]", specs) if stmt.timestamp is not None else None
            first = plans[0] if plans else None
            return self._done(Compiled(_BatchPlan(stmt.kind, plans, ts), specs, [],
                                       first.table.keyspace if first else "", first.table.name if first else ""))
        if nmarkers:
            raise InvalidRequest("Bind variables are not allowed in schema statements")
        return Compiled(_DDLPlan(stmt, session_ks), [])

    def _done(self, c: Compiled) -> Compiled:
        if any(s is None for s in c.specs):
            raise InvalidRequest("Bind variables are not supported at this position by the CQL test server")
        return c

    def _write_plan(self, stmt: Any, specs: list, session_ks: str | None) -> WritePlan:
        ksn = self._ks_name(stmt.keyspace, session_ks)
        if ksn in SYSTEM_KEYSPACES:
            raise InvalidRequest(f"Cannot modify the system keyspace {ksn} (the CQL test server keeps it read-only)")
        table = self.table(stmt.keyspace, stmt.table, session_ks)
        if isinstance(stmt, cql.Insert):
            return InsertPlan(table, stmt, specs)
        if isinstance(stmt, cql.Update):
            return UpdatePlan(table, stmt, specs)
        return DeletePlan(table, stmt, specs)

    # -- protocol entry points ---------------------------------------------------
    def query(self, session: Session, text: str, values: list, opts: Options) -> Any:
        with self.lock:
            compiled = self.compile(text, session.keyspace)
            return self._run(session, compiled, values, opts)

    def prepare(self, session: Session, text: str) -> Prepared:
        with self.lock:
            compiled = self.compile(text, session.keyspace)
            qid = hashlib.md5(((session.keyspace or "") + "\x00" + text).encode()).digest()
            self.prepared[qid] = (text, session.keyspace, compiled)
            cols = compiled.result_columns if isinstance(compiled.plan, SelectPlan) else None
            return Prepared(qid, compiled.keyspace, compiled.table, compiled.specs, compiled.pk_indexes, cols)

    def _prepared(self, qid: bytes) -> Compiled:
        entry = self.prepared.get(qid)
        if entry is None:
            raise Unprepared(f"Prepared query with ID {qid.hex()} not found (either the query was not prepared on "
                             "this host (maybe the host has been restarted?) or you have prepared too many queries "
                             "and it has been evicted from the internal cache)", qid)
        text, ks, compiled = entry
        if compiled is None or compiled.schema_version != self.schema_version:
            compiled = self.compile(text, ks)
            self.prepared[qid] = (text, ks, compiled)
        return compiled

    def execute(self, session: Session, qid: bytes, values: list, opts: Options) -> Any:
        with self.lock:
            compiled = self._prepared(qid)
            return self._run(session, compiled, values, opts)

    def batch(self, session: Session, kind: int, items: list, opts: Options) -> Any:
        """items: [(query string or prepared id bytes, values)]"""
        with self.lock:
            plans = []
            for what, values in items:
                compiled = self._prepared(what) if isinstance(what, bytes) else self.compile(what, session.keyspace)
                if not isinstance(compiled.plan, WritePlan):
                    raise InvalidRequest("Invalid statement in batch: only UPDATE, INSERT and DELETE statements are allowed.")
                values = self._check_values(compiled, values, opts)
                plans.append((compiled.plan, values))
            default_ts = opts.timestamp if opts.timestamp is not None else self.next_timestamp()
            return self._apply_batch(plans, default_ts, "UNLOGGED" if kind == 1 else "LOGGED")

    # -- running -------------------------------------------------------------------
    def _check_values(self, compiled: Compiled, values: list, opts: Options) -> list:
        specs = compiled.specs
        if opts.names:
            by_name = dict(zip(opts.names, values))
            values = [by_name.get(name, UNSET) for name, _ in specs]
        if len(values) != len(specs):
            raise InvalidRequest(f"Invalid amount of bind variables: expected {len(specs)} but got {len(values)}")
        return values

    def _run(self, session: Session, compiled: Compiled, values: list, opts: Options) -> Any:
        plan = compiled.plan
        values = self._check_values(compiled, values, opts)
        if isinstance(plan, SelectPlan):
            return plan.run(values, opts.page_size, opts.paging_state, self.now_seconds())
        if isinstance(plan, WritePlan):
            default_ts = opts.timestamp if opts.timestamp is not None else self.next_timestamp()
            now = self.now_seconds()
            if plan.conditional:
                applied, cols, vals = plan.check(values, now)
                if applied:
                    plan.apply(values, default_ts, now)
                return plan.lwt_result(applied, cols, vals)
            plan.apply(values, default_ts, now)
            return Void()
        if isinstance(plan, _BatchPlan):
            ts = resolve_int(plan.ts, values, "timestamp")
            if ts is None:
                ts = opts.timestamp if opts.timestamp is not None else self.next_timestamp()
            return self._apply_batch([(p, values) for p in plan.plans], ts, plan.kind)
        if isinstance(plan, _UsePlan):
            if plan.keyspace not in self.keyspaces and plan.keyspace not in SYSTEM_KEYSPACES:
                raise InvalidRequest(f"Keyspace '{plan.keyspace}' does not exist")
            session.keyspace = plan.keyspace
            return SetKeyspace(plan.keyspace)
        if isinstance(plan, _DDLPlan):
            return self._ddl(plan.stmt, session.keyspace)
        raise ServerError("Unknown statement")

    def _apply_batch(self, plans: list, default_ts: int, kind: str) -> Any:
        now = self.now_seconds()
        for p, v in plans:  # reject a bad statement before anything of the batch is written
            p.validate(v)
        conditional = [(p, v) for p, v in plans if p.conditional]
        if conditional:
            keys = set()
            for p, v in plans:
                for pk in p.partition_keys(v):
                    keys.add((p.table.keyspace, p.table.name, pk))
            if len({(k[0], k[1]) for k in keys}) > 1:
                raise InvalidRequest("Batch with conditions cannot span multiple tables")
            if len(keys) > 1:
                raise InvalidRequest("Batch with conditions cannot span multiple partitions")
            applied = True
            for p, v in conditional:
                ok, _, _ = p.check(v, now)
                applied = applied and ok
            if applied:
                for p, v in plans:
                    p.apply(v, default_ts, now)
            t = conditional[0][0].table
            return Rows(t.keyspace, t.name, [APPLIED], [[TRUE if applied else FALSE]])
        for p, v in plans:
            p.apply(v, default_ts, now)
        return Void()

    # -- schema statements ------------------------------------------------------------
    def _ddl(self, stmt: Any, session_ks: str | None) -> Any:
        if isinstance(stmt, cql.CreateKeyspace):
            return self._create_keyspace(stmt)
        if isinstance(stmt, cql.DropKeyspace):
            if stmt.name in SYSTEM_KEYSPACES:
                raise InvalidRequest(f"Cannot drop system keyspace {stmt.name}")
            if stmt.name not in self.keyspaces:
                if stmt.if_exists:
                    return Void()
                raise InvalidRequest(f"Keyspace '{stmt.name}' doesn't exist")
            del self.keyspaces[stmt.name]
            self.schema_changed()
            return SchemaChange("DROPPED", "KEYSPACE", stmt.name)
        ksn = self._ks_name(getattr(stmt, "keyspace", None), session_ks)
        if ksn in SYSTEM_KEYSPACES:
            raise InvalidRequest(f"Cannot alter the system keyspace {ksn}")
        ks = self.keyspaces.get(ksn)
        if ks is None:
            raise InvalidRequest(f"Keyspace '{ksn}' doesn't exist")
        if isinstance(stmt, cql.CreateTable):
            return self._create_table(ks, stmt)
        if isinstance(stmt, cql.DropTable):
            if stmt.name not in ks.tables:
                if stmt.if_exists:
                    return Void()
                raise InvalidRequest(f"Table '{ksn}.{stmt.name}' doesn't exist")
            del ks.tables[stmt.name]
            self.schema_changed()
            return SchemaChange("DROPPED", "TABLE", ksn, stmt.name)
        if isinstance(stmt, cql.Truncate):
            t = ks.tables.get(stmt.name)
            if t is None:
                raise InvalidRequest(f"unconfigured table {stmt.name}")
            t.truncate()
            return Void()
        if isinstance(stmt, cql.CreateIndex):
            return self._create_index(ks, stmt)
        if isinstance(stmt, cql.DropIndex):
            for t in ks.tables.values():
                if stmt.name in t.indexes:
                    del t.indexes[stmt.name]
                    t.refresh_index_data()
                    self.schema_changed()
                    return SchemaChange("UPDATED", "TABLE", ksn, t.name)
            if stmt.if_exists:
                return Void()
            raise InvalidRequest(f"Index '{stmt.name}' could not be found in any of the tables of keyspace '{ksn}'")
        if isinstance(stmt, cql.AlterTable):
            return self._alter_table(ks, stmt)
        raise InvalidRequest(f"Unsupported statement {type(stmt).__name__}")

    def _create_keyspace(self, stmt: cql.CreateKeyspace) -> Any:
        if not _NAME_RE.match(stmt.name):
            raise InvalidRequest(f'Keyspace name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got "{stmt.name}")')
        if stmt.name in SYSTEM_KEYSPACES:
            raise InvalidRequest(f"Keyspace name {stmt.name} is reserved")
        replication = None
        durable = True
        for name, lit in stmt.options.items():
            if name == "replication":
                if lit[0] != "map":
                    raise InvalidRequest("replication must be a map, e.g. {'class': 'SimpleStrategy', 'replication_factor': 1}")
                replication = normalize_replication({k[1]: v[1] for k, v in lit[1]})
            elif name == "durable_writes":
                if lit[0] == "bool":
                    durable = lit[1]
                elif lit[0] == "str" and lit[1].lower() in ("true", "false"):
                    durable = lit[1].lower() == "true"
                else:
                    raise InvalidRequest(f"Invalid boolean value {lit[2]} for 'durable_writes'")
            else:
                raise ConfigurationError(f"Unknown property '{name}'")
        if replication is None:
            raise ConfigurationError("Missing mandatory option 'replication'")
        if stmt.name in self.keyspaces:
            if stmt.if_not_exists:
                return Void()
            raise AlreadyExists(f'Cannot add existing keyspace "{stmt.name}"', stmt.name)
        self.keyspaces[stmt.name] = Keyspace(stmt.name, replication, durable)
        self.schema_changed()
        return SchemaChange("CREATED", "KEYSPACE", stmt.name)

    def _create_table(self, ks: Keyspace, stmt: cql.CreateTable) -> Any:
        name = stmt.name
        if not _NAME_RE.match(name):
            raise InvalidRequest(f'Table name must not be empty, more than 48 characters long, or contain non-alphanumeric-underscore characters (got "{name}")')
        if name in ks.tables:
            if stmt.if_not_exists:
                return Void()
            raise AlreadyExists(f'Cannot add already existing table "{name}" to keyspace "{ks.name}"', ks.name, name)
        npk = stmt.inline_pk_count + stmt.pk_clause_count
        if npk == 0:
            raise InvalidRequest(f"No PRIMARY KEY specifed for table '{name}' (exactly one required)")
        if npk > 1:
            raise InvalidRequest(f"Multiple PRIMARY KEY specified for table '{name}' (exactly one required)")
        types: dict[str, Any] = {}
        for cname, ctype, static in stmt.columns:
            if cname in types:
                raise InvalidRequest(f"Duplicate column '{cname}' declaration for table '{ks.name}.{name}'")
            if static:
                raise InvalidRequest("Static columns are not supported by the CQL test server")
            if ctype.name == "counter":
                raise InvalidRequest("Counter columns are not supported by the CQL test server")
            types[cname] = ctype
        key_cols = stmt.partition_key + stmt.clustering
        if len(set(key_cols)) != len(key_cols):
            raise InvalidRequest(f"Duplicate column in PRIMARY KEY of table '{name}'")
        for cname in key_cols:
            if cname not in types:
                raise InvalidRequest(f"Unknown definition {cname} referenced in PRIMARY KEY")
            if types[cname].is_collection and not types[cname].frozen:
                raise InvalidRequest(f"Invalid non-frozen collection type {types[cname].cql()} for PRIMARY KEY component {cname}")
        order = {c: "asc" for c in stmt.clustering}
        for i, (cname, direction) in enumerate(stmt.clustering_order):
            if cname not in order:
                raise InvalidRequest(f"Only clustering key columns can be defined in CLUSTERING ORDER directive: {cname} is not a clustering column")
            if i >= len(stmt.clustering) or stmt.clustering[i] != cname:
                raise InvalidRequest("The order of columns in the CLUSTERING ORDER directive must match that of the clustering columns")
            order[cname] = direction.lower()
        columns = []
        for cname, ctype, _ in stmt.columns:
            if cname in stmt.partition_key:
                columns.append(Column(cname, ctype, "partition_key", stmt.partition_key.index(cname)))
            elif cname in stmt.clustering:
                columns.append(Column(cname, ctype, "clustering", stmt.clustering.index(cname), order[cname]))
            else:
                columns.append(Column(cname, ctype, "regular"))
        opts = table_options(stmt.options)
        ks.tables[name] = Table(ks.name, name, columns, opts)
        self.schema_changed()
        return SchemaChange("CREATED", "TABLE", ks.name, name)

    def _alter_table(self, ks: Keyspace, stmt: cql.AlterTable) -> Any:
        t = ks.tables.get(stmt.name)
        if t is None:
            raise InvalidRequest(f"Table '{ks.name}.{stmt.name}' doesn't exist")
        for cname, ctype, static in stmt.add:
            if cname in t.columns:
                raise InvalidRequest(f"Column with name '{cname}' already exists")
            if static:
                raise InvalidRequest("Static columns are not supported by the CQL test server")
            t.add_column(Column(cname, ctype, "regular"))
        for cname in stmt.drop:
            col = t.columns.get(cname)
            if col is None:
                raise InvalidRequest(f"Column {cname} was not found in table {stmt.name}")
            if col.is_primary_key:
                raise InvalidRequest(f"Cannot drop PRIMARY KEY part {cname}")
            if t.index_on(cname):
                raise InvalidRequest(f"Cannot drop column {cname} because it has dependent secondary indexes")
            t.drop_column(cname)
        if stmt.options:
            t.options = table_options(stmt.options, base=t.options)
        self.schema_changed()
        return SchemaChange("UPDATED", "TABLE", ks.name, t.name)

    def _create_index(self, ks: Keyspace, stmt: cql.CreateIndex) -> Any:
        t = ks.tables.get(stmt.table)
        if t is None:
            raise InvalidRequest(f"Table '{stmt.table}' doesn't exist")
        using = stmt.using
        if stmt.custom and not using:
            raise InvalidRequest("CUSTOM index requires specifying the index class")
        if stmt.column is None:
            raise InvalidRequest("Only CUSTOM indexes can be created without specifying a target column")
        if not stmt.custom and stmt.options:
            raise InvalidRequest("Cannot specify options for a non-CUSTOM index")
        # which implementation
        if using is None:
            kind, class_name = "legacy", None
        else:
            lowered = using.lower()
            if lowered in _SAI_NAMES:
                if not self.sai:
                    if not stmt.custom:
                        raise InvalidRequest("Cannot specify index class for a non-CUSTOM index")
                    raise ConfigurationError(f"Unable to find custom indexer class '{using}'")
                kind, class_name = "sai", SAI_CLASS
            elif using == SASI_CLASS:
                if not stmt.custom:
                    raise InvalidRequest("Cannot specify index class for a non-CUSTOM index")
                if not self.sasi:
                    raise InvalidRequest("SASI indexes are disabled. Enable in cassandra.yaml to use. "
                                         "(set sasi_indexes_enabled: true in cassandra.yaml)")
                kind, class_name = "sasi", SASI_CLASS
            else:
                if not stmt.custom and not self.sai:
                    raise InvalidRequest("Cannot specify index class for a non-CUSTOM index")
                raise ConfigurationError(f"Unable to find custom indexer class '{using}'")
        col = t.columns.get(stmt.column)
        if col is None:
            raise InvalidRequest(f"Column '{stmt.column}' doesn't exist")
        if col.kind == "partition_key":
            if kind == "sasi":
                raise ConfigurationError("partition key columns are not yet supported by SASI")
            if len(t.partition_key) == 1:
                raise InvalidRequest(f"Cannot create secondary index on the only partition key column {col.name}")
        if col.type.is_collection and kind == "sasi":
            raise ConfigurationError(f"Cannot create SASI index on collection column {col.name}")
        if col.type.is_collection and stmt.target_kind == "simple" and not col.type.frozen:
            target_kind = "values"
        else:
            target_kind = stmt.target_kind
        options = dict(stmt.options)
        if kind == "sasi":
            mode = str(options.get("mode", "PREFIX")).upper()
            if mode not in ("PREFIX", "CONTAINS", "SPARSE"):
                raise ConfigurationError(f"Incorrect index mode: {options.get('mode')}")
            if mode == "CONTAINS" and not col.type.is_text:
                raise ConfigurationError(f"CONTAINS mode is only supported on text columns ({col.name} is {col.type.cql()})")
        name = stmt.name or f"{t.name}_{col.name}_idx"
        for other in ks.tables.values():
            if name in other.indexes:
                if stmt.if_not_exists:
                    return Void()
                raise InvalidRequest(f"Index '{name}' already exists")
        for existing in t.indexes.values():
            if existing.column == col.name and existing.kind == kind:
                if stmt.if_not_exists:
                    return Void()
                raise InvalidRequest(f"Index {name} is a duplicate of existing index {existing.name}")
        target = col.name if target_kind == "simple" else f"{target_kind}({col.name})"
        t.indexes[name] = Index(name, col.name, kind, class_name, options, target)
        t.refresh_index_data()
        self.schema_changed()
        return SchemaChange("UPDATED", "TABLE", ks.name, t.name)


__all__ = ["Engine", "Session", "CQLError"]
