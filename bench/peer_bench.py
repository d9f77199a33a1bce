#!/usr/bin/env python3
"""Our stack (`bgl run`) side by side with VictoriaMetrics, over the paths a user has.

Both systems run as subprocesses on free 127.0.0.1 ports in a temporary directory: `bgl run`
as started by default (our receiver, `bgl receive`, graphite-web under gunicorn, the SQLite
store bgl.db, retention 60s:8d,1h:2y) and `victoria-metrics` (Debian's package; see
bench/victoria.py). The ingest part also runs `bgl run --carbon` (carbon-cache with our
plugin and its writer process) and carbon-cache with whisper (carbon's own
`carbon-cache.py`, the same storage-schemas as `bgl run`), on the same stream, in the same
run. Three parts, each on fresh stores, same inputs:

* ingest: M metrics x P points over one plaintext TCP connection, round `new` then E
  rounds `existing` (P more points each, E = 3 at full size; `summary` gives the median of
  each figure over them: whisper's especially moves from run to run); a round runs from the first byte until every point is
  readable through each system's read API (ours: `Accessor.fetch` on the store, one read
  snapshot a check, see ours_reader; VictoriaMetrics: /api/v1/export), checked once the
  stream is sent.
  CPU-seconds and peak RSS of each system's process tree, and the peak RSS of the
  receiving process alone (`bgl receive`, carbon-cache and its writer process, or
  victoria-metrics: the ingest side without graphite-web). Afterwards every point is read
  back from ours and VictoriaMetrics and compared with what was sent. Disk bytes per point of this young store
  (P points a metric) after round 1.
* day: S series x 1 day at 60 s sent over plaintext to both (random two-decimal values, then
  on fresh stores realistic gauges and counters); disk bytes per point after each
  has flushed (ours: WAL checkpoint, bgl.db + bgl.db-wal, and under `parts` the bytes of the
  datapoints tables, of the metadata tables and indexes and of free pages, and of each table
  with its indexes (`tables`: a datapoints table a stage), from the store's `stats`; VictoriaMetrics: /internal/force_flush, every file under its data directory); then graphite-web's `/render?format=json` of the S
  series against VictoriaMetrics' `/api/v1/query_range` (and `/api/v1/export`), interleaved,
  values compared.
* find: N names (`tree.dcN.hostNNNN.cpuN`, as bench/graphite_bench.py) written into our
  store with `Accessor.create_metrics` before `bgl run` starts on it, and sent to
  VictoriaMetrics over plaintext (one point a name); `/metrics/find` over HTTP on both,
  interleaved, p50/p99 per pattern (ours with the glob cache as configured by default),
  answers compared; graphite-web's `/version/` as Django's empty-request floor; a few
  probes on a small extra tree name VictoriaMetrics' glob gaps (`**`, `?`, `[!...]`).

    python bench/peer_bench.py --quick --json       # small sizes, a few minutes
    python bench/peer_bench.py --only ingest        # one part (repeatable)
"""
from __future__ import annotations

import argparse
import calendar
import json
import math
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from bench import proctree  # noqa: E402
from bench.carbon_bench import CHECK_CHUNK, Checker, make_input  # noqa: E402
from bench.graphite_bench import FIND_PATTERNS, percentile, side_by_side, tree_names  # noqa: E402
from bench.victoria import PeerUnavailable, VictoriaMetrics, binary, http_get  # noqa: E402
from biggraphite_like import settings  # noqa: E402
from biggraphite_like.accessor import Accessor  # noqa: E402
from biggraphite_like.metric import MetricMetadata  # noqa: E402
from bench.carbon_bench import whisper_reader  # noqa: E402
from tests.carbon_env import WHISPER_LAUNCHER, CarbonCache, send_to_carbon  # noqa: E402
from tests.stack_env import BglRun  # noqa: E402

SIZES = {
    "full": {"metrics": 100_000, "points": 5, "existing_rounds": 3, "day_series": 1_000, "names": 1_000_000, "find_runs": 50,
             "find_budget": 20.0, "render_runs": 10, "render_budget": 60.0},
    "quick": {"metrics": 10_000, "points": 5, "existing_rounds": 1, "day_series": 100, "names": 10_000, "find_runs": 20,
              "find_budget": 3.0, "render_runs": 5, "render_budget": 10.0},
}
PARTS = ("ingest", "day", "find")
# Small tree showing where VictoriaMetrics reads Graphite globs differently: (pattern, gap)
GAP_NAMES = ["gaps.a.b.c", "gaps.a.x", "gaps.ab.y", "gaps.ac.y", "gaps.b.y"]
GAP_PROBES = [("gaps.**", "`**` (every descendant)"), ("gaps.a?", "`?` (one character)"),
              ("gaps.a[!b]", "`[!...]` (negated class)")]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def plaintext(messages: list[tuple[str, tuple[float, float]]]) -> bytes:
    """Graphite plaintext lines `name value timestamp` (integer seconds, which both accept)."""
    return "".join(f"{name} {value!r} {int(ts)}\n" for name, (ts, value) in messages).encode()


INGEST_SIDES = ("ours", "ours_carbon", "whisper", "vm")  # ours: bgl run (receiver); ours_carbon: bgl run --carbon


def store_url(stack: BglRun) -> str:
    return f"sqlite://{stack.data_dir / settings.DB_FILE_NAME}"


def ours_disk_bytes(stack: BglRun) -> int:
    """bgl.db + bgl.db-wal after a WAL checkpoint (TRUNCATE): what the store keeps on disk
    (graphite-web's own database and the logs are not counted)."""
    db = stack.data_dir / settings.DB_FILE_NAME
    connection = sqlite3.connect(db, timeout=120)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        connection.close()
    return sum(path.stat().st_size for path in (db, db.with_name(db.name + "-wal")) if path.exists())


def ours_disk_parts(stack: BglRun) -> dict:
    """Where our bytes go (after ours_disk_bytes' checkpoint): the store's own `stats`
    (dbstat) for the datapoints tables, the metadata tables and indexes, and free pages;
    under `tables`, the bytes of each table with its indexes (one datapoints table a stage)."""
    accessor = Accessor.from_url(store_url(stack))
    try:
        facts = accessor.store.stats()
    finally:
        accessor.close()
    parts = {part: facts.get(f"disk_bytes.{part}") for part in ("points", "metadata", "free")}
    prefix = "disk_bytes.table."
    parts["tables"] = {key[len(prefix):]: value for key, value in facts.items() if key.startswith(prefix)}
    return parts


def vm_disk_bytes(vm: VictoriaMetrics, points: int) -> int:
    """Every file under VictoriaMetrics' data directory once `points` rows are stored and its
    parts merged (what it keeps at rest; see VictoriaMetrics.settle_on_disk)."""
    return vm.settle_on_disk(points)


def vm_reader(vm: VictoriaMetrics, match: str, timestamps: list[int]):
    """A Checker read through /api/v1/export (one request a pass, one snapshot)."""
    wanted = set(timestamps)

    def read(names: list[str], start: int, end: int) -> dict[str, tuple[int, float]]:
        pending = set(names)
        seen_at = time.perf_counter()
        return {name: (len(wanted.intersection(stamps)), seen_at)
                for name, stamps, _ in vm.export(match, start, end) if name in pending}

    return read


def ours_reader(url: str, timestamps: list[int]):
    """A Checker read of our store through Accessor.fetch, one read snapshot a pass: what a
    pass finds was stored when its snapshot began, so a metric is dated by the pass's start
    however long the pass takes (bench/carbon_bench.py's reader dates each 2,000-metric
    fetch, which added up to a whole pass over 100,000 metrics to the round). A pass stops
    at the first chunk holding an incomplete metric: while a round is being written, polls
    stay cheap and take little CPU from the systems measured; metrics not read are read
    again by a later pass (dated later, never earlier)."""
    wanted = np.array(sorted(timestamps))
    accessor = Accessor.from_url(url)
    # The probe does not record read_on as a user's read would: VictoriaMetrics' probe
    # writes nothing, and these writes would contend with the receiver's.
    accessor._record_reads = lambda names, now: None

    def read(names: list[str], start: int, end: int) -> dict[str, tuple[int, float]]:
        now = int(time.time())
        counts: dict[str, tuple[int, float]] = {}
        with accessor.store.read_snapshot():
            seen_at = time.perf_counter()
            for offset in range(0, len(names), CHECK_CHUNK):
                chunk = names[offset:offset + CHECK_CHUNK]
                existing = accessor.get_metrics(chunk)
                present = [n for n in chunk if n in existing]
                complete = len(present) == len(chunk)
                for name, series in accessor.fetch(present, start, end, now).items():
                    if series is None:
                        complete = False
                        continue
                    stamps = series.start + series.step * np.flatnonzero(~np.isnan(series.values))
                    found = int(np.isin(wanted, stamps).sum())
                    complete &= found == len(wanted)
                    counts[name] = (found, seen_at)
                if not complete:
                    break
        return counts

    return read


def run_round(port: int, pid: int, payload: bytes, points: int, checker: Checker, timeout: float) -> dict:
    """Send a round and poll until every point is readable; its figures."""
    cpu_before = proctree.cpu_seconds(pid)
    started = time.perf_counter()
    sender = threading.Thread(target=send_to_carbon, args=(port, payload))
    sender.start()
    sender.join()  # nothing can be complete before the stream is read; checking would take CPU
    received = time.perf_counter() - started
    checks = 0
    while checker.check():
        checks += 1
        if time.perf_counter() - started > timeout:
            raise RuntimeError(f"{len(checker.pending)} series still incomplete after {timeout}s")
        time.sleep(0.2)
    cpu = proctree.cpu_seconds(pid) - cpu_before
    seconds = max(checker.completed_at - started, 1e-6)
    return {"points": points, "seconds": seconds, "points_per_second": points / seconds, "cpu_seconds": cpu,
            "points_per_cpu_second": points / max(cpu, 1e-6), "received_seconds": received, "checks": checks + 1}


# -- reading everything back ------------------------------------------------------------------
Points = dict[str, dict[int, float]]


def ours_points(url: str, names: list[str], start: int, end: int) -> Points:
    """Every non-empty point of the names in [start, end] through Accessor.fetch."""
    accessor = Accessor.from_url(url)
    found: Points = {}
    try:
        for offset in range(0, len(names), 2_000):
            for name, series in accessor.fetch(names[offset:offset + 2_000], start, end, int(time.time())).items():
                if series is None:
                    continue
                index = np.flatnonzero(~np.isnan(series.values))
                found[name] = {int(series.start + series.step * i): float(series.values[i]) for i in index}
    finally:
        accessor.close()
    return found


def vm_points(vm: VictoriaMetrics, match: str, start: int, end: int) -> Points:
    return {name: dict(zip(stamps, values)) for name, stamps, values in vm.export(match, start, end)}


def compare(expected: Points, found: Points) -> dict:
    """Points found, their sum, and the series whose points differ from the expected ones."""
    mismatches = sorted(name for name in expected.keys() | found.keys()
                        if not _same_points(expected.get(name, {}), found.get(name, {})))
    return {"points": sum(len(points) for points in found.values()),
            "value_sum": math.fsum(v for points in found.values() for v in points.values()),
            "mismatches": len(mismatches), "mismatch_examples": mismatches[:5]}


def _same_points(a: dict[int, float], b: dict[int, float]) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[t], b[t], rel_tol=1e-9, abs_tol=1e-12) for t in a)


def expected_points(messages: list[tuple[str, tuple[float, float]]]) -> Points:
    expected: Points = {}
    for name, (ts, value) in messages:
        expected.setdefault(name, {})[int(ts)] = float(value)
    return expected


# -- the parts ---------------------------------------------------------------------------------
class Systems:
    """Our stack and VictoriaMetrics (with `carbon`: also `bgl run --carbon` and carbon-cache
    with whisper), started side by side in a part's directory."""

    def __init__(self, root: Path, carbon: bool = False):
        self.ours = BglRun(root / "ours")
        self.vm = VictoriaMetrics(root / "vm")
        self.ours_carbon = BglRun(root / "ours_carbon", carbon=True) if carbon else None
        self.whisper = None
        if carbon:
            retention = settings.DEFAULT_RETENTION
            self.whisper = CarbonCache(root / "whisper", None, database="whisper", launcher=WHISPER_LAUNCHER,
                                       schemas=[("carbon", "^carbon\\.", "60s:90d"), ("default", ".*", retention)])
        self.sides = INGEST_SIDES if carbon else ("ours", "vm")

    def __enter__(self) -> "Systems":
        try:
            for stack in (self.ours, self.ours_carbon):
                if stack is not None:
                    stack.data_dir.mkdir(parents=True, exist_ok=True)
                    stack.start()
            if self.whisper is not None:
                self.whisper.start()
            self.vm.start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for stack in (self.ours, self.ours_carbon):
            if stack is not None and stack.process is not None and stack.process.poll() is None:
                try:
                    stack.stop()
                except AssertionError as error:
                    log(str(error))
        if self.whisper is not None and self.whisper.process is not None:
            self.whisper.kill()
        self.vm.stop()

    def _stack(self, side: str) -> BglRun:
        stack = self.ours_carbon if side == "ours_carbon" else self.ours
        assert stack is not None
        return stack

    def port(self, side: str) -> int:
        """The plaintext port of a side."""
        if side == "vm":
            return self.vm.graphite_port
        if side == "whisper":
            return self.whisper.line_port
        return self._stack(side).line_port

    def pid(self, side: str) -> int:
        """The root of the side's process tree."""
        process = {"vm": self.vm.process, "whisper": self.whisper and self.whisper.process}.get(side) \
            or self._stack(side).process
        assert process is not None
        return process.pid

    def receiver_pid(self, side: str) -> int:
        """The receiving process of a side (bgl run's receiver child, not graphite-web)."""
        if side in ("vm", "whisper"):
            return self.pid(side)
        marker = "carbon.conf" if side == "ours_carbon" else "biggraphite_like.receiver"
        stack = self._stack(side)
        return next(pid for pid in stack.children() if marker in Path(f"/proc/{pid}/cmdline").read_text())

    def reader(self, side: str, match: str, timestamps: list[int]):
        """A Checker read through the side's read API."""
        if side == "vm":
            return vm_reader(self.vm, match, timestamps)
        if side == "whisper":
            return whisper_reader(self.whisper.whisper_dir, timestamps)
        return ours_reader(store_url(self._stack(side)), timestamps)

    def disk_bytes(self, side: str, points: int) -> int | None:
        if side == "vm":
            return vm_disk_bytes(self.vm, points)
        return None if side == "whisper" else ours_disk_bytes(self._stack(side))

    def peak_rss(self) -> dict[str, int]:
        return {side: proctree.peak_rss(self.pid(side)) for side in self.sides}

    def receiver_peak_rss(self) -> dict[str, int]:
        return {side: proctree.peak_rss(self.receiver_pid(side)) for side in self.sides}


def part_ingest(root: Path, metrics: int, points: int, timeout: float, existing_rounds: int = 1) -> dict:
    now = int(time.time())
    inputs = [make_input(metrics, points, r, now, 1 + existing_rounds) for r in range(1 + existing_rounds)]
    match = '{__name__=~"bench\\\\..*"}'
    figures: dict = {"metrics": metrics, "points_per_round": metrics * points, "rounds": {}, "young": {}}
    with Systems(root, carbon=True) as systems:
        for side in systems.sides:
            figures["rounds"][side] = []
            for index, (names, messages) in enumerate(inputs):
                timestamps = sorted({int(t) for _, (t, _) in messages})
                read = systems.reader(side, match, timestamps)
                log(f"peer ingest: {side}, round {index + 1} ({'new' if index == 0 else 'existing'} metrics),"
                    f" {len(messages):,} points")
                result = run_round(systems.port(side), systems.pid(side), plaintext(messages), len(messages),
                                   Checker(names, timestamps, read), timeout)
                result["round"] = "new" if index == 0 else "existing"
                log(f"  {result['points_per_second']:,.0f} points/s (all readable after {result['seconds']:.1f} s,"
                    f" received after {result['received_seconds']:.1f} s), {result['cpu_seconds']:.1f} CPU-s")
                figures["rounds"][side].append(result)
                size = systems.disk_bytes(side, len(messages)) if index == 0 else None
                if size is not None:
                    figures["young"][side] = {"bytes": size, "points": len(messages),
                                              "bytes_per_point": size / len(messages)}
                    if side == "ours":
                        figures["young"][side]["parts"] = ours_disk_parts(systems.ours)
        figures["summary"] = {side: summary(rounds) for side, rounds in figures["rounds"].items()}
        figures["peak_rss_bytes"] = systems.peak_rss()
        figures["receiver_peak_rss_bytes"] = systems.receiver_peak_rss()
        messages = [m for _, round_messages in inputs for m in round_messages]
        expected = expected_points(messages)
        names = sorted(expected)
        stamps = [int(ts) for _, (ts, _) in messages]
        start, end = min(stamps) - 1, max(stamps) + 60  # a fetch starts a step after `from`
        figures["expected"] = {"points": len(messages), "value_sum": math.fsum(v for _, (_, v) in messages)}
        figures["answers"] = {"ours": compare(expected, ours_points(store_url(systems.ours), names, start, end)),
                              "ours_carbon": compare(expected, ours_points(store_url(systems.ours_carbon), names,
                                                                           start, end)),
                              "vm": compare(expected, vm_points(systems.vm, match, start, end))}
    return figures


def summary(rounds: list[dict]) -> dict:
    """The `new` round, and the median of each figure over the `existing` rounds (a single
    round moves a lot on a shared machine, whisper's most: its page cache and disk)."""
    existing = [r for r in rounds if r["round"] == "existing"]
    median = {key: statistics.median(r[key] for r in existing) for key in existing[0]
              if isinstance(existing[0][key], (int, float))}
    median.update(round="existing", rounds=len(existing))
    return {"new": rounds[0], "existing": median}


def day_messages(series: int, end: int) -> list[tuple[str, tuple[float, float]]]:
    """`day.hostNNNN.cpuN` x 1,440 minutes ending at `end`; values like a percentage with two
    decimals, pseudo-random (a regular sequence would compress to almost nothing in
    VictoriaMetrics, which no real metric does)."""
    names = [f"day.host{i // 10:04d}.cpu{i % 10}" for i in range(series)]
    rng = random.Random(1)
    return [(name, (float(end - 60 * age), round(rng.uniform(0, 100), 2)))
            for age in range(1439, -1, -1) for name in names]


def realistic_day_messages(series: int, end: int) -> list[tuple[str, tuple[float, float]]]:
    """`real.hostNNNN.gaugeN` / `.counterN` x 1,440 minutes ending at `end`, as hosts report
    them: half gauges (a percentage wandering by small steps, two decimals), half counters
    (an integer total growing by a random amount each minute, as bytes or requests)."""
    rng = random.Random(2)
    series_values: list[tuple[str, list[float]]] = []
    for i in range(series):
        kind = "gauge" if i % 2 == 0 else "counter"
        name = f"real.host{i // 10:04d}.{kind}{i % 10}"
        level, values = rng.uniform(0, 100) if kind == "gauge" else float(rng.randrange(10**9)), []
        for _ in range(1440):
            if kind == "gauge":
                level = min(100.0, max(0.0, level + rng.gauss(0, 0.5)))
                values.append(round(level, 2))
            else:
                level += rng.randrange(0, 1000)
                values.append(level)
        series_values.append((name, values))
    return [(name, (float(end - 60 * (1439 - minute)), values[minute]))
            for minute in range(1440) for name, values in series_values]


def render_points(body: bytes) -> Points:
    return {series["target"]: {int(ts): float(v) for v, ts in series["datapoints"] if v is not None}
            for series in json.loads(body)}


def query_range_points(body: bytes) -> Points:
    return {series["metric"]["__name__"]: {int(ts): float(v) for ts, v in series["values"]}
            for series in json.loads(body)["data"]["result"]}


def part_day(root: Path, series: int, runs: int, budget: float, timeout: float, day_end: int | None = None) -> dict:
    """The day's load, bytes, answers and render; the day ends 2 minutes ago, or at day_end
    (the bytes depend on how much of the day is still in the open window: see --day-end)."""
    now = int(time.time())
    end = (now - 120 if day_end is None else day_end) // 60 * 60
    start = end - 1439 * 60
    messages = day_messages(series, end)
    names = sorted({name for name, _ in messages})
    timestamps = list(range(start, end + 1, 60))
    match = '{__name__=~"day\\\\..*"}'
    expected = expected_points(messages)
    figures: dict = {"series": series, "points": len(messages), "end": end, "load": {}, "day": {}}
    with Systems(root) as systems:
        payload = plaintext(messages)
        for side in ("ours", "vm"):
            log(f"peer day: loading {len(messages):,} points into {side}")
            checker = Checker(names, timestamps, systems.reader(side, match, timestamps))
            figures["load"][side] = run_round(systems.port(side), systems.pid(side), payload, len(messages), checker,
                                              timeout)
            size = systems.disk_bytes(side, len(messages))
            figures["day"][side] = {"bytes": size, "points": len(messages), "bytes_per_point": size / len(messages)}
            if side == "ours":
                figures["day"][side]["parts"] = ours_disk_parts(systems.ours)
            log(f"  {figures['load'][side]['points_per_second']:,.0f} points/s; {size / len(messages):.2f} bytes/point")

        figures["realistic"] = _realistic_day(root / "realistic", series, end, timeout)

        render = {"target": "day.*.*", "from": start - 1, "until": end, "format": "json"}
        query = {"query": match, "start": start, "end": end, "step": 60}
        export = {"match[]": match, "start": start, "end": end}
        ours_url = systems.ours.web + "/render?" + urllib.parse.urlencode(render)
        range_url = systems.vm.url + "/api/v1/query_range?" + urllib.parse.urlencode(query)
        export_url = systems.vm.url + "/api/v1/export?" + urllib.parse.urlencode(export)
        figures["expected"] = {"points": len(messages), "value_sum": math.fsum(v for _, (_, v) in messages)}
        figures["answers"] = {"ours": compare(expected, render_points(http_get(ours_url))),
                              "vm": compare(expected, query_range_points(http_get(range_url))),
                              "vm_export": compare(expected, vm_points(systems.vm, match, start, end))}
        log(f"peer render: {series:,} series x 1 day, ours /render vs /api/v1/query_range")
        figures["render"] = _renamed(side_by_side(lambda: http_get(ours_url), lambda: http_get(range_url), runs,
                                                  budget=budget))
        figures["export"] = _renamed(side_by_side(lambda: http_get(ours_url), lambda: http_get(export_url), runs,
                                                  budget=budget))
        log(f"  ours {figures['render']['ours_s'] * 1e3:,.0f} ms, query_range {figures['render']['vm_s'] * 1e3:,.0f} ms,"
            f" export {figures['export']['vm_s'] * 1e3:,.0f} ms")
        figures["peak_rss_bytes"] = systems.peak_rss()
    return figures


def _realistic_day(root: Path, series: int, end: int, timeout: float) -> dict:
    """Disk bytes per point of realistic gauges and counters (1 day at 60 s) on fresh stores."""
    messages = realistic_day_messages(series, end)
    names = sorted({name for name, _ in messages})
    timestamps = list(range(end - 1439 * 60, end + 1, 60))
    figures: dict = {}
    with Systems(root) as systems:
        payload = plaintext(messages)
        for side in ("ours", "vm"):
            log(f"peer day (realistic gauges and counters): loading {len(messages):,} points into {side}")
            checker = Checker(names, timestamps, systems.reader(side, '{__name__=~"real\\\\..*"}', timestamps))
            run_round(systems.port(side), systems.pid(side), payload, len(messages), checker, timeout)
            size = systems.disk_bytes(side, len(messages))
            figures[side] = {"bytes": size, "points": len(messages), "bytes_per_point": size / len(messages)}
            if side == "ours":
                figures[side]["parts"] = ours_disk_parts(systems.ours)
            log(f"  {size / len(messages):.2f} bytes/point")
    return figures


def _renamed(result: dict) -> dict:
    """side_by_side's `standard_*` keys are VictoriaMetrics here."""
    return {key.replace("standard", "vm"): value for key, value in result.items()}


def find_nodes(body: bytes) -> list[tuple[str, bool]]:
    """(path, is leaf) of a /metrics/find answer (VictoriaMetrics ends branch ids with a dot)."""
    return sorted((node["id"].rstrip("."), bool(node["leaf"])) for node in json.loads(body))


def part_find(root: Path, count: int, runs: int, budget: float, timeout: float) -> dict:
    names = tree_names(count) + GAP_NAMES
    (root / "ours").mkdir(parents=True, exist_ok=True)
    log(f"peer find: {len(names):,} names into our store (Accessor.create_metrics)")
    started = time.perf_counter()
    accessor = Accessor.from_url(f"sqlite://{root / 'ours' / settings.DB_FILE_NAME}")
    try:
        accessor.syncdb()
        metadata = MetricMetadata.create(settings.DEFAULT_RETENTION, "average", 0.5)
        for offset in range(0, len(names), 10_000):
            accessor.create_metrics([(n, metadata) for n in names[offset:offset + 10_000]])
    finally:
        accessor.close()
    figures: dict = {"names": len(names), "ours_load_seconds": time.perf_counter() - started}
    with Systems(root) as systems:
        log(f"peer find: {len(names):,} names into VictoriaMetrics (plaintext, one point a name)")
        started = time.perf_counter()
        ts = int(time.time()) - 60
        send_to_carbon(systems.vm.graphite_port, "".join(f"{name} 1 {ts}\n" for name in names).encode())
        while systems.vm.series_count() < len(names):
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"VictoriaMetrics holds {systems.vm.series_count()} of {len(names)} names")
            time.sleep(0.5)
        figures["vm_load_seconds"] = time.perf_counter() - started

        errors: dict[str, list[str]] = {}

        def finder(base: str, pattern: str, side: str) -> Callable[[], bytes]:
            """A /metrics/find call; an HTTP error (e.g. graphite-web's FIND_TIMEOUT, 3 s, as a
            500) is an answer too: counted, timed like the others, and the answer is empty."""
            url = base + "/metrics/find?" + urllib.parse.urlencode({"query": pattern})

            def call() -> bytes:
                try:
                    return http_get(url)
                except urllib.error.HTTPError as error:
                    errors.setdefault(f"{side} {pattern}", []).append(f"HTTP {error.code}")
                    return b"[]"
            return call

        def ours(pattern: str) -> Callable[[], bytes]:
            return finder(systems.ours.web, pattern, "ours")

        def vm(pattern: str) -> Callable[[], bytes]:
            return finder(systems.vm.url, pattern, "vm")

        rows = []
        for pattern, kind in FIND_PATTERNS:
            ours_nodes, vm_nodes = find_nodes(ours(pattern)()), find_nodes(vm(pattern)())
            row = {"pattern": pattern, "kind": kind, "nodes": len(ours_nodes), "vm_nodes": len(vm_nodes),
                   "same": ours_nodes == vm_nodes, "only_ours": [p for p, _ in sorted(set(ours_nodes) - set(vm_nodes))][:5],
                   "only_vm": [p for p, _ in sorted(set(vm_nodes) - set(ours_nodes))][:5],
                   **_renamed(side_by_side(ours(pattern), vm(pattern), runs, budget=budget))}
            row["errors"] = {side: errors.get(f"{side} {pattern}", []) for side in ("ours", "vm")}
            failed = "".join(f" {side} failed {len(e)}x ({e[0]})" for side, e in row["errors"].items() if e)
            log(f"  {pattern:32} ours {row['ours_s'] * 1e3:8.2f} ms  vm {row['vm_s'] * 1e3:8.2f} ms"
                f"  {row['nodes']} / {row['vm_nodes']} nodes{'' if row['same'] else ' DIFFER'} ({row['runs']} runs){failed}")
            rows.append(row)
        figures["find"] = rows
        figures["gaps"] = []
        for pattern, gap in GAP_PROBES:
            ours_nodes, vm_nodes = find_nodes(ours(pattern)()), find_nodes(vm(pattern)())
            figures["gaps"].append({"pattern": pattern, "gap": gap, "ours": [p for p, _ in ours_nodes],
                                    "vm": [p for p, _ in vm_nodes], "same": ours_nodes == vm_nodes})
        floors = {}
        for side, call in (("ours", lambda: http_get(systems.ours.web + "/version/")),
                           ("vm", lambda: http_get(systems.vm.url + "/health"))):
            call()
            samples = []
            for _ in range(max(20, runs)):
                before = time.perf_counter()
                call()
                samples.append(time.perf_counter() - before)
            floors[side] = {"p50_s": statistics.median(samples), "p99_s": percentile(samples, 99)}
        figures["floor"] = floors
        figures["peak_rss_bytes"] = systems.peak_rss()
    return figures


def day_end_time(text: str) -> int:
    """--day-end's value: a UTC minute in the past 7 days (stage 0 keeps 8 days), as a timestamp."""
    try:
        end = calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a UTC minute written YYYY-MM-DDTHH:MM") from None
    if not time.time() - 7 * 86400 <= end <= time.time() - 120:
        raise argparse.ArgumentTypeError(f"{text} is not between 7 days and 2 minutes ago (UTC)")
    return end


def run(workdir: Path, sizes: dict, parts: tuple[str, ...] = PARTS, timeout: float = 3600.0,
        day_end: int | None = None) -> dict:
    """Every part asked for; VictoriaMetrics' binary is found (or installed) first."""
    figures: dict = {"victoria_metrics": binary(), "sizes": sizes}
    if "ingest" in parts:
        figures["ingest"] = part_ingest(workdir / "ingest", sizes["metrics"], sizes["points"], timeout,
                                        sizes.get("existing_rounds", 1))
    if "day" in parts:
        figures["day"] = part_day(workdir / "day", sizes["day_series"], sizes["render_runs"], sizes["render_budget"],
                                  timeout, day_end)
    if "find" in parts:
        figures["find"] = part_find(workdir / "find", sizes["names"], sizes["find_runs"], sizes["find_budget"], timeout)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    parser.add_argument("--only", action="append", choices=PARTS, help="run this part (repeatable)")
    for key, value in SIZES["full"].items():
        parser.add_argument("--" + key.replace("_", "-"), type=type(value), help=f"default {value:,} (full)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds a load may take")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON (the only output)")
    parser.add_argument("--day-end", type=day_end_time, default=None, metavar="YYYY-MM-DDTHH:MM",
                        help="end the day part's day at this UTC minute (past, within the last 7 days) instead of "
                             "2 minutes ago: how much of the day is in the open window depends on the hour")
    args = parser.parse_args(argv)
    sizes = dict(SIZES["quick" if args.quick else "full"])
    sizes.update({key: getattr(args, key) for key in sizes if getattr(args, key) is not None})
    try:
        binary()
    except PeerUnavailable as error:
        log(f"peer section skipped: {error}")
        print(json.dumps({"skipped": str(error)}))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="bgl-peer-", dir=args.tmpdir))
    try:
        figures = run(workdir, sizes, tuple(args.only or PARTS), args.timeout, args.day_end)
    finally:
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(figures, indent=2))  # `python -m bench` makes the table
    return 0


if __name__ == "__main__":
    sys.exit(main())
