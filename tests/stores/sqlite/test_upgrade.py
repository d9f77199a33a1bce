"""In-place upgrade of stores written by earlier releases (`bgl syncdb`).

tests/data/blocks_store.db.gz and windows_store.db.gz (see make_blocks_store.py) were
written by the releases before windows of chunks (blocks of whisper slots, 42fcb59) and
before window-first row ids (d3091f5), with what each read back: every point must come
back bit for bit. chunks_store.db.gz was written by the release before incremental vacuum
(cb38a22, today's layout): `bgl syncdb --vacuum` rewrites it.

tests/data/store_before_interning.sql is the dump (`sqlite3 .dump`) of a store written by
biggraphite_like at commit 42fcb59, whose metrics and directories hold their parent and
components as text: metrics of depth 1 to 62, a tagged series, points in two stages, a
deleted metric that held the last key, a directory without metrics, a read_on, and a row
whose metadata cannot be read (`bgl repair`'s case). `bgl syncdb` must convert it in
place and lose nothing.
"""
from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
from pathlib import Path

import numpy as np
import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import SchemaMissing
from biggraphite_like.glob import GlobPattern
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.retention import Stage
from biggraphite_like.stores.base import StageTable
from biggraphite_like.stores.sqlite import SQLiteStore
from tests.paths import DATA
from tests.stores.sqlite.upgrade_env import BGL, rows, syncdb

FIXTURE = DATA / "store_before_interning.sql"
NOW = 1_700_000_000  # the `now` the fixture was written with
DEEP = "a.deep." + ".".join(f"p{i}" for i in range(60))
# the old layouts' metrics rows; the name tree's, as its view rebuilds them
METRIC_ROWS = "SELECT key, name, retention, aggregator, xfilesfactor, created_on, updated_on, read_on FROM metrics ORDER BY key"
NAMED_ROWS = METRIC_ROWS.replace("FROM metrics", "FROM named_metrics")
DIRECTORY_NAMES = "SELECT name FROM named_directories WHERE NOT hidden ORDER BY name"


@pytest.fixture
def old_store(tmp_path) -> Path:
    path = tmp_path / "bgl.db"
    conn = sqlite3.connect(path)
    conn.executescript(FIXTURE.read_text())
    conn.close()
    return path


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
    directories = rows(old_store, "SELECT name FROM directories ORDER BY name")
    assert len(metrics) == 7 and (("empty.dir.here",) in directories)

    syncdb(old_store, env)

    assert rows(old_store, NAMED_ROWS) == metrics  # keys, names, metadata, times: unchanged
    assert rows(old_store, DIRECTORY_NAMES) == directories
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
    assert rows(old_store, "SELECT key FROM named_metrics WHERE name = 'new.metric'") == [(9,)]
    assert accessor.glob_metrics("new.*") == ["new.metric"]
    accessor.close()

    syncdb(old_store, env)  # nothing left to convert
    assert len(rows(old_store, NAMED_ROWS)) == 8


def _stage_table(name: str) -> StageTable:
    _, points, precision, _ = name.split("_")
    return StageTable(Stage(int(precision[:-1]), int(points[:-1])), name.endswith("_aggr"))


def read_back(store: SQLiteStore, written: dict) -> int:
    """Assert that every point the release read back (written["points"]) reads back bit for
    bit, and no other; how many points."""
    points = 0
    for table, by_name in written["points"].items():
        names = sorted(by_name)
        reads = store.read_points(_stage_table(table), names, np.zeros(len(names), np.int64),
                                  np.full(len(names), 2**32))
        for index, name in enumerate(names):
            mine = reads.request == index
            order = np.argsort(reads.timestamps[mine])
            got = [[int(t), float(v).hex()] for t, v in zip(reads.timestamps[mine][order], reads.values[mine][order])]
            assert got == by_name[name], (table, name)
            points += len(got)
    return points


@pytest.mark.parametrize("release, refusal", [
    # both releases predate the windows and the name tree: whichever layout is checked first
    # names syncdb
    ("blocks_store", "(blocks of slots|as text).*syncdb"),
    ("windows_store", "(windows keyed metric first|full names).*syncdb"),
])
def test_syncdb_upgrades_the_points_of_a_release_in_place(tmp_path, env, release, refusal):
    """`bgl syncdb` converts the release's file in place: every point read back bit for bit
    as the release read it, metrics and directories kept, every window sealed."""
    path = tmp_path / "bgl.db"
    with gzip.open(DATA / f"{release}.db.gz") as src:
        path.write_bytes(src.read())
    with gzip.open(DATA / f"{release}.json.gz", "rt") as src:
        written = json.load(src)
    before = SQLiteStore(str(path))
    table = next(iter(written["points"]))
    with pytest.raises(SchemaMissing, match=refusal):
        before.read_points(_stage_table(table), ["release.r0.m0"], np.array([0]), np.array([2**32]))
    with pytest.raises(SchemaMissing, match=refusal):  # maintenance too: no query against the old columns
        before.expire_points(written["now"])
    before.close()

    syncdb(path, env)

    store = SQLiteStore(str(path))
    points = read_back(store, written)
    assert points > 1000 and any(v.startswith("-0x0") for t in written["points"].values() for p in t.values()
                                 for _, v in p)  # -0.0 among them
    assert store.glob_metrics(GlobPattern("release.**"), 1000) == sorted(written["names"])
    deep = sorted({n.rsplit(".", 1)[0] for n in written["names"] if ".deep.a.b." in n})
    assert len(deep) >= 3 and store.glob_directories(GlobPattern("release.*.deep.a.*"), 1000) == deep
    store.close()
    assert rows(path, "SELECT name FROM sqlite_master WHERE name LIKE 'old_%'") == []
    for table in written["points"]:
        assert "points BLOB" in rows(path, f"SELECT sql FROM sqlite_master WHERE name = '{table}'")[0][0]
        # converted windows are sealed chunks: no open chunk or tail
        assert rows(path, f"SELECT count(*) FROM {table} WHERE id >= 1 << 62") == [(0,)]
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]
    # writes go on in the new layout
    accessor = Accessor.from_url(f"sqlite://{path}")
    now = written["now"] + 60
    assert accessor.insert_points({"release.r0.m0": [(now, 42.5)]}, now=now).stored == 1
    assert accessor.fetch(["release.r0.m0"], now - 5, now + 1, now=now)["release.r0.m0"].values_list()[-1] == 42.5
    accessor.close()
    syncdb(path, env)  # nothing left to convert


def test_syncdb_vacuum_switches_a_store_of_the_current_release_and_loses_nothing(tmp_path, env):
    """tests/data/chunks_store (commit cb38a22, the release before incremental vacuum) keeps
    its free pages; `bgl syncdb` says so and leaves it, `bgl syncdb --vacuum` rewrites it in
    incremental mode: every point read back bit for bit, metrics and directories as they
    were, and pages freed afterwards go back to the file system."""
    path = tmp_path / "bgl.db"
    with gzip.open(DATA / "chunks_store.db.gz") as src:
        path.write_bytes(src.read())
    with gzip.open(DATA / "chunks_store.json.gz", "rt") as src:
        written = json.load(src)
    metrics = rows(path, METRIC_ROWS)
    directories = rows(path, "SELECT name FROM directories ORDER BY name")
    assert rows(path, "PRAGMA auto_vacuum") == [(0,)] and rows(path, "PRAGMA freelist_count")[0][0] > 0

    process = subprocess.run([BGL, "--store", f"sqlite://{path}", "syncdb"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert process.returncode == 0 and "syncdb --vacuum" in process.stdout, process
    assert rows(path, "PRAGMA auto_vacuum") == [(0,)]  # left as it is: the rewrite is asked for
    process = subprocess.run([BGL, "--store", f"sqlite://{path}", "syncdb", "--vacuum"], env=env, capture_output=True,
                             text=True, timeout=120)
    assert process.returncode == 0 and "auto_vacuum_before none" in process.stdout, process

    assert rows(path, "PRAGMA auto_vacuum") == [(2,)] and rows(path, "PRAGMA freelist_count") == [(0,)]
    assert rows(path, "PRAGMA integrity_check") == [("ok",)]
    assert rows(path, NAMED_ROWS) == metrics
    assert rows(path, DIRECTORY_NAMES) == directories
    store = SQLiteStore(str(path))
    points = read_back(store, written)
    assert points == 3340
    assert store.glob_metrics(GlobPattern("release.**"), 1000) == sorted(written["names"])
    pages = rows(path, "PRAGMA page_count")[0][0]
    store.delete_metrics([n for n in written["names"] if n.startswith("release.r3.")])
    assert rows(path, "PRAGMA freelist_count") == [(0,)] and rows(path, "PRAGMA page_count")[0][0] < pages
    store.close()
