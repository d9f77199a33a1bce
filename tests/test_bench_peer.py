"""The peer benchmark's harness (bench/peer_bench.py) at tiny sizes, on the real systems:
`bgl run` and VictoriaMetrics (Debian's victoria-metrics; scripts/test.sh installs it as
root). Both must return exactly the points sent, for the ingest and the render parts, and
the find part must name VictoriaMetrics' glob gaps.
"""
from __future__ import annotations

import argparse
import math
import time

import pytest

from bench import peer_bench, victoria
from bench.__main__ import peer_rows
from bench.carbon_bench import make_input

DAY_END = int(time.time()) // 3600 * 3600 - 5 * 3600  # --day-end: the day part's day ends 5 to 6 hours ago
SIZES = dict(peer_bench.SIZES["quick"], metrics=40, points=3, existing_rounds=2, day_series=6, names=300, find_runs=3, find_budget=0.5,
             render_runs=2, render_budget=1.0)


@pytest.fixture(scope="module")
def figures(tmp_path_factory) -> dict:
    try:
        victoria.binary(install=False)
    except victoria.PeerUnavailable as error:
        pytest.skip(str(error))
    return peer_bench.run(tmp_path_factory.mktemp("peer"), SIZES, timeout=300, day_end=DAY_END)


def test_ingest_both_systems_return_every_point_sent(figures):
    sent = [message for r in (0, 1, 2) for message in make_input(SIZES["metrics"], SIZES["points"], r, 0, 3)[1]]
    total = math.fsum(value for _, (_, value) in sent)
    answers = figures["ingest"]["answers"]
    for side in ("ours", "ours_carbon", "vm"):  # bgl run (receiver), bgl run --carbon, VictoriaMetrics
        assert answers[side]["mismatches"] == 0, (side, answers[side])
        assert answers[side]["points"] == len(sent) == SIZES["metrics"] * SIZES["points"] * 3
        assert answers[side]["value_sum"] == pytest.approx(total)
    rounds = figures["ingest"]["rounds"]
    assert set(rounds) == {"ours", "ours_carbon", "whisper", "vm"}
    assert all([r["round"] for r in side] == ["new", "existing", "existing"] for side in rounds.values())
    for side, summary in figures["ingest"]["summary"].items():  # the median of the existing rounds
        assert summary["new"] == rounds[side][0] and summary["existing"]["rounds"] == 2
        assert summary["existing"]["points_per_second"] == pytest.approx(
            (rounds[side][1]["points_per_second"] + rounds[side][2]["points_per_second"]) / 2)
    assert set(figures["ingest"]["receiver_peak_rss_bytes"]) == set(rounds)
    assert all(r["points_per_second"] > 0 and r["cpu_seconds"] >= 0 for side in rounds.values() for r in side)


def test_render_and_query_range_return_the_same_day(figures):
    day = figures["day"]
    assert day["end"] == DAY_END  # the day asked for, which both sides return whole
    points = SIZES["day_series"] * 1440
    sent = math.fsum(value for _, (_, value) in peer_bench.day_messages(SIZES["day_series"], 0))
    for side in ("ours", "vm", "vm_export"):
        assert day["answers"][side]["mismatches"] == 0, (side, day["answers"][side])
        assert day["answers"][side]["points"] == points
        assert day["answers"][side]["value_sum"] == pytest.approx(sent)
    assert day["day"]["ours"]["bytes_per_point"] > 0 and day["day"]["vm"]["bytes_per_point"] > 0
    tables = day["day"]["ours"]["parts"]["tables"]  # bytes a table (a datapoints table a stage) add up to the parts
    assert {"datapoints_11520p_60s_0", "datapoints_17520p_3600s_aggr", "metrics"} <= set(tables)
    assert sum(size for name, size in tables.items() if name.startswith("datapoints_")) == day["day"]["ours"]["parts"]["points"]


def test_find_names_victoria_metrics_glob_gaps(figures):
    gaps = {gap["pattern"]: gap for gap in figures["find"]["gaps"]}
    assert gaps["gaps.a?"]["ours"] == ["gaps.ab", "gaps.ac"]
    assert gaps["gaps.a[!b]"]["ours"] == ["gaps.ac"]
    assert not gaps["gaps.a?"]["same"] and not gaps["gaps.a[!b]"]["same"]
    assert all(row["same"] for row in figures["find"]["find"] if "?" not in row["pattern"])


def test_table_has_every_peer_ratio(figures):
    rows, ratios = peer_rows(figures)
    assert set(ratios) == {"ingest_vs_vm", "ingest_cpu_vs_vm", "bytes_vs_vm", "find_http_vs_vm", "fetch_http_vs_vm"}
    assert all(math.isfinite(value) and value > 0 for value in ratios.values()), ratios
    assert all(row[2] for row in rows), rows


def test_day_end_takes_a_past_utc_minute_and_refuses_others():
    hour_ago = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() - 3600))
    assert peer_bench.day_end_time(hour_ago) == (int(time.time()) - 3600) // 60 * 60
    for text, reason in (("23:50", "YYYY-MM-DDTHH:MM"), (time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() + 600)),
                                                         "between 7 days and 2 minutes ago"),
                         ("2020-01-01T00:00", "between 7 days and 2 minutes ago")):
        with pytest.raises(argparse.ArgumentTypeError, match=reason):
            peer_bench.day_end_time(text)


def test_compare_reports_a_wrong_value_or_a_missing_point():
    expected = {"a.b": {60: 1.0, 120: 2.0}}
    assert peer_bench.compare(expected, {"a.b": {60: 1.0, 120: 2.0}})["mismatches"] == 0
    assert peer_bench.compare(expected, {"a.b": {60: 1.0, 120: 2.5}})["mismatch_examples"] == ["a.b"]
    assert peer_bench.compare(expected, {"a.b": {60: 1.0}})["mismatches"] == 1
