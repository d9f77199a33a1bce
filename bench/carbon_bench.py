"""carbon-cache with the biggraphite_like plugin vs carbon-cache with whisper, same input.

Two real carbon-cache daemons, one after the other, each on free 127.0.0.1 ports: ours
(`bgl-carbon-cache`, DATABASE = biggraphite_like, an SQLite store) and carbon's own
`carbon-cache.py` (DATABASE = whisper). Each receives the same pickle stream in two rounds:

1. `new`: every metric is new (carbon creates it) and gets --points points;
2. `existing`: the same metrics get --points more points (the steady state).

A round's time runs from the first byte sent until every point of the round is readable
(so it includes carbon's receiving, caching and writing, and our buffering delay). Once
carbon has read the whole stream (checking earlier would only take CPU from it), the
checker reads the metrics not yet complete again and again, with `whisper.fetch` file by
file or with `Accessor.fetch` 2,000 metrics at a time (one snapshot each), and the round
ends at the time of the read that found its last point. The resolution is the duration of
the last pass (printed). CPU seconds used by the carbon-cache process and its children
(our writer process) during the round are reported too: less sensitive to other jobs on
the machine than wall time. Points stored per second =
points of the round / that time. Both daemons run with MAX_UPDATES_PER_SECOND and
MAX_CREATES_PER_MINUTE unlimited and carbon's other defaults.

    python bench/carbon_bench.py                  # 100,000 metrics x 5 points a round
    python bench/carbon_bench.py --metrics 10000  # smaller
    python bench/carbon_bench.py --profile        # also cProfile our daemon (stats in the tmpdir)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import whisper  # noqa: E402

from bench import proctree  # noqa: E402
from biggraphite_like.accessor import Accessor  # noqa: E402
from tests.carbon_env import WHISPER_LAUNCHER, CarbonCache  # noqa: E402

CHECK_CHUNK = 2_000  # metrics per Accessor.fetch while checking (each fetch: one snapshot, timed)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def make_input(metrics: int, points: int, round_index: int, now: int,
               rounds: int = 2) -> tuple[list[str], list[tuple]]:
    """Names and [(name, (timestamp, value))]: round r of `rounds` holds minutes
    [r*points, (r+1)*points) of a span that ends points + 1 minutes before now."""
    names = [f"bench.host{i // 1000:04d}.service{i % 1000:03d}.value" for i in range(metrics)]
    base = now - now % 60 - rounds * 60 * points
    messages = []
    for p in range(points):
        ts = float(base + (round_index * points + p - points) * 60)
        messages.extend((name, (ts, float(i % 97 + p))) for i, name in enumerate(names))
    return names, messages


class Checker:
    """Which metrics already hold all the points of the round (only the rest is read again).

    A read returns, per metric, the number of expected points found and the time of the
    snapshot it read (SQLite: one read transaction per fetch; whisper: just before the file
    is read), so the round's end is when its last metric was first seen complete, not when
    the checker finished looking.
    """

    def __init__(self, names: list[str], timestamps: list[int], read) -> None:
        self.pending = list(names)
        self.timestamps = timestamps
        self.read = read  # (names, start, end) -> {name: (points found, time of the read)}
        self.completed_at = 0.0

    def check(self) -> int:
        start, end = min(self.timestamps) - 1, max(self.timestamps) + 60  # whisper.fetch starts a step after `from`
        found = self.read(self.pending, start, end)
        expected = len(self.timestamps)
        still = []
        for name in self.pending:
            count, seen_at = found.get(name, (0, 0.0))
            if count < expected:
                still.append(name)
            else:
                self.completed_at = max(self.completed_at, seen_at)
        self.pending = still
        return len(still)


def accessor_reader(url: str, timestamps: list[int]):
    wanted = np.array(sorted(timestamps))
    # One accessor for every check: a fetch records read_on once per metric per hour, a
    # fresh accessor would write it at every check (contending with carbon's writes).
    # Metrics not found are not cached, so a metric created later is seen.
    accessor = Accessor.from_url(url)

    def read(names: list[str], start: int, end: int) -> dict[str, tuple[int, float]]:
        now = int(time.time())
        counts = {}
        for offset in range(0, len(names), CHECK_CHUNK):
            chunk = names[offset:offset + CHECK_CHUNK]
            existing = accessor.get_metrics(chunk)
            present = [n for n in chunk if n in existing]
            if not present:
                continue
            seen_at = time.perf_counter()  # data complete in the snapshot below was complete now
            for name, series in accessor.fetch(present, start, end, now).items():  # one snapshot
                if series is None:
                    continue
                stamps = series.start + series.step * np.flatnonzero(~np.isnan(series.values))
                counts[name] = (int(np.isin(wanted, stamps).sum()), seen_at)
        return counts

    return read


def whisper_reader(data_dir: Path, timestamps: list[int]):
    wanted = set(timestamps)

    def read(names: list[str], start: int, end: int) -> dict[str, int]:
        now = int(time.time())
        counts = {}
        for name in names:
            path = data_dir / (name.replace(".", "/") + ".wsp")
            seen_at = time.perf_counter()
            try:
                (first, _, step), values = whisper.fetch(str(path), start, end, now)
            except (OSError, whisper.WhisperException):
                continue  # not created yet (or being created)
            counts[name] = (sum(1 for i, v in enumerate(values) if v is not None and first + i * step in wanted), seen_at)
        return counts

    return read


def run_round(carbon: CarbonCache, messages: list[tuple], checker: Checker, timeout: float) -> dict:
    """Send the round, poll until every point is readable; returns its figures."""
    points = [(n, t, v) for n, (t, v) in messages]
    received = []

    def send() -> None:
        carbon.send_pickle(points)
        received.append(time.perf_counter())  # carbon has read and cached every point

    cpu_before = proctree.cpu_seconds(carbon.process.pid)
    started = time.perf_counter()
    sender = threading.Thread(target=send)
    sender.start()
    sender.join()  # checking earlier would only take CPU from carbon: nothing can be complete
    checks = 0
    check_time = 0.0
    while True:
        before = time.perf_counter()
        left = checker.check()
        last_check = time.perf_counter() - before
        check_time += last_check
        checks += 1
        if left == 0:
            break
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"{left} metrics still incomplete after {timeout}s:\n{carbon.log()[-2000:]}")
        time.sleep(0.2)
    cpu = proctree.cpu_seconds(carbon.process.pid) - cpu_before  # carbon (+ our writer) is idle by now
    elapsed = checker.completed_at - started
    return {"points": len(points), "seconds": elapsed, "points_per_second": len(points) / elapsed,
            "cpu_seconds": cpu, "points_per_cpu_second": len(points) / cpu,
            "received_seconds": received[0] - started, "checks": checks, "check_seconds": check_time,
            "last_check_seconds": last_check}


def run_side(side: str, workdir: Path, args, inputs: list[tuple[list[str], list[tuple]]]) -> tuple[list[dict], int]:
    """The rounds' figures of one side, and the daemon's peak resident bytes."""
    root = workdir / side
    settings = {
        "CARBON_METRIC_INTERVAL": 60,
        "MAX_CACHE_SIZE": "inf",
    }
    if side == "ours":
        url = f"sqlite://{workdir / 'bgl.db'}"
        Accessor.from_url(url).syncdb()
        carbon = CarbonCache(root, url, schemas=[("bench", ".*", args.retention)],
                             settings={**settings, "BG_LOG_FLUSHES": "true",
                                       "BG_WRITER_PROCESS": "false" if args.in_process_writer else "true"})
        if args.profile:
            carbon.launcher = Path(sys.executable)
    else:
        carbon = CarbonCache(root, None, database="whisper", schemas=[("bench", ".*", args.retention)],
                             settings=settings, launcher=WHISPER_LAUNCHER)
    if args.profile and side == "ours":
        _start_profiled(carbon, workdir / "ours.prof")
    else:
        carbon.start()
    figures = []
    try:
        for index, (names, messages) in enumerate(inputs):
            timestamps = sorted({int(t) for _, (t, _) in messages})
            read = accessor_reader(carbon.store_url, timestamps) if side == "ours" else \
                whisper_reader(carbon.whisper_dir, timestamps)
            log(f"{side}: round {index + 1} ({'new' if index == 0 else 'existing'} metrics), {len(messages):,} points")
            result = run_round(carbon, messages, Checker(names, timestamps, read), args.timeout)
            result["round"] = "new" if index == 0 else "existing"
            log(f"  {result['points_per_second']:,.0f} points/s: all readable after {result['seconds']:.1f}s"
                f" (carbon had received them after {result['received_seconds']:.1f}s;"
                f" {result['checks']} checks, the last took {result['last_check_seconds']:.2f}s);"
                f" carbon used {result['cpu_seconds']:.1f} CPU-s: {result['points_per_cpu_second']:,.0f} points/CPU-s")
            figures.append(result)
    finally:
        peak = proctree.peak_rss(carbon.process.pid) if carbon.process else 0
        code = carbon.stop()
        log(f"{side}: carbon-cache exited with {code}; peak memory {peak / 2**20:,.0f} MiB")
    if side == "ours":
        totals = [line for line in carbon.log().splitlines() if "totals since start" in line]
        if totals:
            log("  " + totals[-1].split("biggraphite_like: ")[-1])
    return figures, peak


def _start_profiled(carbon: CarbonCache, output: Path) -> None:
    """Start our daemon under cProfile (the flusher thread is not profiled: see --profile-flush)."""
    import subprocess

    carbon.launcher = Path(sys.executable)
    original = subprocess.Popen

    def popen(cmd, **kwargs):
        cmd = [sys.executable, "-m", "cProfile", "-o", str(output), "-m", "carbon_plugin.launcher", *cmd[1:]]
        return original(cmd, **kwargs)

    subprocess.Popen = popen
    try:
        carbon.start()
    finally:
        subprocess.Popen = original


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metrics", type=int, default=100_000)
    parser.add_argument("--points", type=int, default=5, help="points per metric per round (one a minute)")
    parser.add_argument("--retention", default="60s:1d,1h:30d")
    parser.add_argument("--only", choices=["ours", "whisper"])
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile our daemon's main thread")
    parser.add_argument("--in-process-writer", action="store_true",
                        help="ours with BG_WRITER_PROCESS = false (store writes in a thread of carbon-cache)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="carbon_bench_", dir=args.tmpdir))
    now = int(time.time())
    inputs = [make_input(args.metrics, args.points, r, now) for r in (0, 1)]
    results = {}
    peak_rss = {}
    try:
        for side in ("ours", "whisper"):
            if args.only and args.only != side:
                continue
            results[side], peak_rss[side] = run_side(side, workdir, args, inputs)
    finally:
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    report = {"metrics": args.metrics, "points_per_round": args.metrics * args.points, "retention": args.retention,
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, "results": results,
              "peak_rss_bytes": peak_rss}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"carbon-cache, {args.metrics:,} metrics x {args.points} points a round, retention {args.retention}")
    print(f"{'round':<10}{'ours pts/s':>12}{'whisper pts/s':>15}{'ratio':>7}"
          f"{'ours pts/cpu-s':>16}{'whisper pts/cpu-s':>19}{'cpu ratio':>11}")
    for index, round_name in enumerate(("new", "existing")):
        ours = results.get("ours", [{}] * 2)[index]
        theirs = results.get("whisper", [{}] * 2)[index]
        wall = [r.get("points_per_second", math.nan) for r in (ours, theirs)]
        cpu = [r.get("points_per_cpu_second", math.nan) for r in (ours, theirs)]
        print(f"{round_name:<10}{wall[0]:>12,.0f}{wall[1]:>15,.0f}{wall[0] / wall[1]:>7.2f}"
              f"{cpu[0]:>16,.0f}{cpu[1]:>19,.0f}{cpu[0] / cpu[1]:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
