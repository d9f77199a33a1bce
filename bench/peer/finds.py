"""Finds: N names (`tree.dcN.hostNNNN.cpuN`, as bench/graphite_bench.py) created on both
systems as a user creates them (bench/peer/cardinality.py), then `/metrics/find` over HTTP.

Each class of pattern is asked as distinct instances, one a call (another host, dc, cpu or
prefix: the same class, about the same answer size), so no answer comes from a cache of
earlier answers on either side: p50/p99 of each, interleaved, every answer compared. Two
formats: treejson (what Grafana and graphite's tree ask) and JSON with every matching path
(ours `format=json`; VictoriaMetrics has no `json` and its `completer` gives treejson's
collapsed paths, so its `/metrics/expand`, the paths as a JSON list, compared as sets).
A class whose answers differ (VictoriaMetrics' glob gaps) is shown but left out of the
ratio, unless ours failed (bench/peer/table.py). Beside them, one
instance asked again and again: cache hits (our glob cache as configured by default).
Our stack is restarted with its defaults after the names are created (the probe's
self-metrics interval is for the creation only). Also graphite-web's `/version/` as Django's
empty-request floor, and a few probes on a small extra tree naming VictoriaMetrics' glob
gaps (`**`, `?`, `[!...]`).
"""
from __future__ import annotations

import json
import random
import statistics
import time
import urllib.parse
from pathlib import Path
from typing import Callable, Iterator

from bench.graphite_bench import percentile, tree_names
from bench.peer import cardinality, probes
from bench.peer.common import Systems, difference, log, timed_get
from bench.victoria import http_get

# Small tree showing where VictoriaMetrics reads Graphite globs differently: (pattern, gap)
GAP_NAMES = ["gaps.a.b.c", "gaps.a.x", "gaps.ab.y", "gaps.ac.y", "gaps.b.y"]
GAP_PROBES = [("gaps.**", "`**` (every descendant)"), ("gaps.a?", "`?` (one character)"),
              ("gaps.a[!b]", "`[!...]` (negated class)")]
# format: (our request, VictoriaMetrics' request), each (path, parameters)
FORMATS = {"treejson": (("/metrics/find", {"format": "treejson"}), ("/metrics/find", {"format": "treejson"})),
           "json": (("/metrics/find", {"format": "json"}), ("/metrics/expand", {"leavesOnly": "0"}))}
WARM_UP = "gaps.*"  # asked of each side before the timed finds, in no class


def _instances(hosts: int) -> dict[str, tuple[str, Callable[[], Iterator[str]]]]:
    """Each class: (an example at 1,000,000 names, its distinct instances over `hosts` hosts)."""
    h, prefixes2, prefixes3 = range(hosts), range(-(-hosts // 100)), range(-(-hosts // 10))
    d = c = range(10)
    return {
        "fixed prefix": ("tree.dc3.host0042.* (10 nodes)",
                         lambda: (f"tree.dc{i}.host{j:04d}.*" for i in d for j in h)),
        "fixed prefix, wildcard after": ("tree.dc1.host00*.cpu1 (100)",
                                         lambda: (f"tree.dc{i}.host{p:02d}*.cpu{k}" for i in d for p in prefixes2 for k in c)),
        "wildcard first": ("*.dc7.host0042.cpu3 (1)",
                           lambda: (f"*.dc{i}.host{j:04d}.cpu{k}" for i in d for j in h for k in c)),
        "wildcard in the middle": ("tree.*.host0042.cpu3 (10)",
                                   lambda: (f"tree.*.host{j:04d}.cpu{k}" for j in h for k in c)),
        "braces and ?": ("tree.dc{1,2}.host00?0.* (200)",
                         lambda: (f"tree.dc{{{a},{b}}}.host{p:02d}?{q}.*" for a in d for b in d if a < b
                                  for p in prefixes2 for q in range(10))),
        "character classes": ("tree.dc5.host00[1-3][0-9].cpu[2-3] (60)",
                              lambda: (f"tree.dc{i}.host{p:02d}[1-3][0-9].cpu[{k}-{k + 1}]" for i in d
                                       for p in prefixes2 for k in range(9))),
        "** (every descendant)": ("tree.dc3.host004*.** (100)",
                                  lambda: (f"tree.dc{i}.host{p:03d}*.**" for i in d for p in prefixes3)),
        "** in the middle": ("tree.**.host0042.cpu9 (10)",
                             lambda: (f"tree.**.host{j:04d}.cpu{k}" for j in h for k in c)),
        "big: a host wildcard": ("tree.dc1.*.cpu1 (10,000)", lambda: (f"tree.dc{i}.*.cpu{k}" for i in d for k in c)),
        "big: ** in the middle of a dc": ("tree.dc1.**.cpu1 (10,000)",
                                          lambda: (f"tree.dc{i}.**.cpu{k}" for i in d for k in c)),
        "big: ** then a leaf": ("tree.**.cpu9 (100,000)", lambda: (f"tree.**.cpu{k}" for k in c)),
    }


def instances(names: int, runs: int, seed: int = 5) -> dict[str, list[str]]:
    """Up to `runs` distinct instances of each class (fewer when the tree has fewer), shuffled:
    the first of each class is the one the cached figure repeats, the others are shared out
    between the formats (a pattern is timed once, in one format)."""
    rng = random.Random(seed)
    chosen = {}
    for kind, (_, generate) in _instances(-(-names // 100)).items():
        patterns = list(dict.fromkeys(generate()))
        rng.shuffle(patterns)
        chosen[kind] = patterns[:runs]
    return chosen


def nodes(body: bytes) -> list[tuple[str, bool] | str]:
    """A find's answer: (path, is leaf) of treejson (branch paths lose the trailing dot
    VictoriaMetrics gives them), the paths of graphite's `json` or of `/metrics/expand`."""
    answer = json.loads(body)
    if isinstance(answer, dict):
        answer = answer["results"]
    if answer and isinstance(answer[0], str):
        return sorted(answer)
    if answer and "id" in answer[0]:
        return sorted((node["id"].rstrip("."), bool(node["leaf"])) for node in answer)
    return sorted(node["path"] for node in answer)


def find_url(base: str, pattern: str, request: tuple[str, dict] = FORMATS["treejson"][0]) -> str:
    path, parameters = request
    return base + path + "?" + urllib.parse.urlencode({"query": pattern, **parameters})


def part_find(root: Path, count: int, runs: int, budget: float, timeout: float, cached_runs: int = 20,
              idle_seconds: float = 5.0, idle_timeout: float = 120.0) -> dict:
    names = tree_names(count) + GAP_NAMES
    figures: dict = {"names": len(names)}
    with Systems(root, ours_options=probes.OURS_PROBE_OPTIONS) as systems:
        figures["create"] = cardinality.create_names(systems, names, timeout, idle_seconds, idle_timeout)
        figures["receiver_peak_rss_bytes"] = systems.receiver_peak_rss()
        figures["name_bytes"] = cardinality.name_bytes(systems, len(names))
        systems.restart_ours()
        for base in (systems.ours.web, systems.vm.url):
            http_get(find_url(base, WARM_UP))
        chosen = instances(count, 1 + len(FORMATS) * runs)
        figures["classes"] = {kind: example for kind, (example, _) in _instances(10_000).items()}
        figures["find"] = {fmt: [_distinct(systems, kind, patterns[1 + number::len(FORMATS)], fmt, budget)
                                 for kind, patterns in chosen.items()] for number, fmt in enumerate(FORMATS)}
        figures["cached"] = [_cached(systems, kind, patterns[0], cached_runs) for kind, patterns in chosen.items()]
        figures["gaps"] = []
        for pattern, gap in GAP_PROBES:
            ours_nodes, vm_nodes = nodes(http_get(find_url(systems.ours.web, pattern))), \
                nodes(http_get(find_url(systems.vm.url, pattern)))
            figures["gaps"].append({"pattern": pattern, "gap": gap, "ours": [p for p, _ in ours_nodes],
                                    "vm": [p for p, _ in vm_nodes], "same": ours_nodes == vm_nodes})
        figures["floor"] = {side: _floor(url, max(20, runs)) for side, url in
                            (("ours", systems.ours.web + "/version/"), ("vm", systems.vm.url + "/health"))}
        figures["peak_rss_bytes"] = systems.peak_rss()
        figures["web_worker_peak_rss_bytes"] = systems.web_worker_peak_rss()
    return figures


def _distinct(systems: Systems, kind: str, patterns: list[str], fmt: str, budget: float) -> dict:
    """Each pattern asked once of each system (which goes first alternates), until the
    patterns or the budget (at least 3 each) run out; answers compared pattern by pattern."""
    ours_request, vm_request = FORMATS[fmt]
    times: dict[str, list[float]] = {"ours": [], "vm": []}
    errors: dict[str, list[str]] = {"ours": [], "vm": []}
    asked, differ, sizes = [], [], []
    started = time.perf_counter()
    for index, pattern in enumerate(patterns):
        if index >= 3 and time.perf_counter() - started > budget:
            break
        answers = {}
        order = (("ours", systems.ours.web, ours_request), ("vm", systems.vm.url, vm_request))
        for side, base, request in order if index % 2 == 0 else order[::-1]:
            seconds, status, body = timed_get(find_url(base, pattern, request))
            times[side].append(seconds)
            if status != 200:
                errors[side].append(f"{pattern}: HTTP {status}")
                answers[side] = None
            else:
                answers[side] = nodes(body)
        asked.append(pattern)
        sizes.append(len(answers["ours"] or []))
        if answers["ours"] != answers["vm"]:
            differ.append(difference(pattern, answers["ours"], answers["vm"]))
    row = {"kind": kind, "format": fmt, "patterns": asked, "runs": len(asked), "nodes_median": statistics.median(sizes),
           "same": not differ, "differ": differ[:5], "differ_count": len(differ), "errors": errors}
    for side in ("ours", "vm"):
        row[f"{side}_s"], row[f"{side}_p99_s"] = statistics.median(times[side]), percentile(times[side], 99)
    row["ratio"] = row["vm_s"] / row["ours_s"]
    failed = "".join(f" {side} failed {len(e)}x" for side, e in errors.items() if e)
    log(f"  {fmt:8} {kind:32} ours {row['ours_s'] * 1e3:8.2f} ms  vm {row['vm_s'] * 1e3:8.2f} ms"
        f"  ~{row['nodes_median']:,.0f} {'entries' if fmt == 'treejson' else 'paths'}, {len(asked)} distinct{'' if not differ else f', {len(differ)} DIFFER'}"
        f"{failed}")
    return row


def _cached(systems: Systems, kind: str, pattern: str, runs: int) -> dict:
    """One pattern asked `runs` times of each system after a first call: cache hits."""
    samples: dict[str, list[float]] = {"ours": [], "vm": []}
    for side, base in (("ours", systems.ours.web), ("vm", systems.vm.url)):
        http_get(find_url(base, pattern))
    for _ in range(runs):
        for side, base in (("ours", systems.ours.web), ("vm", systems.vm.url)):
            samples[side].append(timed_get(find_url(base, pattern))[0])
    row = {"kind": kind, "pattern": pattern, "runs": runs}
    for side, values in samples.items():
        row[f"{side}_s"], row[f"{side}_p99_s"] = statistics.median(values), percentile(values, 99)
    row["ratio"] = row["vm_s"] / row["ours_s"]
    return row


def _floor(url: str, runs: int) -> dict:
    http_get(url)
    samples = [timed_get(url)[0] for _ in range(runs)]
    return {"p50_s": statistics.median(samples), "p99_s": percentile(samples, 99)}
