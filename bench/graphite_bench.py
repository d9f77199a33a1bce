#!/usr/bin/env python3
"""graphite-web finder benchmark: graphite_plugin.Finder against whisper + StandardFinder.

    python bench/graphite_bench.py                        # 1,000 series x 1 day, 100,000 names
    python bench/graphite_bench.py --series 200 --names 20000 --runs 3   # quick
    python bench/graphite_bench.py --profile              # cProfile of our fetch and finds
    python bench/graphite_bench.py --part fetch --runs 5  # the fetch (and its JSON render) alone

Three measurements, each on the same data on both sides, interleaved (ours, theirs, ours,
...) and reported as medians and ratios, because the machine is shared and noisy:

* fetch: `finder.fetch([pattern], now - 1 day, now, now)` of every series (`--series`,
  default 1,000) holding one day of 60 s points, as graphite-web's render calls it.
  StandardFinder's fetch is BaseFinder's: find, then one whisper.fetch per leaf.
* render: graphite-web's `/render?format=json` of those series through its Django app
  in-process (Django's test client, our finder on both sides), answered by
  graphite_plugin's ViewShortcutMiddleware against graphite's own view; the answers must
  be the same bytes.
* find: `finder.find_nodes(FindQuery(pattern))` for wildcard patterns over a tree of
  `--names` metric names (default 100,000). The whisper tree holds empty `.wsp` files:
  StandardFinder's find only looks at names.

CarbonLink is off on both sides (no CARBONLINK_HOSTS; REPLICATION_FACTOR 0 so graphite's
whisper reader does not fail and log an exception per series).
Everything lives in a temporary directory, removed at the end unless --keep.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable, Sequence

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from biggraphite_like.accessor import Accessor  # noqa: E402
from biggraphite_like.metric import MetricMetadata  # noqa: E402
from tests.graphite_env import configure  # noqa: E402

SHORTCUT = "graphite_plugin.middleware.ViewShortcutMiddleware"
FETCH_RETENTION = "60s:1d"
FETCH_ARCHIVES = [(60, 1440)]
# (pattern, what it exercises): over 1,000,000 names, tree.dcN holds 10,000 hosts
FIND_PATTERNS = [
    ("tree.dc3.host0042.*", "fixed prefix"),
    ("tree.dc1.host00*.cpu1", "fixed prefix, wildcard after"),
    ("*.dc7.host0042.cpu3", "wildcard first"),
    ("tree.*.host0042.cpu3", "wildcard in the middle"),
    ("tree.dc{1,2}.host00?0.*", "braces and ?"),
    ("tree.dc5.host00[1-3]?.cpu[2-3]", "character classes"),
    ("tree.dc3.host004*.**", "** (every descendant)"),
    ("tree.**.host0042.cpu9", "** in the middle"),
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed(call: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank) of the samples."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def side_by_side(ours: Callable[[], object], theirs: Callable[[], object], runs: int,
                 hot: Callable[[], object] | None = None, budget: float | None = None) -> dict:
    """Median (`*_s`) and 99th percentile (`*_p99_s`) seconds of interleaved runs, median CPU
    seconds (`*_cpu_s`), after one
    warm-up each, and theirs/ours (`hot`: our side again with its glob cache warm). With a
    budget, fewer runs (at least 5) when `runs` of them would take longer."""
    sides = {"ours_s": ours, "standard_s": theirs, **({"hot_s": hot} if hot else {})}
    samples: dict[str, list[float]] = {key: [] for key in sides}
    cpu: dict[str, list[float]] = {key: [] for key in sides}
    warm_up = sum(timed(call)[0] for call in sides.values())
    if budget is not None:
        runs = max(5, min(runs, int(budget / max(warm_up, 1e-6))))
    for _ in range(runs):
        for key, call in sides.items():
            started = time.process_time()
            samples[key].append(timed(call)[0])
            cpu[key].append(time.process_time() - started)
    result: dict = {key: statistics.median(values) for key, values in samples.items()}
    result.update({key.replace("_s", "_p99_s"): percentile(values, 99) for key, values in samples.items()})
    # CPU seconds of this process (median): what a busy shared machine disturbs least
    result.update({key.replace("_s", "_cpu_s"): statistics.median(values) for key, values in cpu.items()})
    result["runs"] = runs
    result["ratio"] = result["standard_s"] / result["ours_s"]
    if hot:
        result["hot_ratio"] = result["standard_s"] / result["hot_s"]
    return result


# -- fetch ---------------------------------------------------------------------------------
def build_fetch_data(workdir: str, series: int, now: int) -> tuple[str, str, list[str]]:
    import whisper

    names = [f"fetch.host{i // 10:04d}.cpu{i % 10}" for i in range(series)]
    rng = random.Random(1)
    url = f"sqlite://{workdir}/fetch.db"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    metadata = MetricMetadata.create(FETCH_RETENTION, "average", 0.5)
    whisper_dir = os.path.join(workdir, "fetch-whisper")
    batch: dict[str, list] = {}
    for name in names:
        points = [(now - 60 * age, rng.random() * 100) for age in range(1440) if rng.random() > 0.02]
        path = os.path.join(whisper_dir, *name.split(".")) + ".wsp"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        whisper.create(path, FETCH_ARCHIVES, 0.5, "average")
        whisper.update_many(path, points, now=now)
        batch[name] = points
        if len(batch) == 100:
            accessor.insert_points(batch, now=now, create=metadata)
            batch.clear()
    if batch:
        accessor.insert_points(batch, now=now, create=metadata)
    accessor.close()
    return url, whisper_dir, names


def bench_fetch(url: str, whisper_dir: str, names: list[str], now: int, runs: int,
                profile: bool) -> dict:
    from django.test import override_settings
    from graphite.finders.standard import StandardFinder

    from graphite_plugin.finder import Finder

    pattern = "fetch.*.*"
    with override_settings(BG_STORE=url, STANDARD_DIRS=[whisper_dir]):
        ours, standard = Finder(), StandardFinder([whisper_dir])

        def run_ours():
            return ours.fetch([pattern], now - 86400, now, now)

        def run_standard():
            return standard.fetch([pattern], now - 86400, now, now)

        a, b = run_ours(), run_standard()
        key = lambda r: r["path"]  # noqa: E731
        assert [(r["path"], r["time_info"], r["values"]) for r in sorted(a, key=key)] == \
               [(r["path"], r["time_info"], r["values"]) for r in sorted(b, key=key)], "answers differ"
        assert len(a) == len(names)
        result = side_by_side(run_ours, run_standard, runs)
        result.update(series=len(names), points_per_series=len(a[0]["values"]))
        if profile:
            result["profile"] = profiled(run_ours)
    return result


def bench_render(url: str, names: list[str], now: int, runs: int) -> dict:
    from django.conf import settings
    from django.test import Client, override_settings

    from tests.graphite_env import setup_graphite_app, use_finders

    setup_graphite_app()
    # `now` too: at the real clock, two renders a minute boundary apart clip the day differently
    params = {"target": "fetch.*.*", "from": str(now - 86400), "until": str(now), "now": str(now), "format": "json",
              "noCache": "1"}
    plain = tuple(m for m in settings.MIDDLEWARE if m != SHORTCUT)
    clients = {}
    with use_finders(["graphite_plugin.Finder"], BG_STORE=url):
        for side, middleware in (("ours", plain + (SHORTCUT,)), ("standard", plain)):
            with override_settings(MIDDLEWARE=middleware):
                clients[side] = Client()  # its middleware chain is built at its first request
                clients[side].get("/render", params)

        def render(side: str) -> bytes:
            response = clients[side].get("/render", params)
            assert response.status_code == 200, response.content[:300]
            return response.content

        body = render("ours")
        assert body == render("standard"), "answers differ"
        result = side_by_side(lambda: render("ours"), lambda: render("standard"), runs)
    result.update(series=len(names), bytes=len(body))
    return result


# -- find ----------------------------------------------------------------------------------
def tree_names(count: int) -> list[str]:
    """`tree.dc{0..9}.hostNNNN.cpu{0..9}`: hosts added until `count` names."""
    names = []
    host = 0
    while len(names) < count:
        for dc in range(10):
            for cpu in range(10):
                names.append(f"tree.dc{dc}.host{host:04d}.cpu{cpu}")
        host += 1
    return names[:count]


def build_find_data(workdir: str, count: int) -> tuple[str, str]:
    names = tree_names(count)
    url = f"sqlite://{workdir}/find.db"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    metadata = MetricMetadata.create("60s:1d", "average", 0.5)
    for start in range(0, len(names), 10_000):
        accessor.create_metrics([(n, metadata) for n in names[start:start + 10_000]])
    accessor.close()
    whisper_dir = os.path.join(workdir, "find-whisper")
    made = set()
    for name in names:
        parts = name.split(".")
        directory = os.path.join(whisper_dir, *parts[:-1])
        if directory not in made:
            os.makedirs(directory, exist_ok=True)
            made.add(directory)
        open(os.path.join(directory, parts[-1] + ".wsp"), "wb").close()
    return url, whisper_dir


def bench_find(url: str, whisper_dir: str, runs: int, profile: bool, budget: float = 20.0) -> list[dict]:
    from graphite.finders.standard import StandardFinder
    from graphite.finders.utils import FindQuery

    from graphite_plugin.finder import Finder

    from django.conf import settings

    rows = []
    ours, standard = Finder(), StandardFinder([whisper_dir])
    settings.BG_STORE = url
    for pattern, kind in FIND_PATTERNS:
        def run_ours(ttl: int = 0):
            settings.BG_FIND_CACHE_TTL = ttl  # picks the process's backend with that cache setting
            return sorted((n.path, n.is_leaf) for n in ours.find_nodes(FindQuery(pattern, None, None)))

        def run_hot():
            return run_ours(ttl=3600)

        def run_standard():
            return sorted({(n.path, n.is_leaf) for n in standard.find_nodes(FindQuery(pattern, None, None))})

        matched = run_ours()
        assert matched == run_standard() == run_hot(), f"answers differ for {pattern}"
        row = {"pattern": pattern, "kind": kind, "nodes": len(matched),
               **side_by_side(run_ours, run_standard, runs, run_hot, budget)}
        log(f"  {pattern:32} {row['nodes']:6} nodes  ours {row['ours_s'] * 1e3:8.2f} ms"
            f"  standard {row['standard_s'] * 1e3:8.2f} ms  ({row['runs']} runs)")
        if profile:
            row["profile"] = profiled(run_ours)
        rows.append(row)
    return rows


def profiled(call: Callable[[], object]) -> str:
    profiler = cProfile.Profile()
    profiler.runcall(call)
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(12)
    return out.getvalue()


def geometric_mean(values: Sequence[float]) -> float:
    return statistics.geometric_mean(values) if values else float("nan")


def run_one_side(part: str, side: str, workdir: str, now: int) -> None:
    """One side's workload alone, on data an earlier run kept in workdir: what `python -m
    bench` runs in a fresh process to measure each side's peak memory."""
    from django.conf import settings
    from graphite.finders.standard import StandardFinder
    from graphite.finders.utils import FindQuery

    from graphite_plugin.finder import Finder

    settings.BG_FIND_CACHE_TTL = 0
    settings.BG_STORE = f"sqlite://{workdir}/{part}.db"
    finder = Finder() if side == "ours" else StandardFinder([os.path.join(workdir, f"{part}-whisper")])
    for _ in range(3):
        if part == "fetch":
            assert len(finder.fetch(["fetch.*.*"], now - 86400, now, now)) > 0
        else:
            for pattern, _ in FIND_PATTERNS:
                list(finder.find_nodes(FindQuery(pattern, None, None)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=1000, help="series fetched (default 1000)")
    parser.add_argument("--names", type=int, default=100_000, help="names in the find tree (default 100000)")
    parser.add_argument("--runs", type=int, default=5, help="measured fetch runs per side (default 5)")
    parser.add_argument("--find-runs", type=int, default=100,
                        help="measured runs per find pattern and side (default 100), fewer (at least 5) when they"
                        " would take more than --find-budget seconds")
    parser.add_argument("--find-budget", type=float, default=20.0, help="seconds per find pattern (default 20)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of our side")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--workdir", help="work (and keep everything) in this directory instead of a temporary one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--side", choices=["ours", "standard"],
                        help="with --part, --workdir and --now: run one side's workload on kept data, nothing else")
    parser.add_argument("--part", choices=["fetch", "find"],
                        help="measure this part only (fetch: the fetch and the JSON render of its series)")
    parser.add_argument("--now", type=int, help="the time the kept fetch data was written at")
    args = parser.parse_args(argv)

    configure(CARBONLINK_HOSTS=[], REPLICATION_FACTOR=0)
    import django

    django.setup()
    if args.side:
        if not (args.part and args.workdir and args.now):
            parser.error("--side needs --part, --workdir and --now")
        run_one_side(args.part, args.side, args.workdir, args.now)
        return 0
    workdir = args.workdir or tempfile.mkdtemp(prefix="graphite-bench-")
    os.makedirs(workdir, exist_ok=True)
    now = int(time.time())
    report: dict = {"series": args.series, "names": args.names, "runs": args.runs, "workdir": workdir, "now": now}
    try:
        if args.part != "find":
            log(f"writing {args.series} series x 1 day to whisper and the store ...")
            started = time.perf_counter()
            url, whisper_dir, names = build_fetch_data(workdir, args.series, now)
            log(f"  {time.perf_counter() - started:.1f} s; fetching ...")
            report["fetch"] = bench_fetch(url, whisper_dir, names, now, args.runs, args.profile)
            log("rendering (JSON, in-process) ...")
            report["render"] = bench_render(url, names, now, args.runs)
        if args.part == "fetch":
            return _print_report(args, report)
        log(f"creating {args.names:,} names in the store and as empty whisper files ...")
        started = time.perf_counter()
        url, whisper_dir = build_find_data(workdir, args.names)
        report["find_build_seconds"] = time.perf_counter() - started
        log(f"  {report['find_build_seconds']:.1f} s; finding ...")
        report["find"] = bench_find(url, whisper_dir, args.find_runs, args.profile, args.find_budget)
        report["find_geometric_mean_ratio"] = geometric_mean([r["ratio"] for r in report["find"]])
        report["find_hot_geometric_mean_ratio"] = geometric_mean([r["hot_ratio"] for r in report["find"]])
    finally:
        if not (args.keep or args.workdir):
            shutil.rmtree(workdir, ignore_errors=True)
    return _print_report(args, report)


def _print_report(args: argparse.Namespace, report: dict) -> int:
    """The report as JSON (--json) or as text, of the parts measured."""
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if "fetch" in report:
        _print_fetch(args, report)
    if "find" in report:
        _print_find(args, report)
    return 0


def _print_fetch(args: argparse.Namespace, report: dict) -> None:
    fetch = report["fetch"]
    print(f"fetch {fetch['series']} series x {fetch['points_per_series']} points (60 s, one day), "
          f"median of {args.runs}:")
    print(f"  graphite_plugin.Finder.fetch   {fetch['ours_s'] * 1000:9.1f} ms")
    print(f"  StandardFinder.fetch (whisper) {fetch['standard_s'] * 1000:9.1f} ms")
    print(f"  ratio (standard / ours)        {fetch['ratio']:9.1f} x   (aim >= 5 x)")
    print(f"  CPU time: ours {fetch['ours_cpu_s'] * 1000:.1f} ms, standard {fetch['standard_cpu_s'] * 1000:.1f} ms,"
          f" ratio {fetch['standard_cpu_s'] / fetch['ours_cpu_s']:.1f} x")
    render = report["render"]
    print(f"\n/render?format=json of the same series through graphite-web's Django app ({render['bytes']:,} bytes),"
          f" median of {args.runs}:")
    print(f"  with ViewShortcutMiddleware    {render['ours_s'] * 1000:9.1f} ms")
    print(f"  graphite-web's renderView      {render['standard_s'] * 1000:9.1f} ms")
    print(f"  ratio (graphite / ours)        {render['ratio']:9.1f} x")
    if args.profile:
        print("\nprofile of our fetch:\n" + fetch["profile"])


def _print_find(args: argparse.Namespace, report: dict) -> None:
    print(f"\nfind_nodes over {args.names:,} names, median and 99th percentile:")
    print("  cold: glob cache off (every find queries the store); hot: pattern answered before")
    print(f"  {'pattern':32} {'nodes':>6} {'cold p50':>9} {'cold p99':>9} {'hot p50':>8} {'std p50':>9}"
          f" {'std p99':>9} {'cold x':>7} {'hot x':>7}")
    for row in report["find"]:
        print(f"  {row['pattern']:32} {row['nodes']:6} {row['ours_s'] * 1000:9.2f} {row['ours_p99_s'] * 1000:9.2f}"
              f" {row['hot_s'] * 1000:8.3f} {row['standard_s'] * 1000:9.2f} {row['standard_p99_s'] * 1000:9.2f}"
              f" {row['ratio']:7.1f} {row['hot_ratio']:7.1f}")
    print(f"  geometric mean ratio: cold {report['find_geometric_mean_ratio']:.1f} x, "
          f"hot {report['find_hot_geometric_mean_ratio']:.1f} x   (aim >= 100 x)")
    if args.profile:
        for row in report["find"]:
            print(f"profile of our find {row['pattern']}:\n{row['profile']}")


if __name__ == "__main__":
    sys.exit(main())
