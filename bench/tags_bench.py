#!/usr/bin/env python3
"""Tag benchmark: the store's tag index (graphite_plugin.tagdb / Accessor.tags) beside
graphite-web's LocalDatabaseTagDB on the same tagged series, in one run.

    python bench/tags_bench.py                          # 1,000,000 series (the issue's aims)
    python bench/tags_bench.py --series 20000 --runs 20 # quick
    python bench/tags_bench.py --parts index,ingest     # only our indexing and the ingest ratios

Series: `metric<i // 100000>` with 10 tags t0..t9 of cardinalities 3, 10, 30, 100, 300,
1000, 3000, 10000, 30000 and 100000 (t9 = i % 100000 makes every path unique, the others
are a hash of the series number: independent tags). Query values are taken from random
indexed series, so `=` terms always match (t7: ~100 series of a million).

* Ours is indexed through Accessor.tags.tag_series in batches of 10,000: new series per
  second. LocalDatabaseTagDB's own tagSeries would take hours for a million series, so
  its Django tables are bulk-loaded with the rows its tag_series writes (graphite's
  TaggedSeries.parse, sha256 hashes, one tags_seriestag row per tag; indexes rebuilt
  after), which is not timed as indexing. Then `--extra` more series are indexed into
  both full indexes by their own calls (ours tag_series, LocalDatabaseTagDB
  tag_multi_series; batches of 1,000): new series per second side by side.
* Queries, interleaved per run (ours, theirs, ...), p50 and p99: findSeries with one `=`
  term (t7, ~100 series), two `=` terms, `=` plus a prefix regex, a `=~` term alone, `=`
  with `!=` and `!=~`; autocomplete of tags and of values, with and without an
  expression. Both sides must answer the same (a difference is counted and reported).
  Graphite's find_series runs uncached (`_find_series`); a side stops a kind after
  `--budget` seconds (at least 5 runs).
* Ingest of existing series: one point to each of `--ingest` tagged metrics and to as
  many untagged ones through the accessor, medians of `--ingest-rounds` (9), wall and CPU time (the ratios are of
  CPU time: on a shared machine wall time mostly measures the neighbours): warm (metadata
  cached, a running carbon's steady state: insert_points) and cold (cache emptied:
  get_metrics, which normalises every name, then insert_points).

The last line is `ratios: find_eq_vs_localdb=X autocomplete_values_vs_localdb=Y
autocomplete_values_expr_vs_localdb=Z index_vs_localdb=A tagged_vs_untagged_ingest=W
tagged_vs_untagged_ingest_cold=C` (p50 and rate ratios above 1: ours is better; the last
two are tagged's CPU cost over untagged's, warm then cold, aim <= 1.2).
"""
from __future__ import annotations

import argparse
import json
import math
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
from biggraphite_like.tags.series import canonical_path  # noqa: E402
from tests.graphite_env import configure  # noqa: E402

CARDINALITIES = [3, 10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000]
META = MetricMetadata.create("60s:1d", "average", 0.5)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def tag_value(k: int, i: int) -> str:
    """Value of tag t<k> of series i: t9 is i % 100000 (with the metric, the path is unique);
    the others a hash of (i, k) modulo their cardinality, so tags are independent and
    every value is used once there are enough series."""
    if k == 9:
        return f"v{i % CARDINALITIES[9]}"
    mixed = (i * 2654435761) & 0xFFFFFFFF
    mixed = ((mixed ^ (mixed >> 16)) * (0x45D9F3B + 2 * k)) & 0xFFFFFFFF
    return f"v{(mixed ^ (mixed >> 16)) % CARDINALITIES[k]}"


def series_name(i: int) -> str:
    return f"metric{i // 100_000};" + ";".join(f"t{k}={tag_value(k, i)}" for k in range(len(CARDINALITIES)))


def timed(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def build_ours(url: str, names: list[str], batch: int = 10_000) -> tuple[float, float]:
    """New series per second, indexing names into our store in batches: per second of
    wall time and per CPU-second of this process (SQLite works in it, in every thread), both
    of the tag_series calls and of the close that waits for a background checkpoint pass
    still running (stores/sqlite/checkpointer.py: its work is counted, none left out)."""
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    seconds = cpu = 0.0
    for start in range(0, len(names), batch):
        part = names[start:start + batch]
        started = time.process_time()
        seconds += timed(lambda: accessor.tags.tag_series(part))
        cpu += time.process_time() - started
    started = time.process_time()
    seconds += timed(accessor.close)
    cpu += time.process_time() - started
    return len(names) / seconds, len(names) / cpu


def build_graphite(tagdb, names: list[str], batch: int = 1000) -> float:
    """New series per second through LocalDatabaseTagDB.tag_multi_series."""
    from django.db import transaction

    seconds = 0.0
    for start in range(0, len(names), batch):
        part = names[start:start + batch]

        def tag() -> None:
            with transaction.atomic():
                tagdb.tag_multi_series(part)
        seconds += timed(tag)
    return len(names) / seconds


def load_graphite(count: int, chunk: int = 100_000) -> float:
    """Bulk-load LocalDatabaseTagDB's tables with the rows its tag_series would write for
    series 0..count-1 (ids aside); indexes dropped during the load and rebuilt. Seconds."""
    from hashlib import sha256

    from django.db import connection, transaction
    from graphite.tags.utils import TaggedSeries as GraphiteTaggedSeries

    started = time.perf_counter()
    tag_ids: dict[str, int] = {}
    value_ids: dict[str, int] = {}
    tables = ("tags_tag", "tags_tagvalue", "tags_series", "tags_seriestag")
    with transaction.atomic():
        connection.ensure_connection()
        raw = connection.connection
        indexes = raw.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
                              f" AND tbl_name IN ({', '.join('?' * len(tables))})", tables).fetchall()
        for name, _ in indexes:
            raw.execute(f'DROP INDEX "{name}"')
        for start in range(0, count, chunk):
            series, series_tags = [], []
            tags_before, values_before = len(tag_ids), len(value_ids)
            for i in range(start, min(count, start + chunk)):
                parsed = GraphiteTaggedSeries.parse(series_name(i))
                series.append((i + 1, sha256(parsed.path.encode("utf8")).hexdigest(), parsed.path))
                for tag, value in parsed.tags.items():
                    tag_id = tag_ids.setdefault(tag, len(tag_ids) + 1)
                    value_id = value_ids.setdefault(value, len(value_ids) + 1)
                    series_tags.append((i + 1, tag_id, value_id))
            # parents first: the foreign keys are checked (deferred) as the rows go in
            raw.executemany("INSERT INTO tags_tag (id, tag) VALUES (?, ?)",
                            [(i, t) for t, i in tag_ids.items() if i > tags_before])
            raw.executemany("INSERT INTO tags_tagvalue (id, value) VALUES (?, ?)",
                            [(i, v) for v, i in value_ids.items() if i > values_before])
            raw.executemany("INSERT INTO tags_series (id, hash, path) VALUES (?, ?, ?)", series)
            raw.executemany("INSERT INTO tags_seriestag (series_id, tag_id, value_id) VALUES (?, ?, ?)", series_tags)
        for _, sql in indexes:
            raw.execute(sql)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return time.perf_counter() - started


def queries(rng: random.Random, runs: int, series: int) -> list[tuple[str, list[str], str | None]]:
    """(kind, expressions, tag) per run of each kind; `=` values are those of a random
    indexed series (so no query is trivially empty)."""
    found = []
    for _ in range(runs):
        some = rng.randrange(series)
        v7 = tag_value(7, some)
        found += [
            ("find_eq", [f"t7={v7}"], None),
            ("find_eq_eq", [f"t2={tag_value(2, some)}", f"t7={v7}"], None),
            ("find_eq_prefix", [f"t7={v7}", f"t2=~v{rng.randrange(3)}"], None),
            ("find_regex", [f"t8=~v{rng.randrange(100, 1000)}.*"], None),
            ("find_eq_ne", [f"t7={v7}", f"t3!=v{rng.randrange(10)}", f"t5!=~v{rng.randrange(10)}"], None),
            ("autocomplete_tags", [], None),
            ("autocomplete_tags_expr", [f"t7={v7}"], None),
            ("autocomplete_values", [], "t8"),
            ("autocomplete_values_prefix", [], "t9"),
            ("autocomplete_values_expr", [f"t7={v7}"], "t4"),
        ]
    return found


def run_query(db, kind: str, exprs: list[str], tag: str | None, graphite: bool):
    if kind.startswith("find"):
        return db._find_series(exprs) if graphite else db.find_series(exprs)
    if kind.startswith("autocomplete_tags"):
        return db.auto_complete_tags(exprs, None, 100)
    return db.auto_complete_values(exprs, tag, "v12" if kind.endswith("prefix") else None, 100)


def percentile_ms(samples: list[float], fraction: float) -> float:
    """Nearest-rank percentile, in milliseconds."""
    ordered = sorted(samples)
    return round(ordered[max(0, math.ceil(fraction * len(ordered)) - 1)] * 1000, 3)


def bench_queries(ours, graphite, runs: int, budget: float, series: int) -> tuple[dict, dict]:
    """Per kind and side, p50/p99 (ms) and runs; and the kinds whose answers differed."""
    samples: dict[str, dict[str, list[float]]] = {}
    spent: dict[tuple[str, str], float] = {}
    differ: dict[str, dict] = {}
    for kind, exprs, tag in queries(random.Random(17), runs, series):
        answers = []
        for side, db, is_graphite in (("ours", ours, False), ("localdb", graphite, True)):
            taken = samples.setdefault(kind, {}).setdefault(side, [])
            if len(taken) >= 5 and spent.get((kind, side), 0.0) > budget:
                continue
            started = time.perf_counter()
            answers.append(run_query(db, kind, exprs, tag, is_graphite))
            taken.append(time.perf_counter() - started)
            spent[(kind, side)] = spent.get((kind, side), 0.0) + taken[-1]
        if len(answers) == 2 and answers[0] != answers[1]:
            entry = differ.setdefault(kind, {"count": 0, "first": f"{exprs} {tag}: {len(answers[0])} vs"
                                             f" {len(answers[1])} results"})
            entry["count"] += 1
    figures = {kind: {side: {"p50": p50_ms(s), "p99": percentile_ms(s, 0.99), "runs": len(s)}
                      for side, s in sides.items()} for kind, sides in samples.items()}
    return figures, differ


def bench_ingest(url: str, count: int, rounds: int = 9) -> dict:
    """Seconds, wall and CPU (medians of `rounds`), to write one point to each of count existing
    tagged metrics and to as many untagged ones: `warm`, the steady state of a long-running
    writer such as carbon (metadata cached: insert_points alone), and `cold`, its first
    batch (cache emptied: get_metrics, which normalises every name, then insert_points)."""
    accessor = Accessor.from_url(url)
    accessor.syncdb()  # --parts ingest alone: the store is not there yet
    tagged = [canonical_path(series_name(i)) for i in range(count)]
    untagged = [f"plain.metric{i // 1000}.m{i % 1000}" for i in range(count)]
    now = int(time.time())
    for names in (untagged, tagged):
        for start in range(0, count, 10_000):
            accessor.create_metrics([(n, META) for n in names[start:start + 10_000]], now=now)
    result: dict[str, list[float]] = {}
    step = 0
    sides = [("tagged", tagged), ("untagged", untagged)]
    for round_ in range(rounds):
        for state in ("cold", "warm"):
            for label, names in sides if round_ % 2 else sides[::-1]:  # neither side always first
                step += 1
                # start each measure with an empty WAL: a checkpoint falls on no one's write
                accessor.store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # noqa: SLF001
                points = {n: [(now - 60 * step, 1.0)] for n in names}  # what the writer received
                if state == "cold":
                    accessor._cache.clear()  # noqa: SLF001 - both sides read their metadata again
                else:
                    accessor.get_metrics(names)  # cached, as a running writer has them

                def write() -> None:
                    if state == "cold":
                        accessor.get_metrics(names)
                    accessor.insert_points(points, now=now)
                cpu = time.process_time()
                wall = timed(write)
                result.setdefault(f"{state}_{label}", []).append(wall)
                result.setdefault(f"{state}_{label}_cpu", []).append(time.process_time() - cpu)
    accessor.close()
    # medians: a best-of on a shared machine picked whichever side a quiet moment favoured
    # (the warm ratio ranged 0.88-1.24 over runs of the same code with best of 5)
    return {k: statistics.median(v) for k, v in result.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=1_000_000, help="tagged series in both indexes (default 1000000)")
    parser.add_argument("--extra", type=int, default=5000,
                        help="new series then indexed into both full indexes by their own calls (default 5000)")
    parser.add_argument("--runs", type=int, default=50, help="measured runs per query kind and side (default 50)")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="seconds a side may spend on one query kind before it stops (at least 5 runs)")
    parser.add_argument("--ingest", type=int, default=10_000, help="metrics of each kind in the ingest test")
    parser.add_argument("--ingest-rounds", type=int, default=9,
                        help="measures of each ingest kind (cold and warm, tagged and untagged), medians reported")
    parser.add_argument("--parts", default="index,queries,ingest",
                        help="comma-separated parts to run (default all): index (ours, full load), queries"
                             " (LocalDatabaseTagDB's load, the extra series into both, the queries; needs index),"
                             " ingest")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)

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
    report: dict = {"series": args.series, "extra": args.extra, "runs": args.runs, "workdir": workdir,
                    "loadavg_start": os.getloadavg(),
                    "localdb_load": "bulk-loaded: the rows its tag_series writes, indexes rebuilt (not timed as indexing)"}
    parts = set(args.parts.split(","))
    if parts - {"index", "queries", "ingest"} or ("queries" in parts and "index" not in parts):
        parser.error(f"--parts {args.parts!r}: choose among index, queries, ingest (queries needs index)")
    report["parts"] = sorted(parts)
    try:
        url = f"sqlite://{os.path.join(workdir, 'bgl.db')}"
        rates = report["index_per_second"] = {}
        if "index" in parts:
            log(f"indexing {args.series:,} series (ours) ...")
            wall, cpu = build_ours(url, [series_name(i) for i in range(args.series)])
            rates["ours_full_load"], rates["ours_full_load_per_cpu_second"] = round(wall), round(cpu)
        if "queries" in parts:
            log(f"bulk-loading {args.series:,} series into LocalDatabaseTagDB's tables ...")
            report["localdb_load_seconds"] = round(load_graphite(args.series), 1)
            extra = [series_name(i) for i in range(args.series, args.series + args.extra)]
            log(f"indexing {args.extra:,} more series into both full indexes ...")
            rates.update(ours=round(build_ours(url, extra, 1000)[0]), localdb=round(build_graphite(graphite, extra)))
            accessor = Accessor.from_url(url)
            log("queries ...")
            report["query_ms"], report["answers_differ"] = bench_queries(accessor.tags, graphite, args.runs,
                                                                        args.budget, args.series)
            accessor.close()
        if "ingest" in parts:
            log(f"ingest of {args.ingest:,} existing tagged and untagged metrics ...")
            report["ingest_seconds"] = bench_ingest(url, args.ingest, args.ingest_rounds)
            report["ingest_rounds"] = args.ingest_rounds
        report["loadavg_end"] = os.getloadavg()
        report["ratios"] = ratios(report)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(format_report(report))
    return 0


def ratios(report: dict) -> dict:
    """The summary ratios of the parts that ran (p50 and rate ratios above 1: ours is
    better; ingest ratios are tagged's CPU over untagged's)."""
    found = {}
    q, rates, ingest = report.get("query_ms"), report["index_per_second"], report.get("ingest_seconds")
    if q:
        found["find_eq_vs_localdb"] = round(q["find_eq"]["localdb"]["p50"] / q["find_eq"]["ours"]["p50"], 2)
        found["autocomplete_values_vs_localdb"] = round(
            q["autocomplete_values"]["localdb"]["p50"] / q["autocomplete_values"]["ours"]["p50"], 2)
        found["autocomplete_values_expr_vs_localdb"] = round(
            q["autocomplete_values_expr"]["localdb"]["p50"] / q["autocomplete_values_expr"]["ours"]["p50"], 2)
        found["index_vs_localdb"] = round(rates["ours"] / rates["localdb"], 2)
    if ingest:  # CPU time of this process (SQLite works in it): the machine's load does not blur it
        found["tagged_vs_untagged_ingest"] = round(ingest["warm_tagged_cpu"] / ingest["warm_untagged_cpu"], 2)
        found["tagged_vs_untagged_ingest_cold"] = round(ingest["cold_tagged_cpu"] / ingest["cold_untagged_cpu"], 2)
    return found


def format_report(report: dict) -> str:
    rates = report["index_per_second"]
    lines = [f"load average (1 min): {report['loadavg_start'][0]:.1f} at the start, {report['loadavg_end'][0]:.1f} at"
             f" the end ({os.cpu_count()} CPUs); parts: {', '.join(report['parts'])}"]
    if "ours_full_load" in rates:
        lines.append(f"series: {report['series']:,}; ours indexed them at {rates['ours_full_load']:,} series/s"
                     f" ({rates['ours_full_load_per_cpu_second']:,} per CPU-second; batches of 10,000)")
    if "query_ms" in report:
        lines += [f"LocalDatabaseTagDB {report['localdb_load']}, {report['localdb_load_seconds']} s",
                  f"indexing {report['extra']:,} more series into the full indexes (series/s): ours {rates['ours']:,},"
                  f" LocalDatabaseTagDB {rates['localdb']:,}",
                  f"{'query (ms)':<28}{'ours p50':>10}{'p99':>9}{'localdb p50':>13}{'p99':>10}{'runs':>10}"]
        for kind, sides in report["query_ms"].items():
            ours, theirs = sides["ours"], sides["localdb"]
            lines.append(f"{kind:<28}{ours['p50']:>10}{ours['p99']:>9}{theirs['p50']:>13}{theirs['p99']:>10}"
                         f"{ours['runs']:>5}/{theirs['runs']}")
        for kind, entry in report["answers_differ"].items():
            lines.append(f"ANSWERS DIFFER: {kind} in {entry['count']} runs, e.g. {entry['first']}")
        if not report["answers_differ"]:
            lines.append("answers: identical on every run both sides made")
    ingest = report.get("ingest_seconds", {})
    for state in ("warm", "cold") if ingest else ():
        lines.append(f"ingest of existing metrics, {state}, median of {report['ingest_rounds']} (s): tagged {ingest[state + '_tagged']:.3f}"
                     f" wall, {ingest[state + '_tagged_cpu']:.3f} CPU; untagged {ingest[state + '_untagged']:.3f}"
                     f" wall, {ingest[state + '_untagged_cpu']:.3f} CPU")
    lines.append("ratios: " + " ".join(f"{k}={v}" for k, v in report["ratios"].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
