"""Ingest: M metrics x P points over one plaintext TCP connection, round `new` then E rounds
`existing`, on `bgl run` (our receiver), `bgl run --carbon`, carbon-cache + whisper and
VictoriaMetrics, fresh stores, the same stream.

Ours and VictoriaMetrics are followed with their cheap probes (bench/peer/probes.py): each
one's CPU over the same windows (until readable, until idle), less its idle-measured probe
cost. The two carbon-cache sides are dated by bench-side reads of their files (the bench's
own process: their CPU is not touched by it). After every round, every point is read back
from ours (both) and VictoriaMetrics and compared with what was sent. Disk bytes per point
of the young store after round 1.
"""
from __future__ import annotations

import functools
import math
import statistics
import time
from pathlib import Path

from bench.carbon_bench import Checker, make_input
from bench.peer import probes
from bench.peer.common import (Systems, compare, expected_points, log, ours_disk_parts, ours_points, plaintext,
                               run_round, store_url, vm_points)
from tests.carbon_env import send_to_carbon

PROBED = ("ours", "vm")  # followed by probes; the carbon-cache sides by bench-side reads
MATCH = '{__name__=~"bench\\\\..*"}'


def part_ingest(root: Path, metrics: int, points: int, timeout: float, existing_rounds: int = 1,
                idle_seconds: float = 5.0, idle_timeout: float = 120.0,
                probe_for: dict[str, probes.Probe] | None = None) -> dict:
    """Every round on every side; `probe_for` replaces a side's probe (the tests' costly one)."""
    now = int(time.time())
    inputs = [make_input(metrics, points, r, now, 1 + existing_rounds) for r in range(1 + existing_rounds)]
    figures: dict = {"metrics": metrics, "points_per_round": metrics * points, "rounds": {}, "young": {}, "idle": {}}
    with Systems(root, carbon=True, ours_options=probes.OURS_PROBE_OPTIONS) as systems:
        for side in systems.sides:
            figures["rounds"][side] = []
            probe = (probe_for or {}).get(side) or (systems.probe(side) if side in PROBED else None)
            if probe is not None:
                idle = probes.measure_idle(systems.pid(side), probe, idle_seconds)
                figures["idle"][side] = vars(idle)
                log(f"peer ingest: {side} at rest {idle.rate:.3f} CPU-s/s, a probe call {idle.per_call * 1e3:.2f} ms CPU")
            for index, (names, messages) in enumerate(inputs):
                log(f"peer ingest: {side}, round {index + 1} ({'new' if index == 0 else 'existing'} metrics),"
                    f" {len(messages):,} points")
                payload = plaintext(messages)
                if probe is not None:
                    send = functools.partial(send_to_carbon, systems.port(side), payload)
                    result = probes.load(systems.pid(side), send, probe, len(messages), idle, timeout, idle_timeout)
                    result["seconds"], result["cpu_seconds"] = result["readable_seconds"], result["cpu_readable"]
                else:
                    timestamps = sorted({int(t) for _, (t, _) in messages})
                    result = run_round(systems.port(side), systems.pid(side), payload, len(messages),
                                       Checker(names, timestamps, systems.reader(side, MATCH, timestamps)), timeout)
                result["round"] = "new" if index == 0 else "existing"
                log(f"  {result['points_per_second']:,.0f} points/s (readable after {result['seconds']:.1f} s),"
                    f" {result['cpu_seconds']:.2f} CPU-s"
                    + (f"; idle after {result['idle_seconds']:.1f} s, {result['cpu_idle']:.2f} CPU-s" if probe else ""))
                figures["rounds"][side].append(result)
                size = systems.disk_bytes(side, len(messages)) if index == 0 else None
                if size is not None:
                    figures["young"][side] = {"bytes": size, "points": len(messages),
                                              "bytes_per_point": size / len(messages)}
                    if side == "ours":
                        figures["young"][side]["parts"] = ours_disk_parts(systems.ours)
                        for btree, cut in list(figures["young"][side]["parts"]["btrees"].items())[:8]:
                            log(f"  {btree}: {cut['bytes'] / metrics:.1f} B a metric (payload"
                                f" {cut['payload'] / metrics:.1f}, unused {cut['unused'] / metrics:.1f},"
                                f" overhead {cut['overhead'] / metrics:.1f})")
        figures["summary"] = {side: summary(rounds) for side, rounds in figures["rounds"].items()}
        figures["peak_rss_bytes"] = systems.peak_rss()
        figures["receiver_peak_rss_bytes"] = systems.receiver_peak_rss()
        messages = [m for _, round_messages in inputs for m in round_messages]
        expected = expected_points(messages)
        names = sorted(expected)
        stamps = [int(ts) for _, (ts, _) in messages]
        start, end = min(stamps) - 1, max(stamps) + 60  # a fetch starts a step after `from`
        figures["expected"] = {"points": len(messages), "value_sum": math.fsum(v for _, (_, v) in messages)}
        figures["answers"] = {"ours": compare(expected, ours_points(store_url(systems.ours), names, start, end)),
                              "ours_carbon": compare(expected, ours_points(store_url(systems.ours_carbon), names,
                                                                           start, end)),
                              "vm": compare(expected, vm_points(systems.vm, MATCH, start, end))}
    return figures


def summary(rounds: list[dict]) -> dict:
    """The `new` round, and the median of each figure over the `existing` rounds (a single
    round moves a lot on a shared machine, whisper's most: its page cache and disk)."""
    existing = [r for r in rounds if r["round"] == "existing"]
    median = {key: statistics.median(r[key] for r in existing) for key in existing[0]
              if isinstance(existing[0][key], (int, float)) and not isinstance(existing[0][key], bool)}
    median.update(round="existing", rounds=len(existing))
    return {"new": rounds[0], "existing": median}
