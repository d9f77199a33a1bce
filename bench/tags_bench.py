#!/usr/bin/env python3
"""Tag benchmark: the store's tag index (graphite_plugin.tagdb / Accessor.tags) beside
graphite-web's LocalDatabaseTagDB on the same tagged series.

    python bench/tags_bench.py                          # 1,000,000 series (the issue's aims)
    python bench/tags_bench.py --series 20000 --runs 20 # quick

Series: `metric<i // 100000>` with 10 tags t0..t9 of cardinalities 3, 10, 30, 100, 300,
1000, 3000, 10000, 30000 and 100000 (t9 = i % 100000 makes every path unique). Measured,
interleaved per query (ours, theirs, ...) and reported as medians:

* index: new series per second, ours (SQLite, batches of 10,000) and LocalDatabaseTagDB's
  tag_multi_series (Django on SQLite, batches of 1,000) on `--graphite-series` series;
* findSeries with one `=` term (t7, ~100 series) and with `=` plus a prefix regex; p50;
* autocomplete of tags and of values, with and without an expression; p50;
* ingest of existing series: one point to each of `--ingest` tagged metrics and to as
  many untagged ones (Accessor.insert_points), tagged / untagged time.

Graphite's side runs its find_series uncached (`_find_series`). The last line is
`ratios: find_eq_vs_localdb=X autocomplete_values_vs_localdb=Y index_vs_localdb=Z
tagged_vs_untagged_ingest=W` (above 1: ours is better, except the last: ours' cost).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from biggraphite_like.accessor import Accessor  # noqa: E402
from biggraphite_like.metric import MetricMetadata  # noqa: E402
from tests.graphite_env import configure  # noqa: E402

CARDINALITIES = [3, 10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000]
META = MetricMetadata.create("60s:1d", "average", 0.5)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def series_name(i: int) -> str:
    tags = ";".join(f"t{k}=v{(i * (2 * k + 1) + k) % c if k < 9 else i % c}" for k, c in enumerate(CARDINALITIES))
    return f"metric{i // 100_000};{tags}"


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def build_ours(url: str, count: int, batch: int = 10_000) -> float:
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    seconds = 0.0
    for start in range(0, count, batch):
        names = [series_name(i) for i in range(start, min(count, start + batch))]
        seconds += timed(lambda: accessor.tags.tag_series(names))
    accessor.close()
    return count / seconds


def build_graphite(tagdb, count: int, batch: int = 1000) -> float:
    from django.db import transaction

    seconds = 0.0
    for start in range(0, count, batch):
        names = [series_name(i) for i in range(start, min(count, start + batch))]

        def tag() -> None:
            with transaction.atomic():
                tagdb.tag_multi_series(names)
        seconds += timed(tag)
    return count / seconds


def queries(rng: random.Random, runs: int) -> list[tuple[str, list[str], str | None]]:
    """(kind, expressions, tag) per run of each kind."""
    found = []
    for _ in range(runs):
        v7 = f"v{rng.randrange(CARDINALITIES[7])}"
        found += [
            ("find_eq", [f"t7={v7}"], None),
            ("find_eq_prefix", [f"t7={v7}", f"t2=~v{rng.randrange(3)}"], None),
            ("autocomplete_tags", [], None),
            ("autocomplete_tags_expr", [f"t7={v7}"], None),
            ("autocomplete_values", [], "t8"),
            ("autocomplete_values_expr", [f"t7={v7}"], "t4"),
        ]
    return found


def run_query(db, kind: str, exprs: list[str], tag: str | None, graphite: bool):
    if kind.startswith("find"):
        return db._find_series(exprs) if graphite else db.find_series(exprs)
    if kind.startswith("autocomplete_tags"):
        return db.auto_complete_tags(exprs, None, 100)
    return db.auto_complete_values(exprs, tag, None, 100)


def bench_ingest(url: str, count: int) -> dict:
    accessor = Accessor.from_url(url)
    tagged = [series_name(i) for i in range(count)]
    untagged = [f"plain.metric{i // 1000}.m{i % 1000}" for i in range(count)]
    now = int(time.time())
    accessor.create_metrics([(n, META) for n in untagged], now=now)
    accessor.create_metrics([(n, META) for n in tagged], now=now)
    result = {}
    for round_ in range(3):
        for label, names in (("tagged", tagged), ("untagged", untagged)):
            accessor._cache.clear()  # noqa: SLF001 - both sides read their metadata again
            points = {n: [(now - 60 * round_, 1.0)] for n in accessor.get_metrics(names)}
            result.setdefault(label, []).append(timed(lambda: accessor.insert_points(points, now=now)))
    accessor.close()
    return {k: min(v) for k, v in result.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=1_000_000, help="tagged series in our index (default 1000000)")
    parser.add_argument("--graphite-series", type=int, help="series in LocalDatabaseTagDB (default: --series)")
    parser.add_argument("--runs", type=int, default=50, help="measured runs per query kind and side (default 50)")
    parser.add_argument("--ingest", type=int, default=10_000, help="metrics of each kind in the ingest test")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    graphite_series = args.graphite_series or args.series
    if graphite_series != args.series:
        parser.error("--graphite-series must equal --series for the query comparison (same series both sides)")

    workdir = tempfile.mkdtemp(prefix="tags-bench-")
    configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                                     "NAME": os.path.join(workdir, "graphite.db")}})
    import django
    from django.conf import settings
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from graphite.tags.localdatabase import LocalDatabaseTagDB

    graphite = LocalDatabaseTagDB(settings, cache=None, log=None)
    report: dict = {"series": args.series, "runs": args.runs, "workdir": workdir}
    try:
        url = f"sqlite://{os.path.join(workdir, 'bgl.db')}"
        log(f"indexing {args.series:,} series (ours) ...")
        report["index_per_second"] = {"ours": round(build_ours(url, args.series))}
        log(f"indexing {graphite_series:,} series (LocalDatabaseTagDB) ...")
        report["index_per_second"]["localdb"] = round(build_graphite(graphite, graphite_series))
        accessor = Accessor.from_url(url)
        ours = accessor.tags
        samples: dict[str, dict[str, list[float]]] = {}
        for kind, exprs, tag in queries(random.Random(17), args.runs):
            answers = []
            for side, db, is_graphite in (("ours", ours, False), ("localdb", graphite, True)):
                started = time.perf_counter()
                answers.append(run_query(db, kind, exprs, tag, is_graphite))
                samples.setdefault(kind, {}).setdefault(side, []).append(time.perf_counter() - started)
            if answers[0] != answers[1]:
                raise AssertionError(f"{kind} {exprs} {tag}: answers differ ({len(answers[0])} vs {len(answers[1])})")
        accessor.close()
        report["p50_ms"] = {kind: {side: p50_ms(s) for side, s in sides.items()} for kind, sides in samples.items()}
        log(f"ingest of {args.ingest:,} existing tagged and untagged metrics ...")
        ingest = bench_ingest(url, args.ingest)
        report["ingest_seconds"] = ingest
        p50 = report["p50_ms"]
        report["ratios"] = {
            "find_eq_vs_localdb": round(p50["find_eq"]["localdb"] / p50["find_eq"]["ours"], 2),
            "autocomplete_values_vs_localdb": round(
                p50["autocomplete_values"]["localdb"] / p50["autocomplete_values"]["ours"], 2),
            "index_vs_localdb": round(report["index_per_second"]["ours"] / report["index_per_second"]["localdb"], 2),
            "tagged_vs_untagged_ingest": round(ingest["tagged"] / ingest["untagged"], 2),
        }
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"series: {args.series:,}; index (series/s): ours {report['index_per_second']['ours']:,},"
          f" LocalDatabaseTagDB {report['index_per_second']['localdb']:,}")
    print(f"{'query (p50 ms)':<28}{'ours':>10}{'localdb':>10}")
    for kind, sides in report["p50_ms"].items():
        print(f"{kind:<28}{sides['ours']:>10}{sides['localdb']:>10}")
    print(f"ingest of existing metrics (s): tagged {ingest['tagged']:.3f}, untagged {ingest['untagged']:.3f}")
    print("ratios: " + " ".join(f"{k}={v}" for k, v in report["ratios"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
