"""Fixtures shared by the suite: one accessor per store kind, for the conformance tests.

Store kinds:
- `sqlite`: a file in tmp_path;
- `cassandra`: a fresh keyspace per test on the session's CQL test server (tests/cqlserver,
  started once), or on an external cluster when BGL_TEST_CASSANDRA=host:port is set
  (keyspaces `t<pid>_<n>` and `..._metadata`, dropped after each test);
- `real-sasi`, `real-sai`: a real Apache Cassandra node (tests/cassandra_node) started once
  per session when Java and Maven are here, with one store per index mode created once and
  emptied (TRUNCATE) before each test. BGL_TEST_REAL_CASSANDRA: `auto` (default: skipped
  with the reason when Java or Maven is missing), `1` (a node that cannot start fails the
  tests), `0` (skipped). Skipped too when BGL_TEST_CASSANDRA names an external cluster.
"""
from __future__ import annotations

import itertools
import os

import pytest

from biggraphite_like.accessor import Accessor
from tests.xdist_groups import (  # noqa: F401  (pytest-xdist's hooks, for --dist loadgroup)
    pytest_configure_node, pytest_unconfigure, pytest_xdist_make_scheduler, record_groups)

REAL_KINDS = {"real-sasi": "sasi", "real-sai": "sai"}  # store kind -> index mode on the real node
STORE_KINDS = ["sqlite", "cassandra", *REAL_KINDS]
CASSANDRA_KINDS = ["cassandra", *REAL_KINDS]
TEST_CASSANDRA_ENV = "BGL_TEST_CASSANDRA"
REAL_CASSANDRA_ENV = "BGL_TEST_REAL_CASSANDRA"
REAL_CASSANDRA_HEAP = "768M"
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


@pytest.fixture(scope="session")
def cassandra_node(request, tmp_path_factory):
    """The session's real Cassandra node (tests/cassandra_node), or a skip saying why there is none."""
    from tests.cassandra_node import CassandraNode, CassandraUnavailableHere, NodeFailed

    wanted = os.environ.get(REAL_CASSANDRA_ENV, "auto").strip().lower()
    if wanted in ("0", "off", "no", "false"):
        pytest.skip(f"real Cassandra node disabled by {REAL_CASSANDRA_ENV}={wanted}")
    if os.environ.get(TEST_CASSANDRA_ENV):
        pytest.skip(f"{TEST_CASSANDRA_ENV} names an external cluster: no real node is started")
    node = CassandraNode.single(tmp_path_factory.mktemp("cassandra-node"), heap=REAL_CASSANDRA_HEAP)
    capture = request.config.pluginmanager.getplugin("capturemanager")
    try:
        with capture.global_and_fixture_disabled():  # progress shows while the JVM starts
            node.start()
            node.wait_ready()
    except CassandraUnavailableHere as exc:
        if wanted == "auto":
            pytest.skip(f"no real Cassandra node: {exc}")
        pytest.fail(f"no real Cassandra node ({REAL_CASSANDRA_ENV}={wanted}): {exc}")
    except (NodeFailed, KeyboardInterrupt):
        node.stop()
        raise
    _REAL_NODE_FACTS["version"] = node.version
    _REAL_NODE_FACTS["start_seconds"] = node.start_seconds
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def real_keyspaces(cassandra_node):
    """The real node's store per index mode, created once (see tests/cassandra_node/keyspaces.py)."""
    from tests.cassandra_node.keyspaces import RealKeyspaces

    keyspaces = RealKeyspaces(cassandra_node)
    _REAL_NODE_FACTS["keyspaces"] = keyspaces
    yield keyspaces
    keyspaces.close()


_REAL_NODE_FACTS: dict = {}


REAL_NODE_TIMEOUT = 900  # seconds: a test may first wait for the node's start (up to 240 s) and a store's DDL
REAL_NODE_GROUP = "real-cassandra"  # pytest-xdist group: one worker runs every real-node test, so one node starts
SHARED_SCOPES = ("module", "class", "package")


def _on_real_node(item) -> bool:
    params = getattr(item, "callspec", None)
    if params is not None and any(isinstance(v, str) and v in REAL_KINDS for v in params.params.values()):
        return True
    return bool({"real_keyspaces", "cassandra_node"} & set(getattr(item, "fixturenames", ())))


def _shares_a_fixture(item) -> bool:
    """Whether the test uses a fixture set up once for its module (or class): a server, a stack."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(definition.scope in SHARED_SCOPES
                                    for definitions in info.name2fixturedefs.values() for definition in definitions)


@pytest.hookimpl(tryfirst=True)  # the groups, recorded here, schedule pytest-xdist (tests/xdist_groups.py)
def pytest_collection_modifyitems(config, items) -> None:
    """Tests on the real node get a longer timeout than setup.cfg's (their setup may start the node)
    and, under pytest-xdist, one worker (REAL_NODE_GROUP); the other tests of a module with a
    fixture set up once for the module stay on one worker, so that setup runs once."""
    def module_of(item) -> str:
        return item.nodeid.split("::", 1)[0].removeprefix("tests/")

    sharing = {module_of(item) for item in items if _shares_a_fixture(item)}
    for item in items:
        on_real_node = _on_real_node(item)
        if on_real_node:
            item.add_marker(pytest.mark.timeout(REAL_NODE_TIMEOUT))
        if item.get_closest_marker("xdist_group"):
            continue
        if on_real_node:
            item.add_marker(pytest.mark.xdist_group(REAL_NODE_GROUP))
        elif module_of(item) in sharing:  # the whole module, in its order, as a serial run has it
            item.add_marker(pytest.mark.xdist_group(module_of(item)))
    record_groups(config, items)


def _real_node_line() -> str | None:
    """What the session's real node cost, or None when it did not start."""
    if not _REAL_NODE_FACTS:
        return None
    keyspaces = _REAL_NODE_FACTS.get("keyspaces")
    line = (f"real Cassandra node: {_REAL_NODE_FACTS.get('version')}, answered CQL"
            f" {_REAL_NODE_FACTS.get('start_seconds', 0):.0f} s after launch")
    if keyspaces is not None:
        created = ", ".join(f"{mode.upper()} store created in {seconds:.0f} s" for mode, seconds in
                            keyspaces.created.items())
        line += f"; {created or 'no store created'}"
        line += (f"; emptying them between tests ({keyspaces.deletions} partitions deleted,"
                 f" {keyspaces.truncations} TRUNCATEs) took {keyspaces.truncate_seconds:.0f} s")
    return line


_WORKER_LINES: list[str] = []  # the real node's line, sent by the pytest-xdist worker that ran it


def pytest_sessionfinish(session) -> None:
    """A pytest-xdist worker hands its real node's line to the controller, which prints the summary."""
    line = _real_node_line()
    if line and hasattr(session.config, "workeroutput"):
        session.config.workeroutput["real_node_line"] = line


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    line = getattr(node, "workeroutput", {}).get("real_node_line")
    if line:
        _WORKER_LINES.append(line)


def pytest_terminal_summary(terminalreporter) -> None:
    """CI's output says which real Cassandra ran the suites, and what its stores cost."""
    for line in filter(None, [_real_node_line(), *_WORKER_LINES]):
        terminalreporter.write_line(line)


def _cassandra_store_url(kind: str, request, tmp_path) -> str:
    """A store on the CQL test server (a fresh schema-less keyspace, dropped after the test) or on
    the real node (the mode's store, emptied: its schema is there)."""
    if kind in REAL_KINDS:
        return request.getfixturevalue("real_keyspaces").url(REAL_KINDS[kind])
    url = make_store_url("cassandra", tmp_path, request.getfixturevalue("cassandra_address"))
    admin = request.getfixturevalue("cassandra_admin")
    request.addfinalizer(lambda: drop_keyspaces(admin, url))
    return url


@pytest.fixture(params=CASSANDRA_KINDS)
def cassandra_kind(request) -> str:
    """Each Cassandra a Cassandra-only test runs on: the CQL test server, the real node in each index mode."""
    return request.param


@pytest.fixture
def cassandra_url(cassandra_kind, request, tmp_path) -> str:
    """The URL (without options: tests append theirs) of a store on each Cassandra."""
    return _cassandra_store_url(cassandra_kind, request, tmp_path)


@pytest.fixture
def url_server(cassandra_kind, request):
    """The CQL test server behind cassandra_url, or None (a real node or an external cluster)."""
    if cassandra_kind in REAL_KINDS:
        return None
    return request.getfixturevalue("cql_server")


def _synced_accessor(url: str):
    """An accessor on url with its schema created, closed after the test (fixtures yield from it)."""
    acc = Accessor.from_url(url)
    acc.syncdb()
    yield acc
    acc.close()


@pytest.fixture
def cassandra_accessor(cassandra_url):
    """An accessor on an empty store of each Cassandra, its schema created."""
    yield from _synced_accessor(cassandra_url)


@pytest.fixture(params=STORE_KINDS)
def store_url(request, tmp_path) -> str:
    """The URL of an empty store of each kind."""
    if request.param == "sqlite":
        return make_store_url(request.param, tmp_path)
    return _cassandra_store_url(request.param, request, tmp_path)


@pytest.fixture
def schemaless_store_url(request, store_url) -> str:
    """store_url, or on the real node (whose stores keep their schema) a keyspace nobody created."""
    if request.node.callspec.params.get("store_url") in REAL_KINDS:
        return f"{store_url.rsplit('/', 1)[0]}/{new_keyspace()}"
    return store_url


@pytest.fixture
def accessor(store_url):
    """An accessor on an empty store with its schema created."""
    yield from _synced_accessor(store_url)


@pytest.fixture
def sqlite_accessor(tmp_path):
    yield from _synced_accessor(f"sqlite://{tmp_path / 'bgl.db'}")


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


@pytest.fixture
def bgl_stack(tmp_path):
    """A `bgl run` (tests/stack_env.BglRun) on a data directory of its own, not started; killed at the end."""
    from tests.stack_env import BglRun

    run = BglRun(tmp_path / "data")
    yield run
    run.kill()
