#!/usr/bin/env python3
"""Cassandra path: CQL requests per find, fetch and write batch, counted by the CQL test
server (tests/cqlserver) that the real cassandra-driver talks to over TCP; with --real,
also operations per second on a real Cassandra node (SASI and SAI stores) beside SQLite;
with --capacity, a day of writes, then `bgl seal`, and what the tables hold before and after.

    python bench/cassandra_bench.py [--real] [--json]

Counts: the test server is a Python stand-in for Cassandra, so its latency means nothing,
but the number of requests a store operation sends is what costs round trips and
coordinator work on a real cluster (the same statements go to a real node). Each operation
runs once to prepare its statements, then once counted.

Rates (--real): a real Apache Cassandra node (tests/cassandra_node: fetched through Maven,
started on 127.0.0.1, one node, 768 MiB heap) and a SQLite file get the same names and
the same operations; each operation runs for about RATE_SECONDS and its operations per
second are reported side by side.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import sys
import tempfile
import time
from typing import Iterator

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from biggraphite_like.accessor import Accessor  # noqa: E402
from biggraphite_like.maintenance import seal as seal_mod  # noqa: E402
from biggraphite_like.maintenance.seal import seal  # noqa: E402
from biggraphite_like.metric import MetricMetadata  # noqa: E402
from biggraphite_like.stores.base import StageTable  # noqa: E402
from tests.cqlserver import CQLTestServer  # noqa: E402

from bench import cassandra_real as real_mod  # noqa: E402
from bench.cassandra_real import RETENTION, SERIES  # noqa: E402

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
    return count_since_reset(server)


@contextlib.contextmanager
def server_and_store(keyspace: str) -> Iterator[tuple[CQLTestServer, Accessor]]:
    """A CQL test server and an accessor on a keyspace of it with its schema, stopped after."""
    server = CQLTestServer(host="127.0.0.1", port=0)
    server.start()
    accessor = Accessor.from_url(f"cassandra://127.0.0.1:{server.port}/{keyspace}")
    try:
        accessor.syncdb()
        yield server, accessor
    finally:
        accessor.close()
        server.stop()


def measure() -> dict:
    with server_and_store("bench") as (server, accessor):
        metadata = MetricMetadata.create(RETENTION, "average", 0.5)
        names = tree_names()
        accessor.create_metrics([(name, metadata) for name in names])
        actions = operations(accessor, names)
        actions[f"write {SERIES} metrics x 1 point"]()  # a point to fetch
        results = {label: count(server, action) for label, action in actions.items()}
        fresh = iter(range(10**6))
        results["create 10 metrics"] = count(server, lambda: accessor.create_metrics(
            [(f"new.m{next(fresh)}.cpu", metadata) for _ in range(10)]))
        return {"series": SERIES, "names": len(names), "retention": RETENTION, "operations": results}


CAPACITY_RETENTION = "60s:8d,1h:2y"  # biggraphite_like.settings.DEFAULT_RETENTION
CAPACITY_METRICS = 10  # metrics written for one day at 60 s, one point each a write batch
DAY_MINUTES = 1440


def table_contents(server: CQLTestServer, keyspace: str) -> dict[str, dict[str, int]]:
    """Live partitions, rows and logical bytes (partition key, clustering and cell values, no
    per-cell overhead or compression) of each table of a keyspace of the test server: what is
    held once compaction dropped deleted rows (tombstones left out)."""
    contents = {}
    with server.engine.lock:
        now = server.engine.now_seconds()
        for name, table in server.engine.keyspaces[keyspace].tables.items():
            partitions = rows = size = 0
            for partition in table.partitions.values():
                held = 0
                for clustering, row in partition.rows.items():
                    deleted = partition.deletion_for(table.ck_sort_key(clustering))  # range tombstones too
                    cells = row.live_cells(deleted, now)
                    if cells is None:
                        continue
                    rows += 1
                    held += sum(len(c) for c in clustering) + sum(len(cell[0]) for cell in cells.values())
                if held:
                    partitions += 1
                    size += held + sum(len(c) for c in partition.components)
            contents[name] = {"partitions": partitions, "rows": rows, "logical_bytes": size}
    return contents


def measure_capacity(metrics: int = CAPACITY_METRICS) -> dict:
    """One day at 60 s for `metrics` metrics, written as carbon flushes (every metric once a
    minute, one point each), counted by the test server: requests and statements (PREPAREs
    left out: once a process), then the partitions, rows and logical bytes each table holds;
    scaled per million metrics."""
    with server_and_store("capacity") as (server, accessor):
        metadata = MetricMetadata.create(CAPACITY_RETENTION, "average", 0.5)
        names = [f"capacity.host{i:03d}.cpu" for i in range(metrics)]
        server.reset_counts()
        accessor.create_metrics([(name, metadata) for name in names])
        creation = count_since_reset(server, prepares=False)
        start = (int(time.time()) // 86400 - 1) * 86400  # yesterday, 00:00 UTC
        server.reset_counts()
        kinds: collections.Counter = collections.Counter()
        accessor.store._conn.session.add_request_init_listener(lambda future: kinds.update(statement_kinds(future.query)))
        # gauges with two decimals (a random walk per metric): what most carbon metrics look like
        walks = np.round(50 + np.cumsum(np.random.default_rng(16).normal(0, 1, (DAY_MINUTES, metrics)), axis=0), 2)
        for minute in range(DAY_MINUTES):
            ts = start + 60 * minute
            accessor.insert_points({name: [(ts, float(walks[minute, i]))] for i, name in enumerate(names)},
                                   now=ts + 30)
        day = {**count_since_reset(server, prepares=False), "reads": kinds["SELECT"],
               "writes": kinds["INSERT"] + kinds["UPDATE"] + kinds["DELETE"] + kinds["BATCHED_WRITE"]}
        data = table_contents(server, "capacity")
        metadata_tables = table_contents(server, "capacity_metadata")
        end = start + 86400
        fetch = lambda: accessor.fetch(names, end - 86400, end, end)  # noqa: E731
        fetches = {"before_sealing": count(server, fetch)}
        # bgl seal once the day is over (default grace): every window of the day becomes a chunk
        server.reset_counts()
        kinds.clear()
        sealed = seal(accessor, now=end + seal_mod.GRACE, settle=0)
        sealing = {**count_since_reset(server, prepares=False), "reads": kinds["SELECT"],
                   "writes": kinds["INSERT"] + kinds["UPDATE"] + kinds["DELETE"] + kinds["BATCHED_WRITE"]}
        data_sealed = table_contents(server, "capacity")
        fetches["after_sealing"] = count(server, fetch)
    points = {table: metrics * min(DAY_MINUTES * 60 // stage.precision, stage.points)
              for table, stage in stage_tables(CAPACITY_RETENTION).items()}
    scale = 1_000_000 / metrics
    return {
        "metrics": metrics, "retention": CAPACITY_RETENTION, "write_batches": DAY_MINUTES,
        "per_million_metrics": {
            "creation": {key: value * scale for key, value in creation.items() if key != "by_opcode"},
            "one_day_of_writes": {key: value * scale for key, value in day.items() if key != "by_opcode"},
            "sealing_one_day": {key: value * scale for key, value in sealing.items() if key != "by_opcode"},
            "tables_after_sealing": {name: {k: v * scale for k, v in figures.items()}
                                     for name, figures in data_sealed.items() if figures["rows"]},
            "tables_after_one_day": {name: {k: v * scale for k, v in figures.items()}
                                     for name, figures in {**data, **{f"metadata.{n}": f for n, f in
                                                                      metadata_tables.items()}}.items()
                                     if figures["rows"] and not name.endswith("store_settings")},  # one row a store
        },
        "by_opcode": {"creation": creation["by_opcode"], "one_day_of_writes": day["by_opcode"],
                      "sealing_one_day": sealing["by_opcode"]},
        "sealed": sealed.counters(),
        # requests to fetch one day of every series (one read snapshot), per series
        "fetch_one_day_per_series": {when: figures["requests"] / metrics for when, figures in fetches.items()},
        # logical bytes of a stage's per-point rows and chunks per point it holds, before and after sealing
        "bytes_per_point": {
            table: {"before_sealing": (data.get(table, {}).get("logical_bytes", 0)
                                       + data.get(chunk_table, {}).get("logical_bytes", 0)) / count,
                    "after_sealing": (data_sealed.get(table, {}).get("logical_bytes", 0)
                                      + data_sealed.get(chunk_table, {}).get("logical_bytes", 0)) / count}
            for table, count in points.items() if count
            for chunk_table in ["chunks_" + table.removeprefix("datapoints_")]},
    }


def stage_tables(retention: str) -> dict:
    """Stage table name -> stage, of a retention."""
    stages = MetricMetadata.create(retention, "average", 0.5).retention.stages
    return {StageTable(stage, index > 0).name: stage for index, stage in enumerate(stages)}


def statement_kinds(query) -> collections.Counter:
    """The first word of each statement a request carries (a batch: each of its statements)."""
    inner = getattr(query, "_statements_and_parameters", None)
    if inner is not None:  # a BatchStatement: (is_prepared, query id or text, values) each
        return collections.Counter("BATCHED_WRITE" if prepared else text.split(None, 1)[0].upper()
                                   for prepared, text, _ in inner)
    text = getattr(getattr(query, "prepared_statement", None), "query_string", None) or getattr(query, "query_string", "")
    return collections.Counter([text.split(None, 1)[0].upper() if text else "UNKNOWN"])


def count_since_reset(server: CQLTestServer, prepares: bool = True) -> dict:
    """Requests and statements (inside batches too) since the last reset; without PREPARE
    when prepares is False (a process prepares each statement once, whatever it writes)."""
    counts = {key: value for key, value in server.statement_counts.items()
              if value and (prepares or key != "PREPARE")}
    requests = sum(value for key, value in counts.items() if key != "batch_statements")
    statements = requests - counts.get("BATCH", 0) + counts.get("batch_statements", 0)
    return {"requests": requests, "statements": statements, "by_opcode": counts}


RATE_SECONDS = 2.0  # how long each operation is repeated to measure its rate
RATE_RUNS = 200  # at most this many runs of one operation


def rate(action, seconds: float) -> float:
    """Operations per second of action(), after one run that prepares its statements."""
    action()
    runs, started = 0, time.perf_counter()
    while runs < RATE_RUNS and (runs == 0 or time.perf_counter() - started < seconds):
        action()
        runs += 1
    return runs / (time.perf_counter() - started)


def operations(accessor: Accessor, names: list[str]) -> dict:
    """label -> action, on a store holding `names`: the finds, fetch and writes measured everywhere."""
    batch = names[:SERIES]
    now = int(time.time()) // 60 * 60
    minute = [now - 120]

    def write(points: int) -> None:
        minute[0] += 60 * points  # new points each time, as carbon sends them
        accessor.insert_points({n: [(minute[0] + 60 * k, 1.0) for k in range(points)] for n in batch},
                               now=minute[0] + 60 * points)

    actions = {f"find {pattern} ({kind})": (lambda p=pattern: (accessor.glob_metrics(p), accessor.glob_directories(p)))
               for pattern, kind in FIND_PATTERNS}
    actions[f"fetch {SERIES} series x 1 day"] = lambda: accessor.fetch(batch, now - 86400, now + 3600)
    actions[f"write {SERIES} metrics x 1 point"] = lambda: write(1)
    actions[f"write {SERIES} metrics x 5 points"] = lambda: write(5)
    return actions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--real", action="store_true",
                        help="also operations per second on a real Cassandra node beside SQLite (needs java and mvn)")
    parser.add_argument("--capacity", action="store_true",
                        help=f"also one day at 60 s of {CAPACITY_METRICS} metrics ({CAPACITY_RETENTION}): statements,"
                             " partitions, rows and bytes per million metrics (docs/cassandra.md, capacity model)")
    parser.add_argument("--rate-seconds", type=float, default=RATE_SECONDS,
                        help=f"how long each operation is repeated with --real ({RATE_SECONDS:g})")
    parser.add_argument("--bulk-metrics", type=int, default=real_mod.BULK_METRICS,
                        help=f"metrics created, written ({real_mod.BULK_POINTS} points each) and fetched in bulk on the"
                             f" real node with --real, in each index mode ({real_mod.BULK_METRICS:,}; 0: none)")
    parser.add_argument("--modes", default="sasi,sai", help="index modes measured with --real (sasi,sai)")
    parser.add_argument("--cluster", action="store_true",
                        help="with --real: the three-node cluster of tests/cassandra_node (127.0.0.1-3, 512 MiB heap"
                             " each, replication factor 3) instead of one node")
    parser.add_argument("--index-cost", action="store_true",
                        help="with --real: the bulk creation again on a metadata keyspace whose indexes were dropped"
                             " (the node CPU and bytes the indexes cost)")
    args = parser.parse_args(argv)
    report = measure()
    if args.capacity:
        report["capacity"] = measure_capacity()
    if args.real:
        with tempfile.TemporaryDirectory(prefix="bgl-cassandra-bench-") as workdir:
            report["real"] = real_mod.measure_real(workdir, args.rate_seconds, args.bulk_metrics,
                                                   tuple(args.modes.split(",")), args.cluster,
                                                   args.index_cost)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"CQL requests per operation ({report['names']:,} metrics, retention {report['retention']}):")
    for label, figures in report["operations"].items():
        print(f"  {label:55} {figures['requests']:5} requests  {figures['statements']:5} statements")
    capacity = report.get("capacity")
    if capacity:
        figures = capacity["per_million_metrics"]
        print(f"per million metrics ({capacity['retention']}; measured on {capacity['metrics']} metrics,"
              f" one day at 60 s in {capacity['write_batches']} write batches):")
        for what in ("creation", "one_day_of_writes", "sealing_one_day"):
            print(f"  {what:55} {figures[what]['requests']:13,.0f} requests {figures[what]['statements']:13,.0f}"
                  " statements" + (f" ({figures[what]['reads']:,.0f} reads, {figures[what]['writes']:,.0f} writes)"
                                   if "reads" in figures[what] else ""))
        for when in ("tables_after_one_day", "tables_after_sealing"):
            print(f"  {when}:")
            for table, held in figures[when].items():
                print(f"    {table:53} {held['partitions']:13,.0f} partitions {held['rows']:15,.0f} rows"
                      f" {held['logical_bytes'] / 1e9:9.2f} GB logical")
        print("  requests per series to fetch its day: " + ", ".join(
            f"{n:.1f} {when.replace('_', ' ')}" for when, n in capacity["fetch_one_day_per_series"].items()))
        for table, sizes in capacity["bytes_per_point"].items():
            print(f"  logical bytes per point held, {table:24} {sizes['before_sealing']:8.2f} before sealing"
                  f" {sizes['after_sealing']:8.2f} after")
    if report.get("real"):
        real_mod.print_real(report["real"], report["names"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
