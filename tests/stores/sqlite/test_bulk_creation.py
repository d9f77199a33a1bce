"""Creating names in bulk on SQLite (stores/sqlite/metadata.py, `_insert_new_metrics`): the
names a write batch found absent are inserted under keys the store hands out itself, as
AUTOINCREMENT would; the others are upserted. Each name must write and read under its own
row's key, no key of a deleted metric may come back, and a name that has a row after all
is upserted, not refused."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import Metric, MetricMetadata

NOW = 1_700_000_000


def _meta(retention: str = "60s:1d", aggregator: str = "average") -> MetricMetadata:
    return MetricMetadata.create(retention, aggregator, 0.0)


def _rows(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def test_a_bulk_of_new_names_writes_and_reads_each_under_its_own_row_and_never_reuses_a_key(tmp_path):
    path = tmp_path / "bgl.db"
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    accessor.create_metrics([("old.a", _meta()), ("old.b", _meta())], now=NOW)
    highest = _rows(path, "SELECT max(key) FROM metrics")[0][0]
    accessor.delete_metrics(["old.b"])  # the highest key: it must not come back
    names = [f"tree.dc{i % 3}.host{i // 30:03d}.cpu{i % 10}" for i in range(3_000)]
    ts = NOW - 120
    result = accessor.insert_columns(names, np.arange(len(names)), np.full(len(names), ts, np.float64),
                                     np.arange(len(names), dtype=np.float64), now=NOW, create=_meta(), checked=True)
    assert (result.stored, result.created) == (len(names), len(names))

    keys = dict(_rows(path, "SELECT name, key FROM named_metrics"))
    assert len(keys) == len(names) + 1 and min(keys[n] for n in names) > highest
    assert _rows(path, "SELECT seq FROM sqlite_sequence WHERE name = 'metrics'") == [(max(keys.values()),)]
    reader = Accessor.from_url(f"sqlite://{path}")  # no cache of this writer's: keys read from the rows
    series = reader.fetch(names, ts - 60, ts + 60, now=NOW)
    assert [float(np.nansum(series[n].values)) for n in names] == [float(i) for i in range(len(names))]
    accessor.create_metrics([("after.c", _meta())], now=NOW)
    assert _rows(path, "SELECT key FROM named_metrics WHERE name = 'after.c'") == [(max(keys.values()) + 1,)]


def test_a_name_found_absent_that_has_a_row_by_its_creation_is_upserted(tmp_path):
    path = tmp_path / "bgl.db"
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    store = accessor.store
    with store.write_batch():
        assert store.get_metrics(["a.b", "a.c"]) == {}  # both found absent in this batch
        store._insert_metrics([("a.b", ("60s:1d", "average", 0.0), NOW, NOW, 0)])  # a row after all
        new = store.create_metrics([Metric("a.b", _meta("60s:2d", "max"), NOW, NOW),
                                    Metric("a.c", _meta(), NOW, NOW)])
    assert new == {"a.c"}
    assert _rows(path, "SELECT name, retention, aggregator FROM named_metrics ORDER BY name") == [
        ("a.b", "2880*60s", "max"), ("a.c", "1440*60s", "average")]


def test_a_name_given_twice_in_one_creation_is_one_row_with_the_last_metadata(tmp_path):
    path = tmp_path / "bgl.db"
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    new = accessor.store.create_metrics([Metric("x.y", _meta(), NOW, NOW), Metric("x.z", _meta(), NOW, NOW),
                                         Metric("x.y", _meta("60s:2d", "sum"), NOW, NOW)])
    assert new == {"x.y", "x.z"}
    assert _rows(path, "SELECT name, retention, aggregator FROM named_metrics ORDER BY name") == [
        ("x.y", "2880*60s", "sum"), ("x.z", "1440*60s", "average")]


def test_a_bulk_of_names_with_different_metadata_and_times_keeps_each_ones_own(tmp_path):
    """The bulk insert binds a group's metadata and times once a statement: names of
    several groups, interleaved and past a statement's rows, each keep their own."""
    path = tmp_path / "bgl.db"
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    metadatas = [_meta(), _meta("60s:2d", "max"), _meta("10s:1h,60s:1d", "sum")]
    metrics = [Metric(f"mix.d{i % 7}.m{i:05d}", metadatas[i % 3], NOW - i % 2, NOW - i % 5, i % 4)
               for i in range(2_500)]
    assert accessor.store.create_metrics(metrics) == {m.name for m in metrics}
    rows = {r[0]: r[1:] for r in _rows(path, "SELECT name, key, retention, aggregator, created_on, updated_on,"
                                             " read_on FROM named_metrics")}
    assert {name: row[1:] for name, row in rows.items()} == {
        m.name: (str(m.metadata.retention), m.metadata.aggregator.value, m.created_on, m.updated_on, m.read_on)
        for m in metrics}
    assert sorted(row[0] for row in rows.values()) == list(range(1, len(metrics) + 1))
    ts = NOW - 30
    names = [m.name for m in metrics]
    reader = Accessor.from_url(f"sqlite://{path}")
    accessor.insert_columns(names, np.arange(len(names)), np.full(len(names), ts, np.float64),
                            np.arange(len(names), dtype=np.float64), now=NOW, checked=True)
    series = reader.fetch(names, ts - 60, ts + 60, now=NOW)
    assert [float(np.nansum(series[n].values)) for n in names] == [float(i) for i in range(len(names))]
