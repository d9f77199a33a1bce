"""The peer benchmark's harness (bench/peer_bench.py, bench/peer/) at tiny sizes, on the real
systems: `bgl run` and VictoriaMetrics (Debian's victoria-metrics; scripts/test.sh installs
it as root). Both must return exactly the points sent, for the ingest and the render parts;
every new row compares its answers; no timed find repeats a pattern; a probe's cost is not
counted in a system's CPU; the find part names VictoriaMetrics' glob gaps.
"""
from __future__ import annotations

import argparse
import functools
import math
import time
from collections import Counter

import pytest

from bench import peer_bench, victoria
from bench.__main__ import peer_rows
from bench.carbon_bench import make_input
from bench.peer import probes
from bench.peer.common import plaintext
from bench.peer.table import RATIOS
from tests.carbon_env import send_to_carbon

DAY_END = int(time.time()) // 3600 * 3600 - 5 * 3600  # --day-end: the day part's day ends 5 to 6 hours ago
SIZES = dict(peer_bench.SIZES["quick"], metrics=40, points=3, existing_rounds=2, day_series=6, wide_series=30,
             names=3_000, find_runs=3, find_budget=2.0, cached_runs=3, render_runs=2, render_budget=1.0,
             tags_series=300, tags_runs=3, idle_seconds=1.0, idle_timeout=20.0)
VM_GAP_CLASSES = {"braces and ?", "big: ** then a leaf"}  # VictoriaMetrics answers `?` and `tree.**.cpuN` with nothing


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
    for side in ("ours", "vm"):  # followed by their probes: until readable, then until idle
        assert set(figures["ingest"]["idle"][side]) == {"rate", "per_call", "seconds"}
        for r in rounds[side]:
            assert r["idle_reached"] and r["readable_seconds"] <= r["idle_seconds"] + 1e-6
            assert 0 <= r["cpu_readable"] <= r["cpu_readable_raw"] and r["cpu_readable_raw"] <= r["cpu_idle_raw"] + 1e-9


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
    btrees = day["day"]["ours"]["parts"]["btrees"]  # dbstat's cut of every table and index adds up to their pages
    assert {"datapoints_11520p_60s_0", "metrics", "metrics_child", "metrics_leaf"} <= set(btrees)
    for name, cut in btrees.items():
        assert cut["payload"] + cut["unused"] + cut["overhead"] == cut["bytes"] and min(cut.values()) >= 0, name
    assert sum(cut["bytes"] for name, cut in btrees.items() if name.startswith("datapoints_")) \
        == day["day"]["ours"]["parts"]["points"]


def test_wide_renders_and_sums_are_the_points_sent(figures):
    day = figures["day"]
    renders = {row["target"]: row for row in day["renders"]}
    assert set(renders) == {"day.*.*", "sumSeries(day.*.*)", "wide.*.*", "sumSeries(wide.*.*)"}
    for target, row in renders.items():
        minutes = 1440 if target.startswith(("day", "sumSeries(day")) else 60
        series = SIZES["day_series"] if minutes == 1440 else SIZES["wide_series"]
        for side in ("ours", "vm"):  # the sum: one series, a value a minute
            assert row["answers"][side]["mismatches"] == 0, (target, side, row["answers"][side])
            assert row["answers"][side]["points"] == (minutes if target.startswith("sum") else series * minutes)
    for side, concurrent in day["concurrent"].items():  # 4 renders at once, finds meanwhile
        assert [r["status"] for r in concurrent["renders"]] == [200] * 4, (side, concurrent)
        assert concurrent["finds"] >= 1 and concurrent["find_errors"] == 0


def test_no_timed_find_repeats_a_pattern(figures):
    find = figures["find"]
    timed = [pattern for rows in find["find"].values() for row in rows for pattern in row["patterns"]]
    assert len(timed) == len(set(timed)), [p for p, n in Counter(timed).items() if n > 1]
    assert {row["kind"] for row in find["find"]["treejson"]} == set(find["classes"])
    assert all(row["runs"] >= 1 for rows in find["find"].values() for row in rows)
    assert not {row["pattern"] for row in find["cached"]} & set(timed)  # the repeated ones: another figure
    for side, concurrent in figures["day"]["concurrent"].items():
        assert len(concurrent["patterns"]) == len(set(concurrent["patterns"])), side
    for row in figures["tags"]["queries"]:  # tags: every expression distinct too
        asked = [repr(request) for request in row["requests"]]
        assert len(asked) == len(set(asked)) == row["runs"], row["kind"]


def test_find_answers_compared_and_victoria_metrics_glob_gaps_named(figures):
    find = figures["find"]
    gaps = {gap["pattern"]: gap for gap in find["gaps"]}
    assert gaps["gaps.a?"]["ours"] == ["gaps.ab", "gaps.ac"]
    assert gaps["gaps.a[!b]"]["ours"] == ["gaps.ac"]
    assert not gaps["gaps.a?"]["same"] and not gaps["gaps.a[!b]"]["same"]
    for fmt, rows in find["find"].items():
        for row in rows:
            assert row["errors"] == {"ours": [], "vm": []}, (fmt, row)
            assert row["same"] == (row["kind"] not in VM_GAP_CLASSES), (fmt, row["kind"], row["differ"])
    wide = {row["kind"]: row for row in find["find"]["json"]}  # JSON: every path; the big classes' answers
    assert wide["big: a host wildcard"]["nodes_median"] == SIZES["names"] // 100
    assert wide["big: ** then a leaf"]["nodes_median"] == SIZES["names"] // 10


def test_names_created_on_both_then_measured(figures):
    find = figures["find"]
    for side in ("ours", "vm"):
        create = find["create"][side]
        assert create["points"] == find["names"] and create["idle_reached"]
        assert 0 <= create["cpu_readable"] <= create["cpu_readable_raw"]
        size = find["name_bytes"][side]
        assert 0 < size["points_bytes"] < size["bytes"] and size["bytes_per_name"] > 0
        assert find["receiver_peak_rss_bytes"][side] > 0
    assert find["web_worker_peak_rss_bytes"] > 0


def test_tags_answers_compared(figures):
    tags = figures["tags"]
    assert tags["index"]["ours"]["points"] == tags["index"]["vm"]["points"] == SIZES["tags_series"]
    rows = {row["kind"]: row for row in tags["queries"]}
    for kind, row in rows.items():
        assert row["errors"] == {"ours": [], "vm": []}, (kind, row["errors"])
        if kind.startswith("find"):  # findSeries: the same series on both
            assert row["same"], (kind, row["differ"])
    ours, vm = tags["bytes"]["ours"], tags["bytes"]["vm"]  # the tag index within the store less its points
    assert 0 < ours["tag_bytes"] < ours["bytes"] - ours["points_bytes"]
    assert ours["bytes_per_series"] == pytest.approx((ours["bytes"] - ours["points_bytes"]) / SIZES["tags_series"])
    assert 0 < vm["points_bytes"] < vm["bytes"] and vm["bytes_per_series"] > 0
    rows = [row[1] for row in peer_rows({"tags": tags})[0]]
    assert sum(row.startswith("tags: bytes on disk per series") for row in rows) == 1


def test_a_probe_costs_its_system_nothing_in_the_figures(tmp_path):
    """A deliberately costly probe (a full /api/v1/export at each call) raises VictoriaMetrics'
    raw CPU over the window, but not its figure: the probe's cost, measured idle, is taken off.
    Counting the probe (the old checker) moves the figure by about that whole cost."""
    try:
        victoria.binary(install=False)
    except victoria.PeerUnavailable as error:
        pytest.skip(str(error))

    class CostlyProbe(probes.VmProbe):
        def state(self) -> dict[str, float]:
            for _ in range(3):
                list(self.vm.export('{__name__=~"bench\\\\..*"}', now - 86400, now + 60))
            return super().state()

    vm = victoria.VictoriaMetrics(tmp_path / "vm")
    vm.start()
    try:
        now = int(time.time())
        rounds = [make_input(5_000, 3, r, now, 3)[1] for r in range(3)]
        pid = vm.process.pid

        def load(messages, probe, idle):
            send = functools.partial(send_to_carbon, vm.graphite_port, plaintext(messages))
            return probes.load(pid, send, probe, len(messages), idle, timeout=120, idle_timeout=20)

        cheap, costly = probes.VmProbe(vm), CostlyProbe(vm)
        cheap_idle = probes.measure_idle(pid, cheap, 1.5)
        load(rounds[0], cheap, cheap_idle)  # creates the metrics
        costly_idle = probes.measure_idle(pid, costly, 1.5)
        plain = load(rounds[1], cheap, cheap_idle)
        probed = load(rounds[2], costly, costly_idle)
    finally:
        vm.stop()
    charged = costly_idle.charge(probed["readable_seconds"], probed["probe_calls"])
    assert probed["cpu_readable_raw"] - plain["cpu_readable_raw"] > 0.5 * charged > 0.05, (plain, probed)
    assert abs(probed["cpu_readable"] - plain["cpu_readable"]) <= 0.5 * charged + 0.05, (plain, probed)


def test_table_has_every_peer_ratio(figures):
    rows, ratios = peer_rows(figures)
    assert set(ratios) == set(RATIOS)
    assert all(math.isfinite(value) and value > 0 for value in ratios.values()), ratios
    assert all(row[2] or row[3] for row in rows), rows


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
