"""The CQL test server answers as real Cassandra 5.0 does: the same statements on both, side by side.

Each case runs on the session's CQL test server and on the real node (tests/cassandra_node),
in a small keyspace of the shapes the store uses (a clustered points table, a names table
with SASI and SAI indexes), and must give the same rows, or fail with the same kind of
error. Skipped without a real node (see conftest.py).
"""
from __future__ import annotations

import pytest

SASI = "org.apache.cassandra.index.sasi.SASIIndex"
KEYSPACE = "cqldiff"
SCHEMA = [
    f"CREATE KEYSPACE {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
    f"CREATE TABLE {KEYSPACE}.points (metric text, slot int, offset smallint, ts bigint, value double,"
    " PRIMARY KEY ((metric, slot), offset)) WITH CLUSTERING ORDER BY (offset DESC)",
    f"CREATE TABLE {KEYSPACE}.names (name text PRIMARY KEY, parent text, c0 text, c1 text, plain text)",
    f"CREATE CUSTOM INDEX names_parent ON {KEYSPACE}.names (parent) USING '{SASI}' WITH OPTIONS = {{'mode': 'PREFIX'}}",
    f"CREATE CUSTOM INDEX names_c0 ON {KEYSPACE}.names (c0) USING '{SASI}' WITH OPTIONS = {{'mode': 'PREFIX'}}",
    f"CREATE INDEX names_c1 ON {KEYSPACE}.names (c1) USING 'sai'",
]
NAMES = [("a.b.c", "a.b", "a", "b", "x"), ("a.b.d", "a.b", "a", "b", "y"), ("a.e", "a", "a", "e", "x"),
         ("ab.c", "ab", "ab", "c", None), ("z", None, "z", None, "x")]
POINTS = [("m", 0, offset, 1000 + offset, float(offset)) for offset in range(6)] + [("m", 1, 0, 5000, 9.0)]
# (statement, parameters, ordered): ordered results are compared as lists, the others as sets
CASES = [
    # partition reads and clustering slices
    ("SELECT offset, ts, value FROM {ks}.points WHERE metric = %s AND slot = %s", ("m", 0), True),
    ("SELECT offset FROM {ks}.points WHERE metric = %s AND slot = %s AND offset >= %s AND offset <= %s", ("m", 0, 1, 3), True),
    ("SELECT offset FROM {ks}.points WHERE metric = %s AND slot = %s ORDER BY offset ASC LIMIT 2", ("m", 0), True),
    ("SELECT offset FROM {ks}.points WHERE metric = %s AND slot IN (0, 1)", ("m",), True),
    ("SELECT offset FROM {ks}.points WHERE metric = %s", ("m",), True),
    ("SELECT offset FROM {ks}.points WHERE metric = %s AND slot = %s ORDER BY ts", ("m", 0), True),
    ("SELECT offset FROM {ks}.points WHERE ts > %s", (1002,), False),
    ("SELECT offset FROM {ks}.points WHERE ts > %s ALLOW FILTERING", (1002,), False),
    ("SELECT DISTINCT metric, slot FROM {ks}.points", (), False),
    ("SELECT count(*) FROM {ks}.points WHERE metric = %s AND slot = %s", ("m", 0), False),
    # indexes: SASI equality and prefix, SAI equality, what each refuses
    ("SELECT name FROM {ks}.names WHERE parent = %s", ("a.b",), False),
    ("SELECT name FROM {ks}.names WHERE c0 LIKE %s", ("a%",), False),
    ("SELECT name FROM {ks}.names WHERE c0 LIKE %s", ("a",), False),
    ("SELECT name FROM {ks}.names WHERE c0 LIKE %s", ("%b",), False),
    ("SELECT name FROM {ks}.names WHERE c1 = %s", ("b",), False),
    ("SELECT name FROM {ks}.names WHERE c1 LIKE %s", ("b%",), False),
    ("SELECT name FROM {ks}.names WHERE c0 = %s AND c1 = %s", ("a", "b"), False),
    ("SELECT name FROM {ks}.names WHERE c0 = %s AND parent = %s", ("a", "a.b"), False),
    ("SELECT name FROM {ks}.names WHERE c0 = %s AND plain = %s", ("a", "x"), False),
    ("SELECT name FROM {ks}.names WHERE c0 = %s AND plain = %s ALLOW FILTERING", ("a", "x"), False),
    ("SELECT name FROM {ks}.names WHERE plain = %s", ("x",), False),
    ("SELECT name FROM {ks}.names WHERE c0 = %s LIMIT 1", ("zz",), False),
    ("SELECT name FROM {ks}.names WHERE c0 IN (%s, %s)", ("a", "z"), False),
    ("SELECT name FROM {ks}.names WHERE name = %s", ("",), False),  # an empty key: refused
    ("DELETE FROM {ks}.names WHERE name = %s", ("",), False),
    ("SELECT offset FROM {ks}.points WHERE metric = %s AND slot = %s", ("", 0), True),  # a composite: not empty
    ("SELECT name FROM {ks}.names WHERE token(name) >= %s AND token(name) <= %s", (-(2**63), 2**63 - 1), False),
    # errors
    ("SELECT name FROM {ks}.nothing WHERE name = %s", ("a",), False),
    ("SELECT nothing FROM {ks}.names WHERE name = %s", ("a",), False),
    ("INSERT INTO {ks}.names (name, parent) VALUES (%s, %s)", ("", "p"), False),
    ("SELECT offset FROM {ks}.points WHERE metric = %s AND offset = %s", ("m", 1), False),
]


def _outcome(session, statement: str, parameters: tuple, ordered: bool):
    from cassandra import DriverException
    from cassandra.protocol import ErrorMessage

    try:
        rows = [tuple(row) for row in session.execute(statement.format(ks=KEYSPACE), parameters, timeout=60)]
    except (DriverException, ErrorMessage) as exc:
        return "error", type(exc).__name__
    return "rows", rows if ordered else sorted(rows, key=repr)


@pytest.fixture(scope="module")
def sessions(cql_server, real_keyspaces):
    """(test server session, real node session), each with the small keyspace."""
    from cassandra.cluster import Cluster

    if cql_server is None:
        pytest.skip("BGL_TEST_CASSANDRA names an external cluster")
    cluster = Cluster(["127.0.0.1"], port=cql_server.port, protocol_version=4)
    pair = (cluster.connect(), real_keyspaces.session)
    for session in pair:
        session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", timeout=60)
        for statement in SCHEMA:
            session.execute(statement, timeout=60)
        for row in NAMES:
            session.execute(f"INSERT INTO {KEYSPACE}.names (name, parent, c0, c1, plain) VALUES (%s, %s, %s, %s, %s)",
                            row)
        for row in POINTS:
            session.execute(f"INSERT INTO {KEYSPACE}.points (metric, slot, offset, ts, value)"
                            " VALUES (%s, %s, %s, %s, %s)", row)
    yield pair
    for session in pair:
        session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", timeout=60)
    cluster.shutdown()


@pytest.mark.parametrize("statement, parameters, ordered", CASES, ids=[c[0][:70] for c in CASES])
def test_the_test_server_answers_as_cassandra(sessions, statement, parameters, ordered):
    test_server, real = sessions
    expected = _outcome(real, statement, parameters, ordered)
    assert _outcome(test_server, statement, parameters, ordered) == expected
