"""Accessor.insert_columns on a real SQLite file: a batch of more metrics than
max_metrics_per_write is written in parts, in one transaction, with the same result as
one part."""
from __future__ import annotations

import sqlite3
import time

import numpy as np
import pytest

from biggraphite_like.metric import MetricMetadata
from tests.store_env import make_store, stored_values

METADATA = MetricMetadata.create("60s:1d,1h:7d")


def columns(count: int, points: int, minute: int):
    """Names, owner, timestamps, values: point k of every metric, metric-major interleaved."""
    names = [f"cols.m{i:03d}" for i in range(count)]
    owner = np.tile(np.arange(count), points)
    timestamps = np.repeat(minute - 60 * np.arange(points, 0, -1), count).astype(np.float64)
    values = owner * 10.0 + np.repeat(np.arange(points), count)
    return names, owner, timestamps, values


@pytest.mark.parametrize("per_write", [3, 1000])
def test_parts_store_what_one_write_stores(tmp_path, per_write):
    url, accessor = make_store(tmp_path)
    accessor.max_metrics_per_write = per_write
    now = int(time.time())
    minute = now - now % 60
    names, owner, timestamps, values = columns(10, 4, minute)
    first = accessor.insert_columns(names, owner, timestamps, values, now=now, create=METADATA)
    assert (first.stored, first.created, first.rejected) == (40, 10, 0)
    # a second batch on the existing metrics, one invalid value among them
    values2 = values + 0.5
    values2[7] = np.nan
    second = accessor.insert_columns(names, owner, timestamps + 240, values2, now=now + 240, create=METADATA)
    assert (second.stored, second.created, second.rejected) == (39, 0, 1)
    stored = stored_values(accessor, names, minute - 600, now + 240)
    for i, name in enumerate(names):
        expected = {minute - 60 * (4 - k): i * 10.0 + k for k in range(4)}
        expected.update({minute + 240 - 60 * (4 - k): i * 10.0 + k + 0.5 for k in range(4)})
        if i == 7:  # point 7 of the second batch is metric 7's first one
            del expected[minute + 240 - 240]
        assert stored[name] == expected, name


def test_a_failing_part_rolls_back_every_part(tmp_path):
    url, accessor = make_store(tmp_path)
    accessor.max_metrics_per_write = 3
    now = int(time.time())
    names, owner, timestamps, values = columns(10, 2, now - now % 60)

    def metadata_for(name: str) -> MetricMetadata:
        if name == "cols.m008":  # the third part: two parts are written by then
            raise RuntimeError("no rule for cols.m008")
        return METADATA

    with pytest.raises(RuntimeError, match="cols.m008"):
        accessor.insert_columns(names, owner, timestamps, values, now=now, create=metadata_for)
    assert accessor.get_metrics(names) == {}  # not even from the accessor's cache
    with sqlite3.connect(tmp_path / "bgl.db") as db:
        assert db.execute("SELECT count(*) FROM metrics").fetchone() == (0,)
    again = accessor.insert_columns(names, owner, timestamps, values, now=now, create=METADATA)
    assert (again.stored, again.created) == (20, 10)


def test_batches_across_an_hour_read_back_only_hours_they_never_wrote(tmp_path):
    """What the downsampler needs to recompute the hours a batch touches is in memory, or
    known empty: a batch creating its metrics reads none of their points back, one whose
    points straddle an hour reads back only the hour it starts, and the next one nothing
    (issue 21: before, they read back 20, 40 and 20 hours). The points and the hourly
    averages are exact, and created metrics' updated_on is not written a second time."""
    url, accessor = make_store(tmp_path)
    reads, touches = [], []
    read_points, touch_metrics = accessor.store.read_points, accessor.store.touch_metrics
    accessor.store.read_points = lambda *a: reads.append(len(a[1])) or read_points(*a)
    accessor.store.touch_metrics = lambda names, *a: touches.append(len(names)) or touch_metrics(names, *a)
    now = int(time.time())
    hour = now - now % 3600 - 3600
    batches = [columns(20, 5, end) for end in (hour - 300, hour + 120, hour + 420)]  # :50-:54, :57-:01, :02-:06
    every_point = MetricMetadata.create("60s:1d,1h:7d", "average", 0.0)  # an hour propagates from its first minute
    results = [accessor.insert_columns(names, owner, ts, values, now=now, create=every_point)
               for names, owner, ts, values in batches]
    assert [(r.stored, r.created) for r in results] == [(100, 20), (100, 0), (100, 0)]
    assert reads == [20]  # the second batch's new hour, once per metric
    assert touches == []  # created at `now`: their updated_on is written by creation
    names = batches[0][0]
    expected: dict[str, dict[int, float]] = {name: {} for name in names}
    for _, owner, ts, values in batches:
        for i, t, v in zip(owner.tolist(), ts.tolist(), values.tolist()):
            expected[names[i]][int(t)] = v
    stored = stored_values(accessor, names, hour - 3600, now)
    grids, _ = accessor.fetch_grids(names, now - 7 * 24 * 3600, now, now)  # served by the hourly stage
    assert len(grids) == 1 and grids[0].step == 3600
    for row, name in enumerate(names):
        assert stored[name] == expected[name], name
        for start in (hour - 3600, hour):
            minutes = [v for t, v in expected[name].items() if start <= t < start + 3600]
            assert grids[0].grid[row][(start - grids[0].start) // 3600] == sum(minutes) / len(minutes), name


def test_writes_keep_no_mark_a_metric_and_record_updated_on_once_a_touch_interval(tmp_path):
    """Issue 36 item 4: a writer's touch of updated_on follows each metric's own
    updated_on (as stored or as written), not a name -> time mark a metric it ever wrote."""
    url, accessor = make_store(tmp_path)
    touches = []
    touch_metrics = accessor.store.touch_metrics
    accessor.store.touch_metrics = lambda names, *a: touches.append(sorted(names)) or touch_metrics(names, *a)
    now = int(time.time())
    names, owner, timestamps, values = columns(30, 2, now - now % 60)
    accessor.insert_columns(names, owner, timestamps, values, now=now, create=METADATA)
    accessor.insert_columns(names[:10], owner[owner < 10], timestamps[owner < 10] + 60, values[owner < 10],
                            now=now + 60)
    assert touches == [] and accessor._touched["updated_on"] == {}
    later = now + accessor.touch_interval
    accessor.insert_columns(names[:10], owner[owner < 10], timestamps[owner < 10] + 120, values[owner < 10],
                            now=later)
    accessor.insert_columns(names[:10], owner[owner < 10], timestamps[owner < 10] + 180, values[owner < 10],
                            now=later + 60)
    assert touches == [sorted(names[:10])]  # once, at the first write a touch interval after creation
    assert accessor._touched["updated_on"] == {}
    accessor._cache.clear()
    assert {accessor.get_metric(n).updated_on for n in names} == {now, later}
    assert {accessor.get_metric(n).updated_on for n in names[:10]} == {later}


def test_interleaved_points_keep_the_greatest_timestamp_of_a_slot_then_the_last_given(tmp_path):
    """The receiver's batches come metric after metric for each minute, not grouped: the
    downsampler sorts them (issue 32: one stable sort of a packed (metric, timestamp) key)
    so that in a 60-s slot the greatest timestamp wins and, of equal timestamps, the last
    given; the 1 h stage gets the average of what stays (xFilesFactor 0)."""
    _, accessor = make_store(tmp_path)
    now = int(time.time())
    hour = now - now % 3600 - 3600  # a whole past hour: every point in stage 0, its hour propagated
    names = ["ties.a", "ties.b"]
    given = [  # (metric, timestamp, value), in arrival order
        (0, hour + 70, 1.0), (1, hour + 70, 10.0),
        (0, hour + 65, 2.0), (1, hour + 119, 20.0),  # a's 65 loses to its 70 (same slot); b's 119 wins
        (0, hour + 70, 3.0), (1, hour + 61, 30.0),  # a's second 70 is the last given of the greatest
        (0, hour + 5, 4.0), (1, hour + 125, 40.0),
    ]
    owner = np.array([m for m, _, _ in given])
    timestamps = np.array([t for _, t, _ in given], dtype=np.float64)
    values = np.array([v for _, _, v in given])
    result = accessor.insert_columns(names, owner, timestamps, values, now=now,
                                     create=MetricMetadata.create("60s:1d,1h:7d", "average", 0.0))
    assert (result.stored, result.rejected) == (8, 0)
    stored = stored_values(accessor, names, hour - 60, hour + 3600)
    assert stored["ties.a"] == {hour: 4.0, hour + 60: 3.0}
    assert stored["ties.b"] == {hour + 60: 20.0, hour + 120: 40.0}
    hourly = accessor.fetch(names, hour - 3600, hour + 3600, now=now + 2 * 86400)  # past stage 0: the 1 h stage
    assert [v for v in hourly["ties.a"].values_list() if v is not None] == [3.5]
    assert [v for v in hourly["ties.b"].values_list() if v is not None] == [30.0]
