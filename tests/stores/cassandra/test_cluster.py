"""The Cassandra store on a real three-node cluster (127.0.0.1-3, replication factor 3).

What one node cannot show: consistency levels per operation, a node stopped while writes
and reads go on (the store keeps working at the levels that allow it, fails clearly at the
others, and loses no acknowledged point), a node restarted. It takes about 4 minutes on 2
cores, so it runs before each release of the Cassandra store rather than in CI:

    BGL_TEST_CASSANDRA_CLUSTER=1 .venv/bin/python -m pytest -v -s tests/stores/cassandra/test_cluster.py

The tests run in file order on one cluster: the later ones use the node the earlier one stopped.
"""
from __future__ import annotations

import os
import threading
import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import StoreUnavailable
from biggraphite_like.metric import MetricMetadata
from tests.conftest import REAL_NODE_GROUP

pytestmark = [
    pytest.mark.skipif(os.environ.get("BGL_TEST_CASSANDRA_CLUSTER") != "1",
                       reason="the three-node cluster runs with BGL_TEST_CASSANDRA_CLUSTER=1 (about 4 min)"),
    pytest.mark.timeout(1200),  # the first test waits for three nodes and the store's DDL
    pytest.mark.xdist_group(REAL_NODE_GROUP),  # never beside the single node: one worker runs both
]

META = MetricMetadata.create("10s:1d", "average", 0.0)  # one stage: one row a point
NOW = 1_800_000_000 - 1_800_000_000 % 10
METRICS = [f"cl.host{i}.cpu" for i in range(20)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    from tests.cassandra_node import CassandraUnavailableHere
    from tests.cassandra_node.cluster import CassandraCluster

    nodes = CassandraCluster(tmp_path_factory.mktemp("cassandra-cluster"))
    capture = request.config.pluginmanager.getplugin("capturemanager")
    try:
        with capture.global_and_fixture_disabled():
            nodes.start()
    except CassandraUnavailableHere as exc:
        pytest.fail(f"no real Cassandra cluster: {exc}")
    yield nodes
    nodes.stop()


@pytest.fixture(scope="module")
def base_url(cluster) -> str:
    url = f"cassandra://{cluster.contact_points}/cluster3"
    accessor = Accessor.from_url(url + "?replication_factor=3&timeout=30")
    accessor.syncdb()
    accessor.create_metrics([(name, META) for name in METRICS], now=NOW)
    accessor.close()
    return url


def _accessor(base_url: str, level: str, timeout: int = 10) -> Accessor:
    return Accessor.from_url(f"{base_url}?data_write={level}&data_read={level}&timeout={timeout}")


def _stored(accessor: Accessor, names: list[str]) -> set[tuple[str, int]]:
    """(metric, timestamp) of every point the store returns over the last day."""
    series = accessor.fetch(names, NOW - 86_000, NOW + 10, NOW + 10)
    return {(name, s.start + i * s.step) for name, s in series.items()
            for i, value in enumerate(s.values_list()) if value is not None}


def test_every_level_writes_and_reads_with_three_nodes(base_url):
    for k, level in enumerate(["ONE", "QUORUM", "ALL"]):
        accessor = _accessor(base_url, level)
        try:
            points = {name: [(NOW - 80_000 + 10 * (100 * k + j), float(j)) for j in range(10)] for name in METRICS[:3]}
            assert accessor.insert_points(points, now=NOW).stored == 30
            stored = _stored(accessor, METRICS[:3])
            assert {(n, int(t)) for n, series in points.items() for t, _ in series} <= stored, level
        finally:
            accessor.close()


def test_a_node_stopped_during_writes_loses_no_acknowledged_point(cluster, base_url):
    writer = _accessor(base_url, "QUORUM")
    sent: list[tuple[str, int]] = []
    acknowledged: set[tuple[str, int]] = set()
    failures: list[str] = []
    stop = threading.Event()

    def write() -> None:
        for step in range(600):  # one point per metric per batch, at most 600 batches
            if stop.is_set():
                return
            ts = NOW - 40_000 + 10 * step
            batch = {name: [(ts, float(step))] for name in METRICS}
            sent.extend((name, ts) for name in METRICS)
            try:
                if writer.insert_points(batch, now=NOW).stored == len(METRICS):
                    acknowledged.update((name, ts) for name in METRICS)
            except StoreUnavailable as exc:
                failures.append(str(exc))

    thread = threading.Thread(target=write)
    thread.start()
    time.sleep(3)
    killed_at = len(sent)
    cluster.nodes[2].kill()  # 127.0.0.3 goes away as a crashed machine would
    time.sleep(8)
    stop.set()
    thread.join(120)
    assert not thread.is_alive()
    reader = _accessor(base_url, "QUORUM")
    try:
        stored = _stored(reader, METRICS) & set(sent)
    finally:
        reader.close()
        writer.close()
    print(f"\nQUORUM writes with 127.0.0.3 killed after {killed_at} points: sent {len(sent)},"
          f" acknowledged {len(acknowledged)}, stored {len(stored)}, failed batches {len(failures)}")
    assert len(sent) > killed_at  # writes went on after the kill
    assert acknowledged <= stored  # nothing acknowledged is lost
    assert len(acknowledged) >= len(sent) - len(METRICS) * len(failures)
    assert all("Cassandra" in f or "replica" in f or "host" in f for f in failures), failures[:3]


def test_levels_that_a_node_down_allows_work_and_the_others_fail_clearly(base_url):
    ts = NOW - 20_000
    for level in ("ONE", "QUORUM"):
        accessor = _accessor(base_url, level)
        try:
            assert accessor.insert_points({METRICS[0]: [(ts, 1.0)]}, now=NOW).stored == 1
            assert (METRICS[0], ts) in _stored(accessor, [METRICS[0]])
        finally:
            accessor.close()
    # a longer client timeout than the nodes' 10 s: the coordinator's answer (Unavailable once
    # gossip has marked the node down, a write/read timeout before) comes first
    accessor = _accessor(base_url, "ALL", timeout=30)
    try:
        with pytest.raises(StoreUnavailable, match="enough replicas at consistency ALL"):
            accessor.insert_points({METRICS[1]: [(ts, 1.0)]}, now=NOW)
        with pytest.raises(StoreUnavailable, match="enough replicas at consistency ALL"):
            accessor.fetch([METRICS[1]], NOW - 600, NOW, NOW)
    finally:
        accessor.close()


def test_a_restarted_node_serves_every_level_again_with_the_points_written_without_it(cluster, base_url):
    down = cluster.nodes[2]
    down.start()
    down.wait_ready()
    accessor = _accessor(base_url, "ALL")
    try:
        deadline = time.monotonic() + 90  # the driver sees the node up again within its reconnection delay
        while True:
            try:
                assert accessor.insert_points({METRICS[2]: [(NOW - 10, 5.0)]}, now=NOW).stored == 1
                break
            except StoreUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        stored = _stored(accessor, METRICS)  # ALL: every replica answers, the restarted one included
        assert (METRICS[0], NOW - 20_000) in stored  # written at ONE and QUORUM while it was down
        assert (METRICS[2], NOW - 10) in stored
    finally:
        accessor.close()
