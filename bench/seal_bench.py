#!/usr/bin/env python3
"""The twice-daily seal burst: every metric's stage-0 window (720 slots at 60 s) ends at
00:00 and 12:00 UTC, so the first flush after that seals every window at once.

    python bench/seal_bench.py --quick                       # a minute: checks everything runs
    python bench/seal_bench.py --json                        # 100,000 metrics and windows
    python bench/seal_bench.py --baseline /tmp/main-tree     # and against another version's code

Two parts, each side in a fresh child process, sides alternating, medians of --rounds:
- encode: CPU-s to encode 100,000 realistic windows (720 points at 60 s, half gauges
  wandering by small steps with two decimals, half counters, as peer_bench's realistic
  day), with chunks.encode_many against a window-by-window loop; a digest of every chunk's
  bytes, which must be the same on every side (the format does not change).
- flush: through the accessor (insert_columns, the receiver's path) on a fresh SQLite
  store, 100,000 metrics (60s:8d,1h:2y) get the first 718 minutes of a window, then two
  timed flushes of one point a metric: minute 719 (an ordinary flush) and minute 720, the
  window's last slot (the seal burst). CPU-s of each, and the peak RSS of the seal flush
  (the kernel's high-water mark, reset before it).

Sides: `many` (this tree), `loop` (this tree, chunks.encode_many replaced by a loop calling
it one window at a time: what the stores did before), and with --baseline DIR, `baseline`
(the code of DIR, a source tree of another version, e.g. `git archive <commit>` unpacked:
the stores as they were there, unpatched).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
WINDOW = 720  # slots of a stage-0 window at 60 s
STEP = 60
END = 1_764_000_000 - 1_764_000_000 % (WINDOW * STEP)  # a window boundary (00:00 or 12:00 UTC)
PIECE = 10_000  # windows made and encoded at a time (their values: 55 MiB)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def realistic_values(count: int, seed: int):
    """Values of `count` windows (count, 720): even rows gauges (a percentage wandering by
    small steps, two decimals), odd rows counters (a total growing by 0..999 a minute)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values = np.empty((count, WINDOW))
    gauges = rng.uniform(0, 100, (count + 1) // 2)[:, None] + np.cumsum(rng.normal(0, 0.5, ((count + 1) // 2, WINDOW)), 1)
    values[0::2] = np.round(np.clip(gauges, 0, 100), 2)
    counters = rng.integers(0, 10**9, count // 2)[:, None] + np.cumsum(rng.integers(0, 1000, (count // 2, WINDOW)), 1)
    values[1::2] = counters
    return values


def _peak_reset() -> None:
    """Reset the kernel's high-water mark of this process' RSS (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _patch(side: str) -> None:
    """The `loop` side: encode_many one window at a time (the stores' loop before it)."""
    if side != "loop":
        return
    from biggraphite_like import chunks

    many = chunks.encode_many
    chunks.encode_many = lambda windows: [many([w])[0] for w in windows]


def child_encode(side: str, windows: int) -> dict:
    import numpy as np
    from biggraphite_like import chunks

    ts = END - WINDOW * STEP + STEP * np.arange(WINDOW, dtype=np.int64)
    digest, cpu, size = hashlib.sha256(), 0.0, 0
    for start in range(0, windows, PIECE):
        values = realistic_values(min(PIECE, windows - start), start)
        points = [chunks.Points(ts, row) for row in values]
        before = time.process_time()
        if side == "many":
            blobs = chunks.encode_many(points)
        else:  # this tree's encode or the baseline's, window by window
            blobs = [chunks.encode(p) for p in points]
        cpu += time.process_time() - before
        for blob in blobs:
            digest.update(len(blob).to_bytes(4, "little") + blob)
            size += len(blob)
    return {"cpu_seconds": cpu, "windows": windows, "bytes_per_point": size / (windows * WINDOW),
            "digest": digest.hexdigest()}


def child_flush(side: str, metrics: int, workdir: str) -> dict:
    import numpy as np
    from biggraphite_like.accessor import Accessor
    from biggraphite_like.metric import MetricMetadata

    _patch(side)
    accessor = Accessor.from_url(f"sqlite://{workdir}/seal-{side}.db")
    accessor.syncdb()
    names = [f"seal.host{i // 10:05d}.{'gauge' if i % 2 == 0 else 'counter'}{i % 10}" for i in range(metrics)]
    first = END - WINDOW * STEP
    accessor.create_metrics([(n, MetricMetadata.create("60s:8d,1h:2y")) for n in names], now=first)
    per_write = max(1, 2_000_000 // (WINDOW - 2))  # metrics a setup write: ~2 M points
    started = time.perf_counter()
    for start in range(0, metrics, per_write):
        values = realistic_values(min(per_write, metrics - start), start)
        count = len(values)
        owner = np.repeat(np.arange(count), WINDOW - 2)
        timestamps = np.tile(first + STEP * np.arange(WINDOW - 2), count)
        accessor.insert_columns(names[start:start + count], owner, timestamps,
                                values[:, :WINDOW - 2].reshape(-1), now=END - 2 * STEP)
    setup = time.perf_counter() - started
    last = np.concatenate([realistic_values(min(PIECE, metrics - s), s)[:, WINDOW - 2:] for s in range(0, metrics, PIECE)])
    figures = {"metrics": metrics, "setup_seconds": setup}
    for label, minute in (("ordinary", WINDOW - 2), ("seal", WINDOW - 1)):
        _peak_reset()
        before = time.process_time()
        result = accessor.insert_columns(names, np.arange(metrics), np.full(metrics, first + STEP * minute),
                                         last[:, minute - (WINDOW - 2)], now=first + STEP * minute + 1)
        figures[f"{label}_cpu_seconds"] = time.process_time() - before
        figures[f"{label}_peak_rss"] = _peak_rss()
        figures[f"{label}_stored"] = result.stored
    accessor.close()
    return figures


def run_child(part: str, side: str, args: argparse.Namespace, workdir: str) -> dict:
    env = dict(os.environ)
    tree = args.baseline if side == "baseline" else REPO_ROOT
    env["PYTHONPATH"] = tree + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    command = [sys.executable, os.path.abspath(__file__), "--child", part, "--side", side,
               "--windows", str(args.windows), "--metrics", str(args.metrics), "--workdir", workdir]
    output = subprocess.run(command, env=env, stdout=subprocess.PIPE, check=True, timeout=args.timeout).stdout
    return json.loads(output)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 windows and metrics, one round")
    parser.add_argument("--windows", type=int, help="windows of the encode part (default 100,000)")
    parser.add_argument("--metrics", type=int, help="metrics of the flush part (default 100,000)")
    parser.add_argument("--rounds", type=int, help="rounds of each side (default 2; --quick 1)")
    parser.add_argument("--only", choices=["encode", "flush"], help="one part only")
    parser.add_argument("--baseline", help="a source tree of another version: a third side with its code")
    parser.add_argument("--sides", help="comma-separated sides to run (default: many,loop and baseline if given)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a child may take (default 900)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--tmpdir", help="where the stores go (default: the system's temporary directory)")
    parser.add_argument("--child", choices=["encode", "flush"], help=argparse.SUPPRESS)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.windows = args.windows or (2_000 if args.quick else 100_000)
    args.metrics = args.metrics or (2_000 if args.quick else 100_000)
    args.rounds = args.rounds or (1 if args.quick else 2)
    if args.child:
        sys.path.insert(0, os.environ["PYTHONPATH"].split(os.pathsep)[0])
        figures = (child_encode(args.side, args.windows) if args.child == "encode"
                   else child_flush(args.side, args.metrics, args.workdir))
        json.dump(figures, sys.stdout)
        return 0
    if args.baseline and not os.path.isdir(os.path.join(args.baseline, "biggraphite_like")):
        parser.error(f"--baseline {args.baseline}: no biggraphite_like package there")
    sides = args.sides.split(",") if args.sides else ["many", "loop"] + (["baseline"] if args.baseline else [])
    if "many" not in sides or not set(sides) <= {"many", "loop", "baseline"} or ("baseline" in sides) != bool(args.baseline):
        parser.error(f"--sides {args.sides}: many, and loop or baseline (baseline with --baseline)")
    report: dict = {"windows": args.windows, "metrics": args.metrics, "rounds": args.rounds,
                    "loadavg_start": os.getloadavg()}
    for part in (["encode", "flush"] if not args.only else [args.only]):
        runs: dict[str, list[dict]] = {side: [] for side in sides}
        for round_ in range(args.rounds):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                with tempfile.TemporaryDirectory(prefix="bgl-seal-", dir=args.tmpdir) as workdir:
                    log(f"{part}: {side}, round {round_ + 1}")
                    runs[side].append(run_child(part, side, args, workdir))
                    log(f"  {json.dumps({k: v for k, v in runs[side][-1].items() if k != 'digest'})}")
        report[part] = {side: {key: (statistics.median(r[key] for r in rs) if isinstance(rs[0][key], (int, float))
                                     else rs[0][key]) for key in rs[0]} for side, rs in runs.items()}
        if part == "encode":
            report[part]["same_bytes"] = len({r["digest"] for rs in runs.values() for r in rs}) == 1
    report["loadavg_end"] = os.getloadavg()
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print_report(report, sides)
    return 0


def print_report(report: dict, sides: list[str]) -> None:
    """Each part's figures by side, and each side's CPU-s over this tree's encode_many."""
    lines = {
        "encode": (f"encode {report['windows']:,} windows of 720 points", "cpu_seconds",
                   lambda f: f"{f['cpu_seconds']:8.2f} CPU-s ({f['cpu_seconds'] / report['windows'] * 1e6:6.1f} us a"
                             f" window, {f['bytes_per_point']:.3f} bytes a point)"),
        "flush": (f"flush of one point for each of {report['metrics']:,} metrics", "seal_cpu_seconds",
                  lambda f: f"ordinary {f['ordinary_cpu_seconds']:6.2f} CPU-s, seal {f['seal_cpu_seconds']:6.2f} CPU-s,"
                            f" peak RSS of the seal flush {f['seal_peak_rss'] / 2**20:5.0f} MiB"),
    }
    for part, (title, key, line) in lines.items():
        if part not in report:
            continue
        print(f"{title} (median of {report['rounds']}):")
        for side in sides:
            figures = report[part][side]
            print(f"  {side:9} {line(figures)}  {key} / this tree's: {figures[key] / report[part]['many'][key]:.2f}x")
        if part == "encode":
            print(f"  same bytes on every side: {'yes' if report[part]['same_bytes'] else 'NO'}")


if __name__ == "__main__":
    sys.exit(main())
