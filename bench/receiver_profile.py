#!/usr/bin/env python3
"""Where the receiver's CPU and memory go: `bgl receive` as a real process on a SQLite
file, fed over TCP (plaintext or pickle), round `new` (every metric created) then round
`existing` (the same metrics, later points).

Three kinds of run, each on a fresh store, one receiver process at a time:

* plain (`--runs N`): the receiver as `bgl run` starts it, with its counters written to
  a Prometheus file every 0.25 s (the peer bench's probe, bench/peer/probes.py); its CPU
  from /proc (the receiver only: the feeding client sends a file prepared beforehand,
  with sendfile), less its idle cost, until every point is committed; the CPU of its
  main thread (reads, decode, checks, name lookup, buffer) and of its other threads
  (the flusher: grouping, the store's write, downsampling, commit; SQLite's checkpoints)
  from /proc/PID/task; its RSS at start and after each round, and its peak;
* profile (`--profile`): the same receiver inside this script's launcher, every thread
  under cProfile with a CPU clock (time.thread_time, so waiting costs nothing); a snapshot
  at each round's end (SIGUSR1); each function's own time charged to a stage by its
  module (numpy, the standard library and builtins go to the stage of their caller,
  shared by call time), in CPU us a point;
* memory (`--memory`): the launcher under tracemalloc; after each round (SIGUSR1) the
  size of each structure the receiver keeps (attribute paths under the Receiver object,
  objects shared between paths counted once, in the first), per metric, and the
  biggest allocation sites.

`--idle S` also measures what the receiver alone and the whole `bgl run` stack cost at
rest over S seconds with their default settings. Every point sent is read back from the
store after the receiver stopped and counted (`--no-verify`: only the receiver's
counters). Only public tools: cProfile, tracemalloc, /proc, the project's CLI and API.

    python bench/receiver_profile.py --metrics 100000 --points 5 --runs 3 --profile --memory --idle 10
    python bench/receiver_profile.py --metrics 1000000 --protocol plaintext --json out.json
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import json
import math
import os
import pickle
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import proctree  # noqa: E402
from bench.peer.probes import PROBE_INTERVAL, OursProbe, load, measure_idle  # noqa: E402
from bench.receiver_stages import PROBE_STAGE, stages, top_functions  # noqa: E402
from tests.receiver_env import BglReceive  # noqa: E402

PICKLE_BATCH = 500  # points a pickle message, as carbon-relay's MAX_DATAPOINTS_PER_MESSAGE
SNAPSHOT_SIGNAL = signal.SIGUSR1


# -- the stream --------------------------------------------------------------------------------
def metric_name(index: int) -> str:
    """The names of bench/carbon_bench.py's make_input (and the peer bench's ingest)."""
    return f"bench.host{index // 1000:04d}.service{index % 1000:03d}.value"


def metric_names(metrics: int, shape: str) -> list[str]:
    """The stream's names: `bench` (make_input's, a directory a metric) or `tree` (the peer
    bench's find part, bench/peer/cardinality.py: `tree.dcN.hostNNNN.cpuN`, 10 metrics a
    directory)."""
    if shape == "tree":
        from bench.graphite_bench import tree_names
        return tree_names(metrics)
    return [metric_name(i) for i in range(metrics)]


def round_points(metrics: int, points: int, round_index: int, rounds: int, now: int, shape: str = "bench"):
    """Round r's points as (name, timestamp, value) runs, point after point over every
    metric (make_input's stream): yields (timestamp, [(name, value), ...]) per minute."""
    base = now - now % 60 - rounds * 60 * points
    names = metric_names(metrics, shape)
    for p in range(points):
        ts = base + (round_index * points + p - points) * 60
        yield ts, [(name, float(i % 97 + p)) for i, name in enumerate(names)]


def write_stream(path: Path, protocol: str, metrics: int, points: int, round_index: int, rounds: int,
                 now: int, shape: str = "bench") -> tuple[int, float]:
    """Write a round's bytes to `path`; (points, sum of the values)."""
    count, total = 0, math.fsum(float(i % 97 + p) for p in range(points) for i in range(metrics))
    with open(path, "wb") as out:
        for ts, series in round_points(metrics, points, round_index, rounds, now, shape):
            if protocol == "plaintext":
                out.write("".join(f"{name} {value!r} {ts}\n" for name, value in series).encode())
            else:
                for offset in range(0, len(series), PICKLE_BATCH):
                    frame = pickle.dumps([(n, (ts, v)) for n, v in series[offset:offset + PICKLE_BATCH]], protocol=2)
                    out.write(len(frame).to_bytes(4, "big") + frame)
            count += len(series)
    return count, total


def send_file(port: int, path: Path) -> None:
    """Send a file with sendfile (the client's CPU stays out of the receiver's), half-close,
    wait until the receiver closes: it has then read every byte."""
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock, open(path, "rb") as data:
        sock.sendfile(data)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass


# -- the receiver process, read from /proc ---------------------------------------------------------
class FileProbe(OursProbe):
    """bench/peer/probes.py's probe of our receiver, on bgl receive's --metrics-file."""

    def __init__(self, path: Path):
        self.path = path


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (utime + stime) of each thread of a process."""
    ticks, found = os.sysconf("SC_CLK_TCK"), {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[int(task.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def memory_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":")[0]
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(line.split()[1]) * 1024
    return found


class Receiver(BglReceive):
    """`bgl receive` on a fresh SQLite file; `mode` runs it inside this script's launcher
    (profile or memory), which then writes a report per SIGUSR1 into the run's directory."""

    def __init__(self, root: Path, mode: str | None = None, *options: str):
        super().__init__(root, f"sqlite://{root / 'bgl.db'}", "--stats-interval", str(PROBE_INTERVAL),
                         "--flush-interval", "1", *options)
        self.mode = mode
        self.reports = 0

    def command(self) -> list[str]:
        command = super().command()
        if self.mode is None:
            return command
        cli = command.index("biggraphite_like.cli")
        return [sys.executable, str(Path(__file__).resolve()), "--child", self.mode, "--report-dir", str(self.root),
                "--"] + command[cli + 1:]

    def report(self, timeout: float = 600.0) -> dict:
        """Ask the launcher for a report (SIGUSR1) and read it."""
        assert self.process is not None and self.mode is not None
        self.reports += 1
        path = self.root / f"report-{self.reports}.json"
        self.process.send_signal(SNAPSHOT_SIGNAL)
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"no {path.name} from the receiver:\n{self.output()[-2000:]}")
            time.sleep(0.1)
        time.sleep(0.05)  # written then renamed: complete once it exists
        return json.loads(path.read_text())


# -- one run ---------------------------------------------------------------------------------------
def run_once(root: Path, protocol: str, metrics: int, points: int, mode: str | None, verify: bool,
             idle_seconds: float, timeout: float, shape: str = "bench", rounds: int = 2) -> dict:
    """A fresh store, round `new` then (rounds 2) round `existing`; the figures of each."""
    root.mkdir(parents=True)
    now = int(time.time())
    streams, expected = [], []
    for index in range(rounds):
        path = root / f"round{index}.{protocol}"
        expected.append(write_stream(path, protocol, metrics, points, index, 2, now, shape))
        streams.append(path)
    receiver = Receiver(root / "receiver", mode).start()
    pid = receiver.process.pid
    port = receiver.line_port if protocol == "plaintext" else receiver.pickle_port
    probe = FileProbe(receiver.metrics_file)
    figures: dict = {"protocol": protocol, "metrics": metrics, "points_per_metric": points, "mode": mode or "plain",
                     "shape": shape, "rounds": []}
    try:
        figures["memory_at_start"] = memory_status(pid)
        idle = measure_idle(pid, probe, idle_seconds)
        figures["idle_cost"] = vars(idle)
        if mode:
            figures["report_at_start"] = receiver.report()
        for index, path in enumerate(streams):
            threads_before = thread_cpu(pid)
            result = load(pid, lambda: send_file(port, path), probe, expected[index][0], idle, timeout,
                          idle_timeout=120.0)
            threads_after = thread_cpu(pid)
            main = threads_after.get(pid, 0.0) - threads_before.get(pid, 0.0)
            others = sum(threads_after.values()) - sum(threads_before.values()) - main
            result.update(round="new" if index == 0 else "existing", cpu_main_thread=main, cpu_other_threads=others,
                          memory=memory_status(pid),
                          us_per_point=1e6 * result["cpu_readable"] / result["points"])
            if mode:
                result["report"] = receiver.report()
            figures["rounds"].append(result)
            log(f"  {protocol} {mode or 'plain'} round {result['round']}: {result['points']:,} points,"
                f" {result['cpu_readable']:.2f} CPU-s ({result['us_per_point']:.2f} us/point; main thread"
                f" {main:.2f}, others {others:.2f}), {result['points_per_second']:,.0f} points/s,"
                f" RSS {result['memory']['VmRSS'] / 2**20:.0f} MiB")
    finally:
        status = receiver.stop()
    counters = receiver.counters()
    figures["exit_status"] = status
    figures["counters"] = {k: counters.get(k, 0.0) for k in ("metricsReceived", "storedPoints", "refusedLines",
                                                            "droppedPoints", "rejectedPoints", "tooOldPoints",
                                                            "creates")}
    figures["sent"] = {"points": sum(c for c, _ in expected), "value_sum": math.fsum(s for _, s in expected)}
    if verify:
        figures["stored"] = stored(receiver.store_url, metric_names(metrics, shape), points, now)
    for path in streams:
        path.unlink()
    return figures


def stored(url: str, names: list[str], points: int, now: int) -> dict:
    """The bench's points read back from the store (both rounds): how many, their sum."""
    import numpy as np

    from biggraphite_like.accessor import Accessor
    base = now - now % 60 - 2 * 60 * points
    wanted = np.arange(base - points * 60, base + points * 60, 60)
    accessor = Accessor.from_url(url)
    count, total = 0, 0.0
    try:
        for offset in range(0, len(names), 5_000):
            for series in accessor.fetch(names[offset:offset + 5_000], int(wanted[0]) - 1, int(wanted[-1]) + 60,
                                         int(time.time())).values():
                if series is None:
                    continue
                stamps = series.start + series.step * np.arange(len(series.values))
                mask = np.isin(stamps, wanted) & ~np.isnan(series.values)
                count += int(mask.sum())
                total += float(series.values[mask].sum())
    finally:
        accessor.close()
    return {"points": count, "value_sum": total}


# -- the launcher (child side): profiles and memory reports on SIGUSR1 -----------------------------
_profilers: list[tuple[threading.Thread, cProfile.Profile]] = []


def _install_profilers() -> None:
    """Every thread, the main one included, runs under its own cProfile with a CPU clock."""
    main = cProfile.Profile(time.thread_time)
    _profilers.append((threading.current_thread(), main))
    run = threading.Thread.run

    def profiled_run(thread: threading.Thread) -> None:
        profiler = cProfile.Profile(time.thread_time)
        _profilers.append((thread, profiler))
        profiler.enable()
        try:
            run(thread)
        finally:
            profiler.disable()

    threading.Thread.run = profiled_run
    main.enable()


def _profile_report() -> dict:
    """Every function's calls, own and total CPU time, and what each called (for charging
    builtins and libraries to their callers): for the main thread (reads, decode, name
    lookup, the buffer) and for the others together (the flusher: the store's write)."""
    report: dict = {"main": {"functions": {}, "callees": {}}, "others": {"functions": {}, "callees": {}},
                    "threads": {}}
    for thread, profiler in _profilers:
        group = report["main" if thread is threading.main_thread() else "others"]
        entries, callees, spent = group["functions"], group["callees"], 0.0
        for entry in profiler.getstats():
            key = _label(entry.code)
            row = entries.setdefault(key, [0, 0.0, 0.0])
            row[0] += entry.callcount
            row[1] += entry.inlinetime
            row[2] += entry.totaltime
            spent += entry.inlinetime
            for sub in entry.calls or ():
                calls = callees.setdefault(key, {})
                calls[_label(sub.code)] = calls.get(_label(sub.code), 0.0) + sub.totaltime
        report["threads"][thread.name] = spent
    return report


def _label(code: object) -> str:
    if isinstance(code, str):
        return code
    return f"{code.co_filename}:{code.co_firstlineno}({code.co_name})"


def _memory_report() -> dict:
    """Sizes of what the receiver keeps (see `structures`), tracemalloc's totals and its
    biggest allocation sites, and the process's RSS."""
    gc.collect()
    traced, peak = tracemalloc.get_traced_memory()
    snapshot = tracemalloc.take_snapshot()
    sites = [{"site": str(stat.traceback[0]), "bytes": stat.size, "blocks": stat.count}
             for stat in snapshot.statistics("lineno")[:25]]
    receiver = next((o for o in gc.get_objects() if type(o).__name__ == "Receiver" and hasattr(o, "buffer")), None)
    return {"traced": traced, "traced_peak": peak, "sites": sites, "status": memory_status(os.getpid()),
            "structures": structures(receiver) if receiver is not None else {}}


_OPAQUE = (type, type(os), type(_label), type(print), type(_label.__code__), threading.Thread)


def deep_size(obj: object, seen: set[int]) -> int:
    """Bytes of obj and of everything it refers to that `seen` does not hold yet (classes,
    modules, functions and threads are not followed)."""
    total, todo = 0, [obj]
    while todo:
        item = todo.pop()
        if id(item) in seen or isinstance(item, _OPAQUE):
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        todo.extend(gc.get_referents(item))
    return total


FIRST = ("buffer", "accessor", "store", "_cache")  # walked first: what they share is charged to them


def structures(receiver: object, depth: int = 5, floor: int = 64 * 1024) -> dict[str, int]:
    """Bytes under each attribute path of the receiver (buffer first, then the accessor and
    the rest), down to `depth` levels of the project's own objects; paths under `floor`
    bytes are folded into their parent's `(rest)`."""
    seen: set[int] = {id(receiver)}
    sizes: dict[str, int] = {}

    def own(obj: object) -> bool:
        return type(obj).__module__.startswith("biggraphite_like") and hasattr(obj, "__dict__")

    def walk(obj: object, path: str, level: int) -> None:
        seen.add(id(obj))
        rest = sys.getsizeof(obj) + sys.getsizeof(vars(obj))
        seen.add(id(vars(obj)))
        names = sorted(vars(obj), key=lambda n: (n not in FIRST, FIRST.index(n) if n in FIRST else 0, n))
        for name in names:
            value = vars(obj)[name]
            if own(value) and level < depth and id(value) not in seen:
                walk(value, f"{path}.{name}", level + 1)
                continue
            size = deep_size(value, seen)
            if size >= floor:
                sizes[f"{path}.{name}"] = size
            else:
                rest += size
        sizes[f"{path}.(rest)"] = rest

    walk(receiver, "receiver", 1)
    return sizes


def child_main(mode: str, report_dir: Path, cli_args: list[str]) -> int:
    """Run `bgl ARGS` (bgl receive) in this process, writing a report at each SIGUSR1."""
    if mode == "memory":
        tracemalloc.start()
    else:
        _install_profilers()
    reports = [0]

    def on_signal(*_: object) -> None:
        """Write a report, the main thread's profiler off meanwhile (the report is no load)."""
        reports[0] += 1
        if _profilers:
            _profilers[0][1].disable()
        gc.disable()  # no finalizer runs while the other threads' profiles are read
        try:
            report = _memory_report() if mode == "memory" else _profile_report()
            path = report_dir / f"report-{reports[0]}.json"
            path.with_suffix(".tmp").write_text(json.dumps(report))
            path.with_suffix(".tmp").rename(path)
        finally:
            gc.enable()
            if _profilers:
                _profilers[0][1].enable()

    signal.signal(SNAPSHOT_SIGNAL, on_signal)
    from biggraphite_like.cli import main
    return main(cli_args)


# -- idle costs ------------------------------------------------------------------------------------
def idle_costs(root: Path, seconds: float) -> dict:
    """CPU-s a second at rest, default settings: `bgl receive` alone, and `bgl run` whole."""
    from tests.stack_env import BglRun
    figures = {}
    receiver = BglReceive(root / "receive", f"sqlite://{root / 'receive' / 'bgl.db'}").start()
    try:
        figures["bgl receive"] = _rate(receiver.process.pid, seconds)
    finally:
        receiver.stop()
    stack = BglRun(root / "run")
    stack.data_dir.mkdir(parents=True)
    stack.start()
    try:
        time.sleep(2.0)
        figures["bgl run (whole tree)"] = _rate(stack.process.pid, seconds)
    finally:
        stack.stop()
    return figures


def _rate(pid: int, seconds: float) -> float:
    cpu, started = proctree.cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)
    return (proctree.cpu_seconds(pid) - cpu) / (time.perf_counter() - started)


# -- the summary -----------------------------------------------------------------------------------
def summarize(runs: list[dict]) -> dict:
    """Per protocol and round: medians over the plain runs; the profile's stages scaled to them."""
    summary: dict = {}
    for protocol in sorted({r["protocol"] for r in runs}):
        for index, round_name in enumerate(("new", "existing")[:min(len(r["rounds"]) for r in runs)]):
            plain = [r["rounds"][index] for r in runs if r["protocol"] == protocol and r["mode"] == "plain"]
            key = f"{protocol} {round_name}"
            entry: dict = {}
            if plain:
                entry.update({name: statistics.median(p[name] for p in plain)
                              for name in ("us_per_point", "cpu_readable", "cpu_main_thread", "cpu_other_threads",
                                           "points_per_second", "points_per_cpu_second", "readable_seconds")})
                entry["runs"] = len(plain)
                entry["rss_after"] = statistics.median(p["memory"]["VmRSS"] for p in plain)
            profiled = next((r for r in runs if r["protocol"] == protocol and r["mode"] == "profile"), None)
            if profiled is not None:
                entry.update(_profiled_stages(profiled, index, entry if plain else None))
            summary[key] = entry
    return summary


THREADS = (("main", "cpu_main_thread"), ("others", "cpu_other_threads"))


def _profiled_stages(profiled: dict, index: int, plain: dict | None) -> dict:
    """The profile's stages over round `index`; with the plain runs' medians, each thread's
    stages scaled to that thread's CPU in the plain runs (cProfile costs more in the
    thread that makes more Python calls: the main thread's per-item pickle loop), less
    the probe's share."""
    rounds = profiled["rounds"]
    before = profiled["report_at_start"] if index == 0 else rounds[0]["report"]
    report, points = rounds[index]["report"], rounds[index]["points"]
    entry: dict = {"profiled_us_per_point": 0.0, "probe_cost_us_per_point": 0.0, "top_functions": {}}
    profiled_us: dict[str, float] = {}
    scaled_us: dict[str, float] = {}
    for group, plain_key in THREADS:
        spent = stages(report[group], before[group])
        probe = spent.pop(PROBE_STAGE, 0.0)
        total = sum(spent.values())
        entry["probe_cost_us_per_point"] += 1e6 * probe / points
        entry["profiled_us_per_point"] += 1e6 * total / points
        entry["top_functions"][group] = top_functions(report[group], before[group])
        for stage, seconds in spent.items():
            profiled_us[stage] = profiled_us.get(stage, 0.0) + 1e6 * seconds / points
            if plain is not None and total:
                kept = plain[plain_key] * total / (total + probe)  # the thread's plain CPU less the probe's share
                scaled_us[stage] = scaled_us.get(stage, 0.0) + 1e6 * kept * seconds / total / points
    # at a tiny size the plain runs' CPU less the idle cost can round to 0: shares from the profile then
    basis = scaled_us if sum(scaled_us.values()) > 0 else profiled_us
    whole = sum(basis.values())
    entry["stages_share"] = {stage: us / whole if whole else 0.0
                             for stage, us in sorted(basis.items(), key=lambda item: -item[1])}
    entry["stages_profiled_us_per_point"] = profiled_us
    if scaled_us:
        entry["stages_us_per_point"] = scaled_us
    return entry


def print_summary(summary: dict, runs: list[dict], out=sys.stdout) -> None:
    for key, entry in summary.items():
        if "us_per_point" in entry:
            out.write(f"{key}: {entry['us_per_point']:.2f} us/point (median of {entry['runs']}),"
                      f" {entry['points_per_cpu_second']:,.0f} points/CPU-s, {entry['points_per_second']:,.0f}"
                      f" points/s; main thread {entry['cpu_main_thread']:.2f} CPU-s, others"
                      f" {entry['cpu_other_threads']:.2f}\n")
        if "profiled_us_per_point" in entry:
            out.write(f"    profiled: {entry['profiled_us_per_point']:.2f} us/point under cProfile (less the probe's"
                      f" {entry['probe_cost_us_per_point']:.2f}); its stages, each thread's scaled to its CPU"
                      f" above:\n")
        for stage, share in entry.get("stages_share", {}).items():
            scaled = entry.get("stages_us_per_point", {}).get(stage)
            out.write(f"    {stage:40s} {100 * share:5.1f}%" + (f"  {scaled:6.2f} us/point" if scaled else "") + "\n")
    for run in runs:
        stored = run.get("stored", {}).get("points", "not read")
        out.write(f"{run['protocol']} {run['mode']} run: points sent {run['sent']['points']:,}, stored {stored:,}"
                  f" (read back), exit status {run['exit_status']}\n" if stored != "not read" else
                  f"{run['protocol']} {run['mode']} run: points sent {run['sent']['points']:,}, not read back\n")
        for result in run["rounds"]:
            report = result.get("report")
            if run["mode"] == "memory" and report:
                metrics = run["metrics"]
                out.write(f"memory after {run['protocol']} {result['round']}: RSS"
                          f" {report['status']['VmRSS'] / 2**20:.0f} MiB, traced {report['traced'] / 2**20:.0f} MiB;"
                          f" bytes a metric:\n")
                for path, size in sorted(report["structures"].items(), key=lambda item: -item[1]):
                    out.write(f"    {path:60s} {size / metrics:8.1f}\n")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:  # the launcher: --child MODE --report-dir DIR -- BGL-ARGS...
        split = argv.index("--")
        return child_main(argv[1], Path(argv[3]), argv[split + 1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metrics", type=int, default=100_000)
    parser.add_argument("--points", type=int, default=5, help="points a metric a round (default 5)")
    parser.add_argument("--protocol", choices=("plaintext", "pickle", "both"), default="both")
    parser.add_argument("--runs", type=int, default=1, help="plain runs a protocol (default 1; 0: none)")
    parser.add_argument("--profile", action="store_true", help="also one run a protocol under cProfile")
    parser.add_argument("--memory", action="store_true", help="also one run a protocol under tracemalloc")
    parser.add_argument("--idle", type=float, default=0.0, metavar="SECONDS",
                        help="also the CPU at rest of bgl receive and bgl run (default 0: not measured)")
    parser.add_argument("--idle-seconds", type=float, default=3.0,
                        help="seconds of the probe's idle measure before each run (default 3)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--no-verify", dest="verify", action="store_false",
                        help="do not read every point back from the store")
    parser.add_argument("--shape", choices=("bench", "tree"), default="bench",
                        help="names: bench.hostNNNN.serviceNNN.value (default) or the peer bench's find part's"
                             " tree.dcN.hostNNNN.cpuN (10 metrics a directory)")
    parser.add_argument("--new-only", action="store_true", help="round `new` only (creating names)")
    parser.add_argument("--json", metavar="PATH", help="every figure as JSON")
    args = parser.parse_args(argv)
    protocols = ("plaintext", "pickle") if args.protocol == "both" else (args.protocol,)
    modes = [None] * args.runs + (["profile"] if args.profile else []) + (["memory"] if args.memory else [])
    with open("/proc/loadavg") as loadavg:
        load_before = loadavg.read().split()[:3]
    runs, started = [], time.time()
    with tempfile.TemporaryDirectory(prefix="bgl-receiver-profile-") as tmp:
        for protocol in protocols:
            for number, mode in enumerate(modes):
                log(f"receiver profile: {protocol}, {mode or 'plain'} run, {args.metrics:,} metrics x {args.points}")
                runs.append(run_once(Path(tmp) / f"{protocol}-{number}", protocol, args.metrics, args.points, mode,
                                     args.verify, args.idle_seconds, args.timeout, args.shape,
                                     1 if args.new_only else 2))
        idle = idle_costs(Path(tmp) / "idle", args.idle) if args.idle else {}
    summary = summarize(runs)
    print_summary(summary, runs)
    for name, rate in idle.items():
        print(f"at rest: {name} {rate:.4f} CPU-s a second")
    with open("/proc/loadavg") as loadavg:
        load_after = loadavg.read().split()[:3]
    print(f"load average before {' '.join(load_before)}, after {' '.join(load_after)};"
          f" {time.time() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "runs": runs, "idle": idle,
                                               "load": {"before": load_before, "after": load_after}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
