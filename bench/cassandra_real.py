"""The real-node part of bench/cassandra_bench.py (`--real`): one real Cassandra node, or the
three-node cluster of tests/cassandra_node (`--cluster`, replication factor 3), beside SQLite.

- operations per second of the finds, the fetch and the writes on the same 1,000 names;
- find p50 per pattern class on 8,000 more names (`svc.dcD.hostHHHH.{cpu,mem}.N`), each
  answer compared with SQLite's;
- bulk creation, writes and fetches (statements, client and node CPU per unit), each begun
  once the node is quiet (the previous block's flushes and compactions done), with the node
  CPU of the flushes and compactions a block leaves apart;
- creation on a metadata keyspace without its indexes (what index maintenance costs);
- bytes on disk per created metric and per point, tables and indexes apart, after
  `nodetool flush` on every node (memtables written to SSTables).
"""
from __future__ import annotations

import collections
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata

RETENTION = "60s:1d,1h:30d"
SERIES = 100  # metrics per fetch
BULK_METRICS = 20_000  # metrics created, then written, in bulk on the real node (4 to 6 components)
BULK_BATCH = 1_000  # metrics per create_metrics / insert_points call
BULK_POINTS = 60  # points written per metric (one hour at 60 s)
FETCH_RUNS = 30  # fetches of SERIES series x 1 h timed for the p50
FIND_RUNS = 21  # timed finds per pattern (after one that prepares its statements)
# (pattern, class): over find_names(); graphite's find asks glob_metrics then glob_directories
FIND_CLASSES = [
    ("svc.dc3.host0042.cpu.*", "fixed prefix"),
    ("svc.dc1.host00*.cpu.1", "prefix, wildcard after, 100 names"),
    ("*.dc4.host0042.cpu.3", "wildcard first"),
    ("svc.*.host0042.cpu.3", "wildcard in the middle"),
    ("svc.dc{1,2}.host0100.cpu.?", "braces and ?"),
    ("svc.dc3.host0042.**", "** (every descendant)"),
    ("svc.**.host0042.cpu.3", "** in the middle"),
    ("svc.dc2.host00[1-3]?.cpu.*", "character classes, 120 names"),
    ("svc.dc{1,2}.host00[0-5]?.cpu.*", "braces and classes, 480 names"),
]


def find_names() -> list[str]:
    """8,000 names: 5 data centers x 200 hosts x {cpu,mem} x 4."""
    return [f"svc.dc{d}.host{h:04d}.{group}.{i}" for d in range(5) for h in range(200) for group in ("cpu", "mem")
            for i in range(4)]


def bulk_names(count: int) -> list[str]:
    """`bulk.dcD.hostHHHH...`: 4, 5 and 6 components in turn, ten metrics a host."""
    leaves = ("cpu", "disk.used", "net.if0.rx", "load", "mem.free", "net.if1.tx", "up", "disk.free", "net.if0.tx",
              "mem.used")
    return [f"bulk.dc{i // 1000 % 10}.host{i // 10:05d}.{leaves[i % 10]}" for i in range(count)]


def node_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the Cassandra JVMs, from /proc."""
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


QUIET_SHARE = 0.1  # a node is quiet when its JVM uses less than this share of one core over a second
QUIET_WAIT = 60.0  # seconds a settle waits at most


def settle(pids: list[int], most: float = QUIET_WAIT) -> float:
    """Wait until the nodes are quiet (their flushes and compactions done: a second in which
    they used less than QUIET_SHARE of a core), at most `most` seconds; the node CPU seconds
    spent meanwhile."""
    started, spent = time.monotonic(), 0.0
    while time.monotonic() - started < most:
        before = node_cpu_seconds(pids)
        time.sleep(1.0)
        used = node_cpu_seconds(pids) - before
        spent += used
        if used < QUIET_SHARE:
            break
    return spent


class _Costs:
    """Wall time, client CPU (this process, driver threads included), node CPU (every node)
    and the statements sent (each statement of a batch counted) over a block of work."""

    def __init__(self, accessor: Accessor, node_pids: list[int]):
        from bench.cassandra_bench import statement_kinds

        self.kinds: collections.Counter = collections.Counter()
        self.pids = node_pids
        accessor.store._conn.session.add_request_init_listener(lambda f: self.kinds.update(statement_kinds(f.query)))

    @contextlib.contextmanager
    def measure(self, into: dict, units: int, unit: str) -> Iterator[None]:
        """The costs of the block, which starts once the nodes are quiet (another block's
        flushes and compactions not counted); `node_cpu_us_per_<unit>_settled` adds the node
        CPU of the flushes and compactions the block left, until the nodes are quiet again."""
        settle(self.pids)
        self.kinds.clear()
        wall, cpu, node = time.perf_counter(), time.process_time(), node_cpu_seconds(self.pids)
        yield
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        node = node_cpu_seconds(self.pids) - node
        left = settle(self.pids)
        into[f"node_cpu_us_per_{unit}_settled"] = (node + left) / units * 1e6
        statements = sum(self.kinds.values())
        into.update({f"{unit}s": units, "seconds": wall, f"{unit}s_per_second": units / wall,
                     "statements": statements, f"statements_per_{unit}": statements / units,
                     "by_kind": dict(self.kinds), "client_cpu_seconds": cpu, "node_cpu_seconds": node,
                     f"client_cpu_us_per_{unit}": cpu / units * 1e6, f"node_cpu_us_per_{unit}": node / units * 1e6})


def measure_finds(accessor: Accessor, reference: Accessor) -> dict:
    """p50 / p90 ms of each FIND_CLASSES find (glob_metrics then glob_directories, as graphite's
    find asks them), the sizes of its answer, and whether it equals the reference's (SQLite)."""
    figures = {}
    for pattern, label in FIND_CLASSES:
        def find(p: str = pattern) -> tuple[list[str], list[str]]:
            return accessor.glob_metrics(p), accessor.glob_directories(p)

        answer = find()
        times = []
        for _ in range(FIND_RUNS):
            started = time.perf_counter()
            find()
            times.append(time.perf_counter() - started)
        times.sort()
        expected = (reference.glob_metrics(pattern), reference.glob_directories(pattern))
        figures[pattern] = {"class": label, "metrics": len(answer[0]), "directories": len(answer[1]),
                            "p50_ms": statistics.median(times) * 1000, "p90_ms": times[int(len(times) * 0.9)] * 1000,
                            "same_as_sqlite": answer == expected}
    return figures


def measure_bulk(url: str, node_pids: list[int], count: int = BULK_METRICS) -> dict:
    """Creation of `count` new metrics, then BULK_POINTS points of each, then fetches of SERIES
    of them x 1 h: rates, statements and client/node CPU per unit."""
    metadata = MetricMetadata.create(RETENTION, "average", 0.5)
    names = bulk_names(count)
    accessor = Accessor.from_url(url)
    figures: dict[str, dict] = {"creation": {}, "writes": {}, "fetch": {}}
    try:
        accessor.syncdb()
        costs = _Costs(accessor, node_pids)
        with costs.measure(figures["creation"], count, "metric"):
            for first in range(0, count, BULK_BATCH):
                accessor.create_metrics([(n, metadata) for n in names[first:first + BULK_BATCH]])
        figures["creation"]["directories"] = len({d for n in names for d in names_mod.ancestors(n)})
        now = int(time.time()) // 60 * 60
        stamps = [now - 60 * (BULK_POINTS - k) for k in range(BULK_POINTS)]
        with costs.measure(figures["writes"], count * BULK_POINTS, "point"):
            for first in range(0, count, BULK_BATCH):
                accessor.insert_points({n: [(ts, 1.0) for ts in stamps] for n in names[first:first + BULK_BATCH]},
                                       now=now)
        batch = names[:SERIES]
        accessor.fetch(batch, now - 3600, now, now)  # statements prepared
        times = []
        with costs.measure(figures["fetch"], FETCH_RUNS, "fetch"):
            for _ in range(FETCH_RUNS):
                started = time.perf_counter()
                accessor.fetch(batch, now - 3600, now, now)
                times.append(time.perf_counter() - started)
        figures["fetch"]["p50_ms"] = float(np.median(times) * 1000)
    finally:
        accessor.close()
    return figures


def measure_creation_without_indexes(url: str, node_pids: list[int], count: int) -> dict:
    """Creation of `count` metrics, as measure_bulk's, on a metadata keyspace whose indexes
    were dropped after syncdb: the node CPU the indexes cost is the difference."""
    metadata = MetricMetadata.create(RETENTION, "average", 0.5)
    names = bulk_names(count)
    accessor = Accessor.from_url(url)
    figures: dict = {}
    try:
        accessor.syncdb()
        store = accessor.store
        session = store._conn.session
        keyspace = store.metadata_keyspace
        indexes = [row[0] for row in session.execute(
            "SELECT index_name FROM system_schema.indexes WHERE keyspace_name = %s", [keyspace])]
        for index in indexes:
            session.execute(f"DROP INDEX {keyspace}.{index}", timeout=120)
        figures["indexes_dropped"] = len(indexes)
        costs = _Costs(accessor, node_pids)
        with costs.measure(figures, count, "metric"):
            for first in range(0, count, BULK_BATCH):
                accessor.create_metrics([(n, metadata) for n in names[first:first + BULK_BATCH]])
    finally:
        accessor.close()
    return figures


def disk_bytes(data_dirs: list[Path], keyspace: str) -> dict[str, dict[str, int]]:
    """Bytes of each table's SSTables under the nodes' data folders (`<data>/<keyspace>/<table>-<id>`),
    summed over nodes: `table`
    (data, primary index, filters, statistics) and `index` (SASI `-SI_*` and SAI `SAI+*` files)."""
    sizes: dict[str, dict[str, int]] = {}
    for data_dir in data_dirs:
        keyspace_dir = data_dir / keyspace
        if keyspace_dir.is_dir():
            for table_dir in keyspace_dir.iterdir():
                table = table_dir.name.rsplit("-", 1)[0]
                held = sizes.setdefault(table, {"table": 0, "index": 0})
                for path in table_dir.rglob("*"):
                    if path.is_file() and not any(part in ("snapshots", "backups") for part in path.parts):
                        kind = "index" if "-SI_" in path.name or "SAI+" in path.name else "table"
                        held[kind] += path.stat().st_size
    return {table: held for table, held in sorted(sizes.items()) if held["table"] or held["index"]}


def _disk_per_unit(data_dirs: list[Path], keyspace: str, metrics: int, points: int) -> dict:
    """Bytes per created metric (metadata keyspace) and per point (data keyspace), with the tables;
    summed over every node (so over every replica on a cluster)."""
    metadata = disk_bytes(data_dirs, f"{keyspace}_metadata")
    data = disk_bytes(data_dirs, keyspace)

    def total(tables: dict, kind: str) -> int:
        return sum(held[kind] for held in tables.values())

    return {"metadata_tables": metadata, "data_tables": data, "metrics": metrics, "points": points,
            "per_metric": {kind: total(metadata, kind) / metrics for kind in ("table", "index")},
            "per_point": {kind: total(data, kind) / points for kind in ("table", "index")}}


def start_nodes(workdir: str, cluster: bool):
    """The node (768 MiB heap), or the three-node cluster (512 MiB each), started."""
    from tests.cassandra_node import CassandraNode
    from tests.cassandra_node.cluster import CassandraCluster

    if cluster:
        nodes = CassandraCluster(Path(workdir) / "cluster", heap="512M", jmx=True)
        nodes.start()
        return nodes, nodes.nodes, nodes.contact_points, nodes.nodes[0].version
    node = CassandraNode.single(Path(workdir) / "cassandra", heap="768M", jmx=True)
    node.start()
    version = node.wait_ready()
    return node, [node], node.address, version


def measure_real(workdir: str, seconds: float, bulk: int = BULK_METRICS, modes: tuple[str, ...] = ("sasi", "sai"),
                 cluster: bool = False, index_cost: bool = False) -> dict:
    """Operations per second, finds and bulk figures on SQLite and a real node (or cluster) in
    each index mode, same data; bytes on disk once the nodes have stopped; with index_cost,
    creation on a metadata keyspace without indexes too."""
    from bench.cassandra_bench import operations, rate, tree_names

    stores = {"sqlite": f"sqlite://{os.path.join(workdir, 'bench.db')}"}
    rates: dict[str, dict[str, float]] = {}
    finds: dict[str, dict] = {}
    bulk_figures: dict[str, dict] = {}
    owner, nodes, address, version = start_nodes(workdir, cluster)
    options = "&replication_factor=3" if cluster else ""
    pids = [node.process.pid for node in nodes]
    try:
        stores.update({f"cassandra {mode.upper()}": f"cassandra://{address}/bench_{mode}?index={mode}{options}"
                       for mode in modes})
        metadata = MetricMetadata.create(RETENTION, "average", 0.5)
        names = tree_names()
        reference = None
        for store, url in stores.items():
            print(f"[bench] {store}: schema and {len(names) + len(find_names()):,} names", file=sys.stderr, flush=True)
            accessor = Accessor.from_url(url)
            try:
                accessor.syncdb()
                accessor.create_metrics([(name, metadata) for name in names])
                svc = find_names()
                for first in range(0, len(svc), BULK_BATCH):
                    accessor.create_metrics([(name, metadata) for name in svc[first:first + BULK_BATCH]])
                for label, action in operations(accessor, names).items():
                    rates.setdefault(label, {})[store] = rate(action, seconds)
                if reference is None:
                    reference = accessor
                    accessor = None
                else:
                    finds[store] = measure_finds(accessor, reference)
            finally:
                if accessor is not None:
                    accessor.close()
            if bulk and store.startswith("cassandra"):
                print(f"[bench] {store}: bulk creation, writes and fetches of {bulk:,} metrics", file=sys.stderr,
                      flush=True)
                # three nodes take minutes a schema: the cluster's bulk shares the finds' keyspace
                bulk_figures[store] = measure_bulk(url if cluster else url.replace("/bench_", "/bulk_"), pids, bulk)
        if bulk and index_cost:
            print(f"[bench] creation of {bulk:,} metrics without metadata indexes", file=sys.stderr, flush=True)
            bulk_figures["without indexes"] = {"creation": measure_creation_without_indexes(
                f"cassandra://{address}/bulk_noindex?index={modes[-1]}{options}", pids, bulk)}
        if reference is not None:
            reference.close()
        if bulk:
            for node in nodes:
                node.flush()
            data_dirs = [node.config.directory / "data" / "data" for node in nodes]
            for mode in modes:
                keyspace, metrics = (f"bench_{mode}", bulk + len(names) + len(find_names())) if cluster else (
                    f"bulk_{mode}", bulk)
                bulk_figures[f"cassandra {mode.upper()}"]["disk"] = _disk_per_unit(data_dirs, keyspace, metrics,
                                                                                   bulk * BULK_POINTS)
            if "without indexes" in bulk_figures:
                bulk_figures["without indexes"]["disk"] = _disk_per_unit(data_dirs, "bulk_noindex", bulk, bulk)
    finally:
        owner.stop()
    return {"version": version, "stores": list(stores), "nodes": len(nodes), "ops_per_second": rates,
            "finds": finds, "bulk": bulk_figures}


def print_real(real: dict, names: int) -> None:
    """The --real figures, as text."""
    print(f"operations per second, same {names:,} names: " + " / ".join(real["stores"])
          + f" (Cassandra {real['version']}, {real.get('nodes', 1)} node(s))")
    for label, rates in real["ops_per_second"].items():
        print(f"  {label:55} " + " / ".join(f"{rates[store]:8.1f}" for store in real["stores"]))
    for store, finds in real.get("finds", {}).items():
        print(f"find (glob_metrics + glob_directories) on {store}, {len(find_names()):,} more names:")
        for pattern, f in finds.items():
            print(f"  {pattern:34} {f['class']:31} {f['metrics']:4} + {f['directories']:3} names:"
                  f" p50 {f['p50_ms']:6.2f} ms, p90 {f['p90_ms']:6.2f} ms"
                  + ("" if f["same_as_sqlite"] else "  DIFFERS FROM SQLITE"))
    for store, bulk in real.get("bulk", {}).items():
        print(f"bulk on {store}:")
        for what, unit in (("creation", "metric"), ("writes", "point"), ("fetch", "fetch")):
            if what not in bulk:
                continue
            f = bulk[what]
            extra = (f", {f['directories']:,} directories" if "directories" in f
                     else f", p50 {f['p50_ms']:.1f} ms" if what == "fetch" else "")
            print(f"  {what:9} {f[unit + 's']:>9,} {unit}s: {f[unit + 's_per_second']:10,.1f}/s,"
                  f" {f['statements_per_' + unit]:6.3f} statements/{unit} {f['by_kind']},"
                  f" client {f['client_cpu_us_per_' + unit]:8.1f} us/{unit}, node {f['node_cpu_us_per_' + unit]:8.1f}"
                  f" us/{unit} ({f['node_cpu_us_per_' + unit + '_settled']:.1f} with the flushes and compactions"
                  f" left){extra}")
        disk = bulk.get("disk")
        if disk:
            print(f"  disk after drain: per metric {disk['per_metric']['table']:.0f} B tables +"
                  f" {disk['per_metric']['index']:.0f} B indexes; per point {disk['per_point']['table']:.2f} B"
                  f" tables + {disk['per_point']['index']:.2f} B indexes")
            for table, held in {**disk["metadata_tables"], **disk["data_tables"]}.items():
                print(f"    {table:40} {held['table']:12,} B table {held['index']:12,} B indexes")
