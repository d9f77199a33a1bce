"""Maintenance jobs over the Store interface, run against every store kind.

The race tests run the real creator (`Accessor.create_metrics`) and the real cleaner
(`clean`) concurrently, in threads and in processes sharing one store, with test hooks
that widen the windows between a check and the write after it; a negative control shows
the same schedule orphans metrics when the protocol is switched off.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import random
import sqlite3
import threading
import time

import pytest

from biggraphite_like import names
from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import InvalidGlob, InvalidMaintenanceOption
from biggraphite_like.maintenance import directories as directories_mod
from biggraphite_like.maintenance import metrics_file
from biggraphite_like.maintenance.clean import CLOCK_MARGIN, clean
from biggraphite_like.maintenance.delete import delete
from biggraphite_like.maintenance.directories import prune_empty_directories
from biggraphite_like.maintenance.progress import Progress, format_summary
from biggraphite_like.maintenance.repair import repair
from biggraphite_like.maintenance.usage import disk_usage, statistics, whisper_bytes
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.stores.cassandra import CassandraStore
from biggraphite_like.stores.sqlite import SQLiteStore

NOW = 1_700_000_000
DAY = 86400
META = MetricMetadata.create("10s:10m,60s:1h,300s:1d", "average", 0.5)
TEN_YEARS = 3650 * DAY


def all_metrics(accessor) -> list[str]:
    return sorted(m.name for page in accessor.scan_metrics() for m in page.items)


def all_directories(accessor) -> list[str]:
    return sorted(d for page in accessor.scan_directories() for d in page.items)


def assert_consistent(accessor, allow_empty: bool = False) -> None:
    """Every metric has all its ancestors; (unless allowed) every directory has a child."""
    metrics = all_metrics(accessor)
    directories = set(all_directories(accessor))
    orphans = [m for m in metrics if not set(names.ancestors(m)) <= directories]
    assert not orphans, f"metrics missing an ancestor directory: {orphans[:10]}"
    if not allow_empty:
        empty = directories - accessor.store.directories_with_children(sorted(directories))
        assert not empty, f"empty directories left: {sorted(empty)[:10]}"


def orphans_of(accessor) -> list[str]:
    directories = set(all_directories(accessor))
    return [m for m in all_metrics(accessor) if not set(names.ancestors(m)) <= directories]


# -- the race protocol, one step at a time ---------------------------------------------------
def test_creator_restores_ancestors_deleted_right_after_its_write(accessor):
    """W2/W3: a cleaner deletes the parent between the creator's write and its check."""
    deleted = []

    def cleaner_strikes(wanted):
        if not deleted:
            accessor.store.delete_directories(["a.b", "a"])
            deleted.append(wanted)

    accessor._race_hook = cleaner_strikes
    accessor.create_metrics([("a.b.c", META)], now=NOW)
    assert deleted == [["a", "a.b"]]
    assert accessor.directories_restored == 2
    assert accessor.glob_directories("a.*") == ["a.b"]
    assert_consistent(accessor)


def test_cleaner_restores_a_directory_that_gained_a_child(store_url, accessor):
    """C3/C4: a metric is created between the cleaner's emptiness check and its delete."""
    accessor.store.create_directories(["x.y", "x.z"])
    creator = Accessor.from_url(store_url)

    def creator_strikes(empty):
        if "x.y" in empty:
            creator.create_metrics([("x.y.m", META)], now=NOW)

    result = prune_empty_directories(accessor, ["x.y", "x.z"], race_hook=creator_strikes)
    assert (result.removed, result.restored) == (1, 1)  # x.z removed, x.y deleted and restored
    assert all_directories(accessor) == ["x", "x.y"]
    assert_consistent(accessor)
    creator.close()


def test_prune_goes_bottom_up_and_keeps_busy_parents(accessor):
    accessor.create_metrics([("p.keep.m", META)], now=NOW)
    accessor.store.create_directories(["p.e1.e2.e3", "q.r.s"])
    result = prune_empty_directories(accessor, ["p.e1.e2.e3", "q.r.s", "not.there"])
    assert result.removed == 6  # p.e1.e2.e3, p.e1.e2, p.e1, q.r.s, q.r, q
    assert all_directories(accessor) == ["p", "p.keep"]


# -- the race protocol under real concurrency -------------------------------------------------
def _creator_cycle(accessor: Accessor, prefix: str, count: int, rng: random.Random, pause: float = 0.002
                   ) -> list[str]:
    """Leave a directory empty (its metric deleted), then create a new metric in it, many times."""
    created = []
    for index in range(count):
        directory = f"{prefix}.d{index % 7}.e{index}"
        accessor.create_metrics([(f"{directory}.old", META)], now=NOW)
        accessor.delete_metrics([f"{directory}.old"])  # the directory is now empty: the cleaner's prey
        time.sleep(rng.uniform(pause / 2, pause))
        accessor.create_metrics([(f"{directory}.new", META)], now=NOW)
        created.append(f"{directory}.new")
    return created


def _run_race(store_url: str, rounds: int, per_round: int, protocol: bool, seed: int,
              creator_pause: float = 0.002, cleaner_window: float = 0.003) -> tuple[int, int, list[str]]:
    """Creators and a looping cleaner in threads; returns (cleaner restores, creator restores, orphans).

    creator_pause: how long a directory stays empty before its new metric; cleaner_window:
    the longest wait between the cleaner's emptiness check and its delete.
    """
    rng = random.Random(seed)
    cleaner_restored = creator_restored = 0
    for round_index in range(rounds):
        creators = [Accessor.from_url(store_url) for _ in range(2)]
        cleaner = Accessor.from_url(store_url)
        for creator in creators:
            creator._race_hook = lambda wanted: time.sleep(rng.uniform(0, 0.002))
            if not protocol:
                creator._check_ancestors = lambda names, also: None
        stop = threading.Event()
        restored = []

        def clean_loop():
            while not stop.is_set():
                report = clean(cleaner, max_age=TEN_YEARS, now=NOW,
                               race_hook=lambda empty: time.sleep(rng.uniform(0, cleaner_window)))
                restored.append(report.directories_restored)

        threads = [threading.Thread(target=clean_loop)]
        threads += [threading.Thread(target=_creator_cycle,
                                     args=(c, f"r{round_index}.c{i}", per_round, random.Random(i), creator_pause))
                    for i, c in enumerate(creators)]
        for thread in threads[1:]:
            thread.start()
        threads[0].start()
        for thread in threads[1:]:
            thread.join()
        stop.set()
        threads[0].join()
        cleaner_restored += sum(restored)
        creator_restored += sum(c.directories_restored for c in creators)
        for accessor in (*creators, cleaner):
            accessor.close()
    checker = Accessor.from_url(store_url)
    orphans = orphans_of(checker)
    checker.close()
    return cleaner_restored, creator_restored, orphans


# the real node in one index mode each (the race is the metadata's, not the index's; the
# conformance suite covers both modes' globs): a race run costs ~25 s on the real node
@pytest.mark.parametrize("store_url", ["sqlite", "cassandra", "real-sai"], indirect=True)
def test_creation_and_cleanup_race_in_threads(store_url, accessor):
    cleaner_restored, creator_restored, orphans = _run_race(store_url, rounds=6, per_round=25, protocol=True, seed=1)
    assert orphans == []
    # the windows were real: both sides of the protocol had to repair something
    assert cleaner_restored + creator_restored > 0
    clean(accessor, max_age=TEN_YEARS, now=NOW)  # a quiet pass after the storm leaves no empty directory
    assert_consistent(accessor)
    assert len(all_metrics(accessor)) == 6 * 2 * 25


def test_race_negative_control_orphans_without_the_protocol(store_url, accessor, monkeypatch):
    """The same schedule with both checks switched off loses parents: the race test can fail.

    The windows are widened (directories stay empty 10-20 ms, the cleaner waits up to 40 ms
    before deleting) so that a loaded machine still loses some parents every time.
    """
    monkeypatch.setattr(directories_mod, "_restore_repopulated", lambda accessor, deleted: set())
    orphans: list[str] = []
    for attempt in range(5):
        orphans = _run_race(store_url, rounds=1, per_round=25, protocol=False, seed=attempt,
                            creator_pause=0.02, cleaner_window=0.04)[2]
        if orphans:
            break
    assert orphans, "expected the unprotected schedule to orphan at least one metric"


def _process_creator(store_url: str, prefix: str, count: int, seed: int, barrier, queue) -> None:
    accessor = Accessor.from_url(store_url)
    rng = random.Random(seed)
    accessor._race_hook = lambda wanted: time.sleep(rng.uniform(0, 0.002))
    barrier.wait(60)  # everyone starts together: process start-up takes longer than the work
    _creator_cycle(accessor, prefix, count, rng)
    queue.put(("creator", accessor.directories_restored))
    accessor.close()


def _process_cleaner(store_url: str, stop, seed: int, barrier, queue) -> None:
    accessor = Accessor.from_url(store_url)
    rng = random.Random(seed)
    passes = restored = 0
    barrier.wait(60)
    while not stop.is_set() or passes == 0:
        report = clean(accessor, max_age=TEN_YEARS, now=NOW, race_hook=lambda empty: time.sleep(rng.uniform(0, 0.003)))
        passes += 1
        restored += report.directories_restored
    queue.put(("cleaner", restored))
    accessor.close()


# the real node in one index mode each (the race is the metadata's, not the index's; the
# conformance suite covers both modes' globs): a race run costs ~25 s on the real node
@pytest.mark.parametrize("store_url", ["sqlite", "cassandra", "real-sasi"], indirect=True)
def test_creation_and_cleanup_race_in_processes(store_url, accessor):
    context = multiprocessing.get_context("spawn")
    stop, queue, barrier = context.Event(), context.Queue(), context.Barrier(5)
    cleaners = [context.Process(target=_process_cleaner, args=(store_url, stop, s, barrier, queue)) for s in (1, 2)]
    creators = [context.Process(target=_process_creator, args=(store_url, f"p{i}", 60, i, barrier, queue))
                for i in range(3)]
    for process in creators + cleaners:
        process.start()
    for process in creators:
        process.join(120)
    stop.set()
    for process in cleaners:
        process.join(120)
    assert [p.exitcode for p in creators + cleaners] == [0] * 5  # a failure's traceback is on stderr
    results = [queue.get(timeout=10) for _ in creators + cleaners]
    assert sorted(kind for kind, _ in results) == ["cleaner"] * 2 + ["creator"] * 3
    assert sum(restored for _, restored in results) > 0, results  # the windows were real: the protocol had work
    assert orphans_of(accessor) == []
    assert len(all_metrics(accessor)) == 3 * 60
    clean(accessor, max_age=TEN_YEARS, now=NOW)
    assert_consistent(accessor)


# -- clean ---------------------------------------------------------------------------------
def _populate(accessor):
    """12 fresh metrics, 8 stale (not written for 40 days) in their own subtrees."""
    fresh = [f"live.h{i}.cpu" for i in range(6)] + [f"mixed.h{i}.fresh" for i in range(6)]
    stale = [f"dead.h{i}.cpu" for i in range(4)] + [f"mixed.h{i}.stale" for i in range(4)]
    accessor.create_metrics([(n, META) for n in stale], now=NOW - 40 * DAY)
    accessor.create_metrics([(n, META) for n in fresh], now=NOW - 40 * DAY)
    # writes keep updated_on fresh (through Accessor.touch)
    result = accessor.insert_points({n: [(NOW - 60, 1.0)] for n in fresh}, now=NOW)
    assert result.stored == len(fresh)
    return fresh, stale


def test_clean_removes_stale_metrics_and_empty_directories(accessor):
    fresh, stale = _populate(accessor)
    report = clean(accessor, max_age=30 * DAY, now=NOW)
    assert report.metrics_scanned == 20
    assert report.metrics_removed == 8
    assert all_metrics(accessor) == sorted(fresh)
    assert report.directories_removed == 5  # dead.h0..h3, dead
    assert report.directories_restored == 0
    assert set(all_directories(accessor)) == {d for n in fresh for d in names.ancestors(n)}
    assert_consistent(accessor)
    again = clean(accessor, max_age=30 * DAY, now=NOW)
    assert (again.metrics_removed, again.directories_removed) == (0, 0)


def test_clean_keeps_a_metric_written_since_the_scan(accessor, store_url):
    accessor.create_metrics([("s.a", META), ("s.b", META)], now=NOW - 40 * DAY)
    writer = Accessor.from_url(store_url)
    pages = accessor.scan_metrics

    def scan_then_write(*args, **kwargs):
        for page in pages(*args, **kwargs):
            writer.insert_points({"s.a": [(NOW - 30, 2.0)]}, now=NOW)  # after the scan read s.a as stale
            yield page

    accessor.scan_metrics = scan_then_write
    report = clean(accessor, max_age=30 * DAY, now=NOW)
    assert report.metrics_removed == 1
    assert all_metrics(accessor) == ["s.a"]
    writer.close()


def test_clean_default_age_is_the_retention(accessor):
    accessor.create_metrics([("old.m", META)], now=NOW - 2 * DAY)  # META keeps one day
    accessor.create_metrics([("young.m", META)], now=NOW - DAY // 2)
    report = clean(accessor, now=NOW)
    assert report.metrics_removed == 1
    assert all_metrics(accessor) == ["young.m"]


def test_clean_expires_points(accessor):
    accessor.create_metrics([("e.m", META)], now=NOW)
    accessor.insert_points({"e.m": [(NOW - 10 * k, 1.0) for k in range(30)]}, now=NOW)
    assert clean(accessor, max_age=TEN_YEARS, now=NOW).points_expired == 0
    report = clean(accessor, max_age=TEN_YEARS, now=NOW + 2 * DAY)
    if accessor.store.url.startswith("sqlite"):
        assert report.points_expired > 0  # stores with TTL expire by themselves and report 0
    assert accessor.fetch(["e.m"], NOW - 600, NOW, NOW + 2 * DAY)["e.m"] is None


def test_clean_shards_together_equal_one_run(accessor):
    fresh, stale = _populate(accessor)
    reports = [clean(accessor, max_age=30 * DAY, now=NOW, shard=k, nshards=3, page_size=2) for k in range(3)]
    assert sum(r.metrics_scanned for r in reports) == 20
    assert sum(r.metrics_removed for r in reports) == 8
    assert all_metrics(accessor) == sorted(fresh)
    assert_consistent(accessor)


def test_clean_dry_run_counts_without_changing(accessor):
    fresh, stale = _populate(accessor)
    before = (all_metrics(accessor), all_directories(accessor))
    dry = clean(accessor, max_age=30 * DAY, now=NOW, dry_run=True)
    assert (all_metrics(accessor), all_directories(accessor)) == before
    real = clean(accessor, max_age=30 * DAY, now=NOW)
    assert (dry.metrics_removed, dry.directories_removed) == (real.metrics_removed, real.directories_removed) == (8, 5)


@pytest.mark.parametrize("kwargs", [{"max_age": 60}, {"shard": 3, "nshards": 3}, {"nshards": 0}])
def test_clean_refuses_bad_options(accessor, kwargs):
    with pytest.raises(InvalidMaintenanceOption):
        clean(accessor, now=NOW, **kwargs)


class SimulatedClock:
    """A wall clock the test moves by hand (Accessor(clock=...))."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("seed", range(3))
def test_clean_never_removes_a_metric_written_within_max_age(store_url, accessor, seed):
    """Issue 15 item 1: `clean --max-age 1h` removed a metric written every 7 minutes.

    One long-lived writer (its touch interval defers updated_on by up to an hour) writes
    metrics at several periods, on a simulated clock; a cleaner with max age = the touch
    interval runs at random moments. Whenever it runs, every metric written within max
    age is still there; a metric no longer written goes once max age plus the slack
    (touch interval + margin) has passed.
    """
    rng = random.Random(seed)
    clock = SimulatedClock(NOW)
    writer = Accessor.from_url(store_url, clock=clock)
    cleaner = Accessor.from_url(store_url, clock=clock)
    hour = cleaner.touch_interval
    periods = {"w.every7m": 420, "w.every59m": 3540, "w.every61m": 3660, "w.every2m": 120}
    meta = MetricMetadata.create("60s:1d", "average", 0.5)
    last_write: dict[str, float] = {}
    stop_at = NOW + 5 * hour  # w.every2m stops being written then
    cleans = 0
    while clock.now < NOW + 8 * hour:
        for name, period in periods.items():
            due = last_write.get(name, NOW - period) + period
            if due <= clock.now and not (name == "w.every2m" and clock.now >= stop_at):
                writer.insert_points({name: [(clock.now, 1.0)]}, create=meta)
                last_write[name] = clock.now
        clock.now += 60
        if rng.random() < 0.2:
            report = clean(cleaner, max_age=hour)
            cleans += 1
            present = set(all_metrics(cleaner))
            recent = {n for n, t in last_write.items() if t >= clock.now - hour}
            assert recent <= present, (clock.now - NOW, sorted(recent - present), report)
    assert cleans > 50
    # w.every2m, last written at stop_at, went once max age + touch interval + margin had passed
    assert clock.now > last_write["w.every2m"] + 2 * hour + CLOCK_MARGIN
    clean(cleaner, max_age=hour)
    assert all_metrics(cleaner) == sorted(set(periods) - {"w.every2m"})
    writer.close()
    cleaner.close()


def test_clean_without_max_age_keeps_a_metric_whose_retention_is_the_touch_interval(accessor, store_url):
    """Default age = the retention (here 1h, the touch interval): a metric written every
    7 minutes stays; once no longer written, it goes after its retention plus the slack."""
    clock = SimulatedClock(NOW)
    writer = Accessor.from_url(store_url, clock=clock)
    meta = MetricMetadata.create("60s:1h", "average", 0.5)
    for _ in range(40):  # 4 h 40 min of writes, every 7 minutes
        writer.insert_points({"short.m": [(clock.now, 1.0)]}, create=meta)
        clock.now += 420
        assert clean(accessor, now=int(clock.now)).metrics_removed == 0
    last = clock.now - 420
    assert clean(accessor, now=int(last + 3600)).metrics_removed == 0
    assert clean(accessor, now=int(last + 2 * 3600 + CLOCK_MARGIN + 1)).metrics_removed == 1
    writer.close()


def test_clean_refuses_a_max_age_below_the_touch_interval_with_the_reason(accessor):
    with pytest.raises(InvalidMaintenanceOption, match="cannot tell a metric idle for 3599s from one written"):
        clean(accessor, max_age=3599, now=NOW)
    short = Accessor(accessor.store, touch_interval=300)  # writers that refresh updated_on every 5 min
    assert clean(short, max_age=600, now=NOW).metrics_removed == 0


# -- delete --------------------------------------------------------------------------------
def test_delete_then_rewrite_reads_only_new_points(accessor, store_url):
    accessor.create_metrics([("d.a.m", META), ("d.b.m", META)], now=NOW)
    old = [(NOW - 10 * k, 100.0 + k) for k in range(400)]  # reaches stage 1 and 2 by propagation
    accessor.insert_points({"d.a.m": old}, now=NOW)
    report = delete(accessor, "d.a.*")
    assert report.metrics == ["d.a.m"]
    assert report.directories_removed == 1
    assert accessor.glob_directories("d.*") == ["d.b"]
    # written again, by this accessor and by another one that still caches the metric
    other = Accessor.from_url(store_url)
    other.get_metric("d.b.m")
    new = [(NOW - 10 * k, 1.0) for k in range(15)]  # the last 150 s: some minutes propagate
    accessor.insert_points({"d.a.m": new}, now=NOW, create=META)
    for start in (NOW - 600, NOW - 3600, NOW - DAY):  # stages 0, 1 and 2
        series = accessor.fetch(["d.a.m"], start, NOW, NOW)["d.a.m"]
        known = [v for v in series.values_list() if v is not None]
        assert known and set(known) == {1.0}, (start, known)  # none of the 100.0 + k of before
    delete(accessor, "d.b.m")
    other.insert_points({"d.b.m": [(NOW - 5, 2.0)]}, now=NOW, create=META)
    assert [v for v in accessor.fetch(["d.b.m"], NOW - 600, NOW, NOW)["d.b.m"].values_list() if v is not None] == [2.0]
    assert_consistent(accessor)
    other.close()


def test_delete_without_recursive_only_deletes_metrics(accessor):
    accessor.create_metrics([("t.a", META), ("t.a.b", META), ("t.a.c.d", META)], now=NOW)
    report = delete(accessor, "t.a")
    assert report.metrics == ["t.a"]
    assert report.matched_directories == ["t.a"]
    assert all_metrics(accessor) == ["t.a.b", "t.a.c.d"]
    report = delete(accessor, "t.a", recursive=True)
    assert report.metrics == ["t.a.b", "t.a.c.d"]
    assert all_metrics(accessor) == []
    assert all_directories(accessor) == []


def test_delete_recursive_removes_only_what_lies_beneath_matched_directories(accessor):
    """`a.{,b}` matches the directory a.b only (StandardFinder's empty alternative), though
    `a.{,b}.**` matches all of a: a recursive delete removes a.b's subtree and nothing else."""
    accessor.create_metrics([("v.b.x", META), ("v.b.y.z", META), ("v.c.x", META), ("v.m", META)], now=NOW)
    report = delete(accessor, "v.{,b}", recursive=True, dry_run=True)
    assert report.metrics == ["v.b.x", "v.b.y.z"]
    assert report.matched_directories == ["v.b", "v.b.y"]
    delete(accessor, "v.{,b}", recursive=True)
    assert all_metrics(accessor) == ["v.c.x", "v.m"]
    assert all_directories(accessor) == ["v", "v.c"]


def test_delete_dry_run_and_bad_glob(accessor):
    accessor.create_metrics([("u.a", META), ("u.b", META)], now=NOW)
    assert delete(accessor, "u.*", dry_run=True).metrics == ["u.a", "u.b"]
    assert all_metrics(accessor) == ["u.a", "u.b"]
    with pytest.raises(InvalidGlob):
        delete(accessor, "..")


# -- repair --------------------------------------------------------------------------------
def test_repair_recreates_missing_directories_and_drops_invalid_rows(accessor):
    accessor.create_metrics([("r.a.b.m", META), ("r.c", META)], now=NOW)
    accessor.store.delete_directories(["r.a", "r"])  # a crash or an old cleaner lost them
    accessor.store.create_directories(["bad name.x"])  # not a valid name: only a hand edit makes this
    dry = repair(accessor, dry_run=True)
    assert (dry.directories_created, dry.directories_invalid_removed) == (2, 2)
    assert "r.a.b" in all_directories(accessor) and "r" not in all_directories(accessor)
    report = repair(accessor)
    assert (report.directories_created, report.directories_invalid_removed) == (2, 2)
    assert report.examples["missing directories created"] == ["r", "r.a"]
    assert all_directories(accessor) == ["r", "r.a", "r.a.b"]
    assert_consistent(accessor)
    assert repair(accessor).directories_created == 0


def _corrupt(accessor, request, name: str, retention: str | None) -> None:
    """Set a metric row's retention behind the store's back: a hand edit (a text no
    retention parses) or, on Cassandra, a partial row (None: an update of another column
    of a row that does not exist, as a touch racing a deletion leaves)."""
    store = accessor.store
    if isinstance(store, SQLiteStore):
        with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
            # a metric's retention is its metadatas row's (name_tree): point the metric at a bad one
            conn.execute("INSERT OR IGNORE INTO metadatas (retention, aggregator, xfilesfactor) VALUES (?, 'average', 0.5)",
                         (retention,))
            assert conn.execute("UPDATE metrics SET metadata = (SELECT id FROM metadatas WHERE retention = ?)"
                                " WHERE key = (SELECT key FROM named_metrics WHERE name = ?)", (retention, name)).rowcount == 1
        return
    admin = store._conn.session  # the store's own cluster: the test server or the real node
    table = f"{store.metadata_keyspace}.metrics"
    if retention is None:
        admin.execute(f"UPDATE {table} SET updated_on = %s WHERE name = %s", (NOW, name))
    else:
        admin.execute(f"UPDATE {table} SET retention = %s WHERE name = %s", (retention, name))


def _sqlite_blocks(accessor) -> int:
    return sum(v for k, v in accessor.store.stats().items() if k.startswith("blocks."))


def test_unreadable_metadata_is_left_out_counted_and_repaired(accessor, store_url, request, caplog):
    names_ = ["u.ok.a", "u.ok.b", "u.bad.x"]
    accessor.create_metrics([(n, META) for n in names_], now=NOW)
    assert accessor.insert_points({n: [(NOW - 10 * k, 7.0) for k in range(30)] for n in names_}, now=NOW).stored == 90
    _corrupt(accessor, request, "u.bad.x", "ten seconds for a day")
    partial = isinstance(accessor.store, CassandraStore)
    if partial:
        _corrupt(accessor, request, "u.ghost.y", None)
    reader = Accessor.from_url(store_url)  # no metadata cached
    # lookups: the bad row is missing, logged with what is wrong; the others are unaffected
    with caplog.at_level("WARNING", logger="biggraphite_like.stores"):
        found = reader.store.get_metrics(["u.ok.a", "u.bad.x", "u.ok.b", "u.ghost.y"])
    assert sorted(found) == ["u.ok.a", "u.ok.b"]
    assert reader.store.unreadable_rows_seen == 1
    assert "'u.bad.x' has unreadable metadata" in caplog.text and "ten seconds for a day" in caplog.text
    assert "bgl repair" in caplog.text
    series = reader.fetch(["u.ok.a", "u.ok.b"], NOW - 300, NOW, NOW)
    assert all(set(s.values_list()[-25:]) == {7.0} for s in series.values())
    # scans report it apart; clean counts it and keeps its directories; stats count it
    unreadable = {n: why for p in reader.scan_metrics() for n, why in p.unreadable.items()}
    assert sorted(unreadable) == ["u.bad.x", "u.ghost.y"][: 1 + partial]
    assert all(n in why for n, why in unreadable.items())
    for dry_run in (True, False):
        report = clean(reader, max_age=30 * DAY, now=NOW, dry_run=dry_run)
        assert (report.metrics_scanned, report.metrics_unreadable, report.metrics_removed) == (3 + partial, 1 + partial, 0)
        assert report.directories_removed == 0 if not partial else report.directories_removed <= 2
    assert "u.bad" in all_directories(reader)
    stats = statistics(reader, now=NOW)
    assert (stats["metrics"], stats["metrics_unreadable"]) == (2, 1 + partial)
    # repair removes the rows (dry run: counts only); the metric written again starts empty
    assert repair(reader, dry_run=True).metrics_unreadable_removed == 1 + partial
    assert sorted(n for p in reader.scan_metrics() for n in p.unreadable) == sorted(unreadable)
    blocks = _sqlite_blocks(reader)
    report = repair(reader)
    assert report.metrics_unreadable_removed == 1 + partial
    if not partial:  # SQLite: its points went with it (3 metrics with the same points before)
        assert _sqlite_blocks(reader) == blocks * 2 // 3 and blocks > 0
    assert report.examples["metrics with unreadable metadata removed"][0].startswith("u.bad.x: ")
    assert not any(p.unreadable for p in reader.scan_metrics())
    assert reader.glob_metrics("u.**") == ["u.ok.a", "u.ok.b"]
    reader.insert_points({"u.bad.x": [(NOW - 5, 1.0)]}, now=NOW, create=META)
    values = [v for v in reader.fetch(["u.bad.x"], NOW - 300, NOW, NOW)["u.bad.x"].values_list() if v is not None]
    assert values == [1.0]  # none of the 7.0 written before the row went bad
    assert repair(reader).metrics_unreadable_removed == 0
    reader.close()


def test_a_write_creates_again_a_metric_whose_metadata_went_bad(accessor, request):
    accessor.create_metrics([("w.bad", META)], now=NOW)
    _corrupt(accessor, request, "w.bad", "garbage")
    writer = Accessor.from_url(accessor.store.url)
    other = MetricMetadata.create("60s:1d", "sum", 0)
    assert writer.insert_points({"w.bad": [(NOW - 60, 3.0)]}, now=NOW, create=other).stored == 1
    assert writer.get_metric("w.bad").metadata == other
    assert [v for v in writer.fetch(["w.bad"], NOW - 300, NOW, NOW)["w.bad"].values_list() if v is not None] == [3.0]
    writer.close()


# -- du and stats --------------------------------------------------------------------------
def test_disk_usage_and_statistics(accessor):
    other = MetricMetadata.create("60s:1d", "sum", 0)
    accessor.create_metrics([("v.a.x", META), ("v.a.y", META), ("v.b", other)], now=NOW - 3 * DAY)
    accessor.create_metrics([("w", META)], now=NOW)
    rows, total = disk_usage(accessor, "*")
    by_name = {(r.name, r.kind): r for r in rows}
    capacity = 60 + 60 + 288
    assert by_name[("v", "directory")].metrics == 3
    assert by_name[("v", "directory")].points == 2 * capacity + 1440
    assert by_name[("v", "directory")].bytes == 2 * whisper_bytes(META.retention) + whisper_bytes(other.retention)
    assert by_name[("w", "metric")].points == capacity
    assert total.metrics == 4
    assert whisper_bytes(META.retention) == 16 + 3 * 12 + 12 * capacity  # whisper.create's file size
    rows, total = disk_usage(accessor, "v.a")
    assert [(r.name, r.kind, r.metrics) for r in rows] == [("v.a", "directory", 2)]
    facts = statistics(accessor, now=NOW)
    assert (facts["metrics"], facts["directories"]) == (4, 2)
    assert facts["metrics_by_time_since_update"]["<1h"] == 1
    assert facts["metrics_by_time_since_update"]["1d-7d"] == 3
    assert facts["metrics_by_retention"] == {str(META.retention): 3, str(other.retention): 1}
    assert facts["metrics_by_aggregation"] == {"average": 3, "sum": 1}


# -- reporting helpers ---------------------------------------------------------------------
def test_metrics_file_is_written_atomically(tmp_path):
    path = tmp_path / "clean.prom"
    path.write_text("old\n")
    metrics_file.write(str(path), "clean", {"metrics_removed": 3, "duration_seconds": 1.5}, {"metrics_removed": "gone"})
    text = path.read_text()
    assert "# HELP bgl_clean_metrics_removed gone\n# TYPE bgl_clean_metrics_removed gauge\nbgl_clean_metrics_removed 3.0\n" in text
    assert "bgl_clean_duration_seconds 1.5" in text
    assert "bgl_clean_last_run_timestamp_seconds" in text
    assert [p.name for p in tmp_path.iterdir()] == ["clean.prom"]  # no temporary left behind


def test_progress_draws_only_on_a_terminal(tmp_path):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    progress = Progress("job", total=10, stream=stream)
    progress.advance(5)
    progress.close()
    assert "\rjob [" in stream.getvalue() and "5/10" in stream.getvalue()
    plain = io.StringIO()
    Progress("job", total=10, stream=plain).advance(5)
    assert plain.getvalue() == ""
    assert format_summary("clean", {"metrics_removed": 2, "duration_seconds": 0.25}) == (
        "bgl clean: metrics removed 2, duration 0.2s")
