"""The carbon plugin's flush path: carbon's per-metric points become flat arrays written with
Accessor.insert_columns (real SQLite store, the plugin's own buffer, flusher and writer)."""
from __future__ import annotations

import time

import numpy as np

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.ingest.points import Refusals
from carbon_plugin.buffer import WriteBuffer
from carbon_plugin.flusher import Flusher
from carbon_plugin.known import KnownMetrics
from carbon_plugin.options import PluginOptions
from carbon_plugin.stats import PluginStats
from carbon_plugin.writer_process import InProcessWriter
from tests.store_env import make_store, stored_values


def test_take_gives_flat_arrays_of_normalised_names_and_refuses_invalid_ones():
    buffer = WriteBuffer(flush_size=1000, flush_interval=60.0, max_points=1000)
    buffer.add("a.b", [(100, 1.0), (160, 2.0)])
    buffer.add("c..d", [(100, 3.0)])  # another spelling of c.d
    buffer.add("bad\x01name", [(100, 4.0), (160, 5.0)])
    buffer.add("a.b", [(220, 6.0)])
    buffer.add("c.d", [(160, "not a number")])  # carbon never sends this; NaN, refused by the accessor
    refusals = Refusals()
    batch, spellings = buffer.take(refusals)
    assert len(buffer) == 0 and buffer.take(Refusals()) == (None, [])
    assert refusals.count == 2 and "control character" in refusals.samples[0][0]
    assert batch.names == ["a.b", "c.d"]
    assert batch.owner.tolist() == [0, 0, 1, 0, 1]  # arrival order
    by_name = {}
    for owner, ts, value in zip(batch.owner.tolist(), batch.timestamps.tolist(), batch.values.tolist()):
        by_name.setdefault(batch.names[owner], []).append((ts, value))
    assert by_name["a.b"] == [(100, 1.0), (160, 2.0), (220, 6.0)]
    assert by_name["c.d"][0] == (100, 3.0) and np.isnan(by_name["c.d"][1][1])
    assert spellings.count("c..d") == 1 and len(spellings) == 7


def test_flush_splits_by_flush_size_creates_with_carbons_metadata_and_counts_refusals(tmp_path):
    url, accessor = make_store(tmp_path)
    options = PluginOptions(store_url=url, flush_size=7, flush_interval=60.0, retries=0, writer_process=False)
    stats = PluginStats()
    known = KnownMetrics(lambda: accessor, options, stats)
    buffer = WriteBuffer(options.flush_size, options.flush_interval, 10_000)
    flusher = Flusher(InProcessWriter(lambda: accessor), buffer, known, options, stats)
    now = int(time.time())
    minute = now - now % 60
    fast, slow = MetricMetadata.create("60s:1d"), MetricMetadata.create("300s:1d")
    expected = {}
    for i in range(10):
        name = f"flush.m{i}"
        known.set(name, fast if i % 2 else slow)
        points = [(minute - 600 * (k + 1), float(i * 10 + k)) for k in range(3)]
        buffer.add(name, points)
        expected[name] = {ts: value for ts, value in points}
    known.set("flush..spelled", fast)  # carbon's spelling; stored as flush.spelled
    buffer.add("flush..spelled", [(minute - 600, 7.5)])
    buffer.add("flush.nometadata", [(minute - 600, 1.0)])  # carbon never created it: refused
    buffer.add("flush.m0", [(minute - 60, float("inf"))])  # refused by the accessor
    buffer.add("bad\x01name", [(minute - 60, 1.0)])  # refused by the buffer
    try:
        assert flusher.flush_now(30)
    finally:
        flusher.stop()
    counters = stats.totals()
    assert counters["storedPoints"] == 31
    assert counters["rejectedPoints"] == 3
    assert counters["flushes"] >= 5  # 31 points in calls of about 7 points, metrics never split
    reader = Accessor.from_url(url)
    metrics = reader.get_metrics(list(expected) + ["flush.spelled", "flush.nometadata"])
    assert "flush.nometadata" not in metrics
    assert str(metrics["flush.spelled"].metadata.retention) == str(fast.retention)
    for i in range(10):
        assert metrics[f"flush.m{i}"].metadata.retention == (fast if i % 2 else slow).retention
    got = stored_values(reader, list(expected), minute - 3600, now)
    assert got == {name: {ts - ts % (60 if int(name[-1]) % 2 else 300): v for ts, v in points.items()}
                   for name, points in expected.items()}
