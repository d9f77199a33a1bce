"""The Cassandra store's connection: one driver Session per process and connection options
(opened again in a forked child), prepared statements, requests run with bounded concurrency."""
from __future__ import annotations

import os
import ssl
import threading
import uuid
from typing import Any, Self, Sequence

from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import ConstantReconnectionPolicy, DCAwareRoundRobinPolicy, TokenAwarePolicy
from cassandra.query import tuple_factory

from biggraphite_like.errors import StoreError
from biggraphite_like.metric import METRIC_ID_NAMESPACE, metric_id
from biggraphite_like.stores.base import check_shard
from biggraphite_like.stores.cassandra.options import CassandraOptions, parse_url, safe_url
from biggraphite_like.stores.cassandra.requests import (
    RequestRunner,
    translate,
)

DDL_TIMEOUT = 60.0
MIN_TOKEN, MAX_TOKEN = -(2**63), 2**63 - 1
MURMUR3 = "Murmur3Partitioner"  # the partitioner whose tokens the store computes (scans, point reads)


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



class ConnectionMixin:
    """Sessions, prepared statements and request execution for the store."""

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
        self._chunk_tables: set[str] = set()  # chunk tables this process made sure exist (sealing.py)
        self._ids: dict[str, uuid.UUID] = {}
        self._deletions_seen: str | None = None
        self._directory_deletions_seen: str | None = None
        self._directories_written: set[str] = set()  # directories this process wrote (metadata.py)
        # store_settings `sealed` and `chunk_window`, read with the deletion marker (points.py)
        self._sealed_horizon: int | None = None
        self._chunk_width = 0
        self._local = threading.local()
        levels = ConsistencyLevel.name_to_value
        self._levels = {kind: levels[getattr(options, kind)]
                        for kind in ("metadata_read", "metadata_write", "data_read", "data_write")}

    @classmethod
    def from_url(cls, url: str) -> Self:
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
        partitioner = cluster.metadata.partitioner or MURMUR3
        if not partitioner.endswith(MURMUR3):
            cluster.shutdown()
            raise StoreError(f"the Cassandra cluster at {','.join(o.hosts)}:{o.port} uses {partitioner}: this store"
                             f" needs {MURMUR3} (Cassandra's default since 1.2), whose tokens its scans and point"
                             " reads compute")
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
                raise connection.runner.with_progress(
                    translate(exc, f"prepare {query[:80]!r}", self.options.timeout, self._display_url)) from exc
            statement.consistency_level = self._levels[kind]
            self._prepared[query] = statement
        return statement

    def _run(self, requests: Sequence[tuple[Any, Any]], what: str) -> list[list[tuple]]:
        connection = self._conn
        return connection.runner.run(connection.session, requests, what)

    def _execute(self, query: str, parameters: Sequence, kind: str, what: str) -> list[tuple]:
        return self._run([(self._prepare(query, kind), parameters)], what)[0]

