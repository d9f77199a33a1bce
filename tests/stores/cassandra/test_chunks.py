"""The Cassandra store's sealed windows beyond the conformance suite: statement counts,
expiry by TTL on the server's clock, a store written before chunks, `bgl seal`.

Real cassandra-driver over TCP against the CQL test server (the session's, in process).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import SchemaMissing
from biggraphite_like.maintenance.seal import seal
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.stores.base import StageTable
from biggraphite_like.stores.cassandra import schema

META = MetricMetadata.create("10s:10m,60s:1h", "average", 0.0)
NOW = 1_700_000_000
BGL = shutil.which("bgl", path=os.path.dirname(sys.executable))


def _fill(accessor, names, now=NOW):
    accessor.create_metrics([(n, META) for n in names], now=now - 3600)
    accessor.insert_points({n: [(now - 3600 + 10 * k, float(k % 97) + i / 4) for k in range(360)]
                            for i, n in enumerate(names)}, now=now)


def _rows(accessor, table: str) -> int:
    store = accessor.store
    return len(store._execute(f"SELECT metric FROM {store.keyspace}.{table}", [], "data_read", "count rows"))


def test_statements_per_fetch_before_and_after_sealing(url_server, cassandra_accessor):
    cql_server = url_server
    if cql_server is None:
        pytest.skip("statement counts come from the CQL test server")
    accessor = cassandra_accessor
    names = [f"cnt.m{i:02d}" for i in range(40)]
    _fill(accessor, names)
    fetch = lambda: accessor.fetch(names, NOW - 600, NOW, NOW)  # noqa: E731
    expected = fetch()
    counts = []
    for _ in range(2):
        fetch()  # prepares every statement once
        cql_server.reset_counts()
        assert {n: s.values_list() for n, s in fetch().items()} == {n: s.values_list() for n, s in expected.items()}
        counts.append({k: v for k, v in cql_server.statement_counts.items() if v})
        seal(accessor, now=NOW, grace=0, settle=0)
    # the markers, one `metric IN ?` read of the 40 series' rows, then (sealed) one chunk read a series
    assert counts == [{"EXECUTE": 1 + 1}, {"EXECUTE": 1 + 1 + 40}]


def test_sealing_moves_points_into_one_chunk_a_window(cassandra_accessor):
    accessor = cassandra_accessor
    _fill(accessor, ["one.m"])
    raw = StageTable(META.retention.stages[0], False)
    before = _rows(accessor, raw.name)
    report = seal(accessor, now=NOW, grace=0, settle=0)
    # 10s x 60 slots: windows of 600 s; NOW % 600 = 200, so the ring's points of [NOW - 600, NOW - 200)
    # are sealed into one chunk, those of [NOW - 200, NOW) stay per-point rows
    assert (before, _rows(accessor, raw.name)) == (60, 20)
    assert _rows(accessor, schema.chunk_table_name(raw)) == 1
    assert report.points_sealed >= 60 and report.rows_deleted == report.points_sealed


def test_a_sealed_window_expires_by_ttl(url_server, cassandra_accessor):
    cql_server = url_server
    if cql_server is None:
        pytest.skip("needs the test server's clock")
    accessor = cassandra_accessor
    # the end of the last whole 60 s window: the 59 points before it fill that window alone
    # (unaligned, one second in sixty put them all in the open window and nothing sealed)
    now = int(time.time()) // 60 * 60
    accessor.create_metric("ttl.m", MetricMetadata.create("1s:60s", "average", 0.0), now=now)
    accessor.insert_points({"ttl.m": [(now - k, 1.0) for k in range(1, 60)]}, now=now)
    report = seal(accessor, now=now, grace=0, settle=0)
    assert report.windows_sealed == 1
    table = StageTable(MetricMetadata.create("1s:60s", "average", 0.0).retention.stages[0], False)
    assert _rows(accessor, schema.chunk_table_name(table)) == 1
    assert accessor.fetch(["ttl.m"], now - 60, now, now)["ttl.m"].values_list().count(1.0) >= 1
    cql_server.advance_clock(60 + 60 + 3600 + 1 + 5)  # window end + the stage's TTL (duration + slack + one step)
    assert _rows(accessor, schema.chunk_table_name(table)) == 0
    assert accessor.fetch(["ttl.m"], now - 60, now, now)["ttl.m"].values_list().count(1.0) == 0


def test_a_store_written_before_chunks_keeps_working_then_syncdb_and_seal(cassandra_accessor):
    accessor = cassandra_accessor
    store = accessor.store
    _fill(accessor, ["old.a", "old.b"])
    # the store as the previous release left it: no chunk window recorded, no chunk tables
    store._execute(f"DELETE FROM {store.metadata_keyspace}.{schema.SETTINGS_TABLE} WHERE name = ?",
                   ["chunk_window"], "metadata_write", "forget the chunk window")
    for index in range(2):
        table = StageTable(META.retention.stages[index], index > 0)
        store._ddl(f"DROP TABLE IF EXISTS {store.keyspace}.{schema.chunk_table_name(table)}")
    old = Accessor.from_url(store.url)
    try:
        expected = {n: s.values_list() for n, s in old.fetch(["old.a", "old.b"], NOW - 3600, NOW, NOW).items()}
        with pytest.raises(SchemaMissing, match="syncdb"):
            seal(old, now=NOW, grace=0, settle=0)
        old.syncdb()
        assert seal(old, now=NOW, grace=0, settle=0).windows_sealed > 0
        got = {n: s.values_list() for n, s in old.fetch(["old.a", "old.b"], NOW - 3600, NOW, NOW).items()}
        assert got == expected
    finally:
        old.close()


def test_bgl_seal_prints_its_counters(cassandra_accessor, tmp_path):
    accessor = cassandra_accessor
    _fill(accessor, ["cli.m"], now=int(time.time()) - 7200)
    env = dict(os.environ, HOME=str(tmp_path))
    command = [BGL] if BGL else [sys.executable, "-m", "biggraphite_like.cli"]
    metrics_file = tmp_path / "seal.prom"
    result = subprocess.run(command + ["--store", accessor.store.url, "seal", "--grace", "1h", "--settle", "0",
                                       "--format", "json", "--metrics-file", str(metrics_file)],
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    counters = json.loads(result.stdout)["counters"]
    # the 60s stage's past window is sealed; the 10s stage's rows are past its retention (left to the TTL)
    assert counters["windows_sealed"] >= 1 and counters["metrics_scanned"] == 1
    assert counters["rows_past_retention"] >= 1
    assert "bgl_seal_points_sealed" in metrics_file.read_text()
    bad = subprocess.run(command + ["--store", accessor.store.url, "seal", "--grace", "soon"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "grace" in bad.stderr and "soon" in bad.stderr


def test_deleted_ranges_never_cover_another_windows_row():
    from biggraphite_like.stores.cassandra.sealing import _runs

    assert _runs([0, 1, 2, 5, 6, 9], []) == [(0, 9)]
    assert _runs([0, 1, 2, 5, 6, 9], [3, 8]) == [(0, 2), (5, 6), (9, 9)]
    assert _runs([4], [0, 9]) == [(4, 4)]
    assert _runs([], [1]) == []


def test_a_point_written_while_its_window_is_sealed_is_kept(cassandra_accessor):
    """A writer racing `bgl seal` (its point lands after the scan, before the chunk and the
    deletions): the range deletion must not cover it, and reads must prefer it to the
    chunk, in the raw stage and in the aggregate it rewrites."""
    accessor = cassandra_accessor
    _fill(accessor, ["race.m"])
    late = NOW - 400  # in the sealed window [NOW - 800, NOW - 200) of the 10s stage
    older = NOW - 900 - (NOW - 900) % 60  # past the 10s stage: in the sealed window [NOW - 4400, NOW - 800) of the 60s one
    store = accessor.store
    store.announce_seal(NOW)
    report = store.seal_points([accessor.get_metric("race.m")], NOW, NOW, race_hook=lambda: accessor.insert_points(
        {"race.m": [(late, 5000.0), (older, 7000.0)]}, now=NOW))
    assert report.windows_sealed >= 2
    raw = accessor.fetch(["race.m"], NOW - 600, NOW, NOW)["race.m"]
    assert raw.values_list()[(late - raw.start) // raw.step] == 5000.0
    minutes = accessor.fetch(["race.m"], NOW - 3600, NOW, NOW)["race.m"]  # the 60s stage
    assert minutes.values_list()[(older - minutes.start) // minutes.step] == 7000.0
