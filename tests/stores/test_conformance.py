"""The store conformance suite: what every store must do, run against each store kind.

The `accessor` fixture (conftest.py) gives an accessor on an empty store of each kind;
store-specific behaviour (SQL plans, WAL, CQL rules) is tested beside each store.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from biggraphite_like import names
from biggraphite_like.aggregation import Aggregator
from biggraphite_like.errors import GlobTooComplex, MetricNotFound, SchemaMissing, TooManyResults
from biggraphite_like.glob import GlobPattern
from biggraphite_like.metric import MetricMetadata
from tests.stores.glob_cases import PATTERNS, expected_directories, random_tree

NOW = 1_700_000_000
META = MetricMetadata.create("10s:10m,60s:1h,300s:1d", "average", 0.5)


# -- metadata -----------------------------------------------------------------------------
def test_create_get_has(accessor):
    metric = accessor.create_metric("a.b.c", META, now=NOW)
    assert metric.name == "a.b.c"
    loaded = accessor.get_metric("a.b.c")
    assert loaded is not None
    assert loaded.metadata == META
    assert loaded.created_on == NOW and loaded.updated_on == NOW
    assert loaded.id == metric.id and str(loaded.id) == str(metric.id)
    assert accessor.has_metric("a.b.c")
    assert not accessor.has_metric("a.b")
    assert accessor.get_metric("nope") is None


def test_names_are_normalized_everywhere(accessor):
    accessor.create_metric(".a..b.c.", META, now=NOW)
    assert accessor.glob_metrics("a.b.c") == ["a.b.c"]
    assert accessor.has_metric("a..b...c")
    result = accessor.insert_points({"..a.b..c": [(NOW - 5, 1.0)]}, now=NOW)
    assert result.stored == 1
    series = accessor.fetch(["a.b.c"], NOW - 60, NOW, NOW)["a.b.c"]
    assert 1.0 in series.values_list()


def test_metadata_is_separate_per_store_instance(accessor, store_url):
    """A second accessor (another process, say) sees what the first created."""
    from biggraphite_like.accessor import Accessor

    accessor.create_metric("shared.m", META, now=NOW)
    other = Accessor.from_url(store_url)
    try:
        assert other.get_metric("shared.m").metadata == META
    finally:
        other.close()


def test_names_token_changes_with_every_creation_and_deletion_of_names(accessor):
    """What graphite-web's workers compare to drop their glob answers (see GlobCache)."""
    accessor.create_metric("a.b", META, now=NOW)
    seen = [accessor.names_token()]
    assert seen[0] is not None

    def changed() -> bool:
        token = accessor.names_token()
        fresh = token not in seen
        seen.append(token)
        return fresh

    accessor.insert_points({"a.b": [(NOW, 1.0)]}, now=NOW)
    accessor.create_metric("a.b", META, now=NOW + 1)  # metadata replaced: no name created
    assert not changed()
    accessor.create_metric("a.c", META, now=NOW)
    assert changed()
    accessor.create_directories(["x.y"])
    assert changed()
    accessor.delete_metrics(["a.c"])
    assert changed()
    accessor.store.delete_directories(["x.y"])
    assert changed()
    accessor.create_metric("a.c", META, now=NOW)  # the same name again
    assert changed()
    assert not changed()  # reading it changes nothing


def test_directories_of_every_ancestor(accessor):
    accessor.create_metrics([("a.b.c", META), ("a.b", META), ("x.y.z.w", META)], now=NOW)
    assert accessor.glob_directories("*") == ["a", "x"]
    assert accessor.glob_directories("**") == ["a", "a.b", "x", "x.y", "x.y.z"]
    assert accessor.glob_metrics("a.*") == ["a.b"]  # a.b is a metric and a directory
    assert accessor.glob_directories("a.*") == ["a.b"]


def test_recreate_replaces_metadata_keeps_creation_time(accessor):
    accessor.create_metric("m", META, now=NOW)
    other = MetricMetadata.create("10s:10m,60s:1h,300s:1d", "max", 0.0)
    accessor.create_metric("m", other, now=NOW + 100)
    accessor._cache.clear()
    loaded = accessor.get_metric("m")
    assert loaded.metadata == other
    assert loaded.created_on == NOW


def test_update_metadata_changes_aggregation_of_later_writes(accessor):
    accessor.create_metric("upd", META, now=NOW)
    accessor.update_metadata("upd", MetricMetadata.create(META.retention, "max", 0.0))
    accessor._cache.clear()
    assert accessor.get_metric("upd").metadata.aggregator is Aggregator.MAX
    accessor.insert_points({"upd": [(NOW - 700, 5.0), (NOW - 690, 9.0)]}, now=NOW)
    series = accessor.fetch(["upd"], NOW - 3600, NOW, NOW)["upd"]
    assert series.step == 60
    assert 9.0 in series.values_list()


def test_update_metadata_of_missing_metric(accessor):
    with pytest.raises(MetricNotFound, match="nope"):
        accessor.update_metadata("nope", META)


def test_touch_updates_times(accessor):
    accessor.create_metric("t.m", META, now=NOW)
    accessor.touch(["t.m"], "updated_on", now=NOW + 50, force=True)
    accessor.touch(["t.m"], "read_on", now=NOW + 60, force=True)
    accessor._cache.clear()
    metric = accessor.get_metric("t.m")
    assert (metric.updated_on, metric.read_on) == (NOW + 50, NOW + 60)


def test_touch_is_rate_limited(accessor):
    accessor.create_metric("t.r", META, now=NOW)
    accessor.touch(["t.r"], "read_on", now=NOW + 10)
    accessor.touch(["t.r"], "read_on", now=NOW + 20)  # within touch_interval: not written
    accessor._cache.clear()
    assert accessor.get_metric("t.r").read_on == NOW + 10
    accessor.touch(["t.r"], "read_on", now=NOW + 10 + accessor.touch_interval)
    accessor._cache.clear()
    assert accessor.get_metric("t.r").read_on == NOW + 10 + accessor.touch_interval


def test_writes_and_reads_record_times(accessor):
    accessor.create_metric("t.w", META, now=NOW)
    accessor.insert_points({"t.w": [(NOW + 5000, 1.0)]}, now=NOW + 5000)
    accessor.fetch(["t.w"], NOW, NOW + 5000, NOW + 6000)
    accessor._cache.clear()
    metric = accessor.get_metric("t.w")
    assert metric.updated_on == NOW + 5000
    assert metric.read_on == NOW + 6000


# -- globs --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_globs_equal_the_glob_engine(accessor, seed):
    """Whatever indexes a store uses, its results are the glob engine's over all names."""
    metric_names = random_tree(seed, 400)
    accessor.create_metrics([(n, META) for n in metric_names], now=NOW)
    directories = expected_directories(metric_names)
    rng = random.Random(seed)
    patterns = list(PATTERNS)
    for name in rng.sample(metric_names, 40):  # patterns derived from real names
        parts = name.split(".")
        position = rng.randrange(len(parts))
        parts[position] = rng.choice(["*", parts[position][:1] + "*", "{" + parts[position] + ",ab}", "**"])
        patterns.append(".".join(parts))
    for pattern in patterns:
        glob = GlobPattern(pattern)
        assert accessor.glob_metrics(pattern) == glob.filter(metric_names), pattern
        assert accessor.glob_directories(pattern) == glob.filter(directories), pattern
        assert accessor.glob_nodes(pattern) == (glob.filter(metric_names), glob.filter(directories)), pattern
        metrics, found_directories, spans = accessor.glob_node_spans(pattern)
        assert (metrics, found_directories) == (glob.filter(metric_names), glob.filter(directories)), pattern
        assert spans is None or spans == accessor.store.metric_spans(metrics), pattern


def test_glob_results_are_sorted_and_unique(accessor):
    accessor.create_metrics([(n, META) for n in ["b.a", "a.b", "a.a", "c", "a.c.d"]], now=NOW)
    assert accessor.glob_metrics("{a,a,b}.*") == ["a.a", "a.b", "b.a"]
    assert accessor.glob_metrics("**") == ["a.a", "a.b", "a.c.d", "b.a", "c"]


def test_glob_limits(accessor):
    accessor.create_metrics([(f"many.m{i}", META) for i in range(30)], now=NOW)
    accessor.max_glob_results = 20
    with pytest.raises(TooManyResults, match="max_results=20"):
        accessor.glob_metrics("many.*")
    assert len(accessor.glob_metrics("many.m1*")) == 11
    with pytest.raises(GlobTooComplex, match="max_glob_expansion"):
        accessor.glob_metrics("many." + "{a,b}" * 20)


def test_names_of_every_depth_are_found_by_fixed_components(accessor):
    # 1 to 64 components (the most a name has): each depth is its own insert on SQLite
    deep = [".".join(f"d{depth}c{i}" for i in range(depth)) for depth in (1, 2, 5, 31, 63, 64)]
    accessor.create_metrics([(n, META) for n in deep], now=NOW)
    for name in deep:
        parts = name.split(".")
        assert accessor.glob_metrics(name) == [name]
        assert accessor.glob_metrics(".".join(["*"] * (len(parts) - 1) + [parts[-1]])) == [name]
        if len(parts) > 1:  # a fixed component deep inside, nothing fixed before it
            masked = ["*"] * len(parts)
            masked[-2] = parts[-2]
            assert accessor.glob_metrics(".".join(masked)) == [name]
            assert accessor.glob_directories(".".join(masked[:-1])) == [names.parent(name)]
        assert accessor.glob_metrics(".".join(["*"] * len(parts))) == [name]  # not longer, not shorter
    assert accessor.glob_metrics("d64c0.**") == [deep[-1]]
    assert sorted(accessor.glob_directories("**")) == expected_directories(deep)


def test_glob_of_nothing(accessor):
    assert accessor.glob_metrics("nothing.*") == []
    assert accessor.glob_directories("nothing.**") == []


# -- points -------------------------------------------------------------------------------
def test_insert_and_fetch_many_metrics_at_once(accessor):
    metric_names = [f"svc.host{i}.cpu" for i in range(50)]
    accessor.create_metrics([(n, META) for n in metric_names], now=NOW)
    points = {n: [(NOW - 10 * k, float(i * 100 + k)) for k in range(30)] for i, n in enumerate(metric_names)}
    result = accessor.insert_points(points, now=NOW)
    assert (result.stored, result.rejected, result.too_old) == (50 * 30, 0, 0)
    series = accessor.fetch(metric_names, NOW - 300, NOW, NOW)
    assert list(series) == metric_names
    for i, n in enumerate(metric_names):
        s = series[n]
        assert (s.step, s.end - s.start) == (10, 300)
        expected = {NOW - 10 * k - (NOW - 10 * k) % 10: float(i * 100 + k) for k in range(30)}
        got = {s.start + j * s.step: v for j, v in enumerate(s.values_list()) if v is not None}
        assert got == {t: v for t, v in expected.items() if s.start <= t < s.end}


def test_rewrite_keeps_last_value(accessor):
    accessor.create_metric("rw", META, now=NOW)
    accessor.insert_points({"rw": [(NOW - 20, 1.0)]}, now=NOW)
    accessor.insert_points({"rw": [(NOW - 20, 2.0)]}, now=NOW)
    accessor.insert_points({"rw": [(NOW - 20, 3.0), (NOW - 20, 4.0)]}, now=NOW)  # last of a batch wins
    values = accessor.fetch(["rw"], NOW - 60, NOW, NOW)["rw"].values_list()
    assert values.count(4.0) == 1 and 1.0 not in values and 2.0 not in values and 3.0 not in values


def test_coarser_stage_serves_old_windows(accessor):
    accessor.create_metric("old", META, now=NOW)
    points = [(NOW - 3000 + 10 * k, 2.0) for k in range(60)]  # 10 minutes of points, 50 min ago
    result = accessor.insert_points({"old": points}, now=NOW)
    assert result.stored == 60
    series = accessor.fetch(["old"], NOW - 3600, NOW, NOW)["old"]
    assert series.step == 60  # a window of an hour reads the 60s stage
    assert series.values_list().count(2.0) >= 9


def test_too_old_points_are_counted(accessor):
    accessor.create_metric("tooold", META, now=NOW)
    result = accessor.insert_points({"tooold": [(NOW - 86400 - 1, 1.0), (NOW - 5, 2.0)]}, now=NOW)
    assert (result.stored, result.too_old) == (1, 1)


def test_unknown_metric_is_refused_others_stored(accessor):
    accessor.create_metric("known", META, now=NOW)
    result = accessor.insert_points({"known": [(NOW - 5, 1.0)], "unknown": [(NOW - 5, 1.0), (NOW - 6, 2.0)]}, now=NOW)
    assert (result.stored, result.rejected) == (1, 2)
    assert any("unknown" in e and "does not exist" in e for e in result.errors)
    assert not accessor.has_metric("unknown")


def test_insert_can_create_missing_metrics(accessor):
    result = accessor.insert_points({"new.one": [(NOW - 5, 1.0)]}, now=NOW, create=META)
    assert result.stored == 1
    assert accessor.get_metric("new.one").metadata == META
    assert accessor.glob_directories("*") == ["new"]


def test_fetch_unknown_metric_raises(accessor):
    with pytest.raises(MetricNotFound, match="ghost"):
        accessor.fetch(["ghost"], NOW - 60, NOW, NOW)


def test_fetch_outside_retention_is_none(accessor):
    accessor.create_metric("win", META, now=NOW)
    assert accessor.fetch(["win"], NOW + 10, NOW + 20, NOW)["win"] is None  # in the future
    assert accessor.fetch(["win"], NOW - 10 * 86400, NOW - 2 * 86400, NOW)["win"] is None  # past retention


def test_delete_then_rewrite_starts_empty(accessor):
    accessor.create_metric("del.me", META, now=NOW)
    accessor.insert_points({"del.me": [(NOW - 10 * k, 7.0) for k in range(100)]}, now=NOW)
    accessor.delete_metrics(["del.me"])
    assert not accessor.has_metric("del.me")
    assert accessor.glob_metrics("del.*") == []
    accessor.create_metric("del.me", META, now=NOW)
    accessor.insert_points({"del.me": [(NOW - 5, 1.0)]}, now=NOW)
    for start, until in [(NOW - 600, NOW), (NOW - 3600, NOW), (NOW - 86400, NOW)]:
        values = [v for v in accessor.fetch(["del.me"], start, until, NOW)["del.me"].values_list() if v is not None]
        assert 7.0 not in values


def test_expire_removes_points_past_retention(accessor):
    accessor.create_metric("exp", META, now=NOW)
    accessor.insert_points({"exp": [(NOW - 10 * k, 1.0) for k in range(60)]}, now=NOW)
    assert accessor.expire(NOW) == 0
    if accessor.store.url.startswith("cassandra:"):
        # Cassandra expires points itself (each stage table's TTL): expire() has nothing to do.
        # test_cassandra_store.py::test_points_expire_by_ttl_and_expire_returns_zero checks the TTL.
        assert accessor.expire(NOW + 2 * 86400) == 0
        return
    removed = accessor.expire(NOW + 2 * 86400)
    assert removed > 0
    assert accessor.expire(NOW + 2 * 86400) == 0


# -- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "point, reason",
    [
        ((NOW, float("nan")), "not a finite number"),
        ((NOW, float("inf")), "not a finite number"),
        ((NOW, float("-inf")), "not a finite number"),
        ((0, 1.0), "outside 1..4294967295"),
        ((-5, 1.0), "outside 1..4294967295"),
        ((-1, 1.0), "outside 1..4294967295"),
        ((2**32, 1.0), "outside 1..4294967295"),
        ((float("nan"), 1.0), "outside 1..4294967295"),
        ((NOW, "abc"), "not a (timestamp, value) pair"),
    ],
)
def test_bad_points_are_refused_and_others_kept(accessor, point, reason):
    accessor.create_metric("bad.m", META, now=NOW)
    accessor.create_metric("good.m", META, now=NOW)
    result = accessor.insert_points({"bad.m": [point, (NOW - 10, 5.0)], "good.m": [(NOW - 10, 6.0)]}, now=NOW)
    assert result.rejected == 1
    assert result.stored == 2
    assert reason in result.errors[0] and "bad.m" in result.errors[0]
    assert 5.0 in accessor.fetch(["bad.m"], NOW - 60, NOW, NOW)["bad.m"].values_list()


@pytest.mark.parametrize("bad_name", ["a b", "a\tb", "a\nb", "a\x00b", "a\x7fb", "...", "", "a.__END__"])
def test_bad_names_are_refused_and_others_kept(accessor, bad_name):
    result = accessor.insert_points({bad_name: [(NOW - 10, 1.0)], "fine": [(NOW - 10, 2.0)]}, now=NOW, create=META)
    assert (result.rejected, result.stored) == (1, 1)
    assert accessor.glob_metrics("**") == ["fine"]


def test_float_timestamps_are_truncated_like_whisper(accessor):
    accessor.create_metric("ft", META, now=NOW)
    accessor.insert_points({"ft": [(NOW - 10.9, 3.0)]}, now=NOW)
    series = accessor.fetch(["ft"], NOW - 60, NOW, NOW)["ft"]
    index = series.values_list().index(3.0)
    assert series.start + index * series.step == (NOW - 11) - (NOW - 11) % 10


def test_store_without_schema(schemaless_store_url):
    from biggraphite_like.accessor import Accessor

    fresh = Accessor.from_url(schemaless_store_url)
    try:
        with pytest.raises(SchemaMissing, match="syncdb"):
            fresh.glob_metrics("*")
    finally:
        fresh.close()


def test_syncdb_is_idempotent(accessor):
    accessor.create_metric("keep.me", META, now=NOW)
    accessor.syncdb()
    assert accessor.has_metric("keep.me")
    assert accessor.syncdb(dry_run=True) == accessor.store.schema_statements()


def test_values_round_trip_exactly(accessor):
    accessor.create_metric("exact", MetricMetadata.create("1s:10m", "average", 0.5), now=NOW)
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.normal(size=50) * 10.0 ** rng.integers(-300, 300, 50), [0.0, -0.0, 5e-324, 1.7e308]])
    points = [(NOW - 200 + i, float(v)) for i, v in enumerate(values)]
    accessor.insert_points({"exact": points}, now=NOW)
    series = accessor.fetch(["exact"], NOW - 201, NOW, NOW)["exact"]
    got = {series.start + i: v for i, v in enumerate(series.values_list()) if v is not None}
    assert got == dict(points)


# -- directories and full scans ----------------------------------------------------------------
def _scan_all(pages):
    items, cursors = [], []
    for page in pages:
        items.extend(page.items)
        cursors.append(page.cursor)
    return items, cursors


def test_scans_see_every_metric_and_directory_once_across_shards(accessor):
    wanted = [f"scan.{a}.{b}.m{c}" for a in range(4) for b in range(5) for c in range(7)]
    accessor.create_metrics([(n, META) for n in wanted], now=NOW)
    directories = sorted({d for n in wanted for d in names.ancestors(n)})
    for nshards in (1, 3):
        seen_metrics, seen_dirs = [], []
        for shard in range(nshards):
            metrics, _ = _scan_all(accessor.scan_metrics(shard, nshards, page_size=16))
            seen_metrics.extend(m.name for m in metrics)
            dirs, _ = _scan_all(accessor.scan_directories(shard, nshards, page_size=16))
            seen_dirs.extend(dirs)
        assert sorted(seen_metrics) == sorted(wanted)
        assert sorted(seen_dirs) == directories
    metrics, _ = _scan_all(accessor.scan_metrics())
    assert {m.name: m.metadata for m in metrics} == {n: META for n in wanted}


def test_scan_resumes_after_a_cursor(accessor):
    wanted = [f"resume.m{i:03d}" for i in range(50)]
    accessor.create_metrics([(n, META) for n in wanted], now=NOW)
    pages = accessor.scan_metrics(page_size=7)
    first = next(pages)
    assert len(first.items) == 7 and first.cursor is not None
    rest, cursors = _scan_all(accessor.scan_metrics(cursor=first.cursor, page_size=7))
    assert cursors[-1] is None
    assert sorted(m.name for m in first.items + rest) == wanted


def test_scan_of_an_empty_store_yields_nothing(accessor):
    assert _scan_all(accessor.scan_metrics())[0] == []


def test_directory_operations(accessor):
    store = accessor.store
    accessor.create_metrics([("d1.d2.leaf", META)], now=NOW)
    assert store.existing_directories(["d1", "d1.d2", "d1.d2.leaf", "nope"]) == {"d1", "d1.d2"}
    assert store.directories_with_children(["d1", "d1.d2", "d1.d2.leaf", "nope"]) == {"d1", "d1.d2"}
    store.create_directories(["x1.x2.x3"])
    assert store.existing_directories(["x1", "x1.x2", "x1.x2.x3"]) == {"x1", "x1.x2", "x1.x2.x3"}
    assert "x1.x2.x3" not in store.directories_with_children(["x1.x2.x3"])
    store.delete_directories(["x1.x2.x3", "x1.x2"])
    assert store.existing_directories(["x1", "x1.x2", "x1.x2.x3"]) == {"x1"}
    assert accessor.glob_directories("x1.*") == []
    assert accessor.glob_directories("d1.*") == ["d1.d2"]


# -- sealed windows (bgl seal: chunks on Cassandra; SQLite seals as it writes) ---------------------------
SEAL_RANGES = [(NOW - 600, NOW), (NOW - 3600, NOW), (NOW - 86400, NOW), (NOW - 1000, NOW - 400)]


def _seal(accessor, now=NOW):
    from biggraphite_like.maintenance.seal import seal

    return seal(accessor, now=now, grace=0, settle=0)


def _reads(accessor, names_):
    return {(start, until): {n: s.values_list() if s is not None else None
                             for n, s in accessor.fetch(names_, start, until, NOW).items()}
            for start, until in SEAL_RANGES}


def _fill_for_sealing(accessor):
    rng = np.random.default_rng(16)
    accessor.create_metrics([("seal.a", META), ("seal.b", META)], now=NOW - 86400)
    for name in ("seal.a", "seal.b"):
        # a day of 5-minute points (the 300s stage), then the last hour at 10s (every stage)
        old = [(NOW - 86400 + 300 * k, float(np.round(rng.normal(50, 10), 2))) for k in range(276)]
        accessor.insert_points({name: old}, now=NOW - 3600)
        recent = [(NOW - 3600 + 10 * k, float(np.round(rng.normal(50, 10), 2))) for k in range(360)]
        recent[-20] = (recent[-20][0], -0.0)
        accessor.insert_points({name: recent}, now=NOW)


def _is_cassandra(accessor):
    return accessor.store.url.startswith("cassandra:")


def test_sealed_windows_read_as_before(accessor):
    _fill_for_sealing(accessor)
    before = _reads(accessor, ["seal.a", "seal.b"])
    assert sum(v is not None for r in before.values() for s in r.values() for v in s) > 400
    report = _seal(accessor)
    if _is_cassandra(accessor):
        assert report.windows_sealed > 0 and report.points_sealed > 100
        assert report.rows_deleted >= report.points_sealed
    after = _reads(accessor, ["seal.a", "seal.b"])
    assert after == before
    # -0.0 kept as such through the chunk
    recent = accessor.fetch(["seal.a"], NOW - 600, NOW, NOW)["seal.a"].values_list()
    assert any(v == 0.0 and str(v) == "-0.0" for v in recent if v is not None)


def test_late_point_into_a_sealed_window_replaces_its_slot(accessor):
    _fill_for_sealing(accessor)
    _seal(accessor)
    # one point in a sealed window of the 10s stage, one in a sealed window of the 60s stage
    for late, value in [(NOW - 300 - (NOW - 300) % 10, 12345.5), (NOW - 900 - (NOW - 900) % 60, 777.25)]:
        accessor.insert_points({"seal.a": [(late, value)]}, now=NOW)
        window = accessor.fetch(["seal.a"], late - 60, late + 60, NOW)["seal.a"]
        values = window.values_list()
        assert values[(late - window.start) // window.step] == value
        assert values.count(value) == 1
    expected = _reads(accessor, ["seal.a", "seal.b"])
    report = _seal(accessor)
    if _is_cassandra(accessor):
        assert report.windows_resealed >= 1 and report.rows_deleted >= 1
    assert _reads(accessor, ["seal.a", "seal.b"]) == expected


def test_sealing_twice_changes_nothing(accessor):
    _fill_for_sealing(accessor)
    first = _seal(accessor)
    expected = _reads(accessor, ["seal.a", "seal.b"])
    second = _seal(accessor)
    assert (second.windows_sealed, second.rows_deleted) == (0, 0)
    if _is_cassandra(accessor):
        assert first.windows_sealed > 0
    assert _reads(accessor, ["seal.a", "seal.b"]) == expected


def test_sealed_windows_expire_with_their_stage(accessor):
    _fill_for_sealing(accessor)
    _seal(accessor)
    assert accessor.fetch(["seal.a"], NOW - 10 * 86400, NOW - 2 * 86400, NOW)["seal.a"] is None
    later = NOW + 2 * 86400
    assert accessor.fetch(["seal.a"], later - 86400, later, later)["seal.a"].values_list().count(None) == 288
    if not _is_cassandra(accessor):
        assert accessor.expire(later) > 0
        return
    # Cassandra: each chunk lives as long as its window's last point would have (TTL)
    from biggraphite_like.stores.base import StageTable
    from biggraphite_like.stores.cassandra import schema

    store = accessor.store
    key = store._metric_ids(["seal.a"], False)["seal.a"]
    metric = accessor.get_metric("seal.a")
    seen = 0
    for index, stage in enumerate(metric.retention.stages):
        table = StageTable.of(metric, index)
        span = schema.window_steps(stage, schema.CHUNK_WINDOW_STEPS) * stage.precision
        for start in range(NOW - 86400 - span - NOW % span, NOW, span):
            rows = store._execute(f"SELECT TTL(data) FROM {store.keyspace}.{schema.chunk_table_name(table)}"
                                  " WHERE metric = ? AND window_start = ?", [key, start], "data_read", "ttl")
            for (ttl,) in rows:
                seen += 1
                assert 0 < ttl <= start + span + schema.ttl_seconds(stage) - NOW
    assert seen > 0


def _grid_of_reads(store, table, names_, first, last) -> np.ndarray:
    reads = store.read_points(table, names_, np.full(len(names_), first), np.full(len(names_), last))
    grid = np.full((len(names_), (last - first) // table.stage.precision), np.nan)
    grid[reads.request, (reads.timestamps - first) // table.stage.precision] = reads.values
    return grid


def test_read_grid_places_what_read_points_reads(accessor):
    """Store.read_grid (what a fetch reads) holds each point read_points gives for the same
    window at its step, and nothing else, for raw and aggregated stages, before and after
    sealing: the ring's slots of older turns stay out."""
    from biggraphite_like.stores.base import StageTable

    rng = random.Random(5)
    names_ = [f"grid.m{i}" for i in range(5)]
    accessor.create_metrics([(n, META) for n in names_], now=NOW - 7200)
    for now in range(NOW - 7200 + 600, NOW + 1, 600):  # 2 h at 10 s: the 10-minute raw ring turns 12 times
        accessor.insert_points({n: [(t, rng.uniform(-1e6, 1e6)) for t in range(now - 600, now, 10)
                                    if rng.random() < 0.9] for n in names_}, now=now)
    raw, minutes = (StageTable(stage, index > 0) for index, stage in enumerate(META.retention.stages[:2]))
    windows = [(raw, NOW - 590, NOW + 10), (raw, NOW - 300, NOW - 100), (raw, NOW - 900, NOW - 300),
               (minutes, NOW - 3540, NOW + 60), (minutes, NOW - 1200, NOW - 600)]
    for sealed in (False, True):
        if sealed:
            _seal(accessor)
        for table, first, last in windows:
            grid = accessor.store.read_grid(table, names_, first, last, table.stage.precision)
            expected = _grid_of_reads(accessor.store, table, names_, first, last)
            assert np.count_nonzero(~np.isnan(expected)) >= 0.3 * expected.size
            np.testing.assert_array_equal(grid, expected, f"{table.name} [{first - NOW}, {last - NOW}), sealed {sealed}")
