"""What every part of the peer benchmark shares: the systems side by side (`Systems`), the
plaintext stream, the disk bytes of each store, the bench-side readers that date a round
(carbon-cache sides and the day load), and reading everything back to compare it with what
was sent."""
from __future__ import annotations

import math
import sqlite3
import sys
import threading
import time
import urllib.error
from pathlib import Path

import numpy as np

from bench import proctree
from bench.carbon_bench import CHECK_CHUNK, Checker, whisper_reader
from bench.peer.probes import OursProbe, Probe, VmProbe
from bench.victoria import VictoriaMetrics, http_get
from biggraphite_like import settings
from biggraphite_like.accessor import Accessor
from tests.carbon_env import WHISPER_LAUNCHER, CarbonCache, send_to_carbon
from tests.stack_env import BglRun

def timed_get(url: str) -> tuple[float, int, bytes]:
    """(seconds, HTTP status, body) of a GET; an HTTP error is an answer too (its status)."""
    started = time.perf_counter()
    try:
        body, status = http_get(url), 200
    except urllib.error.HTTPError as error:
        body, status = error.read(), error.code
    return time.perf_counter() - started, status, body


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
    parts["btrees"] = page_breakdown(stack.data_dir / settings.DB_FILE_NAME)
    return parts


def page_breakdown(db: Path) -> dict[str, dict[str, int]]:
    """Each B-tree (table or index) of a SQLite file from its dbstat table: pages, cells,
    and its bytes cut three ways: `payload` (the records' bytes), `unused` (free space left
    in its pages by splits and deletions) and `overhead` (page headers, cell pointers, the
    rowid and size varints of each cell); payload + unused + overhead = its pages' bytes."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT name, count(*), sum(ncell), sum(pgsize), sum(payload), sum(unused)"
                                  " FROM dbstat GROUP BY name ORDER BY sum(pgsize) DESC").fetchall()
    finally:
        connection.close()
    return {name: {"pages": pages, "cells": cells, "bytes": size, "payload": payload, "unused": unused,
                   "overhead": size - payload - unused}
            for name, pages, cells, size, payload, unused in rows}


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


def difference(request: object, ours: list | None, vm: list | None) -> dict:
    """What one answer has and the other lacks (5 of each at most)."""
    ours_set, vm_set = set(ours or []), set(vm or [])
    return {"request": request, "only_ours": sorted(ours_set - vm_set)[:5], "only_vm": sorted(vm_set - ours_set)[:5],
            "failed": [side for side, answer in (("ours", ours), ("vm", vm)) if answer is None]}


def expected_points(messages: list[tuple[str, tuple[float, float]]]) -> Points:
    expected: Points = {}
    for name, (ts, value) in messages:
        expected.setdefault(name, {})[int(ts)] = float(value)
    return expected


class Systems:
    """Our stack and VictoriaMetrics (with `carbon`: also `bgl run --carbon` and carbon-cache
    with whisper), started side by side in a part's directory."""

    def __init__(self, root: Path, carbon: bool = False, ours_options: tuple[str, ...] = ()):
        self.ours = BglRun(root / "ours", options=ours_options)
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

    def web_worker_peak_rss(self) -> int:
        """The largest peak RSS of one of our graphite-web (gunicorn) workers: the processes
        without children under the stack that are not the receiver."""
        receiver = self.receiver_pid("ours")
        members = [pid for pid in proctree.tree(self.pid("ours")) if pid not in (self.pid("ours"), receiver)]
        leaves = [pid for pid in members if len(proctree.tree(pid)) == 1]
        return max((proctree.peak_rss(pid) for pid in leaves), default=0)

    def restart_ours(self) -> None:
        """Our stack again on its store, with its defaults (the probe's short self-metrics
        interval is for the loads only: its records would run beside the timed requests)."""
        log("peer: our stack restarted with its defaults")
        self.ours.stop()
        self.ours = BglRun(self.ours.data_dir)
        self.ours.start()

    def probe(self, side: str) -> Probe:
        """The side's cheap readability probe (bench/peer/probes.py)."""
        return VmProbe(self.vm) if side == "vm" else OursProbe(self._stack(side))




def renamed(result: dict) -> dict:
    """side_by_side's `standard_*` keys are VictoriaMetrics here."""
    return {key.replace("standard", "vm"): value for key, value in result.items()}

