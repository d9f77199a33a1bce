"""In-place upgrade of a store written by the release before interned name strings.

tests/data/store_before_interning.sql is the dump (`sqlite3 .dump`) of a store written by
biggraphite_like at commit 42fcb59, whose metrics and directories hold their parent and
components as text: metrics of depth 1 to 62, a tagged series, points in two stages, a
deleted metric that held the last key, a directory without metrics, a read_on, and a row
whose metadata cannot be read (`bgl repair`'s case). `bgl syncdb` must convert it in
place and lose nothing.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import SchemaMissing
from biggraphite_like.metric import MetricMetadata

FIXTURE = Path(__file__).resolve().parent / "data" / "store_before_interning.sql"
BGL = shutil.which("bgl", path=os.path.dirname(sys.executable)) or shutil.which("bgl")
NOW = 1_700_000_000  # the `now` the fixture was written with
DEEP = "a.deep." + ".".join(f"p{i}" for i in range(60))
METRIC_ROWS = "SELECT key, name, retention, aggregator, xfilesfactor, created_on, updated_on, read_on FROM metrics ORDER BY key"


@pytest.fixture
def old_store(tmp_path) -> Path:
    path = tmp_path / "bgl.db"
    conn = sqlite3.connect(path)
    conn.executescript(FIXTURE.read_text())
    conn.close()
    return path


def rows(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def syncdb(path: Path, env: dict) -> None:
    process = subprocess.run([BGL, "--store", f"sqlite://{path}", "syncdb"], env=env, capture_output=True,
                             text=True, timeout=120)
    assert process.returncode == 0, process.stderr


def test_the_fixture_holds_the_old_layout(old_store):
    assert rows(old_store, "SELECT parent, component_0, component_1, component_2 FROM metrics WHERE name = 'a.b.c'") == [
        ("a.b", "a", "b", "c")]
    assert rows(old_store, "SELECT seq FROM sqlite_sequence WHERE name = 'metrics'") == [(8,)]
    assert rows(old_store, "SELECT max(key) FROM metrics") == [(7,)]


def test_reads_of_an_old_store_say_to_run_syncdb(old_store):
    accessor = Accessor.from_url(f"sqlite://{old_store}")
    with pytest.raises(SchemaMissing, match=r"as text.*bgl --store sqlite://\S+ syncdb.*convert"):
        accessor.glob_metrics("a.b.*")
    accessor.close()


def test_bgl_syncdb_converts_in_place_and_loses_nothing(old_store, env):
    metrics = rows(old_store, METRIC_ROWS)
    directories = rows(old_store, "SELECT key, name FROM directories ORDER BY key")
    assert len(metrics) == 7 and ("empty.dir.here" in {name for _, name in directories})

    syncdb(old_store, env)

    assert rows(old_store, METRIC_ROWS) == metrics  # keys, names, metadata, times: unchanged
    assert rows(old_store, "SELECT key, name FROM directories ORDER BY key") == directories
    for table in ("metrics", "directories"):
        kinds = rows(old_store, f"SELECT DISTINCT typeof(parent), typeof(component_0), typeof(component_1) FROM {table}")
        assert {kind for row in kinds for kind in row} <= {"integer", "null"}, (table, kinds)
    assert rows(old_store, "SELECT name FROM sqlite_master WHERE name LIKE 'old%'") == []
    assert rows(old_store, "PRAGMA integrity_check") == [("ok",)]

    accessor = Accessor.from_url(f"sqlite://{old_store}")
    assert accessor.glob_metrics("a.b.*") == ["a.b.c", "a.b.d"]
    assert accessor.glob_metrics("*.cpu.user") == ["host-1.cpu.user"]
    assert accessor.glob_metrics("a.**.p59") == [DEEP]
    assert accessor.glob_metrics("*") == ["top"]
    assert accessor.glob_directories("empty.*") == ["empty.dir"]
    assert accessor.glob_directories("a.*") == ["a.b", "a.deep"]
    assert accessor.glob_metrics("gone.*") == []
    assert accessor.get_metric("x.y") is None  # its row is unreadable, as before: `bgl repair` removes it
    series = accessor.fetch(["a.b.c", "a.b.d", "top"], NOW - 180, NOW, now=NOW)
    assert [v for v in series["a.b.c"].values_list() if v is not None] == [1.5, 2.5]
    assert [v for v in series["a.b.d"].values_list() if v is not None] == [-0.0]
    assert [v for v in series["top"].values_list() if v is not None] == [42.0]

    # the sequence survived: the deleted metric's key 8 is not given again
    accessor.create_metrics([("new.metric", MetricMetadata.create("60s:1d"))], now=NOW)
    assert rows(old_store, "SELECT key FROM metrics WHERE name = 'new.metric'") == [(9,)]
    assert accessor.glob_metrics("new.*") == ["new.metric"]
    accessor.close()

    syncdb(old_store, env)  # nothing left to convert
    assert len(rows(old_store, METRIC_ROWS)) == 8
