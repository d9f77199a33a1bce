"""The plugin's batched writer loop (carbon_plugin/writer_loop.py) against carbon's own
`carbon.writer.writeCachedDataPoints`: the same cache contents, drained by each into carbon's
real database plugins (ours on real SQLite files, carbon's whisper on real files), give the
same stored points and metadata, the same counters and tag queue, and an empty cache."""
from __future__ import annotations

import importlib
import math
import time
from pathlib import Path

import pytest
import whisper

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import MetricNotFound
from biggraphite_like.metric import MetricMetadata
from carbon_plugin import writer_loop
from carbon_plugin.database import BigGraphiteLikeDatabase
from tests.store_env import make_store, stored_values
from tests.paths import REPO_ROOT

RULES = ((r"^app\.fast\.", "10s:1h"), (r"^app\.", "60s:1d"), (".*", "30s:2h"))  # storage-schemas
AGGREGATION = ((r"\.max$", 0.2, "max"), (r"\.count$", 0.0, "sum"))  # no catch-all: carbon's None
EXISTING = MetricMetadata.create("1m:1d", "min", 0.7)  # what no rule gives


@pytest.fixture
def carbon_writer(tmp_path_factory, monkeypatch):
    """carbon.writer with our rules, carbon's global cache, counters and tag queue emptied
    before and after (carbon's module state is put back)."""
    from carbon.conf import settings

    if "CONF_DIR" not in settings:  # carbon.storage reads its files' paths at import
        conf = tmp_path_factory.mktemp("carbon-conf")
        (conf / "storage-schemas.conf").write_text("[default]\npattern = .*\nretentions = 60s:1d\n")
        settings["CONF_DIR"] = str(conf)
    writer = importlib.import_module("carbon.writer")
    from carbon import instrumentation, state
    from carbon.cache import MetricCache
    from carbon.storage import Archive, PatternSchema

    monkeypatch.setattr(writer, "SCHEMAS", [PatternSchema(f"rule{i}", pattern, [Archive.fromString(r)])
                                            for i, (pattern, r) in enumerate(RULES)])
    monkeypatch.setattr(writer, "AGGREGATION_SCHEMAS", [PatternSchema(f"agg{i}", pattern, (xff, method))
                                                        for i, (pattern, xff, method) in enumerate(AGGREGATION)])
    monkeypatch.setattr(writer, "CREATE_BUCKET", None)
    monkeypatch.setattr(writer, "UPDATE_BUCKET", None)
    for key, value in {"ENABLE_TAGS": True, "SKIP_TAGS_FOR_NONTAGGED": True, "LOG_UPDATES": False,
                       "LOG_CREATES": False, "CACHE_WRITE_STRATEGY": "sorted", "MIN_TIMESTAMP_LAG": 0}.items():
        monkeypatch.setitem(settings, key, value)
    monkeypatch.setattr(writer_loop, "_carbons_function", writer.writeCachedDataPoints)
    monkeypatch.setattr(state, "database", None, raising=False)
    cache = MetricCache()
    _empty(cache, writer, instrumentation)
    yield writer
    _empty(cache, writer, instrumentation)


def _empty(cache, writer, instrumentation) -> None:
    with cache.lock:
        cache.clear()
        cache.size = 0
    writer.tagQueue.getbatch(1_000_000)
    writer.tagQueue.update_counter = 0  # every TAG_UPDATE_INTERVAL-th update is queued
    instrumentation.stats.clear()


def fill(cache, now: int) -> dict[str, dict[int, float]]:
    """Points through carbon's MetricCache.store (a duplicate timestamp replaces the value);
    what each metric should hold afterwards."""
    expected: dict[str, dict[int, float]] = {}
    names = [f"app.fast.h{i}.{kind}" for i in range(30) for kind in ("max", "count", "value")]
    names += [f"app.slow.h{i}.value" for i in range(20)] + [f"other.h{i}" for i in range(20)]
    names += ["old.a.max", "old.b.value", "cpu;host=h1", "cpu;host=h2"]
    for step in range(4):
        for index, name in enumerate(names):
            ts = now - now % 60 - 60 * (4 - step)
            value = float(index * 10 + step)
            cache.store(name, (float(ts), value))
            expected.setdefault(name, {})[ts] = value
    cache.store("app.slow.h0.value", (float(now - now % 60 - 60), -1.5))  # replaces a cached point
    expected["app.slow.h0.value"][now - now % 60 - 60] = -1.5
    return expected


def drain(loop, database, now: int, writer) -> tuple[dict, tuple, dict[str, dict[int, float]]]:
    """Fill carbon's cache, drain it with `loop` into `database`; carbon's counters, the tag
    queue's names and what the cache held."""
    from carbon import instrumentation, state
    from carbon.cache import MetricCache

    cache = MetricCache()
    expected = fill(cache, now)
    state.database = database
    loop()
    assert len(cache) == 0 and cache.size == 0
    stats = dict(instrumentation.stats)
    counters = {key: stats.get(key, 0) for key in ("committedPoints", "creates", "errors", "droppedCreates")}
    counters["updateOperations"] = len(stats.get("updateTimes", []))
    queued = writer.tagQueue.getbatch(1_000_000)
    # every created tagged series, and every TAG_UPDATE_INTERVAL-th update (which metric that
    # is depends on the order metrics are written in: carbon's strategy, or the cache's)
    tags = (sorted(set(queued)), len(queued))
    writer.tagQueue.update_counter = 0
    instrumentation.stats.clear()
    return counters, tags, expected


def plugin(tmp_path: Path, name: str) -> tuple[str, BigGraphiteLikeDatabase]:
    from carbon.conf import Settings

    url, accessor = make_store(tmp_path / name)
    accessor.create_metrics([("old.a.max", EXISTING), ("old.b.value", EXISTING)])
    settings = Settings()
    settings.update(BG_STORE=url, BG_FLUSH_INTERVAL=60, BG_WRITER_PROCESS="false")
    return url, BigGraphiteLikeDatabase(settings)


def test_batched_loop_stores_and_counts_what_carbons_loop_does(tmp_path, carbon_writer):
    now = int(time.time())
    results = {}
    for label, loop in (("carbon", carbon_writer.writeCachedDataPoints), ("ours", writer_loop.write_cached_datapoints)):
        (tmp_path / label).mkdir()
        url, database = plugin(tmp_path, label)
        try:
            counters, tags, expected = drain(loop, database, now, carbon_writer)
            assert database.flush(timeout=60)
        finally:
            database.close()
        reader = Accessor.from_url(url)
        names = sorted(expected)
        metadata = {n: m.metadata for n, m in reader.get_metrics(names).items()}
        results[label] = (counters, tags, stored_values(reader, names, now - 600, now + 60), metadata)
        assert results[label][2] == expected
    assert results["ours"] == results["carbon"]
    counters, tags, _, metadata = results["ours"]
    # 4 points a metric (one replaced in place), 2 of 134 metrics existed already
    assert counters == {"committedPoints": 134 * 4, "creates": 132, "errors": 0, "droppedCreates": 0,
                        "updateOperations": 134}
    assert tags == (["cpu;host=h1", "cpu;host=h2"], 3)  # both created, one update of the 134 queued
    assert metadata["old.a.max"] == EXISTING
    assert (str(metadata["app.fast.h3.max"].retention), metadata["app.fast.h3.max"].aggregator.value,
            metadata["app.fast.h3.max"].xfilesfactor) == ("360*10s", "max", 0.2)
    assert str(metadata["other.h1"].retention) == "240*30s"


def test_a_pass_that_empties_the_cache_is_flushed_without_waiting_the_interval(tmp_path, carbon_writer):
    """carbon's writer sleeps a second after a pass that emptied its cache, so nothing more
    comes to batch with: the plugin flushes the pass's points at once, not BG_FLUSH_INTERVAL
    (here 60 s) after they arrived."""
    now = int(time.time())
    (tmp_path / "ours").mkdir()
    url, database = plugin(tmp_path, "ours")
    try:
        _, _, expected = drain(writer_loop.write_cached_datapoints, database, now, carbon_writer)
        reader = Accessor.from_url(url)
        names = sorted(expected)
        deadline = time.monotonic() + 20
        while True:
            try:
                if stored_values(reader, names, now - 600, now + 60) == expected:
                    break
            except MetricNotFound:  # not created yet
                pass
            assert time.monotonic() < deadline, "the pass's points were not flushed within 20 s"
            time.sleep(0.1)
    finally:
        database.close()


def test_a_take_of_many_new_metrics_is_looked_up_in_batches(tmp_path, carbon_writer):
    """A take that empties carbon's cache leaves no waiting names to batch a lookup with:
    the loop asks about the whole take at once, and the plugin looks its unknown names up
    BG_LOOKUP_BATCH at a time (one store query a name made a take of 100,000 new metrics
    take minutes)."""
    from carbon import state
    from carbon.cache import MetricCache

    (tmp_path / "lookups").mkdir()
    url, database = plugin(tmp_path, "lookups")
    cache = MetricCache()
    now = int(time.time())
    names = [f"app.many.h{i}.value" for i in range(2_500)] + ["old.a.max"]
    for index, name in enumerate(names):
        cache.store(name, (float(now - now % 60 - 60), float(index)))
    state.database = database
    try:
        writer_loop.write_cached_datapoints()
        assert database.flush(timeout=60)
        lookups = database.stats.totals()["lookups"]
    finally:
        database.close()
    assert lookups == -(-len(names) // database.options.lookup_batch)  # 1 with the default 5,000
    stored = stored_values(Accessor.from_url(url), names, now - 600, now + 60)
    assert stored == {name: {now - now % 60 - 60: float(index)} for index, name in enumerate(names)}


def test_whisper_gets_the_same_files_metric_by_metric(tmp_path, carbon_writer):
    """A database without write_many (carbon's whisper) is written one metric at a time."""
    from carbon.conf import Settings
    from carbon.database import TimeSeriesDatabase

    now = int(time.time())
    files = {}
    for label, loop in (("carbon", carbon_writer.writeCachedDataPoints), ("ours", writer_loop.write_cached_datapoints)):
        settings = Settings()
        settings.update(LOCAL_DATA_DIR=str(tmp_path / label))
        database = TimeSeriesDatabase.plugins["whisper"](settings)
        counters, _, expected = drain(loop, database, now, carbon_writer)
        assert counters["updateOperations"] == len(expected) and counters["errors"] == 0
        read = {}
        for name in expected:
            path = database.getFilesystemPath(name)
            (start, _, step), values = whisper.fetch(path, now - 600, now)
            read[name] = ({start + i * step: v for i, v in enumerate(values) if v is not None},
                          whisper.info(path)["aggregationMethod"])
        files[label] = read
        assert {n: points for n, (points, _) in read.items()} == expected
    assert files["ours"] == files["carbon"]


def test_a_take_holds_whole_metrics_and_resumes_the_receivers_below_the_watermark(carbon_writer, monkeypatch):
    from carbon import state
    from carbon.cache import MetricCache
    from carbon.conf import settings

    cache = MetricCache()
    for i in range(10):
        for ts in range(3):
            cache.store(f"m{i}", (float(ts), float(i)))
    monkeypatch.setitem(settings, "CACHE_SIZE_LOW_WATERMARK", 10)
    monkeypatch.setattr(state, "cacheTooFull", True)
    taken = writer_loop.take(cache, 7)  # 7 points: three whole metrics
    assert [len(points) for _, points in taken] == [3, 3, 3]
    assert cache.size == 21 and len(cache) == 7 and state.cacheTooFull  # above the watermark
    taken += writer_loop.take(cache, 12)
    assert cache.size == 9 and not state.cacheTooFull  # carbon's cacheSpaceAvailable fired
    taken += writer_loop.take(cache, 1_000)
    assert cache.size == 0 and len(cache) == 0
    assert sorted(name for name, _ in taken) == sorted(f"m{i}" for i in range(10))
    assert all(points == {0.0: float(name[1:]), 1.0: float(name[1:]), 2.0: float(name[1:])} for name, points in taken)


def test_rate_limits_keep_carbons_own_loop(tmp_path, carbon_writer, monkeypatch):
    """MAX_UPDATES_PER_SECOND below infinity: carbon's loop runs, one token a metric."""
    from carbon.util import TokenBucket

    bucket = TokenBucket(1_000, 1)
    monkeypatch.setattr(carbon_writer, "UPDATE_BUCKET", bucket)
    assert not writer_loop.batched(carbon_writer.settings, carbon_writer)
    (tmp_path / "s").mkdir()
    _, database = plugin(tmp_path, "s")
    try:
        counters, _, expected = drain(writer_loop.write_cached_datapoints, database, int(time.time()), carbon_writer)
    finally:
        database.close()
    assert counters["updateOperations"] == len(expected)
    assert math.isclose(bucket.tokens, 1_000 - len(expected), abs_tol=1.0)


def test_the_replacements_are_installed_only_on_the_pinned_carbon():
    """The launcher replaces carbon's write processor and writer loop only on the release
    they are tested against: that must be the release the project pins and installs."""
    from carbon_plugin import launcher

    pins = [line.split("==", 1)[1].strip() for line in
            (REPO_ROOT / "constraints.txt").read_text().splitlines() if line.startswith("carbon==")]
    assert pins and pins[0] in launcher.TESTED_CARBON
    assert launcher.carbon_release() == pins[0]


def test_another_carbon_release_runs_carbons_own_code_and_stores_every_point(tmp_path):
    """The launcher as it runs under a carbon release it was not tested on: carbon's own
    write processor and writer loop run, the log says so, and every point is stored."""
    import random
    import sys

    from tests.carbon_env import CarbonCache
    from tests.carbon_env import SIGTERM_EXIT, series_points

    script = tmp_path / "bgl-carbon-cache-untested"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom carbon_plugin import launcher\n"
                      "launcher.TESTED_CARBON = ('0.0',)\n"
                      "if __name__ == '__main__':  # the plugin's writer process imports this script\n"
                      "    sys.exit(launcher.main())\n")
    script.chmod(0o755)
    url, accessor = make_store(tmp_path)
    now = int(time.time())
    rng = random.Random(7)
    points = [p for i in range(30) for p in series_points(f"untested.host{i}.value", 60, 5, now, rng)]
    carbon = CarbonCache(tmp_path / "carbon", url, launcher=script)
    carbon.start()
    try:
        carbon.send_plaintext(points)
    finally:
        code = carbon.stop()
    assert code in SIGTERM_EXIT, carbon.log()[-3000:]
    assert "is not one of 0.0: carbon's own write processor and writer loop run" in carbon.log()
    expected: dict[str, dict[int, float]] = {}
    for name, ts, value in points:
        expected.setdefault(name, {})[int(ts)] = value
    assert stored_values(Accessor.from_url(url), sorted(expected), now - 3600, now) == expected


def test_failed_creates_and_writes_are_logged_and_counted_as_carbon_does(tmp_path, carbon_writer, monkeypatch):
    """A database whose creates fail for some metrics and whose writes fail for the others:
    both loops log the same lines and count the same `errors`, one a failure; a failed
    write_many counts one error a metric handed over."""
    from carbon import log
    from carbon.conf import Settings
    from carbon.database import TimeSeriesDatabase

    def refused(*args):
        raise OSError("refused")

    now = int(time.time())
    seen = {}
    for label, loop in (("carbon", carbon_writer.writeCachedDataPoints), ("ours", writer_loop.write_cached_datapoints)):
        logged: list[str] = []
        monkeypatch.setattr(log, "msg", lambda message, *args, **kwargs: logged.append(message))
        monkeypatch.setattr(log, "err", lambda *args, **kwargs: None)  # the traceback: no observer here
        settings = Settings()
        settings.update(LOCAL_DATA_DIR=str(tmp_path / label))
        database = TimeSeriesDatabase.plugins["whisper"](settings)
        create = database.create
        monkeypatch.setattr(database, "create", lambda metric, *a: refused() if metric.startswith("other.")
                            else create(metric, *a))
        monkeypatch.setattr(database, "write", refused)
        counters, _, expected = drain(loop, database, now, carbon_writer)
        failed = sorted(line for line in logged if line.startswith("Error "))
        seen[label] = (counters["errors"], failed)
        assert counters["errors"] == len(expected) == len(failed), counters
        assert sum(line.startswith("Error creating other.") for line in failed) == 20
    assert seen["ours"] == seen["carbon"]

    class FailingMany:
        def __init__(self):
            self.known: set[str] = set()

        def exists_many(self, names):
            return {name: True for name in names}

        def exists(self, name):
            return True

        def write_many(self, names, datapoints):
            refused()

    logged = []
    counters, _, expected = drain(writer_loop.write_cached_datapoints, FailingMany(), now, carbon_writer)
    assert counters["errors"] == len(expected)
    (line,) = [line for line in logged if line.startswith("Error ")]  # one line for the whole call
    assert line.startswith(f"Error writing to {len(expected)} metrics (") and line.endswith("...): refused"), line
