"""What is specific to the embedded SQLite store (the stores/sqlite package).

The store-independent behaviour is in tests/stores/test_conformance.py; here: WAL and concurrency across
processes and threads, crash consistency, index use of the glob planner, bounded stage
tables and expiry, integer keys across delete/recreate, store URLs and their errors.

Multi-process tests use the 'spawn' context (no inherited SQLite handles); children report
through queues/pipes, every loop is bounded by a count and a deadline, and no assertion
depends on timing.
"""
from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import queue
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback

import numpy as np
import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import CorruptChunk, InvalidPoint, InvalidStoreURL, SchemaMissing, StoreError, StoreUnavailable
from biggraphite_like.glob import GlobPattern
from biggraphite_like.metric import Metric, MetricMetadata
from biggraphite_like.retention import Stage
from biggraphite_like.stores.base import StageTable
from biggraphite_like.stores.registry import open_store
from biggraphite_like import chunks
from biggraphite_like.stores.sqlite import DEFAULT_TIMEOUT, SQLiteStore
from biggraphite_like.stores.sqlite import points as points_module
from biggraphite_like.stores.sqlite import windows as windows_module

SPAWN = multiprocessing.get_context("spawn")

# Points of the concurrency/crash scenarios: batch k writes value k at BASE + 1 + k for every
# metric (and value k at BASE, overwritten by every batch). With NOW fixed, every point goes
# to stage 0 (1 s precision, one hour) and a fetch from BASE - 1 returns, per metric, column 0
# = BASE and column 1 + k = batch k.
RETENTION = "3600*1s:1440*60s"
BASE = 1_600_000_000
NOW = BASE + 3000
MAX_BATCHES = 2500  # keeps every timestamp of a batch before NOW and inside stage 0


def _meta(retention: str = RETENTION) -> MetricMetadata:
    return MetricMetadata.create(retention, "average", 0.0)


def _url(path) -> str:
    return f"sqlite://{path}"


def _new_store(path, names=(), retention: str = RETENTION) -> Accessor:
    accessor = Accessor.from_url(_url(path))
    accessor.syncdb()
    if names:
        accessor.create_metrics([(n, _meta(retention)) for n in names], now=NOW)
    return accessor


def _batch(names, k: int) -> dict:
    return {name: [(BASE, float(k)), (BASE + 1 + k, float(k))] for name in names}


def _matrix(accessor: Accessor, names) -> np.ndarray:
    """Values of names (rows) at BASE, BASE + 1, ..., NOW (columns), one fetch."""
    series = accessor.fetch(names, BASE - 1, NOW, now=NOW)
    rows = []
    for name in names:
        ts = series[name]
        assert ts is not None and ts.start == BASE and ts.step == 1, (name, ts)
        rows.append(ts.values)
    return np.vstack(rows)


def _check_snapshot(matrix: np.ndarray) -> int:
    """Checks that the matrix holds exactly batches 0..v for some v (-1: none); returns v.

    Every column is all NaN or all one value across metrics (no half-applied batch), the
    column at BASE holds the last batch, and the batches visible are exactly 0..v.
    """
    def uniform(column: np.ndarray, what: str) -> float:
        nan = np.isnan(column)
        assert nan.all() or not nan.any(), f"{what}: a batch is visible for some metrics only: {column}"
        if nan.all():
            return float("nan")
        assert (column == column[0]).all(), f"{what}: metrics disagree (mixed batches): {column}"
        return float(column[0])

    last = uniform(matrix[:, 0], "column at BASE")
    batches = matrix[:, 1:]
    if np.isnan(last):
        assert np.isnan(batches).all(), "batches visible but the column at BASE is empty"
        return -1
    v = int(last)
    for k in range(v + 1):
        value = uniform(batches[:, k], f"batch {k}")
        assert value == k, f"batch {k} missing or wrong ({value}) while batch {v} is visible"
    later = batches[:, v + 1:]
    assert np.isnan(later).all(), f"batches after {v} are visible but the column at BASE says {v}"
    return v


def _report_errors(results: list) -> list[str]:
    return [r[2] for r in results if r[1] == "error"]


def _collect(result_queue, processes, deadline: float) -> list:
    """The (role, status, payload) reports of the processes; then joins them (kills stragglers)."""
    results = []
    while len(results) < len(processes) and time.monotonic() < deadline:
        try:
            results.append(result_queue.get(timeout=0.5))
        except queue.Empty:
            if not any(p.is_alive() for p in processes) and result_queue.empty():
                break
    for process in processes:
        process.join(timeout=max(0.1, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join(5)
    return results


# -- 1. WAL ----------------------------------------------------------------------------

def test_syncdb_puts_the_file_in_wal_mode(tmp_path):
    path = tmp_path / "bgl.db"
    accessor = _new_store(path)
    accessor.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    # WAL is persistent: a store opened later on the same file still uses it
    again = Accessor.from_url(_url(path))
    assert again.store._conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal"
    again.close()


def _wal_writer(path, names, ready, done, result_queue, seconds, max_batches):
    try:
        accessor = Accessor.from_url(_url(path))
        ready.wait(60)
        deadline = time.monotonic() + seconds
        written = 0
        for k in range(max_batches):
            if k and time.monotonic() > deadline:
                break
            points = _batch(names, k)
            points[f"new.k{k}"] = [(BASE + 1 + k, float(k))]
            result = accessor.insert_points(points, now=NOW, create=_meta())
            if result.stored != 2 * len(names) + 1 or result.rejected or result.too_old:
                raise AssertionError(f"batch {k}: {result}")
            written = k + 1
        result_queue.put(("writer", "ok", written))
    except BaseException:
        result_queue.put(("writer", "error", traceback.format_exc()))
    finally:
        done.set()


def _wal_reader(path, names, ready, done, result_queue, index):
    try:
        accessor = Accessor.from_url(_url(path))
        ready.wait(60)
        deadline = time.monotonic() + 60
        seen, checks = [], 0
        for _ in range(20_000):
            finished = done.is_set()
            v = _check_snapshot(_matrix(accessor, names))
            assert not seen or v >= seen[-1], f"went back in time: batch {v} after {seen[-1]}"
            seen.append(v)
            assert accessor.glob_metrics("w.*") == sorted(names)
            created = accessor.glob_metrics("new.*")
            # batches commit in order: the metrics created so far are new.k0 .. new.k<m-1>
            assert set(created) == {f"new.k{j}" for j in range(len(created))}, created
            assert len(created) >= v + 1, f"batch {v} visible but only {len(created)} of its metrics"
            checks += 1
            if finished or time.monotonic() > deadline:
                break
        result_queue.put((f"reader{index}", "ok", (checks, seen[-1])))
    except BaseException:
        result_queue.put((f"reader{index}", "error", traceback.format_exc()))


@pytest.mark.timeout(120)
def test_one_writer_three_readers_across_processes(tmp_path):
    path = tmp_path / "bgl.db"
    names = [f"w.m{i:02d}" for i in range(40)]
    _new_store(path, names).close()
    ready = SPAWN.Barrier(4, timeout=60)
    done = SPAWN.Event()
    results_queue = SPAWN.Queue()
    processes = [SPAWN.Process(target=_wal_writer, args=(path, names, ready, done, results_queue, 3.0, MAX_BATCHES))]
    processes += [
        SPAWN.Process(target=_wal_reader, args=(path, names, ready, done, results_queue, i)) for i in range(3)
    ]
    for process in processes:
        process.start()
    results = _collect(results_queue, processes, time.monotonic() + 100)

    errors = _report_errors(results)
    assert not errors, "\n".join(errors)
    assert not any("locked" in str(r[2]) for r in results)
    assert sorted(r[0] for r in results) == ["reader0", "reader1", "reader2", "writer"]
    written = next(r[2] for r in results if r[0] == "writer")
    assert written >= 1
    for role, _, payload in results:
        if role.startswith("reader"):
            checks, last_seen = payload
            assert checks >= 1 and last_seen < written
    # the final content is complete
    accessor = Accessor.from_url(_url(path))
    assert _check_snapshot(_matrix(accessor, names)) == written - 1
    assert len(accessor.glob_metrics("new.*")) == written


def _two_writers_worker(path, writer, ready, result_queue, batches, seconds):
    try:
        accessor = Accessor.from_url(_url(path))
        names = [f"two.w{writer}.m{i:02d}" for i in range(20)]
        ready.wait(60)
        deadline = time.monotonic() + seconds
        written = 0
        for k in range(batches):
            if k and time.monotonic() > deadline:
                break
            # the first batch creates the metrics (and the shared directory `two`)
            result = accessor.insert_points(_batch(names, k), now=NOW, create=_meta())
            if result.stored != 2 * len(names):
                raise AssertionError(f"writer {writer} batch {k}: {result}")
            written = k + 1
        result_queue.put((f"writer{writer}", "ok", written))
    except BaseException:
        result_queue.put((f"writer{writer}", "error", traceback.format_exc()))


@pytest.mark.timeout(120)
def test_two_writer_processes_are_serialised_not_failed(tmp_path):
    path = tmp_path / "bgl.db"
    _new_store(path).close()
    ready = SPAWN.Barrier(2, timeout=60)
    results_queue = SPAWN.Queue()
    processes = [
        SPAWN.Process(target=_two_writers_worker, args=(path, w, ready, results_queue, 400, 2.0)) for w in range(2)
    ]
    for process in processes:
        process.start()
    results = _collect(results_queue, processes, time.monotonic() + 100)

    errors = _report_errors(results)
    assert not errors, "\n".join(errors)
    assert sorted(r[0] for r in results) == ["writer0", "writer1"]
    accessor = Accessor.from_url(_url(path))
    for role, _, written in results:
        assert written >= 1
        names = accessor.glob_metrics(f"two.w{role[-1]}.*")
        assert len(names) == 20
        assert _check_snapshot(_matrix(accessor, names)) == written - 1
    assert accessor.glob_directories("two.*") == ["two.w0", "two.w1"]


def _fork_child(accessor: Accessor, index: int) -> None:
    name = f"fork.c{index}"
    result = accessor.insert_points({name: [(BASE + k, float(k)) for k in range(1, 101)]}, now=NOW, create=_meta())
    assert result.stored == 100, result
    values = accessor.fetch([name], BASE - 1, NOW, now=NOW)[name].values
    assert np.count_nonzero(~np.isnan(values)) == 100


@pytest.mark.timeout(120)
def test_an_accessor_inherited_through_fork_works_in_parent_and_children(tmp_path):
    """The store reopens its connection after a fork (carbon / WSGI pre-fork servers)."""
    fork = multiprocessing.get_context("fork")
    path = tmp_path / "bgl.db"
    accessor = _new_store(path, ["fork.parent"])
    accessor.insert_points({"fork.parent": [(BASE, 0.0)]}, now=NOW)  # the parent's connection is open
    children = [fork.Process(target=_fork_child, args=(accessor, i)) for i in range(3)]
    for child in children:
        child.start()
    for k in range(1, 51):  # the parent keeps writing while the children do
        accessor.insert_points({"fork.parent": [(BASE + k, float(k))]}, now=NOW)
    for child in children:
        child.join(60)
    assert [c.exitcode for c in children] == [0, 0, 0]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    names = ["fork.c0", "fork.c1", "fork.c2", "fork.parent"]
    assert accessor.glob_metrics("fork.*") == names
    fresh = Accessor.from_url(_url(path))
    matrix = _matrix(fresh, names)
    assert (np.count_nonzero(~np.isnan(matrix), axis=1) == [100, 100, 100, 51]).all()


def test_a_fetch_of_more_than_one_query_of_series_is_one_snapshot(tmp_path, monkeypatch):
    """A fetch split into several SELECTs (more than REQUESTS_PER_QUERY windows, their
    rows read by id: no range of ids) is one snapshot.

    Regression: each SELECT used to run in autocommit mode, so a batch committed between two of
    them was visible for some series of one fetch only.
    """
    from biggraphite_like.stores.sqlite import points as sqlite_points
    from biggraphite_like.stores.sqlite import schema as sqlite_schema

    monkeypatch.setattr(sqlite_points, "_id_ranges", lambda ids: (np.zeros((0, 2), np.int64), ids))

    path = tmp_path / "bgl.db"
    names = [f"big.m{i:05d}" for i in range(sqlite_schema.REQUESTS_PER_QUERY + 1)]
    writer = _new_store(path)
    writer.insert_points(_batch(names, 0), now=NOW, create=_meta())
    reader = Accessor.from_url(_url(path))
    assert _check_snapshot(_matrix(reader, names)) == 0

    class CommitBetweenQueries:
        """The reader's connection; another process commits batch 1 right after the first query."""

        def __init__(self, conn):
            self.conn, self.queries = conn, 0

        def __getattr__(self, attribute):
            return getattr(self.conn, attribute)

        def execute(self, sql, *args):
            cursor = self.conn.execute(sql, *args)
            if "datapoints_" in sql and not sql.lstrip().upper().startswith(("INSERT", "DELETE", "CREATE")):
                self.queries += 1
                if self.queries == 1:
                    rows = cursor.fetchall()
                    writer.insert_points(_batch(names, 1), now=NOW)
                    return _Rows(rows)
            return cursor

    proxy = CommitBetweenQueries(reader.store._conn)
    reader.store._local.conn = proxy
    matrix = _matrix(reader, names)
    assert proxy.queries >= 2, "the scenario did not happen: one fetch made a single datapoints query"
    _check_snapshot(matrix)


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def fetchall(self):
        return self.rows


# -- 2. crash consistency --------------------------------------------------------------

def _crash_child(path, names, first, conn):
    """Writes batches first, first + 1, ... and sends each number once insert_points returned."""
    accessor = Accessor.from_url(_url(path))
    deadline = time.monotonic() + 60
    for k in range(first, MAX_BATCHES):
        if time.monotonic() > deadline:
            break
        points = _batch(names, k)
        points[f"crash.new.k{k}"] = [(BASE + 1 + k, float(k))]
        accessor.insert_points(points, now=NOW, create=_meta())
        conn.send(k)
    time.sleep(60)  # only reached if never killed: the parent kills us anyway


def _run_and_kill(path, names, first: int, reports_before_kill: int) -> list[int]:
    parent_end, child_end = SPAWN.Pipe(duplex=False)
    child = SPAWN.Process(target=_crash_child, args=(path, names, first, child_end))
    child.start()
    child_end.close()
    reported: list[int] = []
    deadline = time.monotonic() + 60
    try:
        while len(reported) < reports_before_kill and time.monotonic() < deadline:
            if parent_end.poll(0.5):
                try:
                    reported.append(parent_end.recv())
                except EOFError:  # the child died on its own: reported by the asserts below
                    break
            elif not child.is_alive():
                break
        time.sleep(random.uniform(0, 0.01))  # land anywhere inside the next transaction
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
    while parent_end.poll(0):  # numbers sent before the kill are commits too
        try:
            reported.append(parent_end.recv())
        except EOFError:
            break
    parent_end.close()
    assert child.exitcode == -signal.SIGKILL, f"child ended on its own: {child.exitcode}"
    assert len(reported) >= reports_before_kill, f"child reported only {reported}"
    assert reported == list(range(first, first + len(reported)))
    return reported


@pytest.mark.timeout(120)
def test_sigkill_mid_write_leaves_a_consistent_store(tmp_path):
    path = tmp_path / "bgl.db"
    names = [f"crash.m{i:03d}" for i in range(100)]
    _new_store(path, names).close()
    first = 0
    for round_ in range(2):  # the second child writes into the store the first crash left
        reported = _run_and_kill(path, names, first, reports_before_kill=20 + 10 * round_)
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        accessor = Accessor.from_url(_url(path))
        visible = _check_snapshot(_matrix(accessor, names))
        # every reported batch is there; at most the one in flight when killed went further
        assert reported[-1] <= visible <= reported[-1] + 1
        created = accessor.glob_metrics("crash.new.*")
        assert sorted(created) == sorted(f"crash.new.k{k}" for k in range(visible + 1))
        accessor.close()
        first = visible + 1


# -- 3. glob planning uses indexes -----------------------------------------------------

def _plan_names():
    names = [f"a.b.c{i}.d" for i in range(600)]
    names += [f"a.b.c{i}" for i in range(400)]
    names += [f"a.x{i}.c{i % 5}.d" for i in range(300)]
    names += [f"x{i}.b.c" for i in range(500)]
    names += [f"y{i}.b.z{i}" for i in range(300)]
    names += [f"r{i}.s{j}.leaf" for i in range(40) for j in range(20)]
    names += [f"q{i}.w{i % 7}.e.leaf" for i in range(300)]
    names += [f"leaf.z{i}" for i in range(100)]
    return names


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "bgl.db"
    accessor = _new_store(path, _plan_names(), retention="60*1s")
    yield accessor
    accessor.close()


@pytest.mark.parametrize("table", ["metrics", "directories"])
def test_candidates_of_a_fixed_prefix_are_only_names_under_it(big_store, table):
    store = big_store.store
    total = store._conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    children = {r[0] for r in store._conn.execute(f"SELECT name FROM named_{table}") if r[0].rpartition(".")[0] == "a.b"}
    assert total > 2000 and children
    candidates = list(store._candidates(table, GlobPattern("a.b.*")))
    assert len(candidates) == len(children)
    assert set(candidates) == children


def test_candidates_of_wildcard_first_patterns_are_bounded(big_store):
    store = big_store.store
    total = store._conn.execute("SELECT count(*) FROM metrics").fetchone()[0]
    candidates = list(store._candidates("metrics", GlobPattern("*.b.c")))
    # one indexed component lookup: `c` third (500 names) or `b` second (800), not all names
    assert set(candidates) >= {f"x{i}.b.c" for i in range(500)}
    assert len(candidates) <= 800 < total
    leaves = list(store._candidates("metrics", GlobPattern("**.leaf")))
    # only names ending in `leaf`, never the `leaf.z*` names nor the rest
    assert all(name.endswith(".leaf") for name in leaves)
    assert len(leaves) == 40 * 20 + 300


def test_candidates_of_a_globstar_between_fixed_components_are_bounded(big_store):
    """`a.**.c3.d`: the names with `c3`, `d` as their last two components under `a`, looked
    up once per possible depth, not every name under `a.` (1,300)."""
    store = big_store.store
    expected = {"a.b.c3.d"} | {f"a.x{i}.c3.d" for i in range(300) if i % 5 == 3}
    candidates = list(store._candidates("metrics", GlobPattern("a.**.c3.d")))
    assert set(candidates) == expected and len(candidates) == len(expected)
    # a literal head extended into the next component's prefix: a range of the name index
    candidates = list(store._candidates("metrics", GlobPattern("a.b.c1*.**")))
    assert set(candidates) == {n for n in _plan_names() if n.startswith("a.b.c1") and n.count(".") > 2}


@pytest.mark.parametrize("pattern", ["*.*.{leaf,d}", "*.*.{c,leaf,d,z0}", "*.*.leaf", "*.*.{c,leaf,d,z0,z1}"])
def test_literals_under_many_directories_are_found_whichever_way_they_are_looked_up(big_store, pattern):
    """A component of 1 to 5 literals under about 2,200 directories (one string at a time,
    or in pairs past _PER_STRING): the glob engine's answer."""
    from biggraphite_like.stores.sqlite import tree_glob

    store = big_store.store
    assert len(store.glob_directories(GlobPattern("*.*"), 10_000)) >= tree_glob._PAGE_MIN
    for table, names in (("metrics", _plan_names()), ("directories", sorted({n.rpartition(".")[0] for n in _plan_names()}))):
        found = store.glob_metrics(GlobPattern(pattern), 10_000) if table == "metrics" \
            else store.glob_directories(GlobPattern(pattern), 10_000)
        assert found == GlobPattern(pattern).filter(names), (table, pattern)
    assert store.glob_metrics(GlobPattern(pattern), 10_000)


def test_a_big_subtree_is_counted_not_listed(big_store, monkeypatch):
    """`a.**.leaf` with a subtree bound below the directories under `a`: the planner counts
    them in the index and takes the inverted index, without listing the directories."""
    from biggraphite_like.stores.sqlite import tree_glob

    store = big_store.store
    listed = []
    child_rows = type(store)._child_rows
    monkeypatch.setattr(type(store), "_child_rows", lambda self, table, nodes, component, visible=True, rows=None:
                        listed.append((table, component)) or child_rows(self, table, nodes, component, visible, rows))
    monkeypatch.setattr(tree_glob, "_MAX_SUBTREE", 5)
    found = store.glob_metrics(GlobPattern("a.**.leaf"), 10_000)
    assert found == sorted(n for n in _plan_names() if n.startswith("a.") and n.endswith(".leaf"))
    assert ("directories", None) not in listed, "the subtree was listed past its bound"


GLOBSTAR_NAMES = [f"p.h{h}.c{c}" for h in range(12) for c in range(3)] + ["p.h1.c0.deep", "p.h10.x.c1", "p.h2",
                                                                            "p.q.m1", "p.q.r.m2", "o.h1.c1"]
# (pattern, whether its subtree listing is its answer; a trailing literal's only when the
# inverted index does not start the walk)
SUBTREE_PATTERNS = [("p.**", True), ("p.h1*.**", True), ("p.h1*.**.c1", "literal"), ("p.**.c1", "literal"),
                    ("p.*.**", True), ("p.**.h1", "literal"), ("p.h?.**", True), ("p.**.x.c1", False),
                    ("p.{**,h1}.c1", False), ("p.**.c*", True), ("p.**.**", False), ("p.q.**", True)]


@pytest.mark.parametrize("way", ["subtree", "subtree for a trailing literal too", "subtree past its bound"])
def test_a_subtree_listed_under_one_globstar_is_its_answer(tmp_path, monkeypatch, way):
    """Fixed components, one plain `**`, then at most one component: the children (matching
    it) of the directories listed under the walked ones are the matches, taken without the
    glob engine's filter (hidden directories walked, not answered; a name both metric and
    directory; a metric deep under); the same answers as the engine's over every name, past
    the subtree's bound (then filtered) too; TooManyResults past max_results either way."""
    from biggraphite_like.glob import TooManyResults
    from biggraphite_like.stores.sqlite import tree_glob

    if way == "subtree past its bound":
        monkeypatch.setattr(tree_glob, "_MAX_SUBTREE", 1)
    elif way == "subtree for a trailing literal too":
        monkeypatch.setattr(tree_glob, "_PROBE_LIMIT", 1)  # every trailing literal counts as many rows
    accessor = _new_store(tmp_path / "bgl.db", GLOBSTAR_NAMES)
    store = accessor.store
    store.delete_directories(["p.q"])  # hidden: p.q.m1 and p.q.r.m2 are still found under it
    directories = sorted({n.rsplit(".", i)[0] for n in GLOBSTAR_NAMES for i in range(1, n.count(".") + 1)} - {"p.q"})
    filtered = []
    engine_filter = GlobPattern.filter
    monkeypatch.setattr(GlobPattern, "filter", lambda self, names, max_results=10_000:
                        filtered.append(self.pattern) or engine_filter(self, names, max_results))
    for pattern, exact in SUBTREE_PATTERNS:
        glob = GlobPattern(pattern)
        expected = (engine_filter(glob, GLOBSTAR_NAMES), engine_filter(glob, directories))
        filtered.clear()
        assert store.glob_nodes(glob, 10_000) == expected, pattern
        assert store.glob_node_spans(glob, 10_000)[:2] == expected, pattern
        assert store.glob_metrics(glob, 10_000) == expected[0], pattern
        assert store.glob_directories(glob, 10_000) == expected[1], pattern
        listed = way != "subtree past its bound" and (exact is True or exact and way != "subtree")
        assert bool(filtered) == (not listed), (pattern, filtered)
    assert "p.q.m1" in store.glob_metrics(GlobPattern("p.**"), 10_000)
    assert "p.h1.c0.deep" in store.glob_metrics(GlobPattern("p.h1*.**"), 10_000)
    with pytest.raises(TooManyResults):
        store.glob_metrics(GlobPattern("p.h1*.**"), 10)
    accessor.close()


def test_a_globstars_inverted_start_counts_no_more_than_it_needs(tmp_path):
    """`a.**.few.many`: the trailing literals are counted in the inverted index up to the
    fewest counted so far (a literal of many rows after one of few reads few index entries),
    and the directories' glob of the same pattern counts and looks up the directory
    component no second time; answers: the glob engine's."""
    names = [f"a.h{h}.many" for h in range(200)] + [f"a.b{i}.few.many" for i in range(3)] + ["a.few.x"]
    names += [f"a.z{i}.many.k" for i in range(10)]  # `many` directories: more than `few` ones
    accessor = _new_store(tmp_path / "bgl.db", names)
    store = accessor.store
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        found = store.glob_nodes(GlobPattern("a.**.few.many"), 10_000)
    finally:
        store._conn.set_trace_callback(None)
    assert found == ([f"a.b{i}.few.many" for i in range(3)], [])
    counts = [sql for sql in statements if sql.startswith("SELECT count(*) FROM (SELECT 1 FROM") and " IN " in sql]
    assert [re.search(r"LIMIT (\d+)", sql).group(1) for sql in counts] == ["1000", "4", "4"], counts  # few; many (metrics, directories)
    looked_up = re.findall(r"FROM directories AS t JOIN name_strings AS s ON s.id = t.component WHERE t.component = (\d+)",
                           "\n".join(statements))
    assert len(looked_up) == 1, statements  # `few`, for both tables
    assert accessor.glob_directories("a.**.few") == ["a.b0.few", "a.b1.few", "a.b2.few", "a.few"]
    accessor.close()


def _unreadable_metadata(store, name: str, bad: int | None = None) -> int:
    """Give the metric `name` a metadata row whose retention cannot be read (created unless
    `bad` names one); returns its id."""
    with store.write_batch():
        if bad is None:
            store._conn.execute("INSERT INTO metadatas (retention, aggregator, xfilesfactor) VALUES ('60x:1d', 'average', 0)")
            bad = store._conn.execute("SELECT max(id) FROM metadatas").fetchone()[0]
        store._conn.execute("UPDATE metrics SET metadata = ? WHERE key = (SELECT key FROM named_metrics"
                            " WHERE name = ?)", (bad, name))
    return bad


def test_metric_spans_are_what_get_metrics_gives(tmp_path):
    """metric_spans (a find's intervals) from the rows: the retention's duration and the
    last write of each metric, as the Metric get_metrics builds; a row whose metadata
    cannot be read is left out as get_metrics leaves it, a name that is no metric too."""
    accessor = _new_store(tmp_path / "bgl.db", ["s.a", "s.b", "s.c.d"], retention="60s:1d,1h:30d")
    accessor.create_metrics([("s.e", _meta("10s:1h"))], now=NOW + 50)
    store = accessor.store
    bad = _unreadable_metadata(store, "s.b")
    names = ["s.a", "s.b", "s.c.d", "s.e", "s.c", "nothing"]
    expected = {name: (m.retention.duration, m.updated_on) for name, m in store.get_metrics(names).items()}
    assert expected == {"s.a": (30 * 86400, NOW), "s.c.d": (30 * 86400, NOW), "s.e": (3600, NOW + 50)}
    assert store.metric_spans(names) == expected
    # many names of one last component (looked up per component): the same
    many = [f"g.h{i}.cpu" for i in range(300)]
    accessor.create_metrics([(name, _meta("10s:1h")) for name in many[:200]], now=NOW + 7)
    accessor.create_metrics([(name, _meta()) for name in many[200:]], now=NOW + 9)
    _unreadable_metadata(store, "g.h5.cpu", bad)
    asked = many + ["g.h1.cpu", "g.nothing.cpu", "s.a"]
    expected = {name: (m.retention.duration, m.updated_on) for name, m in store.get_metrics(asked).items()}
    assert len(expected) == 300 and "g.h5.cpu" not in expected and expected["g.h250.cpu"][1] == NOW + 9
    assert store.metric_spans(asked) == expected
    accessor.close()


@pytest.mark.parametrize("tree", ["fixed", "random"])
def test_the_walk_answers_the_glob_engines_matches(tmp_path, tree):
    """The walk's candidates of a fixed-depth pattern are taken as its matches (not filtered
    again): over the names and patterns of the StandardFinder differential (brackets and
    braces in names, character classes, `?`, nested braces) and random ones, the store's
    answers are the glob engine's over every name."""
    from tests.core import test_glob_standardfinder as differential

    rng = random.Random(7)
    if tree == "fixed":
        names, patterns = sorted(differential.FIXED_NAMES), differential.FIXED_PATTERNS
    else:
        names = differential.random_names(rng, 300)
        others = sorted({part for name in names for part in name.split(".")})
        patterns = [differential.random_pattern(rng, names, others) for _ in range(300)]
    accessor = _new_store(tmp_path / "bgl.db", names)
    directories = sorted({name.rsplit(".", i)[0] for name in names for i in range(1, name.count(".") + 1)})
    for pattern in patterns:
        glob = GlobPattern(pattern)
        expected = ([], []) if glob.matches_nothing else (glob.filter(names), glob.filter(directories))
        assert accessor.glob_nodes(pattern) == expected, pattern
        assert accessor.glob_node_spans(pattern)[:2] == expected, pattern
    accessor.close()


class _UnscannedIds(dict):
    """A cache of string ids that fails when anything scans it (it may hold a million)."""

    def items(self):
        raise AssertionError("the cache of string ids was scanned")

    def __iter__(self):
        raise AssertionError("the cache of string ids was scanned")


def test_literal_components_read_the_cache_of_ids_by_string(tmp_path, monkeypatch):
    """A literal component's ids are read from the cache by each literal, never by going
    through the whole cache (a worker's holds up to a million strings, and other threads
    add to it meanwhile): on each way a literal is looked up."""
    from biggraphite_like.stores.sqlite import tree_glob

    accessor = _new_store(tmp_path / "bgl.db", [f"a.h{h}.{leaf}" for h in range(30) for leaf in "bcd"])
    store = accessor.store
    monkeypatch.setattr(tree_glob, "_MAX_SUBTREE", 1)  # `**.c`: from the inverted index
    store._strings._ids = _UnscannedIds(store._strings._ids)
    assert store.glob_metrics(GlobPattern("a.*.c"), 100) == [f"a.h{h}.c" for h in sorted(range(30), key=str)]
    assert len(store.glob_metrics(GlobPattern("a.*.{b,c,d,e,f}"), 100)) == 90
    assert len(store.glob_metrics(GlobPattern("a.h1*.b"), 100)) == 11
    assert len(store.glob_metrics(GlobPattern("**.c"), 100)) == 30
    accessor.close()


SPAN_PATTERNS = ["s.*", "s.h1.{a,b}", "s.h1*.{a,b,c,d,e}", "s.*.a", "s.*.{a,b,c,d,e}", "s.h1*.*", "s.h?.[a-c]", "s.**", "**.a",
                 "**.h1.a", "s.**.a", "**", "*.*.*", "s.{h1,h2}.*", "s.h1.a", "nothing.*"]


@pytest.mark.parametrize("bounded", [False, True], ids=["planned", "inverted or every name"])
def test_a_globs_walk_carries_its_metrics_spans(tmp_path, monkeypatch, bounded):
    """glob_node_spans: glob_nodes' names, and each metric's span from the rows the walk
    read (metric_spans' for the names it did not: an exact pattern's), on every way the
    planner walks: listed children, one literal, literals in pairs, a prefix range, a
    subtree, the inverted index (last component or not), every name. Spans differ by
    retention and last write; an unreadable row is left out as get_metrics leaves it; a
    retention created after the walk's map was read is read."""
    from biggraphite_like.stores.sqlite import tree_glob

    if bounded:
        monkeypatch.setattr(tree_glob, "_MAX_SUBTREE", 1)
    monkeypatch.setattr(tree_glob, "_PAGE_MIN", 2)  # up to _PER_STRING literals one at a time
    accessor = _new_store(tmp_path / "bgl.db")
    names = [f"s.h{h}.{leaf}" for h in range(1, 13) for leaf in "abcdef"] + ["s.h1.a.deep", "t.a", "a"]
    for index, name in enumerate(names):
        accessor.create_metrics([(name, _meta(("60s:1d", "10s:1h", "60s:1d,1h:30d")[index % 3]))], now=NOW + index % 7)
    store = accessor.store
    _unreadable_metadata(store, "s.h2.a")

    def check(pattern: str) -> None:
        glob = GlobPattern(pattern)
        metrics, directories, spans = store.glob_node_spans(glob, 10_000)
        assert (metrics, directories) == store.glob_nodes(glob, 10_000), pattern
        expected = {name: (m.retention.duration, m.updated_on) for name, m in store.get_metrics(metrics).items()}
        assert spans == expected, pattern

    for pattern in SPAN_PATTERNS:
        check(pattern)
    assert store.glob_node_spans(GlobPattern("s.h2.*"), 10_000)[2].keys() == {f"s.h2.{leaf}" for leaf in "bcdef"}
    assert len(set(store.glob_node_spans(GlobPattern("s.*.*"), 10_000)[2].values())) == 3 * 7
    accessor.create_metrics([("s.h1.g", _meta("1s:1m"))], now=NOW + 99)  # a new metadata row
    assert store.glob_node_spans(GlobPattern("s.h1.*"), 10_000)[2]["s.h1.g"] == (60, NOW + 99)
    for pattern in SPAN_PATTERNS:
        check(pattern)
    accessor.close()


# -- 4. bounded storage and expiry -----------------------------------------------------

STAGES = "20*1s:12*5s:10*30s"  # durations 20 s, 60 s, 300 s
STAGE_TABLES = {"datapoints_20p_1s_0": (20, 1), "datapoints_12p_5s_aggr": (12, 5), "datapoints_10p_30s_aggr": (10, 30)}


def _fill_three_durations(accessor: Accessor, names) -> int:
    """Writes one point a second for 3 x the longest duration, as carbon would; returns the last now."""
    start = BASE
    now = start
    for t in range(start, start + 3 * 300, 10):
        points = {n: [(ts, float(ts % 997) + i) for ts in range(t, t + 10)] for i, n in enumerate(names)}
        now = t + 9
        result = accessor.insert_points(points, now=now)
        assert result.stored == 10 * len(names) and not result.rejected
    return now


# The documented layout of a window (docstring of stores/sqlite/windows.py), decoded here on
# its own: row id = window << 32 | key << 1 for the sealed chunk, + 2**62 for the open chunk,
# + 2**62 + 1 for the open tail; chunks are biggraphite_like.chunks, a tail holds records
# (timestamp uint32, value float64[, count uint32]), little-endian, the last record of a slot
# winning over earlier ones and over the chunk.
_RAW = np.dtype([("ts", "<u4"), ("value", "<f8")])
_AGGR = np.dtype([("ts", "<u4"), ("value", "<f8"), ("count", "<u4")])


def _windows(path, table: str) -> list[tuple[int, int, int, dict[int, tuple]]]:
    """(metric key, window, newest, {slot: (ts, value[, count])}) of every window of a stage table."""
    dtype = _AGGR if table.endswith("_aggr") else _RAW
    precision, points = _stage_of(table)
    with sqlite3.connect(path) as conn:
        rows = conn.execute(f"SELECT id, newest, points FROM {table} ORDER BY id % 2, id").fetchall()  # tails last
    windows: dict[tuple[int, int], list] = {}
    for id_, newest, blob in rows:
        key, window = (id_ & 0xFFFFFFFF) >> 1, (id_ & (2**62 - 1)) >> 32
        entry = windows.setdefault((key, window), [newest, {}])
        entry[0] = max(entry[0], newest)
        if id_ & 1:
            records = [tuple(r) for r in np.frombuffer(blob, dtype).tolist()]
        else:
            p = chunks.decode(blob)
            columns = [p.timestamps.tolist(), p.values.tolist()] + ([p.counts.tolist()] if p.counts is not None else [])
            records = list(zip(*columns))
        for record in records:
            entry[1][(record[0] // precision) % points] = record
    return [(key, window, newest, slots) for (key, window), (newest, slots) in sorted(windows.items())]


def _stage_of(table: str) -> tuple[int, int]:
    _, points, precision, _ = table.split("_")
    return int(precision[:-1]), int(points[:-1])


def _points_per_metric(path, table: str) -> dict[int, int]:
    """Points (filled slots) of each metric key."""
    counts: dict[int, int] = {}
    for key, _, _, slots in _windows(path, table):
        counts[key] = counts.get(key, 0) + len(slots)
    return counts


def test_a_stage_never_holds_more_than_its_points(tmp_path):
    path = tmp_path / "bgl.db"
    names = ["bound.a", "bound.b", "bound.c"]
    accessor = _new_store(path, names, retention=STAGES)
    _fill_three_durations(accessor, names)
    assert sorted(accessor.store.stage_tables()) == sorted(STAGE_TABLES)
    for table, (points, precision) in STAGE_TABLES.items():
        counts = _points_per_metric(path, table)
        assert len(counts) == len(names), (table, counts)
        # every slot was written (3 cycles), and never more points than slots
        assert all(count == points for count in counts.values()), (table, counts)
        with sqlite3.connect(path) as conn:
            (size,), = conn.execute("SELECT window_slots FROM point_windows WHERE stage_table = ?", (table,))
        for key, window, newest, slots in _windows(path, table):
            assert window <= (points - 1) // size, (table, window)
            assert newest >= max(r[0] for r in slots.values())  # expiry may keep a window longer, never drop a live one
            # each point sits in a slot of its window: whisper's ring
            assert all(window * size <= slot < (window + 1) * size for slot in slots), table


def _series(accessor, names, start, now):
    return {n: (ts.start, ts.step, ts.values.copy()) for n, ts in accessor.fetch(names, start, now, now=now).items()}


def _expired(path, now: int) -> tuple[int, int]:
    """(points of the windows whose every point is past its stage's duration, points in all windows)."""
    expired = total = 0
    for table, (points, precision) in STAGE_TABLES.items():
        for _, _, newest, slots in _windows(path, table):
            total += len(slots)
            if max(r[0] for r in slots.values()) < now - points * precision:
                expired += len(slots)
    return expired, total


def _point_bytes(path) -> tuple[int, int]:
    """(bytes of the rows of every datapoints table, rows that are open tails)."""
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'datapoints%'")]
        rows = [conn.execute(f"SELECT total(length(points)), total(id % 2) FROM {t}").fetchone() for t in tables]
    return int(sum(r[0] for r in rows)), int(sum(r[1] for r in rows))


def test_young_metrics_pay_for_their_points_and_full_windows_are_compressed(tmp_path):
    """Carbon's shape (one point a metric a batch, a minute apart), retention 60s:8d,1h:2y:
    five points a metric cost about their records (no preallocated ring); a full day of
    two-decimal values is mostly chunks at about 2 bytes a point."""
    rng = random.Random(5)
    end = BASE - BASE % 86_400
    for minutes, names, limit in ((5, [f"young.m{i}" for i in range(300)], 16.0),
                                  (1440, [f"dense.m{i}" for i in range(20)], 3.0)):
        path = tmp_path / f"{names[0]}.db"
        accessor = _new_store(path)
        accessor.create_metrics([(n, _meta("60s:8d,1h:2y")) for n in names], now=end - 86_400)
        for minute in range(minutes):
            now = end + 60 * minute
            assert accessor.insert_points({n: [(now, round(rng.uniform(0, 100), 2))] for n in names},
                                          now=now).stored == len(names)
        size, tails = _point_bytes(path)
        per_point = size / (minutes * len(names))
        assert per_point <= limit, (minutes, per_point)
        assert tails <= 2 * len(names)  # at most the open window of each stage stays a tail
        values = accessor.fetch(names[:1], end - 1, end + 60 * minutes, now=end + 60 * minutes)[names[0]].values
        assert np.count_nonzero(~np.isnan(values)) == minutes


def test_expire_removes_blocks_past_their_stage_and_keeps_reads(tmp_path):
    path = tmp_path / "bgl.db"
    names = ["exp.a", "exp.b"]
    accessor = _new_store(path, names, retention=STAGES)
    last = _fill_three_durations(accessor, names)
    now = last + 100  # 100 s without writes: the 20 s and 60 s stages are wholly past
    expected, total_before = _expired(path, now)
    windows = [now - 15, now - 20, now - 50, now - 60, now - 200, now - 300]
    reads_before = [_series(accessor, names, start, now) for start in windows]
    assert any(not np.isnan(v).all() for read in reads_before for _, _, v in read.values())

    removed = accessor.expire(now)

    assert expected > 0
    assert removed == expected
    _, total_after = _expired(path, now)
    assert total_before - total_after == removed
    for table, (points, precision) in STAGE_TABLES.items():
        # every window left holds a point of the last duration (older ones may share it)
        assert all(newest >= now - points * precision for _, _, newest, _ in _windows(path, table)), table
    assert _points_per_metric(path, "datapoints_20p_1s_0") == {}
    assert _points_per_metric(path, "datapoints_10p_30s_aggr")  # 300 s: still there
    reads_after = [_series(accessor, names, start, now) for start in windows]
    for start, old, new in zip(windows, reads_before, reads_after):
        for name in names:
            assert old[name][:2] == new[name][:2]
            np.testing.assert_array_equal(old[name][2], new[name][2], err_msg=f"{name} from {start}")
    assert accessor.expire(now) == 0  # nothing left to expire


RING = StageTable(Stage(1, 400), False)
RING_WINDOW = 150  # windows of 150, 150 and 100 slots, so reads cross and wrap windows


def _ring_store(path, names):
    """A store whose RING table has the window width recorded before its creation (the
    point_windows row is what every later use of the table follows)."""
    store = SQLiteStore(str(path))
    store.syncdb()
    with store.write_batch():
        store._conn.execute("INSERT INTO point_windows VALUES (?, ?)", (RING.name, RING_WINDOW))
    store.create_metrics([Metric(n, _meta("400*1s:60*20s")) for n in names])
    return store


@pytest.mark.parametrize("metrics", [3, 40])
def test_blocks_keep_whispers_ring_for_random_writes_and_windows(tmp_path, metrics):
    """write_points/read_points against a model of whisper's ring: a point replaces its slot
    (the last given of a batch wins), a read returns the slots whose timestamp is in the window,
    each once, for windows anywhere in the ring (inside a ring window, across them, wrapping),
    whether the points sit in chunks, open tails or both. With 40 metrics, some batches give
    every metric the same timestamps (a flush): their tails are appended by one statement
    a group of tails (same record count and newest), the others' by the statement for
    small groups, both in one call."""
    rng = random.Random(7)
    names = ["ring.a", "ring.b", "ring.c"] + [f"ring.m{i:02d}" for i in range(metrics - 3)]
    store = _ring_store(tmp_path / "bgl.db", names)
    model: dict[tuple[str, int], tuple[int, float]] = {}
    base = BASE - BASE % 400
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    for round_ in range(40):
        # few points a window (appended to its tail) or many (tails merged into chunks); any bytes as values
        size = rng.choice([1, 2, 3, 6, 60, 1500])  # 1500: windows given 1 KiB at once, merged directly
        batch = [(rng.choice(names), base + rng.randrange(0, 1200), rng.uniform(-1e300, 1e300)) for _ in range(size)]
        if metrics > 3 and round_ % 2:  # a flush: every metric 1 or 2 points at the same times
            times = rng.sample(range(base, base + 1200), rng.choice([1, 2]))
            batch += [(n, t, rng.uniform(-1e6, 1e6)) for n in names for t in times]
        batch += [(n, t, v / 3) for n, t, v in batch[:2]]  # a slot given twice in one batch: the last one wins
        with store.write_batch():
            store.write_points(RING, [n for n, _, _ in batch], np.array([t for _, t, _ in batch], np.int64),
                               np.array([v for _, _, v in batch]))
        for name, ts, value in batch:
            model[(name, ts % 400)] = (ts, value)
        windows = [(rng.choice(names), start, start + rng.randrange(0, 401))
                   for start in (base + rng.randrange(0, 1200) for _ in range(40))]
        windows += [("ring.a", base + 3, base + 403), ("ring.b", base + 10, base + 12)]  # the whole ring, a tiny one
        reads = store.read_points(RING, [n for n, _, _ in windows], np.array([w[1] for w in windows], np.int64),
                                  np.array([w[2] for w in windows], np.int64))
        got = sorted(zip(reads.request.tolist(), reads.timestamps.tolist(), reads.values.tolist()))
        expected = sorted((i, ts, value) for i, (name, start, end) in enumerate(windows)
                          for (n, _), (ts, value) in model.items() if n == name and start <= ts < end)
        assert got == expected, f"round {round_}"
        # read_grid (a fetch's read) places the same slots: chunks by layout, then the tails' last
        # records over them; a grid wider than the ring (a slot in two columns) the windows with a tail
        # decoded together
        first = base + rng.randrange(0, 1200)
        for last in (first + rng.randrange(1, 401), first + rng.randrange(401, 900)):
            grid = np.full((len(names), last - first), np.nan)
            for (name, _), (ts, value) in model.items():
                if first <= ts < last:
                    grid[names.index(name), ts - first] = value
            np.testing.assert_array_equal(store.read_grid(RING, names, first, last, 1), grid,
                                          f"round {round_}, {last - first} columns")
    grouped = [sql for sql in statements if sql.startswith("INSERT") and "SELECT j.value," in sql]
    assert bool(grouped) == (metrics > 3), grouped[:1]


def test_last_tail_records_keep_the_last_record_of_each_slot():
    """The tail records a read places over the chunks (read_grid): of several records of one
    (owner, slot), the same timestamp written again or a later turn of the ring, the last one
    written wins, whatever order the tails and their records come in."""
    dtype = windows_module.record_dtype(RING)

    def tail(*records: tuple[int, float]) -> bytes:
        packed = np.zeros(len(records), dtype)
        packed["ts"], packed["value"] = [ts for ts, _ in records], [value for _, value in records]
        return packed.tobytes()

    blobs = [tail((5, 1.0), (405, 2.0), (6, 3.0), (5, 4.0)), tail((7, 5.0)), tail((9, 6.0), (8, 7.0), (409, 8.0))]
    owner, ts, values = windows_module.last_tail_records(RING, np.array([1, 0, 1]), blobs)
    assert sorted(zip(owner.tolist(), ts.tolist(), values.tolist())) == [
        (0, 7, 5.0), (1, 5, 4.0), (1, 6, 3.0), (1, 8, 7.0), (1, 409, 8.0)]
    with pytest.raises(StoreError, match="not a whole number of 12-byte records"):
        windows_module.last_tail_records(RING, np.array([0]), [tail((5, 1.0))[:-1]])


def _row_kinds(path, table: str) -> dict[int, set[str]]:
    """{window: kinds of its rows} of every window of table ('sealed', 'open', 'tail'), by the documented ids."""
    with sqlite3.connect(path) as conn:
        ids = [i for (i,) in conn.execute(f"SELECT id FROM {table}")]
    kinds: dict[int, set[str]] = {}
    for id_ in ids:
        kind = "tail" if id_ & 1 else "open" if id_ >> 62 else "sealed"
        kinds.setdefault((id_ & (2**62 - 1)) >> 32, set()).add(kind)
    return kinds


def test_a_window_seals_when_its_last_slot_is_written_and_stays_sealed(tmp_path):
    """Carbon's shape (a point a second, in order): windows whose last slot is written become
    sealed chunks, the window being written stays open (chunk and tail); a late point into a
    sealed window replaces its slot there (whisper's ring), and the window stays sealed."""
    path = tmp_path / "bgl.db"
    names = ["seal.a", "seal.b"]
    store = _ring_store(path, names)
    start = BASE - BASE % 400  # slot 0: windows [0, 150), [150, 300), [300, 400)
    for ts in range(start, start + 390):  # window 2: a tail merged at 1 KiB, then a tail again
        store.write_points(RING, names, np.full(2, ts), np.array([ts % 97 + 0.25, -ts]))
    assert _row_kinds(path, RING.name) == {0: {"sealed"}, 1: {"sealed"}, 2: {"open", "tail"}}
    store.write_points(RING, ["seal.a"], np.array([start + 10]), np.array([-7.5]))  # late, into window 0
    store.write_points(RING, ["seal.a"] * 100, start + 20 + np.arange(100), np.full(100, 3.0))  # a tail's worth
    assert _row_kinds(path, RING.name)[0] == {"sealed"}  # merged back into the sealed chunk
    reads = store.read_points(RING, names, np.full(2, start), np.full(2, start + 390))
    got = {(int(r), int(t)): v for r, t, v in zip(reads.request, reads.timestamps, reads.values)}
    expected = {(0, t): (-7.5 if t == start + 10 else 3.0 if 20 <= t - start < 120 else t % 97 + 0.25)
                for t in range(start, start + 390)}
    expected.update({(1, t): float(-t) for t in range(start, start + 390)})
    assert got == expected


def test_tails_written_together_are_merged_at_the_merge_length_by_any_connection(tmp_path):
    """The long tails of an append (issue 32: found by the connection's temp triggers, not by
    a row returned for each tail): 40 metrics written a point at a time in one statement a
    write (a group of tails) each get their tail merged into an open chunk when it reaches
    1 KiB (86 records of 12 bytes), whichever connection appends; the triggers are the
    connection's, the file holds none; every point reads back."""
    path = tmp_path / "bgl.db"
    names = [f"long.m{i:02d}" for i in range(40)]
    first = _ring_store(path, names)
    second = SQLiteStore(str(path))  # another connection to the same file, writing the same tails
    start = BASE - BASE % 400
    for ts in range(start, start + 130):  # window 0, 150 slots: one merge at 86 records, 44 left in the tail
        (first if ts % 2 else second).write_points(RING, names, np.full(40, ts), np.arange(40.0) + ts)
    assert _row_kinds(path, RING.name) == {0: {"open", "tail"}}
    with sqlite3.connect(path) as conn:
        tails = conn.execute(f"SELECT length(points) FROM {RING.name} WHERE id & 1").fetchall()
        assert tails == [(44 * 12,)] * 40
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").fetchone() == (0,)
    reads = first.read_points(RING, names, np.full(40, start), np.full(40, start + 130))
    got = sorted(zip(reads.request.tolist(), reads.timestamps.tolist(), reads.values.tolist()))
    assert got == [(m, t, float(m + t)) for m in range(40) for t in range(start, start + 130)]


@pytest.mark.parametrize("merge_points", [None, 1000])
def test_windows_sealing_together_each_hold_the_chunk_of_their_points(tmp_path, monkeypatch, merge_points):
    """The write of the last slot of every metric's window (00:00 and 12:00 UTC for the
    stage-0 windows of a store) seals them all in one merge, encoded together
    (chunks.encode_many), in slices of at most _MERGE_POINTS slots (here also 6 windows):
    each sealed row is exactly the chunk of its own window's points (gaps, NaN and -0.0
    kept), and reads give every point back bit for bit."""
    if merge_points:
        monkeypatch.setattr(points_module, "_MERGE_POINTS", merge_points)
    path = tmp_path / "bgl.db"
    names = [f"burst.m{i}" for i in range(120)]
    store = _ring_store(path, names)
    start = BASE - BASE % 400  # slot 0: window 0 is slots 0..149
    rng = np.random.default_rng(4)
    expected = {}
    for i, name in enumerate(names):
        slots = np.arange(150) if i % 3 else np.sort(rng.choice(149, 100, replace=False).tolist() + [149])
        if i % 2:
            values = np.round(50 + np.cumsum(rng.normal(0, 0.5, len(slots))), 2)
        else:
            values = 1e9 + np.cumsum(rng.integers(0, 1000, len(slots))).astype(np.float64)
        if i % 5 == 0:
            values[rng.integers(0, len(slots), 3)] = [np.nan, -0.0, np.inf]
        expected[name] = (start + slots, values)
    for first in range(0, 150, 10):  # ten slots a write: each window's tail grows, none seals
        last = 149 if first == 140 else first + 10
        batch = [(n, t, v) for n, (ts, vs) in expected.items() for t, v in zip(ts, vs) if first <= t - start < last]
        store.write_points(RING, [b[0] for b in batch], np.array([b[1] for b in batch]), np.array([b[2] for b in batch]))
    assert all(kinds == {"open", "tail"} for kinds in _row_kinds(path, RING.name).values())
    store.write_points(RING, names, np.full(len(names), start + 149), np.array([expected[n][1][-1] for n in names]))
    assert _row_kinds(path, RING.name) == {0: {"sealed"}}
    with sqlite3.connect(path) as conn:
        sealed = dict(conn.execute(f"SELECT id, points FROM {RING.name}").fetchall())
    for name, (ts, values) in expected.items():
        window_id = store._key(name) << 1  # window 0: the metric's key alone
        assert sealed[window_id] == chunks.encode(chunks.Points(ts, values)), name
    reads = store.read_points(RING, names, np.full(len(names), start), np.full(len(names), start + 150))
    for i, name in enumerate(names):
        mine = reads.request == i
        np.testing.assert_array_equal(reads.timestamps[mine], expected[name][0])
        np.testing.assert_array_equal(reads.values[mine].view(np.uint64), expected[name][1].view(np.uint64))


def test_merged_points_sort_by_window_then_time_with_or_without_a_combined_key():
    """A merge sorts its points by window, then timestamp: by one stable sort of a combined
    key, or by lexsort when the key would not fit 62 bits; the same order either way."""
    rng = np.random.default_rng(6)
    rank = rng.integers(0, 50, 5000)
    for ts in (rng.integers(0, 2**32, 5000), rng.integers(-2**62, 2**62, 5000)):
        np.testing.assert_array_equal(windows_module._by_group_and_time(rank, ts), np.lexsort((ts, rank)))
    assert len(windows_module._by_group_and_time(rank[:0], rank[:0])) == 0


def test_a_bad_timestamp_is_refused_and_writes_nothing(tmp_path):
    store = _ring_store(tmp_path / "bgl.db", ["bad.ts"])
    for bad in (0, -5, 2**32):
        with pytest.raises(InvalidPoint, match="outside 1..4294967295"):
            store.write_points(RING, ["bad.ts", "bad.ts"], np.array([BASE, bad], np.int64), np.array([1.0, 2.0]))
    reads = store.read_points(RING, ["bad.ts"], np.array([BASE - 100]), np.array([BASE + 100]))
    assert len(reads.timestamps) == 0


def test_a_damaged_window_is_an_error_not_wrong_points(tmp_path):
    path = tmp_path / "bgl.db"
    store = _ring_store(path, ["odd.tail", "odd.chunk"])
    store.write_points(RING, ["odd.tail"], np.array([BASE], np.int64), np.array([1.0]))
    store.write_points(RING, ["odd.chunk"] * 400, BASE + np.arange(400), np.arange(400.0))  # every window merged
    with sqlite3.connect(path) as conn:
        tail = _key_of(path, "odd.tail") << 1
        chunk = _key_of(path, "odd.chunk") << 1
        # every window of odd.chunk sealed (its last slot written): chunks below 2**62, window first
        assert conn.execute(f"SELECT count(*) FROM {RING.name} WHERE id IN (?, ?, ?)",
                            [w << 32 | chunk for w in range(3)]).fetchone()[0] == 3
        conn.execute(f"UPDATE {RING.name} SET points = substr(points, 1, length(points) - 5) WHERE id = ?",
                     ((BASE % 400 // RING_WINDOW) << 32 | 2**62 | tail | 1,))
        conn.execute(f"UPDATE {RING.name} SET points = substr(points, 1, length(points) - 3) WHERE id = ?",
                     (1 << 32 | chunk,))
    with pytest.raises(StoreError, match="not a whole number of 12-byte records"):
        store.read_points(RING, ["odd.tail"], np.array([BASE - 10]), np.array([BASE + 10]))
    with pytest.raises(CorruptChunk, match="cannot be decoded"):
        store.read_points(RING, ["odd.chunk"], np.array([BASE + 160]), np.array([BASE + 170]))


_OLD_LAYOUT = """CREATE TABLE {name} (
  metric INTEGER NOT NULL, slot INTEGER NOT NULL, ts INTEGER NOT NULL, value REAL NOT NULL,{count}
  PRIMARY KEY (metric, slot)
) WITHOUT ROWID"""


def test_syncdb_converts_tables_of_one_row_per_point_to_blocks(tmp_path):
    """A file written before blocks (one row per point): reads say to run syncdb, which converts it."""
    path = tmp_path / "bgl.db"
    _ring_store(path, ["old.a", "old.b"]).close()  # the metrics, in a file of the old layout below
    aggr = StageTable(Stage(20, 60), True)
    keys = {n: _key_of(path, n) for n in ("old.a", "old.b")}
    raw_points = {("old.a", BASE + t): float(t) for t in range(0, 900, 7)}  # > 400 s: older slots replaced
    raw_points.update({("old.b", BASE + 3): -1.5})
    with sqlite3.connect(path) as conn:
        for table, count in ((RING, ""), (aggr, " count INTEGER NOT NULL,")):
            conn.execute(f"DROP TABLE {table.name}")
            conn.execute(_OLD_LAYOUT.format(name=table.name, count=count))
        conn.executemany(f"INSERT OR REPLACE INTO {RING.name} VALUES (?, ?, ?, ?)",
                         [(keys[n], ts % 400, ts, v) for (n, ts), v in sorted(raw_points.items(), key=lambda i: i[0][1])])
        conn.execute(f"INSERT INTO {aggr.name} VALUES (?, ?, ?, ?, ?)", (keys["old.b"], 7, BASE - BASE % 20, 2.5, 3))
    old = SQLiteStore(str(path))
    with pytest.raises(SchemaMissing, match="one row per point.*syncdb"):
        old.read_points(RING, ["old.a"], np.array([BASE]), np.array([BASE + 400]))

    old.syncdb()

    reads = old.read_points(RING, ["old.a", "old.b"], np.array([BASE + 500, BASE]), np.array([BASE + 900, BASE + 10]))
    got = {(("old.a", "old.b")[r], ts): v for r, ts, v in zip(reads.request.tolist(), reads.timestamps.tolist(),
                                                               reads.values.tolist())}
    assert got == {k: v for k, v in raw_points.items() if (k[0] == "old.a" and k[1] >= BASE + 500) or k[0] == "old.b"}
    (_, _, _, slots), = _windows(path, aggr.name)
    assert list(slots.values()) == [(BASE - BASE % 20, 2.5, 3)]
    with sqlite3.connect(path) as conn:
        assert not conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'old_%'").fetchall()
    old.syncdb()  # nothing left to convert


def _query_plans(store, call) -> list[tuple[str, str]]:
    """(statement, EXPLAIN QUERY PLAN) of every datapoints query or deletion call runs on store."""
    statements: list[str] = []
    conn = store._conn
    conn.set_trace_callback(statements.append)
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    plans = []
    for sql in statements:
        if re.search(r"(FROM|JOIN|INSERT INTO) datapoints_", sql) and sql.startswith(("SELECT", "WITH", "DELETE",
                                                                                    "INSERT")):
            plan = " / ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
            plans.append((sql[:100], plan))
    return plans


def test_point_reads_writes_and_drops_never_scan_a_stage_table(tmp_path):
    names = [f"plan.m{i}" for i in range(50)]
    store = _ring_store(tmp_path / "bgl.db", names)
    store.write_points(RING, names, np.full(50, BASE), np.ones(50))
    many = [n for n in names for _ in range(5)]  # 5 points a block: blocks read back and written whole
    ts = np.tile(np.arange(BASE + 1, BASE + 6), 50)
    calls = {
        "write": lambda: store.write_points(RING, many, ts, np.ones(len(ts))),
        "read": lambda: store.read_points(RING, names, np.full(50, BASE - 300), np.full(50, BASE + 50)),
        "drop": lambda: store.delete_metrics(names[:2]),
    }
    for what, call in calls.items():
        plans = _query_plans(store, call)
        assert plans, what
        for sql, plan in plans:
            # an append (INSERT ... SELECT over json_each) reads no stage table: its upsert seeks each id
            assert ("USING INTEGER PRIMARY KEY" in plan or sql.startswith("INSERT")) and \
                not re.search(r"SCAN d\b|SCAN datapoints", plan), (what, sql, plan)
        if what == "write":
            assert any(sql.startswith("INSERT") for sql, _ in plans), plans


def test_rows_are_read_by_key_range_or_by_id_and_each_metric_gets_its_own(tmp_path):
    """The rows of the windows read, sealed chunks and open rows (open chunks, tails) apart:
    for a dense run of keys, one range of ids a window and kind, which also meets the rows
    of metrics not asked for (left out), and no read by id; for scattered keys, by id.
    Either way each metric gets exactly its own points, from its sealed chunk, open chunk
    and tail."""
    names = [f"open.m{i:02d}" for i in range(20)]
    store = _ring_store(tmp_path / "bgl.db", names)
    start = BASE - BASE % 400  # slot 0: window 0 is slots 0-149, window 1 slots 150-299
    rng = np.random.default_rng(5)
    expected: dict[str, dict[int, float]] = {n: {} for n in names}

    def write(name: str, ts: np.ndarray) -> None:
        values = np.round(rng.uniform(0, 100, len(ts)), 2)
        store.write_points(RING, [name] * len(ts), ts, values)
        expected[name].update(zip(ts.tolist(), values.tolist()))

    for i, name in enumerate(names):
        write(name, start + np.arange(150))  # window 0 sealed: its last slot written
        if i % 2 == 0:
            write(name, start + 150 + np.arange(30))  # 30 points at once: merged into an open chunk
        write(name, start + 200 + i + np.arange(3))  # then a tail
    sealed, open_rows = (store._conn.execute(f"SELECT count(*) FROM {RING.name} WHERE id {op} ?", (1 << 62,))
                         .fetchone()[0] for op in ("<", ">="))
    assert (sealed, open_rows) == (20, 30)

    for asked, how in ((names[:3] + names[5:7] + names[8:], "BETWEEN"), ([names[0], names[19]], "= j.value")):
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        try:
            reads = store.read_points(RING, asked, np.full(len(asked), start), np.full(len(asked), start + 300))
        finally:
            store._conn.set_trace_callback(None)
        reads_of = [s for s in statements if f"JOIN {RING.name}" in s]
        assert reads_of and all((how == "BETWEEN") == ("BETWEEN" in s) for s in reads_of), reads_of
        for request, name in enumerate(asked):
            mine = reads.request == request
            assert dict(zip(reads.timestamps[mine].tolist(), reads.values[mine].tolist())) == expected[name], name


def test_a_read_after_another_process_deleted_a_metric_looks_the_keys_up_at_once(tmp_path):
    """A deletion by another process makes this one forget its name -> key cache at its next
    read of names (the accessor's metric cache still knows the others): the next read of
    many series finds their keys with one batched lookup, not one query a name, and a name
    deleted meanwhile reads as nothing."""
    names = [f"keys.m{i:03d}" for i in range(60)]
    store = _ring_store(tmp_path / "bgl.db", names)
    start = BASE - BASE % 400
    with store.write_batch():
        store.write_points(RING, [n for n in names for _ in range(3)], np.tile(start + np.arange(3), len(names)),
                           np.repeat(np.arange(len(names), dtype=np.float64), 3))
    other = SQLiteStore(str(tmp_path / "bgl.db"))
    other.delete_metrics([names[7]])
    other.close()
    assert list(store.get_metrics([names[0]])) == [names[0]]
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    try:
        grid = store.read_grid(RING, names, start, start + 3, 1)
    finally:
        store._conn.set_trace_callback(None)
    lookups = [sql for sql in statements if "CROSS JOIN metrics AS m ON m.parent" in sql]
    assert len(lookups) == 1, lookups[:3]
    expected = np.repeat(np.arange(len(names), dtype=np.float64)[:, None], 3, axis=1)
    expected[7] = np.nan
    np.testing.assert_array_equal(grid, expected)


# -- 5. delete then recreate -----------------------------------------------------------

def _key_of(path, name):
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT key FROM named_metrics WHERE name = ?", (name,)).fetchone()
    return None if row is None else row[0]


def test_delete_removes_every_stage_and_recreate_gets_a_new_key(tmp_path):
    path = tmp_path / "bgl.db"
    accessor = _new_store(path, ["keep.me"], retention=STAGES)
    accessor.create_metric("del.me", _meta(STAGES), now=BASE)  # the highest key: a plain rowid would reuse it
    _fill_three_durations(accessor, ["keep.me", "del.me"])
    old_key, kept_key = _key_of(path, "del.me"), _key_of(path, "keep.me")
    kept_before = {t: _points_per_metric(path, t)[kept_key] for t in STAGE_TABLES}
    assert all(_points_per_metric(path, t).get(old_key) for t in STAGE_TABLES)

    accessor.delete_metrics(["del.me"])

    assert _key_of(path, "del.me") is None
    for table in STAGE_TABLES:
        points = _points_per_metric(path, table)
        assert old_key not in points, table
        assert points[kept_key] == kept_before[table], table
    accessor.create_metric("del.me", _meta(STAGES), now=BASE + 900)
    new_key = _key_of(path, "del.me")
    assert new_key is not None and new_key > old_key
    series = accessor.fetch(["del.me"], BASE + 900 - 299, BASE + 900, now=BASE + 900)["del.me"]
    assert np.isnan(series.values).all()
    # the recreated metric is written and read under its new key only
    accessor.insert_points({"del.me": [(BASE + 899, 5.0)]}, now=BASE + 900)
    for table in STAGE_TABLES:
        assert old_key not in _points_per_metric(path, table)
    assert _points_per_metric(path, "datapoints_20p_1s_0")[new_key] == 1


def test_points_written_after_another_process_recreated_the_metric_are_not_lost(tmp_path):
    """Regression: the per-instance name -> key cache kept the dead key of a metric another
    process deleted and recreated; writes went under it (reported stored, readable by nobody).
    """
    path = tmp_path / "bgl.db"
    writer = _new_store(path, ["re.m"])
    assert writer.insert_points({"re.m": [(NOW - 10, 1.0)]}, now=NOW).stored == 1
    other = Accessor.from_url(_url(path))  # e.g. `bgl delete` then carbon recreating the metric
    other.delete_metrics(["re.m"])
    other.create_metric("re.m", _meta(), now=NOW)

    assert writer.insert_points({"re.m": [(NOW - 5, 2.0)]}, now=NOW).stored == 1

    fresh = Accessor.from_url(_url(path))
    values = fresh.fetch(["re.m"], NOW - 20, NOW, now=NOW)["re.m"].values_list()
    assert 2.0 in values


# -- rollback of a write batch ---------------------------------------------------------

def test_a_rolled_back_batch_leaves_the_store_usable(tmp_path):
    """Regression: a stage table created in a rolled-back transaction stayed in the table cache,
    so later writes skipped CREATE TABLE and failed with SchemaMissing.
    """
    path = tmp_path / "bgl.db"
    accessor = _new_store(path)
    with pytest.raises(RuntimeError):
        with accessor.store.write_batch():
            accessor.create_metric("rb.first", _meta("60*1s:60*60s"), now=NOW)  # first metric of its stages
            raise RuntimeError("e.g. a later statement of the batch failed")
    assert accessor.store.get_metrics(["rb.first"]) == {}  # the batch was rolled back
    assert "datapoints_60p_1s_0" not in accessor.store.stage_tables()

    accessor.create_metric("rb.second", _meta("60*1s:60*60s"), now=NOW)
    assert accessor.insert_points({"rb.second": [(NOW - 10, 3.0)]}, now=NOW).stored == 1
    assert 3.0 in accessor.fetch(["rb.second"], NOW - 30, NOW, now=NOW)["rb.second"].values_list()


def test_metrics_created_in_a_rolled_back_batch_are_created_again(tmp_path):
    """Regression: the accessor cached metrics created in a batch that was then rolled back, so
    insert_points(create=...) no longer created them and the whole batch failed (MetricNotFound).
    """
    path = tmp_path / "bgl.db"
    accessor = _new_store(path, ["rb.existing"])  # its stage tables exist and are committed
    with pytest.raises(RuntimeError):
        with accessor.store.write_batch():
            accessor.insert_points({"rb.new": [(NOW - 10, 1.0)]}, now=NOW, create=_meta())
            raise RuntimeError("e.g. a later statement of the batch failed")
    assert accessor.store.get_metrics(["rb.new"]) == {}  # the store rolled it back

    result = accessor.insert_points(
        {"rb.new": [(NOW - 5, 2.0)], "rb.existing": [(NOW - 5, 3.0)]}, now=NOW, create=_meta()
    )
    assert result.stored == 2, result
    assert accessor.glob_metrics("rb.*") == ["rb.existing", "rb.new"]


class _FailingWrite:
    """A thread's connection whose next datapoints insert fails (e.g. a disk I/O error), and
    which lets another thread take the write lock the moment this thread's ROLLBACK releases it."""

    def __init__(self, conn, after_rollback):
        self.conn, self.after_rollback, self.armed = conn, after_rollback, True

    def __getattr__(self, attribute):
        return getattr(self.conn, attribute)

    def _fail_once(self, sql):
        if self.armed and sql.startswith("INSERT INTO datapoints"):
            self.armed = False
            raise sqlite3.OperationalError("disk I/O error")

    def executemany(self, sql, rows):
        self._fail_once(sql)
        return self.conn.executemany(sql, rows)

    def execute(self, sql, *args):
        self._fail_once(sql)
        result = self.conn.execute(sql, *args)
        if sql == "ROLLBACK":
            other = threading.Thread(target=self.after_rollback)
            other.start()
            other.join(30)
        return result


def _failed_write_then_other_thread(accessor, points, create, other_points, other_create):
    """This thread's insert_points fails and rolls back; another thread writes right after the
    ROLLBACK. Returns what the other thread's insert_points returned (or raised)."""
    outcome = []

    def other_thread():
        try:
            outcome.append(accessor.insert_points(other_points, now=NOW, create=other_create))
        except Exception as exc:  # noqa: BLE001 - reported to the test
            outcome.append(exc)

    store = accessor.store
    real = store._conn
    store._local.conn = _FailingWrite(real, other_thread)
    try:
        with pytest.raises(StoreError):
            accessor.insert_points(points, now=NOW, create=create)
    finally:
        store._local.conn = real
    assert len(outcome) == 1
    return outcome[0]


def test_a_rollback_leaves_no_stale_table_to_another_thread(tmp_path):
    accessor = _new_store(tmp_path / "bgl.db")
    retention = _meta("60*1s:60*60s")  # first metrics of these stages: their tables are created now
    other = _failed_write_then_other_thread(
        accessor, {"race.first": [(NOW - 10, 1.0)]}, retention, {"race.second": [(NOW - 5, 2.0)]}, retention
    )
    assert not isinstance(other, Exception), repr(other)
    assert other.stored == 1
    assert accessor.fetch(["race.second"], NOW - 20, NOW, now=NOW)["race.second"].values_list()[14] == 2.0


def test_a_rollback_leaves_no_stale_key_to_another_thread(tmp_path):
    accessor = _new_store(tmp_path / "bgl.db", ["race.existing"])  # stage tables exist
    other = _failed_write_then_other_thread(
        accessor, {"race.a": [(NOW - 10, 1.0)]}, _meta(), {"race.a": [(NOW - 5, 7.0)]}, None
    )
    # the other thread's point is either refused (race.a does not exist) or stored under race.a
    assert not isinstance(other, Exception), repr(other)
    accessor.create_metric("race.other", _meta(), now=NOW)  # a new metric starts empty
    other_values = accessor.fetch(["race.other"], NOW - 20, NOW, now=NOW)["race.other"].values
    assert np.isnan(other_values).all(), "a point of race.a shows under the new metric race.other"
    if other.stored:
        assert accessor.store.get_metrics(["race.a"]), "a point of race.a was acknowledged, race.a does not exist"


# -- 6. store URLs and their errors ----------------------------------------------------

def test_url_with_absolute_path(tmp_path):
    store = open_store(f"sqlite://{tmp_path}/a.db")
    assert isinstance(store, SQLiteStore)
    assert store.path == f"{tmp_path}/a.db"
    assert store.timeout == DEFAULT_TIMEOUT


def test_url_with_timeout(tmp_path):
    store = open_store(f"sqlite://{tmp_path}/a.db?timeout=5")
    assert store.path == f"{tmp_path}/a.db"
    assert store.timeout == 5.0
    store.syncdb()
    assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000


def test_url_with_mmap_size_reads_through_mmap(tmp_path):
    store = open_store(f"sqlite://{tmp_path}/a.db?timeout=5&mmap_size=1048576")
    store.syncdb()
    assert store._conn.execute("PRAGMA mmap_size").fetchone()[0] == 1048576
    plain = open_store(f"sqlite://{tmp_path}/a.db")
    assert plain._conn.execute("PRAGMA mmap_size").fetchone()[0] == 0  # writers: off unless asked
    store.close()
    plain.close()


@pytest.mark.parametrize("url, words", [
    ("sqlite:///tmp/a.db?mmap_size=-1", ["mmap_size", "bytes", "'-1'"]),
    ("sqlite:///tmp/a.db?mmap_size=1G", ["mmap_size", "bytes"]),
    ("sqlite:///tmp/a.db?bogus=1", ["bogus", "timeout", "mmap_size"]),
    ("sqlite:///tmp/a.db?timeout=5&journal=off", ["journal"]),
    ("sqlite:///tmp/a.db?timeout=soon", ["timeout", "number"]),
    ("sqlite://", ["sqlite:///"]),
    ("sqlite://?timeout=5", ["sqlite:///"]),
])
def test_bad_urls_are_refused_with_a_clear_message(url, words):
    with pytest.raises(InvalidStoreURL) as info:
        open_store(url)
    message = str(info.value)
    for word in words:
        assert word in message, message


def test_a_path_in_a_missing_directory_is_unavailable(tmp_path):
    missing = tmp_path / "no" / "such"
    accessor = Accessor.from_url(f"sqlite://{missing}/bgl.db")
    with pytest.raises(StoreUnavailable) as info:
        accessor.syncdb()
    message = str(info.value)
    # names the missing directory as the problem, not only the file SQLite could not open
    assert str(missing) in message and "director" in message.lower(), message
    with pytest.raises(StoreUnavailable):
        accessor.get_metric("a.b")
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("existing", [True, False], ids=["empty-file", "no-file"])
def test_a_file_without_schema_says_to_run_syncdb(tmp_path, existing):
    path = tmp_path / "empty.db"
    if existing:
        sqlite3.connect(path).close()
    accessor = Accessor.from_url(_url(path))
    operations = [
        lambda: accessor.get_metric("a.b"),
        lambda: accessor.glob_metrics("a.*"),
        lambda: accessor.insert_points({"a.b": [(NOW, 1.0)]}, now=NOW, create=_meta()),
        lambda: accessor.fetch(["a.b"], NOW - 60, NOW, now=NOW),
        lambda: accessor.expire(NOW),
        lambda: accessor.store.touch_metrics(["a.b"], "read_on", NOW),
    ]
    for operation in operations:
        with pytest.raises(SchemaMissing) as info:
            operation()
        assert re.search(r"\bbgl\b.*\bsyncdb\b", str(info.value)), str(info.value)
    # once another process created the schema, the same accessor works
    Accessor.from_url(_url(path)).syncdb()
    accessor.insert_points({"a.b": [(NOW - 1, 1.0)]}, now=NOW, create=_meta())
    assert accessor.glob_metrics("a.*") == ["a.b"]


# -- 7. threads ------------------------------------------------------------------------

def test_one_accessor_shared_by_eight_threads(tmp_path):
    path = tmp_path / "bgl.db"
    accessor = _new_store(path)
    errors: list[str] = []
    written: dict[str, dict[int, float]] = {}
    connections: dict[int, object] = {}
    start = threading.Barrier(8, timeout=30)
    lock = threading.Lock()

    def work(index: int) -> None:
        try:
            start.wait()
            connections[index] = accessor.store._conn
            mine: dict[str, dict[int, float]] = {}
            deadline = time.monotonic() + 1.5
            for k in range(300):
                if k >= 3 and time.monotonic() > deadline:
                    break
                names = [f"t{index}.m{k}", f"t{index}.m{k // 2}", f"t{index}.all"]
                points = {n: [(BASE + 1 + k, float(index * 1000 + k))] for n in names}
                result = accessor.insert_points(points, now=NOW, create=_meta())
                assert result.stored == len(set(names)), result
                for n in set(names):
                    mine.setdefault(n, {})[BASE + 1 + k] = float(index * 1000 + k)
                read = _matrix(accessor, sorted(mine))
                for row, n in enumerate(sorted(mine)):
                    for ts, value in mine[n].items():
                        assert read[row, ts - BASE] == value, (n, ts, read[row, ts - BASE], value)
                assert len(accessor.glob_metrics(f"t{index}.*")) == len(mine)
            with lock:
                written.update(mine)
        except BaseException:
            with lock:
                errors.append(traceback.format_exc())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads)
    assert not errors, "\n".join(errors)
    assert len({id(c) for c in connections.values()}) == 8  # one connection per thread
    fresh = Accessor.from_url(_url(path))
    names = sorted(written)
    assert len(names) >= 8 * 3
    assert fresh.glob_metrics("*.*") == names
    matrix = _matrix(fresh, names)
    for row, name in enumerate(names):
        for ts, value in written[name].items():
            assert matrix[row, ts - BASE] == value, (name, ts)


_LOCK_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE store_state SET value = value WHERE name = 'deletions'")
print("locked", flush=True)
sys.stdin.readline()  # hold the writer lock until told (or killed)
conn.execute("COMMIT")
"""


@contextlib.contextmanager
def writer_lock_held_by_another_process(path):
    """A second process holding the SQLite writer lock (BEGIN IMMEDIATE) until the block ends."""
    holder = subprocess.Popen([sys.executable, "-c", _LOCK_HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.stdin.close()  # EOF: commit and exit
        try:
            holder.wait(timeout=30)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()


def test_a_read_never_waits_behind_another_process_to_record_read_on(tmp_path):
    """Issue 15 item 8: `bgl read` waited 14 s behind carbon's write lock to record read_on.
    With the writer lock held by another process and a 20 s busy timeout, fetch answers at
    once; the read is recorded, with its own time, by a later read once the lock is free."""
    path = tmp_path / "bgl.db"
    writer = Accessor.from_url(_url(path))
    writer.syncdb()
    meta = MetricMetadata.create("60s:1h", "average", 0.5)
    writer.insert_points({"read.busy": [(1_700_000_040, 4.5)]}, now=1_700_000_100, create=meta)
    reader = Accessor.from_url(_url(path) + "?timeout=20")
    with writer_lock_held_by_another_process(path):
        started = time.monotonic()
        series = reader.fetch(["read.busy"], 1_700_000_000, 1_700_000_100, now=1_700_000_100)["read.busy"]
        waited = time.monotonic() - started
        assert 4.5 in series.values_list()
        assert waited < 5, f"the read waited {waited:.1f}s behind the other process's lock"
        assert (reader.read_on_deferred, reader.read_on_failures) == (1, 0)
        with pytest.raises(StoreUnavailable):  # a write does wait (0.3 s here) and then fails
            Accessor.from_url(_url(path) + "?timeout=0.3").store.touch_metrics(["read.busy"], "read_on", 1)
        assert writer.store.get_metrics(["read.busy"])["read.busy"].read_on == 0
    # the lock is free: the next read (of another metric) records both, each with its time
    writer.insert_points({"read.other": [(1_700_000_040, 1.0)]}, now=1_700_000_100, create=meta)
    reader.fetch(["read.other"], 1_700_000_000, 1_700_000_200, now=1_700_000_200)
    found = writer.store.get_metrics(["read.busy", "read.other"])
    assert (found["read.busy"].read_on, found["read.other"].read_on) == (1_700_000_100, 1_700_000_200)
    assert (reader.read_on_deferred, reader.read_on_failures) == (1, 0)
    writer.close()
    reader.close()


def test_bgl_read_does_not_wait_behind_another_process(tmp_path, env):
    path = tmp_path / "bgl.db"
    writer = Accessor.from_url(_url(path))
    writer.syncdb()
    writer.insert_points({"cli.busy": [(1_700_000_040, 2.5)]}, now=1_700_000_100,
                         create=MetricMetadata.create("60s:1h", "average", 0.5))
    bgl = os.path.join(os.path.dirname(sys.executable), "bgl")
    with writer_lock_held_by_another_process(path):
        started = time.monotonic()
        done = subprocess.run([bgl, "--store", _url(path), "read", "--from", "1700000000", "--until", "1700000100",
                               "--now", "1700000100", "cli.busy"], env=env, capture_output=True, text=True, timeout=60)
        waited = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert 2.5 in json.loads(done.stdout)["values"]
    assert waited < DEFAULT_TIMEOUT / 3, f"bgl read took {waited:.1f}s (busy timeout {DEFAULT_TIMEOUT}s)"
    writer.close()


def test_a_read_succeeds_when_its_read_on_cannot_be_recorded(tmp_path, caplog):
    """A store the reader may not write (here a trigger refuses the update, as a read-only
    replica would): fetch still answers; the failure is counted and logged, and not tried
    again for that metric before the touch interval."""
    path = tmp_path / "bgl.db"
    writer = Accessor.from_url(_url(path))
    writer.syncdb()
    meta = MetricMetadata.create("60s:1h", "average", 0.5)
    writer.insert_points({"read.only": [(1_700_000_040, 4.5)]}, now=1_700_000_100, create=meta)
    writer.store._conn.execute("CREATE TRIGGER no_reads BEFORE UPDATE OF read_on ON metrics"
                               " BEGIN SELECT RAISE(ABORT, 'read-only replica'); END")
    reader = Accessor.from_url(_url(path))
    series = reader.fetch(["read.only"], 1_700_000_000, 1_700_000_100, now=1_700_000_100)["read.only"]
    assert series is not None and 4.5 in series.values_list()
    assert reader.read_on_failures == 1
    assert "could not record the read" in caplog.text and "read-only replica" in caplog.text
    reader.fetch(["read.only"], 1_700_000_000, 1_700_000_100, now=1_700_000_160)
    assert reader.read_on_failures == 1  # within the touch interval: not tried again
    writer.store._conn.execute("DROP TRIGGER no_reads")
    reader.fetch(["read.only"], 1_700_000_000, 1_700_000_100, now=1_700_000_100 + 7200)
    assert writer.store.get_metrics(["read.only"])["read.only"].read_on == 1_700_000_100 + 7200
    assert reader.read_on_failures == 1
    writer.close()
    reader.close()


def test_only_point_changes_make_the_downsampler_forget(tmp_path):
    """The downsampler keeps the open coarse interval of what it wrote while the store's
    points mark is unchanged: commits that change no point (graphite-web's read_on,
    metric creation) keep it; a point written by another connection clears it."""
    meta = _meta("10s:10m,60s:1h")
    writer, other = Accessor.from_url(_url(tmp_path / "s.db")), Accessor.from_url(_url(tmp_path / "s.db"))
    writer.syncdb()
    writer.create_metrics([("m.a", meta), ("m.b", meta)], now=NOW)
    reads = []
    real_read_points = writer.store.read_points

    def counting_read_points(table, names, starts, ends):  # the real read, counted
        reads.append(list(names))
        return real_read_points(table, names, starts, ends)

    writer.store.read_points = counting_read_points
    minute = NOW - NOW % 60 + 60  # points in the minute [minute - 60, minute), now at its end
    writer.insert_points({"m.a": [(minute - 60, 1.0)]}, now=minute)
    assert reads == [["m.a"]]  # nothing remembered yet: the minute is read back
    writer.insert_points({"m.a": [(minute - 50, 2.0)]}, now=minute)
    assert len(reads) == 1
    other.fetch(["m.b"], minute - 600, minute, minute)  # records read_on: a commit
    other.create_metrics([("m.c", meta)], now=minute)
    writer.insert_points({"m.a": [(minute - 40, 3.0)]}, now=minute)
    assert len(reads) == 1
    other.insert_points({"m.a": [(minute - 30, 4.0)]}, now=minute)  # another writer's point
    writer.insert_points({"m.a": [(minute - 20, 5.0)]}, now=minute)
    assert len(reads) == 2  # forgotten and read back, so the average counts the 4.0
    series = writer.fetch(["m.a"], minute - 3600, minute, minute)["m.a"]
    assert series.step == 60 and series.values_list()[-2:] == [3.0, None]  # (1 + 2 + 3 + 4 + 5) / 5
    with sqlite3.connect(tmp_path / "s.db") as conn:  # a rolled back write leaves no mark behind
        mark = conn.execute("SELECT value FROM store_state WHERE name = 'points'").fetchone()[0]
    with pytest.raises(RuntimeError), writer.store.write_batch():
        writer.insert_points({"m.b": [(minute - 10, 6.0)]}, now=minute)
        raise RuntimeError("roll back")
    with sqlite3.connect(tmp_path / "s.db") as conn:
        assert conn.execute("SELECT value FROM store_state WHERE name = 'points'").fetchone()[0] == mark
    before = len(reads)
    writer.insert_points({"m.a": [(minute - 10, 6.0)]}, now=minute)
    assert reads[before:] == [["m.a"]]  # the writer forgot what the rollback took back
    writer.close()
    other.close()


def test_the_wal_stays_under_its_limit_through_a_creation_burst(tmp_path):
    """Issue 16: a burst of creations (20 batches of 2,000 new metrics, hundreds of KiB
    of WAL each) never leaves the WAL past `wal_limit` after a commit: each commit that
    passes it checkpoints and truncates. SQLite's own checkpoint (1,000 pages) would let
    it reach 4 MiB and never shrink it."""
    path = tmp_path / "bgl.db"
    accessor = Accessor.from_url(_url(path))
    accessor.store.wal_limit = 256 << 10
    accessor.syncdb()
    metadata = MetricMetadata.create(RETENTION)
    wal = tmp_path / "bgl.db-wal"
    sizes = []
    for batch in range(20):
        accessor.create_metrics([(f"burst.b{batch}.h{i // 100}.m{i % 100}", metadata) for i in range(2000)], now=NOW)
        sizes.append(wal.stat().st_size if wal.exists() else 0)
    assert path.stat().st_size > 4 * (256 << 10)  # the burst wrote several times the limit
    assert max(sizes) <= 256 << 10, sizes
    assert len(accessor.glob_metrics("burst.*.*.*")) == 40_000
    accessor.close()
