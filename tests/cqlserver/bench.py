"""Throughput of the CQL test server through the real driver (a test tool's figures).

    python -m tests.cqlserver.bench [--rows 5000]

Prints statements per second for: concurrent prepared INSERTs, synchronous simple
INSERTs (query strings), prepared single-partition SELECTs, a paged token-range
scan, and SASI LIKE queries over the whole table. The figures say whether the
conformance suite can afford thousands of rows; they are not claims about any store.
"""
from __future__ import annotations

import argparse
import time

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

from .server import CQLTestServer

SASI = "org.apache.cassandra.index.sasi.SASIIndex"


def _rate(label: str, n: int, seconds: float) -> None:
    print(f"{label:<48} {n:>6} in {seconds:6.3f} s = {n / seconds:8.0f} /s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    n = parser.parse_args(argv).rows
    with CQLTestServer() as server:
        profile = ExecutionProfile(load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()))
        cluster = Cluster(["127.0.0.1"], port=server.port, protocol_version=4,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile})
        s = cluster.connect()
        s.execute("CREATE KEYSPACE b WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE b.m (name text PRIMARY KEY, parent text, v bigint)")
        s.execute(f"CREATE CUSTOM INDEX ON b.m (parent) USING '{SASI}'")
        s.execute("CREATE TABLE b.p (k int, c int, v double, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)")

        ins = s.prepare("INSERT INTO b.m (name, parent, v) VALUES (?, ?, ?)")
        args = [(f"a{i % 50}.m{i}", f"a{i % 50}.", i) for i in range(n)]
        t0 = time.perf_counter()
        execute_concurrent_with_args(s, ins, args, concurrency=64)
        _rate("prepared INSERT, 64 concurrent", n, time.perf_counter() - t0)

        m = max(1, n // 5)
        t0 = time.perf_counter()
        for i in range(m):
            s.execute("INSERT INTO b.p (k, c, v) VALUES (%s, %s, %s)", (i % 10, i, i * 0.5))
        _rate("simple INSERT (query string), synchronous", m, time.perf_counter() - t0)

        sel = s.prepare("SELECT v FROM b.m WHERE name = ?")
        t0 = time.perf_counter()
        execute_concurrent_with_args(s, sel, [(a[0],) for a in args], concurrency=64)
        _rate("prepared SELECT by partition key, 64 concurrent", n, time.perf_counter() - t0)

        scan = s.prepare("SELECT name FROM b.m WHERE token(name) > ? AND token(name) <= ?")
        scan.fetch_size = 500
        t0 = time.perf_counter()
        count = sum(1 for _ in s.execute(scan, (-(1 << 63), (1 << 63) - 1)))
        _rate("rows of a paged token-range scan (pages of 500)", count, time.perf_counter() - t0)

        like = s.prepare("SELECT name FROM b.m WHERE parent LIKE ?")
        q = 50
        t0 = time.perf_counter()
        for i in range(q):
            s.execute(like, (f"a{i}.%",))
        _rate(f"SASI LIKE prefix query over {n} rows (100 matches)", q, time.perf_counter() - t0)
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
