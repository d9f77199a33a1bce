"""Day: S series x 1 day at 60 s sent over plaintext to both systems (random two-decimal
values, then on fresh stores realistic gauges and counters): disk bytes per point after
each has flushed (ours: WAL checkpoint, bgl.db + bgl.db-wal, and under `parts` the bytes of
the datapoints tables, of the metadata tables and indexes and of free pages, and of each
table with its indexes (`tables`: a datapoints table a stage), from the store's `stats`;
VictoriaMetrics: /internal/force_flush, every file under its data directory). Then the
renders (bench/peer/renders.py) of those series and of W series x 1 hour loaded after the
bytes were measured, and graphite-web's `/render` of the day against VictoriaMetrics'
`/api/v1/export` (raw points).
"""
from __future__ import annotations

import math
import random
import time
import urllib.parse
from pathlib import Path

from bench.carbon_bench import Checker
from bench.graphite_bench import side_by_side
from bench.peer import renders
from bench.peer.common import (Systems, renamed, compare, expected_points, log, ours_disk_parts, plaintext,
                               run_round, vm_points)

WIDE_MINUTES = 60


def day_messages(series: int, end: int) -> list[tuple[str, tuple[float, float]]]:
    """`day.hostNNNN.cpuN` x 1,440 minutes ending at `end`; values like a percentage with two
    decimals, pseudo-random (a regular sequence would compress to almost nothing in
    VictoriaMetrics, which no real metric does)."""
    return renders.series_messages("day", series, end, 1440, seed=1)


def realistic_day_messages(series: int, end: int) -> list[tuple[str, tuple[float, float]]]:
    """`real.hostNNNN.gaugeN` / `.counterN` x 1,440 minutes ending at `end`, as hosts report
    them: half gauges (a percentage wandering by small steps, two decimals), half counters
    (an integer total growing by a random amount each minute, as bytes or requests)."""
    rng = random.Random(2)
    series_values: list[tuple[str, list[float]]] = []
    for i in range(series):
        kind = "gauge" if i % 2 == 0 else "counter"
        name = f"real.host{i // 10:04d}.{kind}{i % 10}"
        level, values = rng.uniform(0, 100) if kind == "gauge" else float(rng.randrange(10**9)), []
        for _ in range(1440):
            if kind == "gauge":
                level = min(100.0, max(0.0, level + rng.gauss(0, 0.5)))
                values.append(round(level, 2))
            else:
                level += rng.randrange(0, 1000)
                values.append(level)
        series_values.append((name, values))
    return [(name, (float(end - 60 * (1439 - minute)), values[minute]))
            for minute in range(1440) for name, values in series_values]


def part_day(root: Path, series: int, wide_series: int, runs: int, budget: float, timeout: float,
             day_end: int | None = None) -> dict:
    """The day's load, bytes, answers and renders; the day ends 2 minutes ago, or at day_end
    (the bytes depend on how much of the day is still in the open window: see --day-end)."""
    now = int(time.time())
    end = (now - 120 if day_end is None else day_end) // 60 * 60
    start = end - 1439 * 60
    messages = day_messages(series, end)
    match = '{__name__=~"day\\\\..*"}'
    expected = expected_points(messages)
    figures: dict = {"series": series, "points": len(messages), "end": end, "load": {}, "day": {}}
    with Systems(root) as systems:
        figures["load"] = _load(systems, messages, match, timeout, bytes_of=figures["day"])
        figures["realistic"] = _realistic_day(root / "realistic", series, end, timeout)
        wide_end = (int(time.time()) - 120) // 60 * 60
        wide = renders.series_messages("wide", wide_series, wide_end, WIDE_MINUTES, seed=3)
        figures["wide_load"] = _load(systems, wide, '{__name__=~"wide\\\\..*"}', timeout)
        figures["expected"] = {"points": len(messages), "value_sum": math.fsum(v for _, (_, v) in messages)}
        log(f"peer renders: {series:,} series x 1 day, {wide_series:,} x {WIDE_MINUTES} minutes;"
            " ours /render vs /api/v1/query_range")
        wide_expected = expected_points(wide)
        cases = [renders.Case(systems, "day", total, start, end, expected) for total in (False, True)] + \
            [renders.Case(systems, "wide", total, wide_end - 60 * (WIDE_MINUTES - 1), wide_end, wide_expected)
             for total in (False, True)]
        figures["renders"] = renders.measure(cases, runs, budget)
        figures["answers"] = dict(figures["renders"][0]["answers"],
                                  vm_export=compare(expected, vm_points(systems.vm, match, start, end)))
        export = {"match[]": match, "start": start, "end": end}
        export_url = systems.vm.url + "/api/v1/export?" + urllib.parse.urlencode(export)
        figures["export"] = renamed(side_by_side(lambda: renders.http_get(cases[0].ours_url),
                                                  lambda: renders.http_get(export_url), runs, budget=budget))
        log(f"  export {figures['export']['vm_s'] * 1e3:,.0f} ms")
        hosts = [f"{prefix}.host{h:04d}.*" for prefix, count in (("wide", wide_series), ("day", series))
                 for h in range(-(-count // 10))]
        random.Random(4).shuffle(hosts)
        leaves = [f"wide.host{i // 10:04d}.cpu{i % 10}" for i in range(wide_series)]
        log(f"peer renders: {renders.CONCURRENT_RENDERS} x {cases[3].label} at once while finds go on")
        figures["concurrent"] = renders.concurrent(systems, cases[3], hosts + leaves)
        figures["peak_rss_bytes"] = systems.peak_rss()
    return figures


def _load(systems: Systems, messages: list[tuple[str, tuple[float, float]]], match: str, timeout: float,
          bytes_of: dict | None = None) -> dict:
    """Send the messages to both systems in turn, each until readable (bench-side reads); with
    `bytes_of`, the disk bytes per point of each store afterwards."""
    names = sorted({name for name, _ in messages})
    timestamps = sorted({int(ts) for _, (ts, _) in messages})
    payload = plaintext(messages)
    figures = {}
    for side in ("ours", "vm"):
        log(f"peer day: loading {len(messages):,} points into {side}")
        checker = Checker(names, timestamps, systems.reader(side, match, timestamps))
        figures[side] = run_round(systems.port(side), systems.pid(side), payload, len(messages), checker, timeout)
        if bytes_of is not None:
            size = systems.disk_bytes(side, len(messages))
            bytes_of[side] = {"bytes": size, "points": len(messages), "bytes_per_point": size / len(messages)}
            if side == "ours":
                bytes_of[side]["parts"] = ours_disk_parts(systems.ours)
            log(f"  {figures[side]['points_per_second']:,.0f} points/s; {size / len(messages):.2f} bytes/point")
    return figures


def _realistic_day(root: Path, series: int, end: int, timeout: float) -> dict:
    """Disk bytes per point of realistic gauges and counters (1 day at 60 s) on fresh stores."""
    messages = realistic_day_messages(series, end)
    figures: dict = {}
    with Systems(root) as systems:
        _load(systems, messages, '{__name__=~"real\\\\..*"}', timeout, bytes_of=figures)
    return figures

