"""Fixtures shared by the suite: one accessor per store kind, for the conformance tests.

Store kinds: `sqlite` (a file in tmp_path) and `cassandra`: a fresh keyspace per test on
the session's CQL test server (tests/cqlserver, started once), or on a real cluster when
BGL_TEST_CASSANDRA=host:port is set (keyspaces `t<pid>_<n>` and `..._metadata`, dropped
after each test).
"""
from __future__ import annotations

import itertools
import os

import pytest

from biggraphite_like.accessor import Accessor

STORE_KINDS = ["sqlite", "cassandra"]
TEST_CASSANDRA_ENV = "BGL_TEST_CASSANDRA"
_keyspace_numbers = itertools.count()


def new_keyspace() -> str:
    """A keyspace name no other test (or concurrent test run) uses."""
    return f"t{os.getpid()}_{next(_keyspace_numbers)}"


def make_store_url(kind: str, tmp_path, cassandra_address: str | None = None) -> str:
    if kind == "sqlite":
        return f"sqlite://{tmp_path / 'bgl.db'}"
    if kind == "cassandra":
        assert cassandra_address, "the cassandra kind needs the cassandra_address fixture"
        return f"cassandra://{cassandra_address}/{new_keyspace()}"
    raise ValueError(kind)


@pytest.fixture(scope="session")
def cql_server():
    """The session's CQL test server (None when BGL_TEST_CASSANDRA names a real cluster)."""
    if os.environ.get(TEST_CASSANDRA_ENV):
        yield None
        return
    from tests.cqlserver import CQLTestServer

    server = CQLTestServer(host="127.0.0.1", port=0)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def cassandra_address(cql_server) -> str:
    """host:port of the Cassandra the tests use."""
    return os.environ.get(TEST_CASSANDRA_ENV) or f"127.0.0.1:{cql_server.port}"


@pytest.fixture(scope="session")
def cassandra_admin(cassandra_address):
    """A driver session to drop the tests' keyspaces."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy

    host, _, port = cassandra_address.rpartition(":")
    profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy())
    cluster = Cluster([host], port=int(port), protocol_version=4, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    session = cluster.connect()
    yield session
    cluster.shutdown()


def drop_keyspaces(admin, url: str) -> None:
    keyspace = url.split("?", 1)[0].rsplit("/", 1)[1]
    for name in (keyspace, f"{keyspace}_metadata"):
        admin.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)


@pytest.fixture
def cassandra_url(cassandra_address, cassandra_admin, tmp_path):
    """The URL of a fresh (schema-less) keyspace, dropped after the test."""
    url = make_store_url("cassandra", tmp_path, cassandra_address)
    yield url
    drop_keyspaces(cassandra_admin, url)


@pytest.fixture(params=STORE_KINDS)
def store_url(request, tmp_path) -> str:
    """The URL of an empty store of each kind."""
    if request.param == "cassandra":
        return request.getfixturevalue("cassandra_url")
    return make_store_url(request.param, tmp_path)


@pytest.fixture
def accessor(store_url):
    """An accessor on an empty store with its schema created."""
    acc = Accessor.from_url(store_url)
    acc.syncdb()
    yield acc
    acc.close()


@pytest.fixture
def sqlite_accessor(tmp_path):
    acc = Accessor.from_url(f"sqlite://{tmp_path / 'bgl.db'}")
    acc.syncdb()
    yield acc
    acc.close()


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """The environment of every `bgl` run: data dir and home inside tmp_path, no $BGL_STORE."""
    environment = dict(os.environ)
    for variable in ("BGL_STORE", "XDG_DATA_HOME"):
        environment.pop(variable, None)
    environment["BGL_DATA_DIR"] = str(tmp_path / "data")
    environment["HOME"] = str(tmp_path / "home")
    return environment


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch, tmp_path):
    """Tests never touch the operator's default store."""
    monkeypatch.setenv("BGL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("BGL_STORE", raising=False)
    yield
