"""Each system's CPU for its own work over a load, with probes that cost it (nearly) nothing.

A load is timed from its first byte until every point is readable (`readable`), then until
the system is idle again (`idle`: background merges, seals, checkpoints). The system's CPU
is that of its process tree (/proc) over each window. Readability is watched through a
counter the system keeps anyway:

* ours (`bgl run`): the receiver's Prometheus file (log/receiver.prom, rewritten at each
  self-metrics record: `bgl run --self-metrics-interval` PROBE_INTERVAL): every point
  received, committed (a commit is readable by graphite-web), and nothing left buffered
  but the record's own self-metrics. Reading the file costs the receiver nothing; its
  records every PROBE_INTERVAL are its probe cost, part of its idle rate.
* VictoriaMetrics: `vm_rows_inserted_total{type="graphite"}` of its /metrics, then one
  /internal/force_flush (what makes rows searchable at once instead of within a second).

What probing costs is measured idle before a load (`IdleCost`: the tree's CPU rate without
probing, then the extra CPU of each probe call) and taken off the window's CPU; both the
raw and the corrected figures are kept. The points themselves are read back and compared
after the windows (bench/peer/common.py), never inside them.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from bench import proctree
from bench.victoria import VictoriaMetrics
from biggraphite_like.receiver.stats import ALIASES, COUNTERS, GAUGES
from tests.stack_env import BglRun

PROBE_INTERVAL = 0.25  # seconds between two records of our receiver's counters while measured
OURS_PROBE_OPTIONS = ("--self-metrics-interval", str(PROBE_INTERVAL))
POLL = 0.2  # seconds between two probe calls
SELF_POINTS = len(COUNTERS) + len(ALIASES) + len(GAUGES)  # points one self-metrics record adds to the buffer


class LoadTimeout(RuntimeError):
    """A system did not make a load readable within the timeout, or refused part of it."""


class Probe:
    """How many points a system holds, read cheaply; `reached` says when a load is readable."""

    def state(self) -> dict[str, float]:
        raise NotImplementedError

    def reached(self, before: dict[str, float], points: int) -> bool:
        raise NotImplementedError

    def finish(self) -> None:
        """Make what `reached` saw readable (nothing for ours: a commit is)."""


class OursProbe(Probe):
    """Our receiver's counters from its Prometheus file (bgl_receiver_<counter> lines)."""

    def __init__(self, stack: BglRun):
        self.path = stack.data_dir / "log" / "receiver.prom"

    def state(self) -> dict[str, float]:
        values = {}
        for line in Path(self.path).read_text().splitlines():
            if line.startswith("bgl_receiver_"):
                name, value = line.split()
                values[name[len("bgl_receiver_"):]] = float(value)
        return values

    LOSSES = ("refusedLines", "droppedPoints", "rejectedPoints", "tooOldPoints")

    def reached(self, before: dict[str, float], points: int) -> bool:
        now = self.state()
        lost = {name: now[name] - before[name] for name in self.LOSSES if now[name] != before[name]}
        if lost:
            raise LoadTimeout(f"our receiver lost points of the load: {lost} (see its log)")
        return (now["metricsReceived"] - before["metricsReceived"] >= points
                and now["storedPoints"] - before["storedPoints"] >= points
                and now["bufferedPoints"] <= SELF_POINTS)


class VmProbe(Probe):
    """VictoriaMetrics' rows inserted over plaintext, from its /metrics."""

    def __init__(self, vm: VictoriaMetrics):
        self.vm = vm

    def state(self) -> dict[str, float]:
        for line in self.vm.get("/metrics").decode().splitlines():
            if line.startswith('vm_rows_inserted_total{type="graphite"}'):
                return {"inserted": float(line.split()[-1])}
        raise RuntimeError("vm_rows_inserted_total{type=\"graphite\"} missing from VictoriaMetrics' /metrics")

    def reached(self, before: dict[str, float], points: int) -> bool:
        return self.state()["inserted"] - before["inserted"] >= points

    def finish(self) -> None:
        self.vm.get("/internal/force_flush")


@dataclass
class IdleCost:
    """A system's CPU rate at rest (CPU-s a second) and the extra CPU of one probe call."""
    rate: float
    per_call: float
    seconds: float

    def charge(self, seconds: float, calls: int) -> float:
        """CPU-s that a window of `seconds` with `calls` probe calls costs a resting system."""
        return self.rate * seconds + self.per_call * calls


def measure_idle(pid: int, probe: Probe, seconds: float, poll: float = POLL) -> IdleCost:
    """The tree's CPU rate left alone for `seconds`, then with the probe called every `poll`."""
    cpu, started = proctree.cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)
    rate = (proctree.cpu_seconds(pid) - cpu) / (time.perf_counter() - started)
    cpu, started, calls = proctree.cpu_seconds(pid), time.perf_counter(), 0
    while time.perf_counter() - started < seconds:
        probe.state()
        calls += 1
        time.sleep(poll)
    elapsed = time.perf_counter() - started
    extra = proctree.cpu_seconds(pid) - cpu - rate * elapsed
    return IdleCost(rate=rate, per_call=max(extra, 0.0) / calls, seconds=seconds)


def load(pid: int, send: Callable[[], None], probe: Probe, points: int, idle: IdleCost, timeout: float,
         idle_timeout: float, poll: float = POLL) -> dict:
    """Send a load and follow it until readable, then until idle; its figures (seconds from
    the first byte; CPU-s raw and less the idle charge)."""
    before = probe.state()
    cpu0, started = proctree.cpu_seconds(pid), time.perf_counter()
    send()
    received = time.perf_counter() - started
    calls = 0
    while True:
        calls += 1
        if probe.reached(before, points):
            break
        if time.perf_counter() - started > timeout:
            raise LoadTimeout(f"{points:,} points not readable after {timeout:.0f} s (probe: {probe.state()},"
                              f" before: {before})")
        time.sleep(poll)
    probe.finish()
    readable = time.perf_counter() - started
    cpu_readable = proctree.cpu_seconds(pid) - cpu0
    idle_at, cpu_idle, settled = _until_idle(pid, idle, started, cpu0, idle_timeout, window=max(1.0, idle.seconds))
    figures = {"points": points, "received_seconds": received, "readable_seconds": readable,
               "cpu_readable_raw": cpu_readable, "probe_calls": calls,
               "cpu_readable": max(cpu_readable - idle.charge(readable, calls), 0.0),
               "idle_seconds": idle_at, "cpu_idle_raw": cpu_idle,
               "cpu_idle": max(cpu_idle - idle.charge(idle_at, calls), 0.0), "idle_reached": settled,
               "idle_cost": asdict(idle)}
    figures["points_per_second"] = points / max(readable, 1e-6)
    figures["points_per_cpu_second"] = points / max(figures["cpu_readable"], 1e-3)
    figures["points_per_cpu_second_idle"] = points / max(figures["cpu_idle"], 1e-3)
    return figures


def _until_idle(pid: int, idle: IdleCost, started: float, cpu0: float, timeout: float,
                window: float, step: float = 0.5) -> tuple[float, float, bool]:
    """(seconds from `started`, CPU-s since `cpu0`) at the start of the first `window` (as
    long as the idle measure's) in which the tree's CPU rate came back to its idle rate (plus 0.02 CPU-s a second, a few
    clock ticks), and whether it did before `timeout` seconds."""
    samples = [(time.perf_counter(), proctree.cpu_seconds(pid))]
    span = int(round(window / step))
    threshold = idle.rate * 1.5 + 0.02
    while True:
        time.sleep(step)
        samples.append((time.perf_counter(), proctree.cpu_seconds(pid)))
        if len(samples) > span:
            (t0, c0), (t1, c1) = samples[-1 - span], samples[-1]
            if (c1 - c0) / (t1 - t0) <= threshold:
                return t0 - started, c0 - cpu0, True
        if samples[-1][0] - samples[0][0] > timeout:
            return samples[-1][0] - started, samples[-1][1] - cpu0, False
