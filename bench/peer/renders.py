"""Wide renders: what a dashboard asks of many series at once, on both systems.

For a prefix X holding `X.hostNNNN.cpuN` series (the day part's 1,000 series x 1 day, and
20,000 series x 1 hour here), graphite-web's `/render?format=json` of `X.*.*` and of
`sumSeries(X.*.*)` against VictoriaMetrics' `/api/v1/query_range` of
`{__graphite__="X.*.*"}` and `sum({__graphite__="X.*.*"})` (step 60 s): each answer is
compared with what was sent (the sum: per minute, over the series), then timed
interleaved. Then 4 wide renders at once while a client keeps asking finds, each find a
pattern not asked before (no glob-cache answer), from another client address: p50/p99 of
those finds, status and time of each render, on each system in turn.
"""
from __future__ import annotations

import http.client
import json
import math
import random
import statistics
import threading
import time
import urllib.parse

from bench.graphite_bench import percentile, side_by_side
from bench.peer.common import Points, Systems, renamed, compare, log, timed_get
from bench.victoria import http_get

CONCURRENT_RENDERS = 4


def series_messages(prefix: str, series: int, end: int, minutes: int, seed: int) -> list[tuple[str, tuple[float, float]]]:
    """`<prefix>.hostNNNN.cpuN` x `minutes` ending at `end`: two-decimal values, pseudo-random."""
    names = [f"{prefix}.host{i // 10:04d}.cpu{i % 10}" for i in range(series)]
    rng = random.Random(seed)
    return [(name, (float(end - 60 * age), round(rng.uniform(0, 100), 2)))
            for age in range(minutes - 1, -1, -1) for name in names]


def render_points(body: bytes, rename: str | None = None) -> Points:
    return {rename or series["target"]: {int(ts): float(v) for v, ts in series["datapoints"] if v is not None}
            for series in json.loads(body)}


def query_range_points(body: bytes, rename: str | None = None) -> Points:
    return {rename or series["metric"]["__name__"]: {int(ts): float(v) for ts, v in series["values"]}
            for series in json.loads(body)["data"]["result"]}


def summed(expected: Points) -> Points:
    """The `sum` series of the expected points: per timestamp, the sum over the series."""
    columns: dict[int, list[float]] = {}
    for points in expected.values():
        for ts, value in points.items():
            columns.setdefault(ts, []).append(value)
    return {"sum": {ts: math.fsum(values) for ts, values in columns.items()}}


class Case:
    """One render on both systems: its URLs and the answer expected."""

    def __init__(self, systems: Systems, prefix: str, total: bool, start: int, end: int, expected: Points):
        glob = f"{prefix}.*.*"
        target, query = (f"sumSeries({glob})", f'sum({{__graphite__="{glob}"}})') if total else \
            (glob, f'{{__graphite__="{glob}"}}')
        self.label, self.total = target, total
        self.ours_url = systems.ours.web + "/render?" + urllib.parse.urlencode(
            {"target": target, "from": start - 1, "until": end, "format": "json"})
        self.vm_url = systems.vm.url + "/api/v1/query_range?" + urllib.parse.urlencode(
            {"query": query, "start": start, "end": end, "step": 60})
        self.expected = summed(expected) if total else expected
        self.series, self.points = len(expected), sum(len(p) for p in expected.values())

    def answers(self) -> dict:
        rename = "sum" if self.total else None
        return {"ours": compare(self.expected, render_points(http_get(self.ours_url), rename)),
                "vm": compare(self.expected, query_range_points(http_get(self.vm_url), rename))}


def measure(cases: list[Case], runs: int, budget: float) -> list[dict]:
    """Each case's answers compared, then its p50/p99 on both systems, interleaved."""
    rows = []
    for case in cases:
        row = {"target": case.label, "series": case.series, "points": case.points, "answers": case.answers(),
               **renamed(side_by_side(lambda: http_get(case.ours_url), lambda: http_get(case.vm_url), runs,
                                       budget=budget))}
        log(f"  {case.label} over {case.series:,} series: ours {row['ours_s'] * 1e3:,.0f} ms,"
            f" VM {row['vm_s'] * 1e3:,.0f} ms; mismatches {row['answers']['ours']['mismatches']} /"
            f" {row['answers']['vm']['mismatches']}")
        rows.append(row)
    return rows


FINDS_FROM = "127.0.0.2"  # the finds' client address: another user than the renders' (127.0.0.1)


def timed_get_from(url: str, source: str) -> tuple[float, int, bytes]:
    """timed_get from another loopback address (Linux answers all of 127/8): graphite-web
    counts requests in progress per client address (BG_MAX_CLIENT_REQUESTS, 4 a process),
    and 4 renders plus a find from one address answer the find 503 when the renders all
    went to the worker that got it."""
    parts = urllib.parse.urlsplit(url)
    started = time.perf_counter()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300, source_address=(source, 0))
    try:
        connection.request("GET", parts.path + "?" + parts.query)
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    return time.perf_counter() - started, response.status, body


def concurrent(systems: Systems, case: Case, find_patterns: list[str]) -> dict:
    """CONCURRENT_RENDERS renders of `case` at once on each system while another client
    (FINDS_FROM) asks the finds in turn (each pattern once a system); the finds go on until
    every render is done."""
    figures = {}
    for side, base, render_url in (("ours", systems.ours.web, case.ours_url), ("vm", systems.vm.url, case.vm_url)):
        renders: list[dict] = []
        lock = threading.Lock()

        def render() -> None:
            seconds, status, _ = timed_get(render_url)
            with lock:
                renders.append({"seconds": seconds, "status": status})

        threads = [threading.Thread(target=render) for _ in range(CONCURRENT_RENDERS)]
        for thread in threads:
            thread.start()
        finds, statuses, asked = [], [], []
        for pattern in find_patterns:
            asked.append(pattern)
            seconds, status, _ = timed_get_from(base + "/metrics/find?" + urllib.parse.urlencode({"query": pattern}),
                                                FINDS_FROM)
            finds.append(seconds)
            statuses.append(status)
            if not any(thread.is_alive() for thread in threads):
                break
        for thread in threads:
            thread.join()
        figures[side] = {"renders": renders, "finds": len(finds), "find_errors": sum(s != 200 for s in statuses),
                         "find_p50_s": statistics.median(finds), "find_p99_s": percentile(finds, 99),
                         "patterns": asked}
        statuses_text = ", ".join(f"{r['status']} in {r['seconds']:.2f} s" for r in renders)
        log(f"  {CONCURRENT_RENDERS} x {case.label} on {side}: renders {statuses_text}; {len(finds)} finds meanwhile,"
            f" p50 {figures[side]['find_p50_s'] * 1e3:.1f} ms, p99 {figures[side]['find_p99_s'] * 1e3:.1f} ms")
    return figures
