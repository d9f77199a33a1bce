"""Tags: the same tagged series (`metricN;t0=...;...;t9=...`, bench/tags_bench.py's) sent over
plaintext to `bgl run` and VictoriaMetrics, then graphite's tags API on both (graphite-web's
`/tags/*` on our index; VictoriaMetrics' own Graphite tags API).

* indexing: series per second until every series is readable, and per CPU-second of each
  system (bench/peer/probes.py: its own CPU, idle-measured probe cost taken off), and the
  CPU until idle;
* bytes on disk per series once indexed, counted two ways (bench/peer/cardinality.py's
  name_bytes for the second): our tag index (the five tag tables with their indexes: the
  pages dbstat gives them after a WAL checkpoint) against VictoriaMetrics' index (every
  file but its `data` directory, the points, once merged); and our store less its points
  (the tag index, plus each series' metric row and name, which VictoriaMetrics' index also
  holds: its MetricName per series) against the same VictoriaMetrics figure;
* `/tags/findSeries` and `/tags/autoComplete/{tags,values}` (limit 100): p50/p99 of each
  kind, every expression distinct (no answer from a cache of earlier ones), interleaved,
  answers compared (sorted), our stack restarted with its defaults first.
  LocalDatabaseTagDB stays the exactness reference in bench/tags_bench.py.
"""
from __future__ import annotations

import functools
import json
import random
import statistics
import time
import urllib.parse
from pathlib import Path

from bench.graphite_bench import percentile
from bench.peer import probes
from bench.peer.cardinality import name_bytes
from bench.peer.common import Systems, difference, log, ours_disk_parts, timed_get
from bench.tags_bench import CARDINALITIES, series_name, tag_value
from biggraphite_like.stores.sqlite.tags import TAG_TABLES
from tests.carbon_env import send_to_carbon

KINDS = ("find_eq", "find_eq_eq", "find_eq_prefix", "find_regex", "find_eq_ne", "autocomplete_tags_expr",
         "autocomplete_values_expr", "autocomplete_values_prefix")


def requests(rng: random.Random, runs: int, series: int) -> dict[str, list[tuple[str, dict]]]:
    """Up to `runs` distinct (path, parameters) of each kind; `=` values are those of an indexed
    series (no query is trivially empty)."""
    found: dict[str, dict[str, tuple[str, dict]]] = {kind: {} for kind in KINDS}
    for _ in range(runs * 20):
        some = rng.randrange(series)
        v7 = tag_value(7, some)
        candidates = {
            "find_eq": ("/tags/findSeries", {"expr": [f"t7={v7}"]}),
            "find_eq_eq": ("/tags/findSeries", {"expr": [f"t2={tag_value(2, some)}", f"t7={v7}"]}),
            "find_eq_prefix": ("/tags/findSeries", {"expr": [f"t7={v7}", f"t2=~v{rng.randrange(3)}"]}),
            "find_regex": ("/tags/findSeries", {"expr": [f"t8=~v{rng.randrange(100, 1000)}.*"]}),
            "find_eq_ne": ("/tags/findSeries", {"expr": [f"t7={v7}", f"t3!=v{rng.randrange(10)}",
                                                         f"t5!=~v{rng.randrange(10)}"]}),
            "autocomplete_tags_expr": ("/tags/autoComplete/tags", {"expr": [f"t7={v7}"], "limit": 100}),
            "autocomplete_values_expr": ("/tags/autoComplete/values",
                                         {"expr": [f"t7={v7}"], "tag": f"t{rng.randrange(7)}", "limit": 100}),
            "autocomplete_values_prefix": ("/tags/autoComplete/values",
                                           {"tag": "t9", "valuePrefix": f"v{rng.randrange(10, 1000)}", "limit": 100}),
        }
        for kind, request in candidates.items():
            if len(found[kind]) < runs:
                found[kind].setdefault(json.dumps(request, sort_keys=True), request)
        if all(len(chosen) >= runs for chosen in found.values()):
            break
    return {kind: list(chosen.values()) for kind, chosen in found.items()}


def part_tags(root: Path, series: int, runs: int, timeout: float, idle_seconds: float = 5.0,
              idle_timeout: float = 120.0) -> dict:
    names = [series_name(i) for i in range(series)]
    ts = int(time.time()) - 60
    payload = "".join(f"{name} 1 {ts}\n" for name in names).encode()
    figures: dict = {"series": series, "tags": len(CARDINALITIES), "index": {}}
    with Systems(root, ours_options=probes.OURS_PROBE_OPTIONS) as systems:
        for side in ("ours", "vm"):
            probe = systems.probe(side)
            idle = probes.measure_idle(systems.pid(side), probe, idle_seconds)
            log(f"peer tags: {series:,} tagged series into {side}")
            send = functools.partial(send_to_carbon, systems.port(side), payload)
            result = probes.load(systems.pid(side), send, probe, series, idle, timeout, idle_timeout)
            result["series_per_second"] = series / max(result["readable_seconds"], 1e-6)
            result["series_per_cpu_second"] = series / max(result["cpu_readable"], 1e-3)
            figures["index"][side] = result
            log(f"  {result['series_per_second']:,.0f} series/s, {result['series_per_cpu_second']:,.0f} per CPU-s;"
                f" idle after {result['idle_seconds']:.1f} s, {result['cpu_idle']:.2f} CPU-s")
        figures["bytes"] = index_bytes(systems, series)
        systems.restart_ours()
        bases = {"ours": systems.ours.web, "vm": systems.vm.url}
        for base in bases.values():  # each side's first request, in no kind
            timed_get(base + "/tags/autoComplete/tags?tagPrefix=warm")
        rows = []
        for kind, asked in requests(random.Random(6), runs, series).items():
            rows.append(_timed(bases, kind, asked))
        figures["queries"] = rows
    return figures


def index_bytes(systems: Systems, series: int) -> dict:
    """Bytes on disk per series on each side (see the module docstring): the store less its
    points (name_bytes: ours after a WAL checkpoint, VictoriaMetrics merged) and, for ours,
    the tag tables alone."""
    figures = name_bytes(systems, series)
    tables = ours_disk_parts(systems.ours)["tables"]
    figures["ours"]["tag_bytes"] = sum(tables.get(table, 0) for table in TAG_TABLES)
    figures["ours"]["tag_bytes_per_series"] = figures["ours"]["tag_bytes"] / series
    for side in ("ours", "vm"):
        figures[side]["bytes_per_series"] = figures[side].pop("bytes_per_name")
    log(f"  bytes per series: ours {figures['ours']['tag_bytes_per_series']:,.1f} (tag tables),"
        f" {figures['ours']['bytes_per_series']:,.1f} (store less points); VM {figures['vm']['bytes_per_series']:,.1f}")
    return figures


def _timed(bases: dict[str, str], kind: str, asked: list[tuple[str, dict]]) -> dict:
    """Each request once on each system (which goes first alternates); answers compared."""
    times: dict[str, list[float]] = {"ours": [], "vm": []}
    errors: dict[str, list[str]] = {"ours": [], "vm": []}
    differ, sizes = [], []
    for index, (path, params) in enumerate(asked):
        answers = {}
        for side in ("ours", "vm") if index % 2 == 0 else ("vm", "ours"):
            seconds, status, body = timed_get(bases[side] + path + "?" + urllib.parse.urlencode(params, doseq=True))
            times[side].append(seconds)
            answers[side] = sorted(json.loads(body)) if status == 200 else None
            if status != 200:
                errors[side].append(f"HTTP {status}: {body[:200]!r}")
        sizes.append(len(answers["ours"] or []))
        if answers["ours"] != answers["vm"]:
            differ.append(difference([path, params], answers["ours"], answers["vm"]))
    row = {"kind": kind, "runs": len(asked), "requests": asked, "answer_median": statistics.median(sizes),
           "same": not differ, "differ": differ[:3], "differ_count": len(differ), "errors": errors}
    for side in ("ours", "vm"):
        row[f"{side}_s"], row[f"{side}_p99_s"] = statistics.median(times[side]), percentile(times[side], 99)
    row["ratio"] = row["vm_s"] / row["ours_s"]
    log(f"  {kind:28} ours {row['ours_s'] * 1e3:8.2f} ms  vm {row['vm_s'] * 1e3:8.2f} ms  ~{row['answer_median']:,.0f}"
        f" items, {len(asked)} distinct{'' if not differ else f', {len(differ)} DIFFER'}")
    return row
