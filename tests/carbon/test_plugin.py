"""The carbon plugin, driven by the real carbon-cache daemon (bgl-carbon-cache) over TCP.

Every test starts carbon-cache 1.1.10 as a subprocess on free 127.0.0.1 ports with an
SQLite store, sends plaintext and pickle, stops it with SIGTERM and reads the store back
through the accessor (and whisper files, for the double-write database).
"""
from __future__ import annotations

import random
import re
import sqlite3
import time

import numpy as np
import pytest
import whisper

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from carbon_plugin.database import BigGraphiteLikeDatabase, MetadataNotLoaded
from tests.carbon_env import SIGTERM_EXIT, CarbonCache, carbonlink_request, series_points
from tests.store_env import make_store, stored_values

pytestmark = pytest.mark.slow

SCHEMAS = (
    ("carbon", r"^carbon\.", "1s:1h"),
    ("fast", r"^app\.fast\.", "10s:1h,1m:1d"),
    ("slow", r"^app\.slow\.", "1m:1d,1h:30d"),
    ("default", ".*", "30s:2h"),
)
AGGREGATION = (  # no catch-all rule: other metrics get carbon's None, None (average, 0.5)
    ("min", r"\.min$", 0.1, "min"),
    ("max", r"\.max$", 0.2, "max"),
    ("count", r"\.count$", 0.0, "sum"),
)


def test_carbon_cache_stores_every_point_with_its_rules(tmp_path):
    url, accessor = make_store(tmp_path)
    rng = random.Random(4)
    now = int(time.time())
    # Existing metrics, with metadata no rule would give: they must keep it.
    old_metadata = MetricMetadata.create("1m:1d", "max", 0.3)
    old_names = [f"app.fast.old{i}.value" for i in range(10)]
    accessor.create_metrics([(n, old_metadata) for n in old_names])
    expected_rules: dict[str, tuple[str, str, float]] = {}
    points = []
    for i in range(60):
        for suffix, method, xff in (("min", "min", 0.1), ("max", "max", 0.2), ("count", "sum", 0.0),
                                    ("value", "average", 0.5)):
            name = f"app.fast.host{i}.{suffix}"
            expected_rules[name] = ("360*10s:1440*60s", method, xff)
            points += series_points(name, 10, 20, now, rng)
    for i in range(40):
        name = f"app.slow.host{i}.value"
        expected_rules[name] = ("1440*60s:720*3600s", "average", 0.5)
        points += series_points(name, 60, 20, now, rng)
    for i in range(20):
        name = f"other.m{i}.count"
        expected_rules[name] = ("240*30s", "sum", 0.0)
        points += series_points(name, 30, 20, now, rng)
    for name in old_names:
        points += series_points(name, 60, 20, now, rng)
    rng.shuffle(points)  # out of order, metrics interleaved
    half = len(points) // 2
    # one metric mixes good points and a refused one; three metrics have only bad points
    mixed = series_points("app.fast.mixed.value", 10, 5, now, rng)
    bad_lines = [f"app.fast.mixed.value inf {now - 5}\n", f"bad.inf.value inf {now}\n",
                 "bad.ts.value 1.0 -5\n", "bad.future.value 1.0 5000000000\n"]

    carbon = CarbonCache(tmp_path / "carbon", url, schemas=SCHEMAS, aggregation=AGGREGATION,
                         settings={"CARBON_METRIC_INTERVAL": 1})
    carbon.start()
    try:
        carbon.send_plaintext(points[:half] + mixed, raw_lines=bad_lines)
        _wait_for_point(url, points[0][0])  # the running flush path has written some of them
        carbon.send_pickle(points[half:])
    finally:
        code = carbon.stop()  # at once: points are still in carbon's cache and our buffer
    assert code in SIGTERM_EXIT, carbon.log()[-3000:]

    expected: dict[str, dict[int, float]] = {}
    for name, ts, value in points + mixed:
        expected.setdefault(name, {})[int(ts)] = value
    assert len(expected) == 60 * 4 + 40 + 20 + 10 + 1
    check_now = int(time.time())
    reader = Accessor.from_url(url)
    got = stored_values(reader, sorted(expected), check_now - 1800, check_now)
    missing = {n: sorted(set(v) - set(got[n])) for n, v in expected.items() if set(v) - set(got[n])}
    assert not missing, f"{sum(map(len, missing.values()))} points missing, e.g. {list(missing.items())[:3]}"
    assert got == expected
    # metadata from the rules (and carbon's None defaults), existing metrics untouched
    metrics = reader.get_metrics(list(expected))
    for name, (retention, method, xff) in expected_rules.items():
        metadata = metrics[name].metadata
        assert (str(metadata.retention), metadata.aggregator.value, metadata.xfilesfactor) == (retention, method, xff), name
    for name in old_names:
        assert metrics[name].metadata == old_metadata
    # refused points: logged with the reason and counted; their metrics never created
    log = carbon.log()
    assert "bad.inf.value: value inf is not a finite number" in log
    assert "bad.ts.value: timestamp -5.0 is outside" in log
    assert "bad.future.value: timestamp 5000000000.0 is outside" in log
    assert "rejectedPoints=4," in log and "droppedPoints=0," in log
    assert not reader.get_metrics(["bad.inf.value", "bad.ts.value", "bad.future.value"])
    # the plugin's counters are among carbon's self-metrics, in the same store
    assert reader.glob_metrics("carbon.agents.*.biggraphite_like.rejectedPoints")


def test_double_writes_agree_with_whisper(tmp_path):
    url, accessor = make_store(tmp_path)
    rng = random.Random(7)
    now = int(time.time())
    schemas = (("carbon", r"^carbon\.", "60s:1d"), ("all", ".*", "10s:10m,60s:1h"))
    carbon = CarbonCache(tmp_path / "carbon", url, database="whisper+biggraphite_like", schemas=schemas,
                         aggregation=AGGREGATION)
    # A metric that already has a whisper file (migration): the store must copy its metadata.
    migrated = carbon.whisper_dir / "mig" / "a.wsp"
    migrated.parent.mkdir(parents=True)
    # its first stage ends 600 s back, in the gap of the points below, like the schema's
    whisper.create(str(migrated), [(5, 120), (60, 60)], 0.7, "last")
    points = []
    names = [f"dw.h{i}.{s}" for i in range(15) for s in ("min", "max", "count", "value")] + ["mig.a"]
    for name in names:
        # the last 8 minutes every 10 s, then 12..50 minutes ago every 10 s, with gaps: never
        # near the 10-minute edge of every metric's first stage, where a second between
        # whisper's write and our flush could route a point to a different stage
        for age in list(range(10, 480, 10)) + list(range(720, 3000, 10)):
            if rng.random() < 0.8:
                points.append((name, float(now - now % 10 - age), rng.uniform(-50, 50)))
    rng.shuffle(points)
    carbon.start()
    try:
        carbon.send_pickle(points[: len(points) // 2])
        carbon.send_plaintext(points[len(points) // 2:])
    finally:
        code = carbon.stop()
    assert code in SIGTERM_EXIT, carbon.log()[-3000:]
    reader = Accessor.from_url(url)
    info = whisper.info(str(migrated))
    stored = reader.get_metric("mig.a").metadata
    assert (str(stored.retention), stored.aggregator.value) == ("120*5s:60*60s", "last")
    assert stored.xfilesfactor == info["xFilesFactor"] == pytest.approx(0.7)  # whisper keeps a float32
    check_now = int(time.time())
    compared = 0
    for name in names:
        path = carbon.whisper_dir / (name.replace(".", "/") + ".wsp")
        for start, end in ((check_now - 300, check_now), (check_now - 3000, check_now - 60)):
            (w_start, w_end, w_step), w_values = whisper.fetch(str(path), start, end, check_now)
            ours = reader.fetch([name], start, end, check_now)[name]
            assert (ours.start, ours.end, ours.step) == (w_start, w_end, w_step), name
            assert ours.values_list() == w_values, (name, start, end)
            compared += sum(v is not None for v in w_values)
    assert compared > 1000


def test_restart_keeps_metadata_and_store_errors_are_retried_then_counted(tmp_path):
    url, accessor = make_store(tmp_path)
    now = int(time.time())
    root = tmp_path / "carbon"
    # run 1, as a daemon (fork; pidfile and logs where carbon.conf says): rules A create app.r.x
    carbon = CarbonCache(root, url, schemas=(("carbon", r"^carbon\.", "1s:1h"), ("a", ".*", "10s:1h")))
    carbon.start(daemon=True)
    assert carbon.pidfile.exists()
    carbon.send_plaintext([("app.r.x", float(now - 60), 1.0)])
    carbon.stop()  # `bgl-carbon-cache stop`: SIGTERM through the pidfile
    assert str(accessor.get_metric("app.r.x").retention) == "360*10s"
    assert "totals since start: storedPoints=" in carbon.log()

    # run 2: different rules, a short lock timeout and quick retries
    carbon = CarbonCache(root, url + "?timeout=0.2",
                         schemas=(("carbon", r"^carbon\.", "1s:1h"), ("b", ".*", "1m:1d")),
                         aggregation=(("all", ".*", 0.0, "sum"),),
                         settings={"CARBON_METRIC_INTERVAL": 1, "BG_RETRIES": 3, "BG_RETRY_DELAY": 0.2})
    carbon.start()
    try:
        carbon.send_plaintext([("app.r.x", float(now - 30), 2.0), ("app.r.y", float(now - 120), 3.0)])
        # CarbonLink metadata, answered from memory: app.r.x was looked up when written
        deadline = time.monotonic() + 30
        while True:
            answer = carbonlink_request(carbon.query_port, {"type": "get-metadata", "metric": "app.r.x",
                                                            "key": "aggregationMethod"})
            if "value" in answer or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert answer == {"value": "average"}
        answer = carbonlink_request(carbon.query_port, {"type": "set-metadata", "metric": "app.r.x",
                                                        "key": "xFilesFactor", "value": 0.25})
        assert answer == {"old_value": 0.5, "new_value": 0.25}
        answer = carbonlink_request(carbon.query_port, {"type": "get-metadata", "metric": "app.r.y",
                                                        "key": "nope"})
        assert "Unsupported metadata key" in answer["error"]
        _wait_until(lambda: Accessor.from_url(url).get_metric("app.r.x").metadata.xfilesfactor == 0.25)
        _wait_for_point(url, "app.r.y")

        # a transient store failure: another writer holds the lock until app.r.z's write failed once
        blocker = sqlite3.connect(str(tmp_path / "bgl.db"), isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        mark = len(carbon.log())
        carbon.send_plaintext([("app.r.z", float(now - 60), 4.0)])
        _wait_for_log_line(carbon, mark, "failed (attempt 1)")  # app.r.z's, or the self-metrics' it waits behind
        blocker.execute("COMMIT")
        _wait_for_point(url, "app.r.z")  # the retry stored it

        # a lasting failure that can recover (the store is locked): retried past BG_RETRIES,
        # never dropped, stored once the lock is released
        blocker.execute("BEGIN IMMEDIATE")
        mark = len(carbon.log())
        carbon.send_plaintext([("app.r.w", float(now - 60), 5.0)])
        _wait_for_log_line(carbon, mark, "failed (attempt 6)", "until the store takes it")
        assert "biggraphite_like: dropped" not in carbon.log()[mark:]
        blocker.execute("COMMIT")
        blocker.close()
        _wait_for_point(url, "app.r.w")
    finally:
        code = carbon.stop()
    assert code in SIGTERM_EXIT, carbon.log()[-3000:]

    reader = Accessor.from_url(url)
    x = reader.get_metric("app.r.x").metadata
    assert (str(x.retention), x.aggregator.value, x.xfilesfactor) == ("360*10s", "average", 0.25)
    y = reader.get_metric("app.r.y").metadata
    assert (str(y.retention), y.aggregator.value, y.xfilesfactor) == ("1440*60s", "sum", 0.0)
    check_now = int(time.time())
    values = stored_values(reader, ["app.r.x", "app.r.y", "app.r.z"], now - 600, check_now)
    assert values["app.r.x"] == {now - 60 - (now - 60) % 10: 1.0, now - 30 - (now - 30) % 10: 2.0}
    assert list(values["app.r.y"].values()) == [3.0]
    assert list(values["app.r.z"].values()) == [4.0]
    assert list(stored_values(reader, ["app.r.w"], now - 600, check_now)["app.r.w"].values()) == [5.0]
    totals = re.findall(r"droppedPoints=(\d+),", carbon.full_log())
    assert totals == ["0", "0"]  # neither run dropped anything, run 2 not even while locked


def _wait_until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def _wait_for_log_line(carbon: CarbonCache, start: int, *parts: str, timeout: float = 60.0) -> None:
    """Wait for one line of carbon's log (after offset start) holding every part."""
    deadline = time.monotonic() + timeout
    while not any(all(p in line for p in parts) for line in carbon.log()[start:].splitlines()):
        assert time.monotonic() < deadline, carbon.log()[start:][-3000:]
        time.sleep(0.1)


def _wait_for_point(url: str, name: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        accessor = Accessor.from_url(url)  # a fresh one: no cached metadata
        metric = accessor.get_metrics([name])
        if metric:
            now = int(time.time())
            series = accessor.fetch([name], now - 600, now, now)[name]
            if series is not None and not np.isnan(series.values).all():
                return
        time.sleep(0.1)
    raise AssertionError(f"{name} has no point after {timeout}s")


def test_in_process_lookups_are_batched_and_writes_flushed_without_further_writes(tmp_path):
    """The database object outside the daemon, with carbon's real settings and cache objects."""
    from carbon.cache import MetricCache
    from carbon.conf import Settings

    url, accessor = make_store(tmp_path)
    stored = MetricMetadata.create("10s:1h", "max", 0.0)
    accessor.create_metrics([(f"pre.m{i}", stored) for i in range(3)])
    settings = Settings()
    settings.update(BG_STORE=url, BG_FLUSH_INTERVAL=0.2, BG_WRITER_PROCESS="false")  # the daemon tests cover the child
    database = BigGraphiteLikeDatabase(settings)
    now = int(time.time())
    waiting = ["pre.m0", "pre.m1", "pre.m2", "new.m"]
    cache = MetricCache()
    for name in waiting:  # the names carbon's writer will ask about next
        cache.store(name, (now, 1.0))
    try:
        assert database.exists("pre.m1")
        assert database.stats.totals()["lookups"] == 1  # one query answered every waiting name
        assert database.exists("pre.m0") and database.exists("pre.m2") and not database.exists("new.m")
        assert database.stats.totals()["lookups"] == 1
        assert database.getMetadata("pre.m2", "aggregationMethod") == "max"
        with pytest.raises(MetadataNotLoaded, match="ask again"):
            database.getMetadata("never.seen", "xFilesFactor")
        database.create("new.m", [(60, 1440)], None, None)
        assert database.getMetadata("new.m", "xFilesFactor") == 0.5  # carbon's None: the default
        database.write("new.m", [(now - 60, 5.0)])
        database.write("pre.m0", [(now - 10, 6.0)])
        # no further write: the flusher writes them within BG_FLUSH_INTERVAL of their arrival
        _wait_for_point(url, "new.m")
        _wait_for_point(url, "pre.m0")
        metric = Accessor.from_url(url).get_metric("new.m")
        assert (str(metric.retention), metric.metadata.aggregator.value) == ("1440*60s", "average")
        assert Accessor.from_url(url).get_metric("pre.m0").metadata == stored
    finally:
        database.close()
        for name in waiting:
            cache.pop(name)


def test_writer_process_is_replaced_when_it_dies(tmp_path):
    """The child that writes the store: a dead one is replaced, no batch is lost with it."""
    from carbon_plugin.writer_process import ProcessWriter

    url, accessor = make_store(tmp_path)
    metadata = MetricMetadata.create("60s:1d")
    now = int(time.time())
    writer = ProcessWriter(url)
    try:
        # flat arrays over the pipe: point i is (timestamps[i], values[i]) of names[owner[i]]
        result = writer.insert_columns(["proc.a", "proc.c"], np.array([0, 1, 1]),
                                       np.array([now - 120, now - 180, now - 120], dtype=np.float64),
                                       np.array([1.0, 3.5, -4.25]), now, [metadata, metadata])
        assert (result.stored, result.created) == (3, 2)
        first = writer._process
        first.kill()
        first.join()
        result = writer.insert_columns(["proc.b"], np.array([0]), np.array([now - 60.0]), np.array([2.0]),
                                       now, [metadata])  # a new child
        assert result.stored == 1 and writer._process.pid != first.pid
        result = writer.insert_columns(["proc.unknown"], np.array([0]), np.array([now - 60.0]), np.array([2.0]),
                                       now, None)  # no metadata: an unknown metric is refused, not created
        assert (result.stored, result.rejected) == (0, 1) and "does not exist" in result.errors[0]
    finally:
        writer.close()
    assert writer._process is None
    values = stored_values(Accessor.from_url(url), ["proc.a", "proc.b", "proc.c"], now - 600, now)
    assert values == {"proc.a": {now - 120 - (now - 120) % 60: 1.0}, "proc.b": {now - 60 - (now - 60) % 60: 2.0},
                      "proc.c": {now - 180 - (now - 180) % 60: 3.5, now - 120 - (now - 120) % 60: -4.25}}
