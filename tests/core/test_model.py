"""Unit tests of the metric model: names, retentions, aggregation, whisper's aggregate()."""
from __future__ import annotations

import os
import random
import tempfile

import numpy as np
import pytest
import whisper

from biggraphite_like import names
from biggraphite_like.aggregation import Aggregator, parse_xfilesfactor
from biggraphite_like.downsampling import aggregate, route
from biggraphite_like.errors import InvalidAggregation, InvalidMetricName, InvalidRetention, InvalidTimeRange
from biggraphite_like.metric import MetricMetadata, make_metric, metric_id
from biggraphite_like.retention import Retention, parse_duration


# -- names --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, canonical",
    [("a.b.c", "a.b.c"), ("a..b", "a.b"), (".a.b.", "a.b"), ("...a....b...", "a.b"), ("x", "x"),
     ("a-b_c:d;e=f@g", "a-b_c:d;e=f@g"), ("défaut.μs", "défaut.μs")],
)
def test_normalize(raw, canonical):
    assert names.normalize(raw) == canonical


@pytest.mark.parametrize(
    "raw, message",
    [("a b", "whitespace"), ("a\tb", "whitespace"), ("a\nb", "whitespace"), ("a\x00b", "control character"),
     ("a\x1bb", "control character"), ("a\x7fb", "control character"), ("a\u200bb", "control character"),
     ("a\u00a0b", "whitespace"), ("", "empty"), ("...", "empty"), ("a.__END__.b", "reserved"),
     (".".join(["c"] * 65), "65 components"), ("a." + "x" * 256, "at most 255")],
)
def test_normalize_rejects(raw, message):
    with pytest.raises(InvalidMetricName, match=message):
        names.normalize(raw)


def test_all_canonical_only_when_normalize_keeps_every_name():
    """The buffer's bulk check against normalize(), on random batches of names made of the
    characters that matter (dots, tag markers, whitespace and control bytes, non-ASCII,
    the end marker, long names): when it says True, normalize() returns each name as it
    is; and it says True for plain names."""
    rng = random.Random(36)
    pieces = ["a", "b", "cpu", ".", ".", "..", ";", "{", '"}', "=", " ", "\t", "\x00", "\x7f", "é", "__END__",
              "_", "-", "x" * 60]
    said_true = 0
    for _ in range(5000):
        batch = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 4))]
        if names.all_canonical(batch):
            said_true += 1
            for name in batch:
                assert names.normalize(name) == name, batch
    assert said_true > 100
    assert names.all_canonical([f"tree.dc{i % 4}.host{i:04d}.cpu{i % 10}" for i in range(1000)])
    assert names.all_canonical([".".join(["a"] * 64)]) and not names.all_canonical([".".join(["a"] * 65)])


def test_normalize_accepts_limits():
    assert len(names.normalize(".".join(["c"] * 64)).split(".")) == 64
    assert names.normalize("x" * 255) == "x" * 255


def test_normalize_rejects_non_strings():
    with pytest.raises(InvalidMetricName, match="string"):
        names.normalize(b"a.b")  # type: ignore[arg-type]


def test_ancestors_and_parent():
    assert names.ancestors("a.b.c") == ["a", "a.b"]
    assert names.ancestors("a") == []
    assert names.parent("a.b.c") == "a.b"
    assert names.parent("a") == ""


def test_metric_id_is_stable_and_name_derived():
    assert metric_id("a.b") == metric_id("a.b")
    assert metric_id("a.b") != metric_id("a.c")
    assert make_metric("..a..b", MetricMetadata.create("60s:1d")).id == metric_id("a.b")
    assert metric_id("a.b").version == 5


# -- retentions ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, stages",
    [
        ("10s:6h,1m:7d", [(10, 2160), (60, 10080)]),
        ("2160*10s:10080*60s", [(10, 2160), (60, 10080)]),
        ("60:1440", [(60, 1440)]),
        ("1m:1d", [(60, 1440)]),
        ("1min:1d", [(60, 1440)]),
        ("1h:1y", [(3600, 8760)]),
        ("1w:2y", [(604800, 104)]),
        ("10s:6h, 1m:7d", [(10, 2160), (60, 10080)]),
        ("1m:7d,10s:6h", [(10, 2160), (60, 10080)]),  # sorted as whisper.create does
    ],
)
def test_retention_spellings(text, stages):
    assert Retention.parse(text).as_tuples() == stages


def test_retention_from_carbon_tuples_and_back():
    retention = Retention.parse([(10, 2160), (60, 10080)])
    assert retention == Retention.parse("10s:6h,1m:7d")
    assert str(retention) == "2160*10s:10080*60s"
    assert Retention.parse(str(retention)) == retention
    assert retention.duration == 60 * 10080


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("10s", "precision:duration"),
        ("10x:6h", "invalid unit"),
        ("abc:6h", "invalid precision"),
        ("10*", "invalid precision"),
        ("x*10s", "points\\*precision"),
        ("10s:6h,10s:1d", "same precision"),
        ("10s:6h,15s:7d", "not a multiple"),
        ("10s:1h,60s:30m", "not more than"),
        ("10s:30s,60s:1h", "fewer points"),
        ("0s:1h", "positive"),
        ("10s:0", "positive"),
    ],
)
def test_retention_rejects(text, message):
    with pytest.raises(InvalidRetention, match=message):
        Retention.parse(text)


@pytest.mark.parametrize("text", ["10s:6h,1m:7d,1h:1y", "60s:1d", "1s:20s,5s:1m,30s:5m"])
def test_retention_rules_are_whispers(text):
    """Whatever we accept, whisper accepts: validateArchiveList does not raise."""
    whisper.validateArchiveList(Retention.parse(text).as_tuples())


def test_parse_duration():
    assert parse_duration("90") == 90
    assert parse_duration("2h") == 7200
    assert parse_duration("3d") == 3 * 86400
    with pytest.raises(InvalidRetention):
        parse_duration("-1h")


def test_read_window_is_whispers():
    """Stage choice and window alignment equal whisper.fetch's on an empty file."""
    retention = Retention.parse("10s:1m,60s:5m,300s:30m")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "w.wsp")
        whisper.create(path, retention.as_tuples())
        now = 1_700_000_123
        rng = random.Random(0)
        for _ in range(500):
            until = now - rng.randint(-100, 2000)
            start = until - rng.randint(0, 2500)
            expected = whisper.fetch(path, start, until, now=now)
            window = retention.read_window(start, until, now)
            if expected is None:
                assert window is None
            else:
                assert (window.start, window.end, window.step) == expected[0]
                assert window.size == len(expected[1])
    with pytest.raises(InvalidTimeRange, match="after until"):
        retention.read_window(10, 5, now)


# -- aggregation --------------------------------------------------------------------------
def test_aggregator_names():
    assert [a.value for a in Aggregator] == ["average", "sum", "last", "max", "min", "avg_zero", "absmax", "absmin"]
    assert Aggregator.parse(None) is Aggregator.AVERAGE
    assert Aggregator.parse("MAX") is Aggregator.MAX
    with pytest.raises(InvalidAggregation, match="use one of average, sum"):
        Aggregator.parse("median")


@pytest.mark.parametrize("value, expected", [(None, 0.5), ("0", 0.0), (1, 1.0), ("0.25", 0.25)])
def test_xfilesfactor(value, expected):
    assert parse_xfilesfactor(value) == expected


@pytest.mark.parametrize("value", ["-0.1", 1.5, "nan", "abc"])
def test_xfilesfactor_rejects(value):
    with pytest.raises(InvalidAggregation):
        parse_xfilesfactor(value)


@pytest.mark.parametrize("aggregator", list(Aggregator))
def test_aggregate_is_bit_for_bit_whispers(aggregator):
    rng = random.Random(aggregator.value)
    rows = []
    for _ in range(400):
        width = rng.choice([1, 2, 5, 6, 60])
        row = []
        for _ in range(width):
            if rng.random() < 0.4:
                row.append(None)
            else:
                row.append(rng.choice([rng.uniform(-1e9, 1e9), float(rng.randint(-3, 3)), rng.uniform(-1, 1) * 1e-12]))
        rows.append(row)
    for width in {len(r) for r in rows}:
        same = [r for r in rows if len(r) == width]
        grid = np.array([[np.nan if v is None else v for v in r] for r in same])
        xff = rng.choice([0.0, 0.3, 0.5, 1.0])
        values, counts, ok = aggregate(aggregator, grid, xff)
        for row, value, count, propagate in zip(same, values.tolist(), counts.tolist(), ok.tolist()):
            known = [v for v in row if v is not None]
            assert count == len(known)
            assert propagate == (bool(known) and len(known) / len(row) >= np.float32(xff))
            if known:
                assert value == whisper.aggregate(aggregator.value, known, row)


def test_route_is_whispers():
    metric = make_metric("r", MetricMetadata.create("10s:1m,60s:5m"))
    ages = np.array([-5, 0, 60, 61, 300, 301])
    assert route(metric, 1000 - ages, 1000).tolist() == [0, 0, 0, 1, 1, -1]
