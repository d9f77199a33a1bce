#!/usr/bin/env python3
"""Cassandra path: CQL requests per find, fetch and write batch, counted by the CQL test
server (tests/cqlserver) that the real cassandra-driver talks to over TCP.

    python bench/cassandra_bench.py [--json]

Counts, not times: the test server is a Python stand-in for Cassandra, so its latency
means nothing, but the number of requests a store operation sends is what costs round
trips and coordinator work on a real cluster. Each operation runs once to prepare its
statements, then once counted.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from biggraphite_like.accessor import Accessor  # noqa: E402
from biggraphite_like.metric import MetricMetadata  # noqa: E402
from tests.cqlserver import CQLTestServer  # noqa: E402

RETENTION = "60s:1d,1h:30d"
SERIES = 100  # metrics per fetch and per write batch
# (pattern, what it exercises) over tree.dc{0..9}.host{000..009}.cpu{0..9}
FIND_PATTERNS = [
    ("tree.dc3.host004.*", "fixed prefix"),
    ("*.dc7.host004.cpu3", "wildcard first"),
    ("tree.dc{1,2}.host00?.cpu1", "braces and ?"),
    ("tree.dc5.host00[1-3].cpu[2-3]", "character classes"),
    ("tree.dc3.host004.**", "** (every descendant)"),
    ("tree.**.host004.cpu9", "** in the middle"),
]


def tree_names() -> list[str]:
    return [f"tree.dc{dc}.host{host:03d}.cpu{cpu}" for dc in range(10) for host in range(10) for cpu in range(10)]


def count(server: CQLTestServer, action) -> dict:
    """Run the action twice (the first prepares its statements) and count the second."""
    action()
    server.reset_counts()
    action()
    counts = {key: value for key, value in server.statement_counts.items() if value}
    requests = sum(value for key, value in counts.items() if key != "batch_statements")
    statements = requests - counts.get("BATCH", 0) + counts.get("batch_statements", 0)
    return {"requests": requests, "statements": statements, "by_opcode": counts}


def measure() -> dict:
    server = CQLTestServer(host="127.0.0.1", port=0)
    server.start()
    accessor = Accessor.from_url(f"cassandra://127.0.0.1:{server.port}/bench")
    try:
        accessor.syncdb()
        metadata = MetricMetadata.create(RETENTION, "average", 0.5)
        names = tree_names()
        accessor.create_metrics([(name, metadata) for name in names])
        batch = names[:SERIES]
        now = int(time.time()) // 60 * 60
        minute = [now - 120]

        def write(points: int) -> None:
            minute[0] += 60 * points  # new points each time, as carbon sends them
            accessor.insert_points({n: [(minute[0] + 60 * k, 1.0) for k in range(points)] for n in batch},
                                   now=minute[0] + 60 * points)

        results = {}
        for pattern, kind in FIND_PATTERNS:
            results[f"find {pattern} ({kind})"] = count(
                server, lambda: (accessor.glob_metrics(pattern), accessor.glob_directories(pattern)))
        write(1)
        results[f"fetch {SERIES} series x 1 day"] = count(server, lambda: accessor.fetch(batch, now - 86400, now + 3600))
        results[f"write {SERIES} metrics x 1 point"] = count(server, lambda: write(1))
        results[f"write {SERIES} metrics x 5 points"] = count(server, lambda: write(5))
        fresh = iter(range(10**6))
        results["create 10 metrics"] = count(server, lambda: accessor.create_metrics(
            [(f"new.m{next(fresh)}.cpu", metadata) for _ in range(10)]))
        return {"series": SERIES, "names": len(names), "retention": RETENTION, "operations": results}
    finally:
        accessor.close()
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    report = measure()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"CQL requests per operation ({report['names']:,} metrics, retention {report['retention']}):")
    for label, figures in report["operations"].items():
        print(f"  {label:55} {figures['requests']:5} requests  {figures['statements']:5} statements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
