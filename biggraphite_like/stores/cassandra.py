"""The Cassandra store: metadata and datapoints on an Apache Cassandra cluster (3.11, 4.x, 5.0).

- One driver Session per process (protocol v4, token-aware and DC-aware routing), opened
  on first use and opened again in a forked child (carbon forks after loading plugins).
- Prepared statements everywhere; metadata statements use the metadata consistency levels,
  datapoint statements the data ones (URL options, see cassandra_options.py).
- Requests run asynchronously, at most `max_concurrency` in flight; a failure raises an
  error saying what failed, against which hosts, within which timeout
  (cassandra_requests.py).
- Schema and data layout: cassandra_schema.py. Glob planning: cassandra_glob.py.

Deleting a metric writes a new *generation* for its name (metric_generations) before
removing its row. A metric's data id (the partition key of its points) is uuid5 of its
name, or of name and generation once it was deleted, so a metric written again starts
empty; the old partitions are no longer read and expire with their TTL. A deletion also
changes a marker that every process reads once per write batch and read snapshot, and
then forgets the data ids it cached (see `_check_deletions`).

`expire_points` returns 0: Cassandra expires points itself (TTL of each stage table).
"""
from __future__ import annotations

import contextlib
import itertools
import os
import ssl
import threading
import time
import uuid
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from biggraphite_like import names as names_mod
from biggraphite_like.errors import MetricNotFound, SchemaMissing, StoreError, TooManyResults
from biggraphite_like.glob import GlobPattern
from biggraphite_like.metric import METRIC_ID_NAMESPACE, Metric, MetricMetadata, metric_id
from biggraphite_like.stores import cassandra_glob as planner
from biggraphite_like.stores import cassandra_schema as schema
from biggraphite_like.stores.cassandra_tags import CassandraTagIndex
from biggraphite_like.stores.base import PointReads, ScanPage, StageTable, Store, check_shard, metrics_page
from biggraphite_like.stores.cassandra_options import CassandraOptions, parse_url, safe_url
try:  # the driver is an optional dependency: the registry imports this module only for cassandra://
    from cassandra import ConsistencyLevel, InvalidRequest, RequestValidationException
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import ConstantReconnectionPolicy, DCAwareRoundRobinPolicy, TokenAwarePolicy
    from cassandra.query import UNSET_VALUE, BatchStatement, BatchType, SimpleStatement, tuple_factory

    from biggraphite_like.stores.cassandra_requests import (
        CassandraRequestError,
        RequestRunner,
        is_missing_table,
        translate,
    )
except ImportError as _exc:  # pragma: no cover - exercised only without the driver
    raise ImportError(
        "the cassandra:// store needs the DataStax driver: pip install cassandra-driver"
        " (or this package's [cassandra] extra)") from _exc

CANDIDATE_FACTOR = 10  # candidates a glob may read per allowed result when the index cannot decide alone
MAX_BATCH = 256  # statements per unlogged (single-partition) batch
WALK_LIMIT = 256  # directories one level of a glob walk may list before the depth query takes over
DDL_TIMEOUT = 60.0
MIN_TOKEN, MAX_TOKEN = -(2**63), 2**63 - 1
_METRIC_SELECT = "name, " + ", ".join(schema.METRIC_COLUMNS)


class _Connection:
    """The driver objects of one process, shared by the stores with the same connection options."""

    def __init__(self, key: tuple, cluster, session, runner: RequestRunner):
        self.pid = os.getpid()
        self.key = key
        self.cluster = cluster
        self.session = session
        self.runner = runner
        self.users = 0


_shared: dict[tuple, _Connection] = {}
_shared_lock = threading.Lock()
_shared_pid = os.getpid()


def _acquire(key: tuple, connect) -> _Connection:
    """The process's connection for key, opened by connect() if there is none."""
    global _shared_lock, _shared_pid
    if _shared_pid != os.getpid():  # forked: the parent's connections (and lock) are not ours
        _shared_lock, _shared_pid = threading.Lock(), os.getpid()
        _shared.clear()
    with _shared_lock:
        connection = _shared.get(key)
        if connection is None:
            connection = _shared[key] = connect(key)
        connection.users += 1
        return connection


def _release(connection: _Connection) -> None:
    with _shared_lock:
        connection.users -= 1
        if connection.users > 0 or _shared.get(connection.key) is not connection:
            return
        del _shared[connection.key]
    connection.cluster.shutdown()


def data_id(name: str, generation: int | None) -> uuid.UUID:
    """Partition key of a metric's points: changes with each deletion of the name."""
    if not generation:
        return metric_id(name)
    return uuid.uuid5(METRIC_ID_NAMESPACE, f"{name}\n{generation}")  # "\n" never appears in a name


def token_range(shard: int, nshards: int) -> tuple[int, int]:
    """(exclusive low, inclusive high) Murmur3 tokens of shard k of n equal parts of the ring."""
    check_shard(shard, nshards)
    total = 2**64
    low = MIN_TOKEN + total * shard // nshards
    high = MIN_TOKEN + total * (shard + 1) // nshards
    return low, min(high, MAX_TOKEN)


class CassandraStore(Store):
    """Metrics and points in two Cassandra keyspaces (see module docstring)."""

    def __init__(self, options: CassandraOptions, url: str):
        self.options = options
        self.url = url
        self._display_url = safe_url(url)
        self.keyspace = options.keyspace
        self.metadata_keyspace = options.metadata_keyspace
        self._connection: _Connection | None = None
        self._prepared: dict[str, Any] = {}  # per store: consistency levels are the store's own
        self._lock = threading.Lock()
        self._lock_pid = os.getpid()
        self._index_kind: str | None = None  # read from store_settings (or chosen by syncdb)
        self._tables: set[str] = set()
        self._ids: dict[str, uuid.UUID] = {}
        self._deletions_seen: str | None = None
        self._local = threading.local()
        levels = ConsistencyLevel.name_to_value
        self._levels = {kind: levels[getattr(options, kind)]
                        for kind in ("metadata_read", "metadata_write", "data_read", "data_write")}

    @classmethod
    def from_url(cls, url: str) -> "CassandraStore":
        return cls(parse_url(url), url)

    # -- connection ------------------------------------------------------------------------
    @property
    def _conn(self) -> _Connection:
        """This process's connection (one Session per process and cluster), opened on first use."""
        connection = self._connection
        if connection is not None and connection.pid == os.getpid():
            return connection
        if self._lock_pid != os.getpid():  # forked: the parent's lock may be held by a thread that is gone
            self._lock, self._lock_pid = threading.Lock(), os.getpid()
        with self._lock:
            connection = self._connection
            if connection is None or connection.pid != os.getpid():
                # after a fork the parent's cluster is left alone (its threads are not ours)
                self._prepared = {}
                connection = self._connection = _acquire(self._connection_key(), self._connect)
        return connection

    def _connection_key(self) -> tuple:
        o = self.options
        return (o.hosts, o.port, o.username, o.password, o.ssl, o.ssl_ca, o.ssl_cert, o.ssl_key, o.ssl_verify,
                o.local_dc, o.timeout, o.max_concurrency)

    def _connect(self, key: tuple) -> _Connection:
        o = self.options
        policy = TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=o.local_dc))
        profile = ExecutionProfile(load_balancing_policy=policy, request_timeout=o.timeout, row_factory=tuple_factory)
        auth = PlainTextAuthProvider(username=o.username, password=o.password) if o.username else None
        cluster = Cluster(
            contact_points=list(o.hosts),
            port=o.port,
            protocol_version=4,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            auth_provider=auth,
            ssl_context=self._ssl_context(),
            reconnection_policy=ConstantReconnectionPolicy(delay=1.0, max_attempts=None),
            connect_timeout=o.timeout,
            control_connection_timeout=o.timeout,
            # a table a schema change creates must be known to every node before the store uses
            # it: a busy multi-node cluster can take longer than the driver's default 10 s
            max_schema_agreement_wait=int(max(DDL_TIMEOUT, o.timeout)),
            idle_heartbeat_interval=max(5, int(o.timeout)),
            schema_metadata_enabled=True,  # keyspace replication: token-aware routing needs it
            token_metadata_enabled=True,
        )
        try:
            session = cluster.connect()
        except Exception as exc:
            cluster.shutdown()
            raise translate(exc, f"connect to Cassandra at {','.join(o.hosts)}:{o.port}", o.timeout,
                            self._display_url) from exc
        # Session.prepare waits the session's legacy default timeout (10 s), which cannot be set
        # through the public property once execution profiles are used: set it underneath
        session._default_timeout = o.timeout
        return _Connection(key, cluster, session, RequestRunner(o.max_concurrency, o.timeout, self._display_url))

    def _ssl_context(self) -> ssl.SSLContext | None:
        o = self.options
        if not o.ssl:
            return None
        context = ssl.create_default_context(cafile=o.ssl_ca)
        if o.ssl_cert:
            context.load_cert_chain(o.ssl_cert, o.ssl_key)
        if not o.ssl_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def close(self) -> None:
        """Stop using the process's connection (closed when no other store uses it)."""
        connection, self._connection = self._connection, None
        if connection is not None and connection.pid == os.getpid():
            _release(connection)

    def _prepare(self, query: str, kind: str):
        """The prepared statement of query (once per process), at the consistency of `kind`."""
        connection = self._conn
        statement = self._prepared.get(query)
        if statement is None:
            try:
                statement = connection.session.prepare(query)
            except Exception as exc:
                raise translate(exc, f"prepare {query[:80]!r}", self.options.timeout, self._display_url) from exc
            statement.consistency_level = self._levels[kind]
            self._prepared[query] = statement
        return statement

    def _run(self, requests: Sequence[tuple[Any, Any]], what: str) -> list[list[tuple]]:
        connection = self._conn
        return connection.runner.run(connection.session, requests, what)

    def _execute(self, query: str, parameters: Sequence, kind: str, what: str) -> list[tuple]:
        return self._run([(self._prepare(query, kind), parameters)], what)[0]

    # -- schema ------------------------------------------------------------------------------
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

    # -- metadata ------------------------------------------------------------------------------
    def create_metrics(self, metrics: Sequence[Metric]) -> None:
        if not metrics:
            return
        self._check_schema()
        for metric in metrics:
            for index in range(len(metric.retention.stages)):
                self._ensure_table(StageTable.of(metric, index))
        meta = self.metadata_keyspace
        existing = self._read_rows([m.name for m in metrics])
        generations = self._generations([m.name for m in metrics if m.name not in existing])
        insert = self._prepare(
            f"INSERT INTO {meta}.metrics (name, parent, {', '.join(schema.COMPONENT_COLUMNS)}, "
            f"{', '.join(schema.METRIC_COLUMNS)}) VALUES ({', '.join(['?'] * (schema.COMPONENTS + 9))})",
            "metadata_write")
        update = self._prepare(
            f"UPDATE {meta}.metrics SET retention = ?, aggregator = ?, xfilesfactor = ?, updated_on = ? WHERE name = ?",
            "metadata_write")
        requests: list[tuple[Any, Any]] = []
        ids: dict[str, uuid.UUID] = {}
        for metric in metrics:
            md = metric.metadata
            row = existing.get(metric.name)
            if row is not None:
                ids[metric.name] = row[1]
                requests.append((update, (str(md.retention), md.aggregator.value, md.xfilesfactor,
                                          metric.updated_on, metric.name)))
            else:
                ids[metric.name] = data_id(metric.name, generations.get(metric.name))
                requests.append((insert, (metric.name, _parent(metric.name), *_components(metric.name),
                                          ids[metric.name], str(md.retention), md.aggregator.value, md.xfilesfactor,
                                          metric.created_on, metric.updated_on, metric.read_on)))
        directories = sorted({d for m in metrics for d in names_mod.ancestors(m.name)})
        requests += self._directory_inserts(directories)
        self._run(requests, f"create {len(metrics)} metrics and {len(directories)} directories")
        self._ids.update(ids)

    def _read_rows(self, names: Sequence[str], partial: bool = False) -> dict[str, tuple]:
        """Metric rows by name: (name, id, retention, ...) as in schema.METRIC_COLUMNS.

        Rows without a data id or retention are left by a touch racing a deletion: they are
        not metrics, and are only returned with `partial` (to delete them)."""
        names = list(dict.fromkeys(names))
        select = self._prepare(f"SELECT {_METRIC_SELECT} FROM {self.metadata_keyspace}.metrics WHERE name = ?",
                               "metadata_read")
        results = self._run([(select, (n,)) for n in names], f"read {len(names)} metrics")
        return {rows[0][0]: rows[0] for rows in results
                if rows and (partial or (rows[0][2] is not None and rows[0][1] is not None))}

    def _generations(self, names: Sequence[str]) -> dict[str, int]:
        if not names:
            return {}
        select = self._prepare(f"SELECT generation FROM {self.metadata_keyspace}.metric_generations WHERE name = ?",
                               "metadata_read")
        results = self._run([(select, (n,)) for n in names], f"read the generations of {len(names)} metric names")
        return {n: rows[0][0] for n, rows in zip(names, results) if rows and rows[0][0]}

    def get_metrics(self, names: Sequence[str]) -> dict[str, Metric]:
        self._check_schema()
        rows = self._read_rows(names)
        for name, row in rows.items():
            self._ids[name] = row[1]
        found = self.readable_metrics(map(_stored_fields, rows.values()))
        for name in names:
            if name not in rows:
                self._ids.pop(name, None)
        return found

    def update_metadata(self, name: str, metadata: MetricMetadata) -> None:
        self._check_schema()
        if name not in self._read_rows([name]):
            raise MetricNotFound(f"metric {name!r} does not exist")
        for index, stage in enumerate(metadata.retention.stages):
            self._ensure_table(StageTable(stage, index > 0))
        self._execute(
            f"UPDATE {self.metadata_keyspace}.metrics SET retention = ?, aggregator = ?, xfilesfactor = ? WHERE name = ?",
            (str(metadata.retention), metadata.aggregator.value, metadata.xfilesfactor, name),
            "metadata_write", f"update the metadata of {name}")

    def touch_metrics(self, names: Sequence[str], field: str, timestamp: int) -> None:
        if field not in ("updated_on", "read_on"):
            raise ValueError(f"cannot touch {field!r}: use updated_on or read_on")
        if not names:
            return
        self._check_schema()
        update = self._prepare(f"UPDATE {self.metadata_keyspace}.metrics SET {field} = ? WHERE name = ?",
                               "metadata_write")
        self._run([(update, (timestamp, n)) for n in dict.fromkeys(names)], f"set {field} of {len(names)} metrics")

    def delete_metrics(self, names: Sequence[str]) -> None:
        self._check_schema()
        existing = list(self._read_rows(names, partial=True))
        if not existing:
            return
        meta = self.metadata_keyspace
        generation = time.time_ns() // 1000
        insert = self._prepare(f"INSERT INTO {meta}.metric_generations (name, generation) VALUES (?, ?)",
                               "metadata_write")
        delete = self._prepare(f"DELETE FROM {meta}.metrics WHERE name = ?", "metadata_write")
        # the generation first: a metric created again must never get the old data id back
        self._run([(insert, (n, generation)) for n in existing], f"record the deletion of {len(existing)} metrics")
        self._run([(delete, (n,)) for n in existing], f"delete {len(existing)} metrics")
        for name in existing:
            self._ids.pop(name, None)
        marker = self._prepare(f"INSERT INTO {meta}.{schema.SETTINGS_TABLE} (name, value) VALUES (?, ?)",
                               "metadata_write")
        self._run([(marker, ("deletions", f"{generation}-{uuid.uuid4().hex}"))], "record that metrics were deleted")

    @contextlib.contextmanager
    def write_batch(self) -> Iterator[None]:
        """Not a transaction (Cassandra has none); the outermost one checks for deletions first."""
        with self._deletions_checked():
            yield

    @contextlib.contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """Not a snapshot (Cassandra has none); the outermost one checks for deletions first."""
        with self._deletions_checked():
            yield

    @contextlib.contextmanager
    def _deletions_checked(self) -> Iterator[None]:
        """The outermost batch or snapshot is one operation: `timeout` bounds all of it."""
        local = self._local
        depth = getattr(local, "depth", 0)
        with self._conn.runner.operation():
            if not depth:
                self._check_deletions()
            local.depth = depth + 1
            try:
                yield
            finally:
                local.depth = depth

    def _check_deletions(self) -> None:
        """Forget cached data ids when any process deleted metrics since we last looked.

        A metric deleted and created again has a new data id: points written under the old
        one would be lost, points read under it would be the deleted ones. Deletions change
        one row of store_settings, read once a write batch or read snapshot, so a writer
        with a stale id finds the metric gone (MetricNotFound: the accessor reads the
        metadata again and creates the metric if it was asked to) and a reader reads the
        new id (or nothing).
        """
        try:
            self._check_schema()
        except SchemaMissing:
            return  # the batch's first statement says so
        rows = self._execute(f"SELECT value FROM {self.metadata_keyspace}.{schema.SETTINGS_TABLE} WHERE name = ?",
                             ["deletions"], "metadata_read", "read the deletion marker")
        marker = rows[0][0] if rows else None
        if marker != self._deletions_seen:
            self._ids.clear()
            self._deletions_seen = marker

    def _metric_ids(self, names: Iterable[str], missing_ok: bool) -> dict[str, uuid.UUID]:
        unique = list(dict.fromkeys(names))
        unknown = [n for n in unique if n not in self._ids]
        if unknown:
            rows = self._read_rows(unknown)
            for name, row in rows.items():
                self._ids[name] = row[1]
            if not missing_ok:
                missing = [n for n in unknown if n not in rows]
                if missing:
                    raise MetricNotFound(f"metric {missing[0]!r} does not exist: create it before writing points")
        return {n: self._ids[n] for n in unique if n in self._ids}

    # -- directories and full scans ------------------------------------------------------------
    def _directory_inserts(self, directories: Sequence[str]) -> list[tuple[Any, Any]]:
        insert = self._prepare(
            f"INSERT INTO {self.metadata_keyspace}.directories (name, parent, {', '.join(schema.COMPONENT_COLUMNS)})"
            f" VALUES ({', '.join(['?'] * (schema.COMPONENTS + 2))})", "metadata_write")
        return [(insert, (d, _parent(d), *_components(d))) for d in directories]

    def create_directories(self, names: Sequence[str]) -> None:
        self._check_schema()
        wanted = sorted({a for n in names for a in (*names_mod.ancestors(n), n)})
        self._run(self._directory_inserts(wanted), f"create {len(wanted)} directories")

    def delete_directories(self, names: Sequence[str]) -> None:
        self._check_schema()
        delete = self._prepare(f"DELETE FROM {self.metadata_keyspace}.directories WHERE name = ?", "metadata_write")
        self._run([(delete, (n,)) for n in dict.fromkeys(names)], f"delete {len(names)} directories")

    def existing_directories(self, names: Sequence[str]) -> set[str]:
        self._check_schema()
        select = self._prepare(f"SELECT name FROM {self.metadata_keyspace}.directories WHERE name = ?",
                               "metadata_read")
        results = self._run([(select, (n,)) for n in dict.fromkeys(names)], f"read {len(names)} directories")
        return {rows[0][0] for rows in results if rows}

    def directories_with_children(self, names: Sequence[str]) -> set[str]:
        self._check_schema()
        unique = [n for n in dict.fromkeys(names) if n]
        requests = []
        for table in ("metrics", "directories"):
            select = self._prepare(
                f"SELECT parent FROM {self.metadata_keyspace}.{table} WHERE parent = ? LIMIT 1", "metadata_read")
            requests += [(select, (n,)) for n in unique]
        results = self._run(requests, f"find children of {len(unique)} directories")
        return {rows[0][0] for rows in results if rows}

    def scan_metrics(self, shard=0, nshards=1, cursor=None, page_size=1000) -> Iterator[ScanPage[Metric]]:
        for rows, next_cursor in self._scan("metrics", _METRIC_SELECT, shard, nshards, cursor, page_size):
            yield metrics_page(map(_stored_fields, rows), next_cursor)

    def scan_directories(self, shard=0, nshards=1, cursor=None, page_size=1000) -> Iterator[ScanPage[str]]:
        for rows, next_cursor in self._scan("directories", "name", shard, nshards, cursor, page_size):
            yield ScanPage([r[0] for r in rows], next_cursor)

    def _scan(self, table: str, columns: str, shard: int, nshards: int, cursor: str | None, page_size: int):
        """Pages of one shard's token range; the cursor is `shard/nshards/<driver paging state>`."""
        low, high = token_range(shard, nshards)
        paging_state = None
        if cursor:
            tag, _, state = cursor.rpartition("/")
            try:
                paging_state = bytes.fromhex(state)
            except ValueError:
                paging_state = None
            if tag != f"{shard}/{nshards}" or not paging_state:
                raise ValueError(f"cursor {cursor!r} is not one of a scan of shard {shard} of {nshards}")
        self._check_schema()
        statement = self._prepare(
            f"SELECT {columns} FROM {self.metadata_keyspace}.{table} WHERE token(name) > ? AND token(name) <= ?",
            "metadata_read")
        yielded = False
        while True:
            bound = statement.bind((low, high))
            bound.fetch_size = page_size
            try:
                result = self._conn.session.execute(bound, paging_state=paging_state, timeout=self.options.timeout)
            except Exception as exc:
                raise translate(exc, f"scan {table}", self.options.timeout, self._display_url) from exc
            rows = list(result.current_rows)
            paging_state = result.paging_state
            next_cursor = f"{shard}/{nshards}/{paging_state.hex()}" if paging_state else None
            if rows or (next_cursor is None and yielded):
                yield rows, next_cursor
                yielded = True
            if next_cursor is None:
                return

    def stats(self) -> dict[str, int | float | str]:
        kind = self._check_schema()
        rows = self._run([(SimpleStatement("SELECT release_version FROM system.local"), None)], "read system.local")[0]
        connection = self._conn
        return {
            "store": "cassandra",
            "url": self._display_url,
            "keyspace": self.keyspace,
            "metadata_keyspace": self.metadata_keyspace,
            "index": kind,
            "release_version": rows[0][0] if rows else "unknown",
            "hosts_up": sum(1 for h in connection.cluster.metadata.all_hosts() if h.is_up),
            "hosts_known": len(connection.cluster.metadata.all_hosts()),
            "consistency": ",".join(f"{k}={getattr(self.options, k)}" for k in self._levels),
            "max_concurrency": self.options.max_concurrency,
            "timeout": self.options.timeout,
            "shard": self.options.shard,
            "stage_tables_seen": len(self._tables),
            "prepared_statements": len(self._prepared),
            "stores_sharing_the_session": connection.users,
        }

    # -- globs ---------------------------------------------------------------------------------
    def glob_metrics(self, pattern: GlobPattern, max_results: int) -> list[str]:
        return self._glob("metrics", pattern, max_results)

    def glob_directories(self, pattern: GlobPattern, max_results: int) -> list[str]:
        return self._glob("directories", pattern, max_results)

    def _glob(self, table: str, pattern: GlobPattern, max_results: int) -> list[str]:
        with self._conn.runner.operation():  # a walk's levels share the timeout
            return self._glob_in_time(table, pattern, max_results)

    def _glob_in_time(self, table: str, pattern: GlobPattern, max_results: int) -> list[str]:
        kind = self._check_schema()
        if self.options.max_results is not None:
            max_results = min(max_results, self.options.max_results)
        candidates: list[str] = []
        requests: list[tuple[Any, Any]] = []
        limits: list[int | None] = []  # row limit of each request whose reaching means "too many"
        for part in planner.plan(pattern, like=kind == "sasi"):
            if isinstance(part, planner.Walk):
                candidates += self._walk(table, part.components, max_results)
                continue
            for request, limit in self._part_requests(table, part, max_results):
                requests.append(request)
                limits.append(limit)
        results = self._run(requests, f"glob {pattern.pattern!r} on {table}")
        for rows, limit in zip(results, limits):
            if limit is not None and len(rows) >= limit:
                raise TooManyResults(
                    f"glob {pattern.pattern[:120]!r} reads more than {limit - 1} candidate names (limit"
                    f" max_results={max_results} x {CANDIDATE_FACTOR}); narrow the pattern")
            candidates += (r[0] for r in rows if r[1] is not None)
        return pattern.filter(candidates, max_results)

    def _select(self, table: str, conjunction: planner.Conjunction, limit: int | None):
        where = " AND ".join(f"{r.column} {r.operator} ?" for r in conjunction)
        query = f"SELECT name, component_0 FROM {self.metadata_keyspace}.{table}"
        if where:
            query += f" WHERE {where}"
        if limit is not None:
            query += f" LIMIT {limit}"
        if len(conjunction) > 1 or (conjunction and conjunction[0].column != "name"):
            query += " ALLOW FILTERING"
        return self._prepare(query, "metadata_read"), [r.value for r in conjunction]

    def _part_requests(self, table: str, part: planner.Part, max_results: int):
        """((statement, parameters), limit-that-means-too-many or None) of one plan part."""
        exact_limit = max_results + 1
        loose_limit = max_results * CANDIDATE_FACTOR + 1
        if isinstance(part, planner.Lookup):
            for name in part.names:
                yield self._select(table, (planner.Restriction("name", "=", name),), None), None
        elif isinstance(part, planner.Queries):
            for conjunction in part.queries:
                limit = exact_limit if part.exact else loose_limit
                yield self._select(table, conjunction, limit), None if part.exact else limit
        else:  # Scan
            limit = exact_limit if part.exact else loose_limit
            yield self._select(table, (), limit), None if part.exact else limit

    def _walk(self, table: str, components: Sequence, max_results: int) -> list[str]:
        """Names under directories walked level by level by `parent = ?` (see cassandra_glob)."""
        depth = len(components)
        limit = max_results * CANDIDATE_FACTOR + 1

        def children(target: str, parents: list[str], component) -> list[str] | None:
            if not parents:  # the top level
                requests = [self._select(target, planner.depth_restriction(1), limit)]
            else:
                requests = [self._select(target, (planner.Restriction("parent", "=", p),), limit) for p in parents]
            results = self._run(requests, f"list {table} under {len(parents)} directories")
            if any(len(rows) >= limit for rows in results):
                return None
            found = [r[0] for rows in results for r in rows if r[1] is not None]
            if component is None:
                return found
            return [n for n in found if component.matches(n.rpartition(".")[2])]

        parents: list[str] = []
        for level in range(depth - 1):
            listed = children("directories", parents, components[level])
            if listed is None or len(listed) > WALK_LIMIT:
                return self._depth_scan(table, depth, limit)
            if not listed:
                return []
            parents = listed
        found = children(table, parents, None)
        return found if found is not None else self._depth_scan(table, depth, limit)

    def _depth_scan(self, table: str, depth: int, limit: int) -> list[str]:
        rows = self._run([self._select(table, planner.depth_restriction(depth), limit)], f"list {table} of depth {depth}")[0]
        if len(rows) >= limit:
            raise TooManyResults(f"a glob of depth {depth} without fixed components reads more than {limit - 1}"
                                 f" candidate names (limit max_results x {CANDIDATE_FACTOR}); narrow the pattern")
        return [r[0] for r in rows if r[1] is not None]

    # -- datapoints --------------------------------------------------------------------------------
    def _point_statement(self, table: StageTable, query: str, kind: str, create: bool):
        try:
            return self._prepare(query, kind)
        except SchemaMissing as exc:
            if not create or not is_missing_table(exc.__cause__ or exc):
                raise
            self._tables.discard(table.name)
            self._ensure_table(table)
            return self._prepare(query, kind)

    def write_points(self, table, names, timestamps, values, counts=None) -> None:
        if not len(timestamps):
            return
        self._check_schema()
        ids = self._metric_ids(names, missing_ok=False)
        stage = table.stage
        if table.aggregated:
            statement = self._point_statement(
                table, f"INSERT INTO {self.keyspace}.{table.name} (metric, slot_start, offset, shard, ts, value, count)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)", "data_write", True)
            counts = counts if counts is not None else np.ones(len(timestamps), np.int64)
        else:
            statement = self._point_statement(
                table, f"INSERT INTO {self.keyspace}.{table.name} (metric, slot_start, offset, ts, value)"
                " VALUES (?, ?, ?, ?, ?)", "data_write", True)
        timestamps = np.asarray(timestamps, dtype=np.int64)
        slots = (timestamps // stage.precision) % stage.points
        offsets = slots % schema.ROW_POINTS
        blocks = (slots - offsets).tolist()
        owners = [ids[n] for n in names]
        order = sorted(range(len(timestamps)), key=lambda i: (owners[i].bytes, blocks[i]))
        shard = self.options.shard
        offsets_l, ts_l, values_l = offsets.tolist(), timestamps.tolist(), np.asarray(values).tolist()
        counts_l = np.asarray(counts).tolist() if table.aggregated else None
        requests: list[tuple[Any, Any]] = []
        for _, group in itertools.groupby(order, key=lambda i: (owners[i], blocks[i])):
            # two points of one slot (turns of the ring apart): the last given wins, as in a whisper file;
            # in one batch both would get the same write time and Cassandra would keep the larger value
            group = list({offsets_l[i]: i for i in group}.values())
            for first in range(0, len(group), MAX_BATCH):
                params = [
                    (owners[i], blocks[i], offsets_l[i], shard, ts_l[i], values_l[i], counts_l[i])
                    if counts_l is not None else (owners[i], blocks[i], offsets_l[i], ts_l[i], values_l[i])
                    for i in group[first:first + MAX_BATCH]
                ]
                if len(params) == 1:
                    requests.append((statement, params[0]))
                else:  # one partition: an unlogged batch is one mutation
                    batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=self._levels["data_write"])
                    for p in params:
                        batch.add(statement, p)
                    requests.append((batch, None))
        kind = "aggregated" if table.aggregated else "raw"
        self._run(requests, f"write {len(timestamps)} {kind} points to {self.keyspace}.{table.name}")

    def read_points(self, table, names, starts, ends) -> PointReads:
        if not len(names):
            return PointReads.empty()
        self._check_schema()
        ids = self._metric_ids(names, missing_ok=True)
        columns = "ts, value, count, writetime(value)" if table.aggregated else "ts, value"
        try:
            statement = self._point_statement(
                table, f"SELECT {columns} FROM {self.keyspace}.{table.name}"
                " WHERE metric = ? AND slot_start = ? AND offset >= ? AND offset <= ?", "data_read", False)
        except SchemaMissing as exc:
            if is_missing_table(exc.__cause__ or exc):
                return PointReads.empty()  # no metric ever used this stage
            raise
        requests: list[tuple[Any, Any]] = []
        owners: list[int] = []
        for index, (name, start, end) in enumerate(zip(names, starts.tolist(), ends.tolist())):
            key = ids.get(name)
            if key is None:
                continue
            for block, low, high in schema.slot_ranges(table.stage, start, end):
                requests.append((statement, (key, block, low, high)))
                owners.append(index)
        results = self._run(requests, f"read points of {len(names)} metrics from {self.keyspace}.{table.name}")
        sizes = [len(rows) for rows in results]
        if not sum(sizes):
            return PointReads.empty()
        request = np.repeat(np.array(owners, dtype=np.int64), sizes)
        columns_data = list(zip(*(r for rows in results for r in rows)))
        timestamps = np.array(columns_data[0], dtype=np.int64)
        values = np.array(columns_data[1], dtype=np.float64)
        # a slot may hold a point of another turn of the ring: keep those inside the window, as whisper
        inside = (timestamps >= starts[request]) & (timestamps < ends[request])
        request, timestamps, values = request[inside], timestamps[inside], values[inside]
        if table.aggregated and len(request):
            # per timestamp, the shard row with the largest count, ties by the latest write
            counts = np.array([c or 0 for c in columns_data[2]], dtype=np.int64)[inside]
            written = np.array([w or 0 for w in columns_data[3]], dtype=np.int64)[inside]
            order = np.lexsort((written, counts, timestamps, request))
            request, timestamps, values = request[order], timestamps[order], values[order]
            last = np.ones(len(order), dtype=bool)
            last[:-1] = (request[1:] != request[:-1]) | (timestamps[1:] != timestamps[:-1])
            request, timestamps, values = request[last], timestamps[last], values[last]
        return PointReads(request, timestamps, values)

    def expire_points(self, now: int) -> int:
        """0: Cassandra expires points itself (each stage table's default_time_to_live)."""
        self._check_schema()
        return 0


def _parent(name: str):
    """The parent column: unset for top-level names (indexes skip empty values; `component_1 = '__END__'`
    finds the top level)."""
    return names_mod.parent(name) or UNSET_VALUE


def _components(name: str) -> list:
    """component_0..63 of a name: its parts, `__END__`, then unset (no tombstones for empty columns)."""
    parts = name.split(".")
    values: list = parts + [schema.END] + [UNSET_VALUE] * (schema.COMPONENTS - len(parts) - 1)
    return values[:schema.COMPONENTS]


def _stored_fields(row: Sequence) -> tuple:
    """A metrics row (name, id, retention, ...) as stored_metric's arguments; a row without a
    data id is a partial one (an update racing a deletion): nothing of it is readable."""
    name, data_id_, *fields = row
    return (name, *fields) if data_id_ is not None else (name, *[None] * len(fields))


__all__ = ["CassandraStore", "data_id", "token_range"]
