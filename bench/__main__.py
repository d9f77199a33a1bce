"""`python -m bench [--quick]`: every benchmark, each figure next to its reference measured
in the same run on the same data, in one table; the last line sums them up:

    ratios: ingest_vs_whisper=X find_vs_standard=Y globstar_vs_standard=G fetch_vs_whisper=Z
            ingest_vs_vm ingest_cpu_vs_vm bytes_vs_vm find_http_vs_vm find_cached_vs_vm
            fetch_http_vs_vm render_wide_vs_vm names_load_vs_vm name_bytes_vs_vm tags_find_vs_vm
            tags_index_vs_vm tags_find_vs_localdb=F
    cached find p50 (in-process, median over the patterns): H ms

(each > 1 means ours is better: points stored per second over whisper's through
carbon-cache end to end; StandardFinder's median find time over ours, geometric mean over
the patterns, glob cache off, then over the `**` patterns alone; whisper +
StandardFinder's fetch time over ours; then the
peer section against VictoriaMetrics, bench/peer_bench.py, whose ratios bench/peer/table.py
defines; then LocalDatabaseTagDB's findSeries p50 with one `=` term over ours, on the same
tagged series, bench/tags_bench.py).

It runs the benchmarks of this folder as child processes (their own options are in
bench/README.md) and measures each side's peak memory: carbon-cache's process tree with
our plugin and with whisper; graphite-web's finder (ours and StandardFinder) each alone in
a fresh process on the data the timed run kept (Python, Django and graphite included on
both sides).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a script: the repository's root on the path, as `python -m bench` has it
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.peer.table import RATIOS as PEER_RATIOS, mib, ms, peer_rows  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
RATIOS = ("ingest_vs_whisper", "find_vs_standard", "globstar_vs_standard", "fetch_vs_whisper", *PEER_RATIOS,
          "tags_find_vs_localdb")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_json(script: str, *args: str) -> dict:
    """Run a benchmark of this folder with --json; its progress goes to our stderr."""
    command = [sys.executable, os.path.join(BENCH_DIR, script), *args, "--json"]
    log(f"$ {' '.join(command[1:])}")
    started = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.PIPE, cwd=REPO_ROOT, check=True)
    log(f"  ({time.perf_counter() - started:.0f} s)")
    return json.loads(result.stdout)


def peak_rss_of(command: list[str]) -> int:
    """Run a command to its end; its peak resident bytes (ru_maxrss, kernel-measured)."""
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, command)
    return usage.ru_maxrss * 1024


def table(rows: list[list[str]]) -> str:
    headers = ["part", "measure", "ours", "reference", "ratio", "peak memory ours", "peak memory ref."]
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(headers, widths)).rstrip(),
             "  ".join("-" * width for width in widths)]
    lines += ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def ingest_rows(writes: dict, carbon: dict) -> tuple[list[list[str]], float]:
    rows = []
    for case in writes["writes"]:
        ours, theirs = case["ours_points_per_s"], case["whisper_points_per_s"]
        rows.append(["ingest", f"accessor writes, {case['retention']}, {case['metrics']:,} metrics x"
                     f" {case['points_per_metric']} point(s) a batch", f"{ours:,.0f} pts/s",
                     f"whisper {theirs:,.0f} pts/s", f"{ours / theirs:.2f}x", "", ""])
    results, peaks = carbon["results"], carbon["peak_rss_bytes"]
    totals = {}
    for side in ("ours", "whisper"):
        totals[side] = sum(r["points"] for r in results[side]) / sum(r["seconds"] for r in results[side])
    for index, (ours, theirs) in enumerate(zip(results["ours"], results["whisper"])):
        rows.append(["ingest", f"carbon-cache end to end, {carbon['metrics']:,} metrics, {ours['round']} metrics,"
                     " points stored", f"{ours['points_per_second']:,.0f} pts/s",
                     f"whisper {theirs['points_per_second']:,.0f} pts/s",
                     f"{ours['points_per_second'] / theirs['points_per_second']:.2f}x",
                     mib(peaks.get("ours")) if index == 0 else "", mib(peaks.get("whisper")) if index == 0 else ""])
    return rows, totals["ours"] / totals["whisper"]


def find_rows(graphite: dict, memory: dict) -> tuple[list[list[str]], float]:
    rows = []
    for index, row in enumerate(graphite["find"]):
        first = index == 0
        rows.append(["find", f"{row['pattern']} ({row['kind']}, {row['nodes']:,} nodes) p50 / p99",
                     f"{ms(row['ours_s'])} / {ms(row['ours_p99_s'])}",
                     f"StandardFinder {ms(row['standard_s'])} / {ms(row['standard_p99_s'])}",
                     f"{row['ratio']:.1f}x", mib(memory.get("find ours")) if first else "",
                     mib(memory.get("find standard")) if first else ""])
    for row in graphite["find"]:
        rows.append(["find", f"{row['pattern']}, answer cached (BG_FIND_CACHE_TTL) p50 / p99",
                     f"{ms(row['hot_s'])} / {ms(row['hot_p99_s'])}", "", f"{row['hot_ratio']:.1f}x", "", ""])
    return rows, statistics.geometric_mean([row["ratio"] for row in graphite["find"]])


def globstar_ratio(graphite: dict) -> float:
    """StandardFinder's median time over ours on the patterns with `**`, geometric mean."""
    ratios = [row["ratio"] for row in graphite["find"] if "**" in row["pattern"]]
    return statistics.geometric_mean(ratios) if ratios else math.nan


def cached_find_p50(graphite: dict) -> float:
    """Seconds: the median over the find patterns of the median time of a cached answer."""
    return statistics.median(row["hot_s"] for row in graphite["find"])


def fetch_rows(graphite: dict, memory: dict) -> tuple[list[list[str]], float]:
    fetch = graphite["fetch"]
    return [["fetch", f"{fetch['series']:,} series x 1 day at 60 s through the finder, p50 / p99",
             f"{ms(fetch['ours_s'])} / {ms(fetch['ours_p99_s'])}",
             f"whisper + StandardFinder {ms(fetch['standard_s'])} / {ms(fetch['standard_p99_s'])}",
             f"{fetch['ratio']:.1f}x", mib(memory.get("fetch ours")), mib(memory.get("fetch standard"))]], fetch["ratio"]


def cassandra_rows(cassandra: dict) -> list[list[str]]:
    rows = [["cassandra", f"CQL requests: {label}", f"{figures['requests']:,} ({figures['statements']:,} statements)",
             "", "", "", ""] for label, figures in cassandra["operations"].items()]
    real = cassandra.get("real")
    for label, rates in (real or {}).get("ops_per_second", {}).items():
        stores = [store for store in real["stores"] if store != "sqlite"]
        rows.append([f"cassandra {real['version']}", f"{label}, ops/s: " + " / ".join(stores),
                     " / ".join(f"{rates[store]:.1f}" for store in stores), f"SQLite {rates['sqlite']:.1f}",
                     "", "", ""])
    return rows


def tags_rows(tags: dict) -> tuple[list[list[str]], float]:
    """Rows of bench/tags_bench.py (ours beside LocalDatabaseTagDB on the same series) and
    its findSeries-with-one-= ratio."""
    rates = tags["index_per_second"]
    rows = [["tags", f"index {tags['series']:,} new tagged series (batches of 10,000)",
             f"{rates['ours_full_load']:,} series/s", "LocalDatabaseTagDB bulk-loaded", "", "", ""],
            ["tags", f"index {tags['extra']:,} more series into the full indexes", f"{rates['ours']:,} series/s",
             f"LocalDatabaseTagDB {rates['localdb']:,} series/s", f"{rates['ours'] / rates['localdb']:.2f}x", "", ""]]
    for kind, sides in tags["query_ms"].items():
        ours, theirs = sides["ours"], sides["localdb"]
        differ = " (ANSWERS DIFFER)" if kind in tags["answers_differ"] else ""
        rows.append(["tags", f"{kind}{differ}, p50 / p99", f"{ours['p50']:,.2f} ms / {ours['p99']:,.2f} ms",
                     f"LocalDatabaseTagDB {theirs['p50']:,.2f} ms / {theirs['p99']:,.2f} ms",
                     f"{theirs['p50'] / max(ours['p50'], 1e-6):.1f}x", "", ""])
    ingest = tags["ingest_seconds"]
    for state in ("warm", "cold"):
        rows.append(["tags", f"ingest of existing metrics, {state}, tagged vs untagged (CPU time, lower is better)",
                     f"{ingest[state + '_tagged_cpu']:.3f} s", f"untagged {ingest[state + '_untagged_cpu']:.3f} s",
                     f"{ingest[state + '_tagged_cpu'] / ingest[state + '_untagged_cpu']:.2f}x", "", ""])
    return rows, tags["ratios"]["find_eq_vs_localdb"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="a fast check: 10,000 names for the finds, 10,000 metrics through carbon, 20,000 tagged"
                             " series (a few minutes)")
    parser.add_argument("--json", metavar="PATH", help="also write every figure there as JSON")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    names, metrics = (10_000, 10_000) if args.quick else (1_000_000, 100_000)
    workdir = tempfile.mkdtemp(prefix="bgl-bench-")
    figures: dict = {"quick": args.quick, "machine": {
        "cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
        "loadavg_start": os.getloadavg()}}
    try:
        figures["writes"] = run_json("accessor_bench.py", "--only", "writes", *(["--quick"] if args.quick else []))
        figures["graphite"] = graphite = run_json(
            "graphite_bench.py", "--series", "1000", "--names", str(names), "--workdir", os.path.join(workdir, "graphite"),
            "--find-runs", "20" if args.quick else "100", "--find-budget", "3" if args.quick else "20")
        memory = {}
        for part in ("fetch", "find"):
            for side in ("ours", "standard"):
                log(f"peak memory: {part}, {side} alone")
                memory[f"{part} {side}"] = peak_rss_of([
                    sys.executable, os.path.join(BENCH_DIR, "graphite_bench.py"), "--side", side, "--part", part,
                    "--workdir", graphite["workdir"], "--now", str(graphite["now"])])
        figures["graphite_peak_rss_bytes"] = memory
        shutil.rmtree(graphite["workdir"], ignore_errors=True)
        figures["carbon"] = run_json("carbon_bench.py", "--metrics", str(metrics), "--tmpdir", workdir)
        try:
            figures["peer"] = run_json("peer_bench.py", "--tmpdir", workdir, *(["--quick"] if args.quick else []))
        except subprocess.CalledProcessError as error:  # keep every other figure
            figures["peer"] = {"skipped": f"bench/peer_bench.py failed with status {error.returncode} (its log is above)"}
        figures["tags"] = run_json("tags_bench.py", *(["--series", "20000", "--extra", "1000", "--runs", "10",
                                                         "--ingest", "2000"] if args.quick else []))
        real = ["--real"] if shutil.which("java") and shutil.which("mvn") else []  # a real node beside SQLite
        figures["cassandra"] = run_json("cassandra_bench.py", *real)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    figures["machine"]["loadavg_end"] = os.getloadavg()
    figures["seconds"] = time.perf_counter() - started

    ingest, ingest_ratio = ingest_rows(figures["writes"], figures["carbon"])
    finds, find_ratio = find_rows(figures["graphite"], figures["graphite_peak_rss_bytes"])
    fetches, fetch_ratio = fetch_rows(figures["graphite"], figures["graphite_peak_rss_bytes"])
    peer, peer_ratios = ([], {}) if "skipped" in figures["peer"] else peer_rows(figures["peer"])
    tags, tags_ratio = tags_rows(figures["tags"])
    figures["ratios"] = {"ingest_vs_whisper": ingest_ratio, "find_vs_standard": find_ratio,
                         "globstar_vs_standard": globstar_ratio(figures["graphite"]),
                         "fetch_vs_whisper": fetch_ratio, **peer_ratios, "tags_find_vs_localdb": tags_ratio}
    figures["cached_find_p50_s"] = cached_find_p50(figures["graphite"])
    if args.json:
        with open(args.json, "w") as file:
            json.dump(figures, file, indent=2)
    machine = figures["machine"]
    print(f"biggraphite_like benchmarks ({'quick' if args.quick else 'full'}): {machine['cpus']} CPUs,"
          f" Python {machine['python']}, load {machine['loadavg_start'][0]:.1f} -> {machine['loadavg_end'][0]:.1f},"
          f" {figures['seconds'] / 60:.1f} min")
    print(table([*ingest, *finds, *fetches, *peer, *tags, *cassandra_rows(figures["cassandra"])]))
    if "skipped" in figures["peer"]:
        print(f"peer section skipped: {figures['peer']['skipped']}")
    print("ratios: " + " ".join(f"{key}={figures['ratios'].get(key, math.nan):.2f}" for key in RATIOS))
    print(f"cached find p50 (in-process, median over the patterns): {figures['cached_find_p50_s'] * 1000:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
