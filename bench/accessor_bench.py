#!/usr/bin/env python3
"""Accessor benchmark: batch writes and globs, side by side with whisper and StandardFinder.

Run from the repository root (see bench/README.md for what each figure means):

    python bench/accessor_bench.py --quick          # a minute or two: checks everything runs
    python bench/accessor_bench.py                  # 1,000,000 names for the globs
    python bench/accessor_bench.py --names 200000 --json

Everything happens in a fresh temporary directory (SQLite stores, whisper files), removed
at the end unless --keep. Timings are medians of repeated measurements taken in this one
run, and comparisons are ratios of figures measured side by side (interleaved), because
the machine is shared and noisy: never read them as absolute guarantees.

Only public tools: the standard library, numpy, biggraphite_like's public accessor API,
whisper and graphite-web (through tests/graphite_env.py for Django settings).
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import math
import os
import platform
import pstats
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Iterator, Sequence

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:  # `from tests.graphite_env import ...`, and the project if not installed
    sys.path.insert(0, REPO_ROOT)

import numpy as np  # noqa: E402

from biggraphite_like import settings  # noqa: E402
from biggraphite_like.accessor import Accessor  # noqa: E402
from biggraphite_like.metric import MetricMetadata  # noqa: E402

DEFAULT_RETENTION = settings.DEFAULT_RETENTION
SINGLE_STAGE_RETENTION = "60s:1d"
AGGREGATION = "average"
XFILESFACTOR = 0.5
WRITE_CASES = {"10000x1": (10_000, 1), "1000x10": (1_000, 10)}  # metrics x points per metric per batch
CREATE_BATCH = 10_000
LEAVES = ("user", "system", "idle", "nice", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
DCS, CPUS = 10, 10
NAMES_PER_HOST = DCS * CPUS * len(LEAVES)  # one host number across every dc: 1,000 names

# (pattern, what it exercises); each is measured with glob_metrics and glob_directories.
GLOB_PATTERNS = [
    ("servers.dc1.host001.*", "fixed prefix"),
    ("servers.dc1.host001.cpu1.*", "fixed prefix"),
    ("servers.dc1.host001.cpu1.user", "exact name"),
    ("*.dc1.host001.cpu1.user", "wildcard first"),
    ("servers.dc1.host{001,002,003}.cpu1.*", "braces"),
    ("servers.dc1.host00[1-5].cpu1.user", "character class"),
    ("servers.dc1.host001.**", "globstar"),
    ("servers.dc1.*", "directories"),
]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- statistics -----------------------------------------------------------------------------
def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): with 50 samples p99 is the largest."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def summarize(samples: Sequence[float]) -> dict:
    return {
        "runs": len(samples),
        "p50": statistics.median(samples),
        "p99": percentile(samples, 99),
        "min": min(samples),
        "max": max(samples),
    }


@contextlib.contextmanager
def profiled(profiler: cProfile.Profile | None) -> Iterator[None]:
    if profiler is None:
        yield
        return
    profiler.enable()
    try:
        yield
    finally:
        profiler.disable()


# -- environment ------------------------------------------------------------------------------
def environment() -> dict:
    def version(module: str) -> str | None:
        try:
            from importlib.metadata import version as dist_version

            return dist_version(module)
        except Exception:
            return None

    git = None
    with contextlib.suppress(Exception):
        head = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO_ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        git = f"{head}{' (dirty)' if dirty else ''}" if head else None
    model = None
    with contextlib.suppress(Exception), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "numpy": np.__version__,
        "whisper": version("whisper"),
        "graphite_web": version("graphite-web"),
        "django": version("Django"),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "platform": platform.platform(),
        "git": git,
        "code_sha256": _code_digest(),
        "loadavg_start": _loadavg(),
    }


def _code_digest() -> str:
    """First 12 hex digits of the sha256 of the project's sources as imported (the tree changes)."""
    import hashlib

    import biggraphite_like

    digest = hashlib.sha256()
    package = os.path.dirname(biggraphite_like.__file__)
    for folder, dirs, files in sorted(os.walk(package)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                with open(os.path.join(folder, name), "rb") as source:
                    digest.update(name.encode() + b"\0" + source.read())
    return digest.hexdigest()[:12]


def _loadavg() -> list[float] | None:
    with contextlib.suppress(OSError, AttributeError):
        return [round(x, 2) for x in os.getloadavg()]
    return None


# -- writes ---------------------------------------------------------------------------------------
def write_metric_names(count: int) -> list[str]:
    """`bench.writes.hostNNN.metricNN`: 100 metrics per host directory (per whisper directory)."""
    return [f"bench.writes.host{i // 100:03d}.metric{i % 100:02d}" for i in range(count)]


def whisper_file(root: str, name: str) -> str:
    return os.path.join(root, *name.split(".")) + ".wsp"


def bench_write_case(
    workdir: str, retention: str, case: str, batches: int, prefill_minutes: int,
    with_whisper: bool, profiler: cProfile.Profile | None,
) -> dict:
    """One write scenario on a fresh store (and fresh whisper files): interleaved timed batches."""
    import whisper

    metrics, per_metric = WRITE_CASES[case]
    os.makedirs(workdir)
    names = write_metric_names(metrics)
    metadata = MetricMetadata.create(retention, AGGREGATION, XFILESFACTOR)
    accessor = Accessor.from_url(f"sqlite://{os.path.join(workdir, 'bgl.db')}")
    accessor.syncdb()
    for start in range(0, len(names), CREATE_BATCH):
        accessor.create_metrics([(n, metadata) for n in names[start:start + CREATE_BATCH]])
    paths: list[str] = []
    if with_whisper:
        wsp_root = os.path.join(workdir, "whisper")
        archives = metadata.retention.as_tuples()
        for name in names:
            path = whisper_file(wsp_root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            # sparse: 10,000 files of the default retention would otherwise take 3.4 GB of zeros
            whisper.create(path, archives, xFilesFactor=XFILESFACTOR, aggregationMethod=AGGREGATION, sparse=True)
            paths.append(path)

    # Timeline: minute m is at hour0 + 60 m, hour0 six hours ago (every point lands in stage
    # 0 of both retentions). Minutes [0, prefill) are written untimed so that the hour being
    # written already has enough points for propagation to write the coarser stage (the
    # steady state: read the 60 finer points of the hour, write one aggregate).
    now = int(time.time())
    hour0 = now - now % 3600 - 6 * 3600
    rng = np.random.default_rng(42)

    def minute_points(first_minute: int, count: int) -> list[tuple[int, float]]:
        values = (rng.random(count) * 100.0).tolist()
        return [(hour0 + 60 * (first_minute + j), values[j]) for j in range(count)]

    if prefill_minutes:
        prefill = minute_points(0, prefill_minutes)
        accessor.insert_points({n: prefill for n in names}, now=now)
        for path in paths:
            whisper.update_many(path, prefill, now=now)

    # Batch 0 is the warm-up; batches 1..n are measured. Inputs are built before timing.
    inputs = []
    for b in range(batches + 1):
        first = prefill_minutes + b * per_metric
        inputs.append({n: minute_points(first, per_metric) for n in names})
    expected = metrics * per_metric
    ours_wall, ours_cpu, wsp_wall, wsp_cpu = [], [], [], []
    stored_ok = True
    for b, batch in enumerate(inputs):
        with profiled(profiler if b else None):
            w0, c0 = time.perf_counter(), time.process_time()
            result = accessor.insert_points(batch, now=now)
            w1, c1 = time.perf_counter(), time.process_time()
        if result.stored != expected or result.rejected or result.too_old:
            stored_ok = False
            log(f"  unexpected write result: {result.stored} stored, {result.rejected} rejected,"
                f" {result.too_old} too old: {result.errors[:3]}")
        if b:
            ours_wall.append(w1 - w0)
            ours_cpu.append(c1 - c0)
        if with_whisper:
            items = [(path, batch[name]) for path, name in zip(paths, names)]
            w0, c0 = time.perf_counter(), time.process_time()
            for path, points in items:
                whisper.update_many(path, points, now=now)
            w1, c1 = time.perf_counter(), time.process_time()
            if b:
                wsp_wall.append(w1 - w0)
                wsp_cpu.append(c1 - c0)
    accessor.close()

    def rate(seconds: list[float]) -> float | None:
        return expected / statistics.median(seconds) if seconds else None

    figures = {
        "retention": retention,
        "case": case,
        "metrics": metrics,
        "points_per_metric": per_metric,
        "points_per_batch": expected,
        "batches": batches,
        "prefill_minutes": prefill_minutes,
        "all_points_stored": stored_ok,
        "ours_batch_seconds": ours_wall,
        "ours_batch_cpu_seconds": ours_cpu,
        "ours_points_per_s": rate(ours_wall),
        "ours_points_per_cpu_s": rate(ours_cpu),
        "whisper_batch_seconds": wsp_wall,
        "whisper_batch_cpu_seconds": wsp_cpu,
        "whisper_points_per_s": rate(wsp_wall),
        "whisper_points_per_cpu_s": rate(wsp_cpu),
    }
    figures["ratio_ours_over_whisper"] = (
        figures["ours_points_per_s"] / figures["whisper_points_per_s"] if wsp_wall else None)
    figures["ratio_cpu_ours_over_whisper"] = (
        figures["ours_points_per_cpu_s"] / figures["whisper_points_per_cpu_s"] if wsp_cpu else None)
    return figures


# -- globs ------------------------------------------------------------------------------------------
def tree_names(count: int) -> Iterator[str]:
    """`servers.dc{0..9}.hostNNN.cpu{0..9}.<leaf>`: host numbers grow until `count` names.

    Host-major order, so any prefix of the sequence holds complete hosts (host000 and
    host001 of every dc are complete from 2,000 names on) and creation order is not the
    name order, as with carbon.
    """
    produced = 0
    host = 0
    while True:
        for dc in range(DCS):
            for cpu in range(CPUS):
                for leaf in LEAVES:
                    if produced == count:
                        return
                    yield f"servers.dc{dc}.host{host:03d}.cpu{cpu}.{leaf}"
                    produced += 1
        host += 1


def create_tree_store(path: str, count: int, profiler: cProfile.Profile | None = None) -> dict:
    """A store holding `count` tree names, created through Accessor.create_metrics in batches."""
    metadata = MetricMetadata.create(DEFAULT_RETENTION, AGGREGATION, XFILESFACTOR)
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    batch: list[tuple[str, MetricMetadata]] = []
    batch_seconds: list[float] = []
    started = time.perf_counter()
    cpu_started = time.process_time()
    next_report = started + 30

    def flush() -> None:
        nonlocal next_report
        t0 = time.perf_counter()
        with profiled(profiler):
            accessor.create_metrics(batch)
        batch_seconds.append(time.perf_counter() - t0)
        batch.clear()
        if time.perf_counter() > next_report:
            done = len(batch_seconds) * CREATE_BATCH
            log(f"  created ~{done:,} of {count:,} names ({time.perf_counter() - started:.0f} s)")
            next_report = time.perf_counter() + 30

    for name in tree_names(count):
        batch.append((name, metadata))
        if len(batch) == CREATE_BATCH:
            flush()
    if batch:
        flush()
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    accessor.close()
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    metadata_bytes = metadata_disk_bytes(path)
    return {
        "names": count,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "names_per_s": count / seconds if seconds else None,
        "create_names_per_s": count / seconds if seconds else None,
        "create_names_per_cpu_s": count / cpu_seconds if cpu_seconds else None,
        "metadata_bytes": metadata_bytes,
        "metadata_bytes_per_metric": metadata_bytes / count if metadata_bytes is not None else None,
        "first_batch_seconds": batch_seconds[0] if batch_seconds else None,
        "last_batch_seconds": batch_seconds[-1] if batch_seconds else None,
        "batch_size": CREATE_BATCH,
        "db_bytes": size,
    }


def metadata_disk_bytes(path: str) -> int | None:
    """Bytes of the pages of every table and index but the datapoints ones (dbstat, after a
    checkpoint moved the WAL into the file); None when SQLite lacks the dbstat table."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return conn.execute(
            "SELECT SUM(d.pgsize) FROM dbstat AS d JOIN sqlite_master AS m ON m.name = d.name"
            " WHERE m.tbl_name NOT LIKE 'datapoints%'").fetchone()[0]
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()


def timed_runs(call: Callable[[], object], runs: int, budget: float) -> tuple[float, list[float], object]:
    """(first run's seconds, seconds of `runs` more runs, fewer if they exceed budget, last result)."""
    t0 = time.perf_counter()
    result = call()
    first = time.perf_counter() - t0
    runs = max(3, min(runs, int(budget / max(first, 1e-6))))
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = call()
        samples.append(time.perf_counter() - t0)
    return first, samples, result


def bench_globs(store_path: str, runs: int, budget: float) -> list[dict]:
    """glob_metrics and glob_directories of each pattern: first-run, p50 and p99 latencies."""
    accessor = Accessor.from_url(f"sqlite://{store_path}")  # fresh: no metadata cached by creation
    rows = []
    try:
        for pattern, kind in GLOB_PATTERNS:
            for op in ("metrics", "directories"):
                call = getattr(accessor, f"glob_{op}")
                try:
                    first, samples, result = timed_runs(lambda: call(pattern), runs, budget)
                except Exception as exc:  # a limit or a bug: report it, go on
                    rows.append({"pattern": pattern, "kind": kind, "op": op, "error": f"{type(exc).__name__}: {exc}"})
                    log(f"  {op} {pattern}: {type(exc).__name__}: {exc}")
                    continue
                row = {"pattern": pattern, "kind": kind, "op": op, "results": len(result), "first": first,
                       **summarize(samples)}
                rows.append(row)
                log(f"  {op:11} {pattern:40} {row['results']:6} results  p50 {row['p50'] * 1e3:9.3f} ms")
    finally:
        accessor.close()
    return rows


def bench_standard_finder(store_path: str, names: list[str], workdir: str, runs: int, budget: float) -> dict:
    """Ours (glob_metrics + glob_directories: what a finder needs) vs StandardFinder, interleaved."""
    from tests.graphite_env import configure, make_whisper_tree

    configure()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from graphite.finders.standard import StandardFinder
        from graphite.finders.utils import FindQuery

    root = os.path.join(workdir, "whisper-tree")
    t0 = time.perf_counter()
    make_whisper_tree(root, names)
    tree_seconds = time.perf_counter() - t0
    finder = StandardFinder(directories=[root])
    accessor = Accessor.from_url(f"sqlite://{store_path}")

    def ours(pattern: str) -> tuple[list[str], list[str]]:
        return accessor.glob_metrics(pattern), accessor.glob_directories(pattern)

    def standard(pattern: str) -> tuple[list[str], list[str]]:
        leaves, branches = set(), set()
        for node in finder.find_nodes(FindQuery(pattern, None, None)):
            (leaves if node.is_leaf else branches).add(node.path)
        return sorted(leaves), sorted(branches)

    rows = []
    try:
        for pattern, kind in GLOB_PATTERNS:
            try:
                t0 = time.perf_counter()
                our_result = ours(pattern)
                our_first = time.perf_counter() - t0
                t0 = time.perf_counter()
                std_result = standard(pattern)
                std_first = time.perf_counter() - t0
                count = max(3, min(runs, int(budget / max(our_first + std_first, 1e-6))))
                our_samples, std_samples = [], []
                for _ in range(count):  # interleaved: both sides see the same noise
                    t0 = time.perf_counter()
                    ours(pattern)
                    our_samples.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    standard(pattern)
                    std_samples.append(time.perf_counter() - t0)
            except Exception as exc:
                rows.append({"pattern": pattern, "kind": kind, "error": f"{type(exc).__name__}: {exc}"})
                log(f"  compare {pattern}: {type(exc).__name__}: {exc}")
                continue
            row = {
                "pattern": pattern,
                "kind": kind,
                "runs": count,
                "ours_p50": statistics.median(our_samples),
                "standard_p50": statistics.median(std_samples),
                "ours_results": len(our_result[0]) + len(our_result[1]),
                "standard_results": len(std_result[0]) + len(std_result[1]),
                "same_results": our_result == std_result,
            }
            row["ratio_ours_over_standard"] = row["ours_p50"] / row["standard_p50"]
            rows.append(row)
            log(f"  compare {pattern:40} ours {row['ours_p50'] * 1e3:8.3f} ms"
                f"  standard {row['standard_p50'] * 1e3:8.3f} ms  same={row['same_results']}")
    finally:
        accessor.close()
    return {"names": len(names), "whisper_tree_seconds": tree_seconds, "patterns": rows}


# -- report -------------------------------------------------------------------------------------
def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for index, row in enumerate(cells):
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def fmt_rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def fmt_ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.3f}" if ms < 10 else f"{ms:.1f}" if ms < 1000 else f"{ms:,.0f}"


def print_creation(creation: dict) -> None:
    per_metric = creation["metadata_bytes_per_metric"]
    print(f"Creation of {creation['names']:,} names, batches of {creation['batch_size']:,}:"
          f" {fmt_rate(creation['create_names_per_s'])} names/s, {fmt_rate(creation['create_names_per_cpu_s'])}"
          f" names/cpu-s; metadata (metrics, directories, their indexes, interned strings)"
          f" {'unknown' if per_metric is None else f'{per_metric:,.0f}'} bytes/metric")


def print_report(report: dict) -> None:
    env = report["environment"]
    print(f"biggraphite_like accessor benchmark ({'quick' if report['quick'] else 'full'})")
    print(f"Python {env['python']}, SQLite {env['sqlite']}, numpy {env['numpy']}, whisper {env['whisper']},"
          f" graphite-web {env['graphite_web']}; {env['cpus']} CPUs ({env['cpu_model']});"
          f" git {env['git']}, sources sha256 {env.get('code_sha256')}")
    print(f"load average at start {env['loadavg_start']}, at end {env.get('loadavg_end')}")
    writes = report.get("writes")
    if writes:
        print("\nA. Batch writes: Accessor.insert_points vs whisper.update_many, same points, same retention"
              f" (median of {writes[0]['batches']} batches after 1 warm-up; one process, one thread)")
        print(table(
            ["retention", "batch", "ours pts/s", "whisper pts/s", "ours/whisper",
             "ours pts/cpu-s", "whisper pts/cpu-s", "cpu ratio", "ours s/batch", "whisper s/batch"],
            [[w["retention"], f"{w['metrics']:,} x {w['points_per_metric']}",
              fmt_rate(w["ours_points_per_s"]), fmt_rate(w["whisper_points_per_s"]),
              fmt_ratio(w["ratio_ours_over_whisper"]),
              fmt_rate(w["ours_points_per_cpu_s"]), fmt_rate(w["whisper_points_per_cpu_s"]),
              fmt_ratio(w["ratio_cpu_ours_over_whisper"]),
              f"{statistics.median(w['ours_batch_seconds']):.3f}",
              f"{statistics.median(w['whisper_batch_seconds']):.3f}" if w["whisper_batch_seconds"] else "-"]
             for w in writes]))
        if not all(w["all_points_stored"] for w in writes):
            print("WARNING: some batches did not store every point (see the log)")
    if report.get("creation"):
        print()
        print_creation(report["creation"])
    globs = report.get("globs")
    if globs:
        creation = globs["creation"]
        print(f"\nB. Globs over {creation['names']:,} names (servers.dc*.host*.cpu*.<leaf>)")
        print(f"Creation through Accessor.create_metrics in batches of {creation['batch_size']:,}:"
              f" {creation['seconds']:.1f} s ({fmt_rate(creation['names_per_s'])} names/s;"
              f" first batch {creation['first_batch_seconds']:.2f} s, last {creation['last_batch_seconds']:.2f} s);"
              f" store {creation['db_bytes'] / 1e6:,.0f} MB")
        print_creation(creation)
        rows = []
        for r in globs["patterns"]:
            if "error" in r:
                rows.append([r["pattern"], r["op"], r["kind"], "error", r["error"][:60], "", "", ""])
            else:
                rows.append([r["pattern"], r["op"], r["kind"], f"{r['results']:,}", fmt_ms(r["first"]),
                             fmt_ms(r["p50"]), fmt_ms(r["p99"]), r["runs"]])
        print(table(["pattern", "glob_", "kind", "results", "first ms", "p50 ms", "p99 ms", "runs"], rows))
    compare = report.get("standard_finder")
    if compare:
        print(f"\nC. Ours (glob_metrics + glob_directories) vs graphite-web StandardFinder over"
              f" {compare['names']:,} names (empty whisper files), p50, interleaved")
        rows = []
        for r in compare["patterns"]:
            if "error" in r:
                rows.append([r["pattern"], "error", r["error"][:60], "", "", "", ""])
            else:
                rows.append([r["pattern"], fmt_ms(r["ours_p50"]), fmt_ms(r["standard_p50"]),
                             fmt_ratio(r["ratio_ours_over_standard"]),
                             f"{r['ours_results']:,}", f"{r['standard_results']:,}",
                             "yes" if r["same_results"] else "NO"])
        print(table(["pattern", "ours p50 ms", "standard p50 ms", "ours/standard",
                     "ours results", "standard results", "same"], rows))
    print(f"\nTotal {report['seconds']:.0f} s")


# -- main ---------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="small run to check the benchmark: 10,000 names, 3 batches, 20 glob runs")
    parser.add_argument("--names", type=int, help="names in the glob tree (default 1,000,000; --quick 10,000)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of tables")
    parser.add_argument("--only", choices=["writes", "globs", "creation"],
                        help="run one part only (creation: create --names names, default 100,000, and report"
                             " names/s and metadata bytes per metric)")
    parser.add_argument("--case", action="append", choices=sorted(WRITE_CASES),
                        help="write case(s) to run (default: all)")
    parser.add_argument("--retention", action="append",
                        help=f"retention(s) for the writes (default: {DEFAULT_RETENTION} and {SINGLE_STAGE_RETENTION})")
    parser.add_argument("--batches", type=int, help="measured write batches per case (default 7; --quick 3)")
    parser.add_argument("--prefill", type=int, default=30,
                        help="minutes written (untimed) before the batches, so propagation writes (default 30)")
    parser.add_argument("--glob-runs", type=int, help="runs per glob measurement (default 50; --quick 20)")
    parser.add_argument("--glob-budget", type=float, default=10.0,
                        help="seconds per glob measurement: fewer runs when one is slow (default 10)")
    parser.add_argument("--compare-names", type=int, default=10_000,
                        help="names in the tree compared with StandardFinder (default 10,000; at most --names)")
    parser.add_argument("--no-whisper", action="store_true", help="skip whisper in the write part")
    parser.add_argument("--no-standard", action="store_true", help="skip the StandardFinder comparison")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile the measured insert_points calls (and create_metrics with --only creation);"
                             " print the top by cumtime to stderr")
    parser.add_argument("--tmpdir", help="where to create the temporary directory (default: the system's)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    args.names = args.names or (10_000 if args.quick else 100_000 if args.only == "creation" else 1_000_000)
    args.batches = args.batches or (3 if args.quick else 7)
    args.glob_runs = args.glob_runs or (20 if args.quick else 50)
    args.retention = args.retention or [DEFAULT_RETENTION, SINGLE_STAGE_RETENTION]
    args.case = args.case or list(WRITE_CASES)
    if args.names < 1:
        parser.error("--names must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    report: dict = {"quick": args.quick, "environment": environment(), "arguments": {
        k: v for k, v in vars(args).items() if k not in ("json", "tmpdir", "keep")}}
    workdir = tempfile.mkdtemp(prefix="bgl-bench-", dir=args.tmpdir)
    log(f"working in {workdir}")
    profiler = cProfile.Profile() if args.profile else None
    try:
        if args.only in (None, "writes"):
            report["writes"] = []
            for retention in args.retention:
                for case in args.case:
                    log(f"writes: {retention}, {case}")
                    figures = bench_write_case(
                        os.path.join(workdir, f"writes-{len(report['writes'])}"), retention, case,
                        args.batches, args.prefill, not args.no_whisper, profiler)
                    report["writes"].append(figures)
                    log(f"  ours {fmt_rate(figures['ours_points_per_s'])} points/s,"
                        f" whisper {fmt_rate(figures['whisper_points_per_s'])} points/s")
        if args.only == "creation":
            log(f"creation: {args.names:,} names")
            report["creation"] = create_tree_store(os.path.join(workdir, "creation.db"), args.names, profiler)
        if args.only in (None, "globs"):
            big = os.path.join(workdir, "globs.db")
            log(f"globs: creating {args.names:,} names")
            creation = create_tree_store(big, args.names)
            log(f"  created in {creation['seconds']:.1f} s")
            report["globs"] = {"creation": creation, "patterns": bench_globs(big, args.glob_runs, args.glob_budget)}
            if not args.no_standard:
                compare_count = min(args.compare_names, args.names)
                if compare_count == args.names:
                    small = big
                else:
                    small = os.path.join(workdir, "compare.db")
                    log(f"compare: creating {compare_count:,} names")
                    create_tree_store(small, compare_count)
                report["standard_finder"] = bench_standard_finder(
                    small, list(tree_names(compare_count)), workdir, args.glob_runs, args.glob_budget)
    finally:
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    report["environment"]["loadavg_end"] = _loadavg()
    report["seconds"] = time.perf_counter() - started
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
        print(out.getvalue(), file=sys.stderr)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
