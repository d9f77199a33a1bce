"""The SQLite name tree (stores/sqlite/name_tree.py, docs/format/sqlite.md#names): the
upgrade of a store written by the last release with full names (`bgl syncdb`, everything
kept), globs that read the name tables through their indexes only, hidden directories,
caches of directory keys across store objects and rollbacks, and bytes per name.

tests/data/before_name_tree.sql is the dump of a store written by commit 9cc4e88 (see
tests/data/make_name_tree_store.py) and before_name_tree.json what that code read back.
"""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import SchemaMissing
from biggraphite_like.glob import GlobPattern
from biggraphite_like.metric import Metric, MetricMetadata
from tests.paths import DATA
from tests.stores.sqlite.upgrade_env import BGL, rows as _rows, syncdb

NOW = 1_700_000_000


def _meta() -> MetricMetadata:
    return MetricMetadata.create("60s:1d", "average", 0.0)


def _store(path: Path, names=()) -> Accessor:
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    if names:
        accessor.create_metrics([(n, _meta()) for n in names], now=NOW)
    return accessor


# -- 1. the upgrade of the last release's file ------------------------------------------

def test_bgl_syncdb_moves_a_store_of_the_last_release_into_the_name_tree_and_keeps_everything(tmp_path, env):
    path = tmp_path / "bgl.db"
    conn = sqlite3.connect(path)
    conn.executescript((DATA / "before_name_tree.sql").read_text())
    conn.close()
    expected = json.loads((DATA / "before_name_tree.json").read_text())
    before = Accessor.from_url(f"sqlite://{path}")
    with pytest.raises(SchemaMissing, match=r"full names.*bgl --store \S+ syncdb"):
        before.glob_metrics("*")
    before.close()

    syncdb(path, env)
    assert _rows(path, "SELECT name FROM sqlite_master WHERE name LIKE 'old%'") == []
    assert _rows(path, "PRAGMA integrity_check") == [("ok",)]
    assert "name" not in {r[1] for r in _rows(path, "PRAGMA table_info(metrics)")}
    assert _rows(path, "SELECT count(*) FROM name_strings WHERE value = 'a.b'") == [(0,)]  # a parent path, gone
    assert _rows(path, "SELECT count(*) FROM name_strings WHERE value = 'cpu'") == [(1,)]  # a component, kept

    accessor = Accessor.from_url(f"sqlite://{path}")
    store = accessor.store
    metrics = {m.name: m for page in store.scan_metrics(page_size=7) for m in page.items}
    assert sorted(metrics) == sorted(expected["metrics"]) and len(metrics) == 92
    for name, want in expected["metrics"].items():
        metric = metrics[name]
        assert {"key": store._key(name), "retention": str(metric.retention),
                "aggregator": metric.metadata.aggregator.value, "xfilesfactor": metric.metadata.xfilesfactor,
                "created_on": metric.created_on, "updated_on": metric.updated_on, "read_on": metric.read_on} == want, name
    assert sorted(d for page in store.scan_directories(page_size=5) for d in page.items) == expected["directories"]
    assert "kept.under" not in expected["directories"] and "kept" in expected["directories"]
    for name, points in expected["points"].items():
        series = accessor.fetch([name], NOW - 3600, NOW, now=NOW)[name]
        assert [[series.start + i * series.step, float(v).hex()] for i, v in enumerate(series.values_list())
                if v is not None] == points, name
    assert sum(len(p) for p in expected["points"].values()) == 2 * 89 + 1
    # the release's walk hid the metrics under a directory deleted while they were there from
    # fixed-depth globs (not from `**` ones); the tree walks hidden directories: found by both
    assert expected["globs"]["kept.*.*"][0] == [] and "kept.under.m1" in expected["globs"]["**"][0]
    expected["globs"]["kept.*.*"][0] = ["kept.under.m1", "kept.under.m2"]
    for pattern, (metric_names, directory_names) in expected["globs"].items():
        assert accessor.glob_metrics(pattern) == metric_names, pattern
        assert accessor.glob_directories(pattern) == directory_names, pattern
    for query, found in expected["tags"].items():
        assert accessor.tags.find_series(json.loads(query)) == found, query
    # the metric key sequence survived: the deleted metric's key is not given again
    accessor.create_metrics([("new.metric", _meta())], now=NOW)
    assert store._key("new.metric") == expected["next_key"]
    # a directory deleted while it had metrics stays hidden until a name under it is made again
    assert accessor.glob_directories("kept.*") == []
    accessor.create_metrics([("kept.under.m3", _meta())], now=NOW)
    assert accessor.glob_directories("kept.*") == ["kept.under"]
    accessor.close()

    syncdb(path, env)  # nothing left to convert
    assert _rows(path, "SELECT count(*) FROM metrics") == [(94,)]


# -- 2. globs read the name tables through their indexes ---------------------------------

def _tree_names() -> list[str]:
    names = [f"tree.dc{d}.host{h:04d}.cpu{c}" for d in range(4) for h in range(60) for c in range(5)]
    names += [f"a.b.c{i}.d" for i in range(300)] + [f"a.b.c{i}" for i in range(200)]
    names += [f"a.x{i}.c{i % 5}.d" for i in range(100)] + [f"x{i}.b.c" for i in range(200)]
    names += [f"r{i}.s{j}.leaf" for i in range(20) for j in range(10)] + [f"leaf.z{i}" for i in range(50)]
    return names


@pytest.fixture(scope="module")
def tree_store(tmp_path_factory):
    accessor = _store(tmp_path_factory.mktemp("tree") / "bgl.db", _tree_names())
    yield accessor
    accessor.close()


PATTERNS = [
    # the peer bench's classes (bench/peer/finds.py)
    "tree.dc3.host0042.*", "tree.dc1.host00*.cpu1", "*.dc2.host0042.cpu3", "tree.*.host0042.cpu3",
    "tree.dc{1,2}.host00?0.*", "tree.dc1.host00[1-3][0-9].cpu[2-3]", "tree.dc3.host004*.**", "tree.**.host0042.cpu4",
    "tree.dc1.*.cpu1", "tree.dc1.**.cpu1", "tree.**.cpu4",
    # others: wildcards first, globstars between literals, optional components, everything
    "a.b.*", "a.b.c1*.d", "*.b.c", "*.*.leaf", "**.leaf", "a.**", "a.**.c3.d", "{a,x1}.**.{d,c}", "a.b.c1{,0}.d",
    "**", "*",
]


@pytest.mark.parametrize("table", ["metrics", "directories"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_glob_reads_no_name_table_whole(tree_store, pattern, table):
    """Every statement of a glob searches the name tables by an index (SEARCH, never SCAN
    but of a json_each list) — but a pattern that nothing narrows (`**`, `*` at the root,
    which read every name or every top-level child anyway) — and answers as the glob engine."""
    store = tree_store.store
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        found = store._glob(table, GlobPattern(pattern), 100_000)
    finally:
        store._conn.set_trace_callback(None)
    every = {m for n in _tree_names() for m in ([n] if table == "metrics" else
                                                [".".join(n.split(".")[:i]) for i in range(1, n.count(".") + 1)])}
    assert found == GlobPattern(pattern).filter(every, 100_000)
    assert found or table == "directories" or pattern == "*"
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert selects
    for sql in selects:
        details = [row[3] for row in store._conn.execute("EXPLAIN QUERY PLAN " + sql)]
        scans = [d for d in details if d.startswith("SCAN") and "VIRTUAL TABLE" not in d
                 and not d.startswith("SCAN (subquery")]  # a bounded subquery's rows
        if pattern != "**":
            assert not scans, (pattern, sql, details)


def test_candidates_of_a_globstar_between_literals_come_from_the_inverted_index(tree_store):
    """`tree.**.host0042.cpu4`: the 4 directories named host0042, then cpu4 under each; not
    every directory under `tree`."""
    store = tree_store.store
    assert sorted(store._candidates("metrics", GlobPattern("tree.**.host0042.cpu4"))) == [
        f"tree.dc{d}.host0042.cpu4" for d in range(4)]
    assert sorted(store._candidates("metrics", GlobPattern("a.**.c3.d"))) == ["a.b.c3.d"] + sorted(
        f"a.x{i}.c3.d" for i in range(100) if i % 5 == 3)


# -- 3. hidden directories ---------------------------------------------------------------

def test_a_directory_deleted_with_children_is_hidden_then_shown_again_then_collected(tmp_path):
    path = tmp_path / "bgl.db"
    accessor = _store(path, ["p.q.m1", "p.q.r.m2"])
    store = accessor.store
    token = store.names_token()
    store.delete_directories(["p.q"])  # as `bgl repair` of an invalid directory or a hand deletion
    assert store.names_token() != token
    assert store.existing_directories(["p", "p.q", "p.q.r"]) == {"p", "p.q.r"}
    assert accessor.glob_directories("p.*") == [] and accessor.glob_directories("p.*.*") == ["p.q.r"]
    assert accessor.glob_metrics("p.q.*") == ["p.q.m1"] and accessor.glob_metrics("p.**") == ["p.q.m1", "p.q.r.m2"]
    assert sorted(d for page in store.scan_directories() for d in page.items) == ["p", "p.q.r"]
    assert store.stats()["directories"] == 2
    # a new name under it makes it again: shown, and the token moves
    token = store.names_token()
    accessor.create_metrics([("p.q.m3", _meta())], now=NOW)
    assert store.names_token() != token and accessor.glob_directories("p.*") == ["p.q"]
    # hidden again, then its last children go: the row goes with them
    store.delete_directories(["p.q"])
    accessor.delete_metrics(["p.q.m1", "p.q.m3"])
    store.delete_directories(["p.q.r"])
    # p.q and p.q.r: p.q.r.m2 is under both
    assert _rows(path, "SELECT name FROM named_directories WHERE hidden ORDER BY name") == [("p.q",), ("p.q.r",)]
    accessor.delete_metrics(["p.q.r.m2"])
    assert _rows(path, "SELECT name FROM named_directories ORDER BY name") == [("p",)]
    accessor.close()


# -- 4. caches of directory keys -------------------------------------------------------

def test_a_directory_made_again_by_another_store_object_is_found_under_its_new_key(tmp_path):
    """Store `a` caches the key of `s.t`; store `b` (another process) deletes everything
    under `s` and makes `s.t.m` again: `a` reads and writes it under the new key, and a
    metric `a` creates there has its full name (no metric under a deleted key)."""
    path = tmp_path / "bgl.db"
    a = _store(path, ["s.t.m", "s.t.n"])
    b = Accessor.from_url(f"sqlite://{path}")
    assert a.glob_metrics("s.t.*") == ["s.t.m", "s.t.n"]
    b.delete_metrics(["s.t.m", "s.t.n"])
    b.store.delete_directories(["s.t", "s"])
    assert _rows(path, "SELECT count(*) FROM directories") == [(0,)]
    b.create_metrics([("s.t.m", _meta())], now=NOW)
    assert a.get_metric("s.t.m") is not None and a.glob_metrics("s.t.*") == ["s.t.m"]
    a.create_metrics([("s.t.o", _meta())], now=NOW)
    assert a.insert_points({"s.t.o": [(NOW - 60, 1.0)]}, now=NOW).stored == 1
    assert _rows(path, "SELECT name FROM named_metrics ORDER BY name") == [("s.t.m",), ("s.t.o",)]
    a.close()
    b.close()


def test_a_creation_never_uses_a_cached_directory_key_whose_row_is_gone(tmp_path):
    """A read in another thread may cache a key from a snapshot older than a deletion after
    this process last checked the deletion counter: a creation checks the keys it would use
    (here the cache is made stale by hand, the counter unchanged)."""
    path = tmp_path / "bgl.db"
    accessor = _store(path, ["s.t.m"])
    store = accessor.store
    accessor.delete_metrics(["s.t.m"])
    store.delete_directories(["s.t"])
    with store.write_batch():
        pass  # this process has seen the deletion counter move
    store._tree._keys["s.t"] = 10_000  # as if cached before the deletion
    store._tree._keys["s"] = _rows(path, "SELECT key FROM named_directories WHERE name = 's'")[0][0]
    accessor.create_metrics([("s.t.n", _meta())], now=NOW)
    assert _rows(path, "SELECT name FROM named_metrics") == [("s.t.n",)]
    assert _rows(path, "SELECT count(*) FROM metrics WHERE parent NOT IN (SELECT key FROM directories)") == [(0,)]
    accessor.close()


def test_a_rolled_back_creation_forgets_the_directory_keys_it_made(tmp_path):
    path = tmp_path / "bgl.db"
    accessor = _store(path)
    store = accessor.store
    with pytest.raises(RuntimeError), store.write_batch():
        store.create_metrics([Metric("u.v.w", _meta())])
        raise RuntimeError("rolled back")
    assert _rows(path, "SELECT count(*) FROM directories") == [(0,)]
    accessor.create_metrics([("u.v.w", _meta()), ("u.v2", _meta())], now=NOW)
    assert _rows(path, "SELECT name FROM named_metrics ORDER BY name") == [("u.v.w",), ("u.v2",)]
    assert accessor.glob_directories("**") == ["u", "u.v"]
    accessor.close()


# -- 5. bytes per name -----------------------------------------------------------------

def test_names_take_less_than_74_bytes_each(tmp_path):
    """The issue's bound (2x VictoriaMetrics' 37 bytes a name) on 30,000 names of the peer
    bench's shape, every table but the points' (the 64 component columns took ~297)."""
    path = tmp_path / "bgl.db"
    names = [f"tree.dc{d}.host{h:04d}.cpu{c}" for h in range(300) for d in range(10) for c in range(10)]
    accessor = _store(path)
    for start in range(0, len(names), 5000):
        accessor.create_metrics([(n, _meta()) for n in names[start:start + 5000]], now=NOW)
    stats = accessor.store.stats()
    accessor.close()
    assert stats["metrics"] == 30_000
    per_name = int(stats["disk_bytes.metadata"]) / len(names)
    assert per_name < 74, stats


# -- 6. kill -9 during a bulk creation ---------------------------------------------------

_CREATOR = """
import sys
from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
accessor = Accessor.from_url(sys.argv[1])
metadata = MetricMetadata.create("60s:1d")
for batch in range(1000):
    accessor.create_metrics([(f"bulk.dc{batch % 7}.h{batch}.m{i}", metadata) for i in range(2000)], now=1)
    print(batch, flush=True)  # acknowledged: committed
"""


def test_kill_9_during_bulk_creation_loses_no_acknowledged_name_and_leaves_no_orphan(tmp_path):
    """A process creating 2,000 names a batch is killed (SIGKILL) after some batches: every
    acknowledged batch is there whole, a batch is there whole or not at all, and every
    metric and directory hangs from an existing directory (the tree has no orphan)."""
    path = tmp_path / "bgl.db"
    _store(path).close()
    process = subprocess.Popen([sys.executable, "-c", _CREATOR, f"sqlite://{path}"], stdout=subprocess.PIPE, text=True)
    acknowledged = []
    try:
        while len(acknowledged) < 5:
            line = process.stdout.readline()
            assert line, "the creator ended early"
            acknowledged.append(int(line))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    accessor = Accessor.from_url(f"sqlite://{path}")
    names = accessor.glob_metrics("bulk.*.*.*")
    batches = {int(n.split(".")[2][1:]) for n in names}
    assert set(acknowledged) <= batches and batches == set(range(len(batches)))  # no gap: batches in order
    assert len(names) == 2000 * len(batches)  # whole batches only
    assert accessor.glob_directories("bulk.*.*") == sorted({f"bulk.dc{b % 7}.h{b}" for b in batches})
    accessor.close()
    assert _rows(path, "SELECT count(*) FROM metrics WHERE parent NOT IN (SELECT key FROM directories)") == [(0,)]
    assert _rows(path, "SELECT count(*) FROM directories WHERE parent != 0"
                       " AND parent NOT IN (SELECT key FROM directories)") == [(0,)]
    assert _rows(path, "PRAGMA integrity_check") == [("ok",)]


# -- 7. kill -9 during `bgl clean` --------------------------------------------------------

def test_kill_9_during_clean_leaves_the_live_names_whole_and_no_orphan_then_clean_finishes(tmp_path, env):
    """`bgl clean` of 20,000 stale metrics (of 24,000) is killed (SIGKILL) once it has
    deleted some: every live metric and its directories are there, no row of the tree
    hangs from a missing directory, and a second clean removes the rest."""
    path = tmp_path / "bgl.db"
    now = int(time.time())
    accessor = _store(path)
    stale = [f"stale.h{i // 100:03d}.m{i % 100:02d}" for i in range(20_000)]
    live = [f"live.h{i // 100:03d}.m{i % 100:02d}" for i in range(2_000)] + [f"stale.h{i:03d}.live" for i in range(20)]
    accessor.create_metrics([(n, _meta()) for n in stale], now=now - 40 * 86400)
    accessor.create_metrics([(n, _meta()) for n in live], now=now)
    accessor.close()
    clean = subprocess.Popen([BGL, "--store", f"sqlite://{path}", "clean", "--max-age", "30d"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while _rows(path, "SELECT count(*) FROM metrics")[0][0] == len(stale) + len(live):
            assert clean.poll() is None and time.monotonic() < deadline, "clean ended or stalled before deleting"
            time.sleep(0.05)
    finally:
        clean.send_signal(signal.SIGKILL)
        clean.wait(timeout=60)
    left = _rows(path, "SELECT count(*) FROM metrics")[0][0]
    assert len(live) <= left < len(stale) + len(live)
    checker = Accessor.from_url(f"sqlite://{path}")
    assert checker.glob_metrics("live.*.*") == sorted(n for n in live if n.startswith("live."))
    assert checker.glob_metrics("stale.*.live") == sorted(n for n in live if n.endswith(".live"))
    assert checker.store.existing_directories([f"stale.h{i:03d}" for i in range(20)] + ["live", "stale"]) == {
        *(f"stale.h{i:03d}" for i in range(20)), "live", "stale"}
    checker.close()
    assert _rows(path, "SELECT count(*) FROM metrics WHERE parent NOT IN (SELECT key FROM directories)") == [(0,)]
    assert _rows(path, "SELECT count(*) FROM directories WHERE parent != 0"
                       " AND parent NOT IN (SELECT key FROM directories)") == [(0,)]
    assert _rows(path, "PRAGMA integrity_check") == [("ok",)]
    finish = subprocess.run([BGL, "--store", f"sqlite://{path}", "clean", "--max-age", "30d"], env=env,
                            capture_output=True, text=True, timeout=300)
    assert finish.returncode == 0, finish.stderr
    assert _rows(path, "SELECT count(*) FROM metrics") == [(len(live),)]
    checker = Accessor.from_url(f"sqlite://{path}")
    assert checker.glob_metrics("**") == sorted(live)
    assert checker.glob_directories("stale.*") == [f"stale.h{i:03d}" for i in range(20)]
    checker.close()


def test_a_writer_does_not_cache_the_directories_it_creates_and_still_creates_under_them(tmp_path):
    """Issue 36 item 4: the directories a batch of new names inserts are not kept in the
    process's path caches (they cost about 180 bytes a directory, and a writer rarely
    needs one again); a later batch under one of them looks it up (then caches it) and
    creates no second row."""
    path = tmp_path / "bgl.db"
    accessor = _store(path)
    tree = accessor.store._tree
    accessor.insert_columns([f"w.h{i}.cpu" for i in range(50)], np.arange(50), np.full(50, NOW - 60.0),
                            np.ones(50), now=NOW, create=_meta())
    assert not [p for p in tree._keys if p.startswith("w.")] and not [p for p in tree._paths.values() if p]
    accessor.insert_columns(["w.h7.mem", "w.h8.mem"], np.arange(2), np.full(2, NOW - 60.0), np.ones(2), now=NOW,
                            create=_meta())
    assert {"w.h7", "w.h8"} <= set(tree._keys)  # looked up, then cached
    assert _rows(path, "SELECT count(*) FROM directories") == [(51,)]
    assert _rows(path, "SELECT count(*) FROM named_metrics WHERE name LIKE 'w.%'") == [(52,)]
    assert sorted(accessor.glob_metrics("w.h7.*")) == ["w.h7.cpu", "w.h7.mem"]
    accessor.close()
