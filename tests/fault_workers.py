"""Workers of the fault suite and the soak run: real processes doing writes, creation,
clean, finds and reads on one store, each reporting what the store acknowledged.

A worker runs as its own process (`python -m tests.fault_workers KIND URL ACK_FILE SEED`)
so it can be killed with SIGKILL at any point. After every acknowledged operation (the
accessor call returned: the transaction is committed) it appends one line to ACK_FILE,
written with one `os.write` so a kill leaves whole lines: `send B` (batch B about to
be written), `write B` (batch B of `write_batch(B)` stored), `create B`, `clean K N`,
`find N`, `read N`. What a batch holds
is a pure function of its number, so the parent can check every acknowledged point
without being told the points.
"""
from __future__ import annotations

import os
import random
import sqlite3
import sys
import time
from typing import Iterator

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.maintenance.clean import clean
from biggraphite_like.metric import MetricMetadata

META = MetricMetadata.create("60s:1d,300s:7d", "average", 0.5)
WRITE_METRICS = 40  # metrics each write batch touches (some new every batch)
BASE = 1_800_000_000  # batch b writes at BASE + 60 * b (a fresh slot each batch)
STALE_AGE = 40 * 86400  # what the clean worker leaves behind to be cleaned


def write_batch(batch: int) -> dict[str, tuple[int, float]]:
    """The points of write batch `batch`: name -> (timestamp, value)."""
    names = [f"w.h{i % 8}.m{i}" for i in range(WRITE_METRICS // 2)]  # always the same ones
    names += [f"w.new.b{batch // 10}.m{batch % 10}.x{i}" for i in range(WRITE_METRICS // 2)]  # created by the write
    return {name: (BASE + 60 * batch, float(batch * 1000 + i)) for i, name in enumerate(names)}


def create_batch(batch: int) -> list[str]:
    return [f"c.b{batch}.h{i % 5}.m{i}" for i in range(100)]


def _ack(fd: int, text: str) -> None:
    os.write(fd, (text + "\n").encode())


def _batches(start: int = 0) -> Iterator[int]:
    batch = start
    while True:
        yield batch
        batch += 1


def run(kind: str, url: str, ack_path: str, seed: int, stop_after: float = 0.0, pause: float = 0.0) -> None:
    """Do `kind` of work on the store until killed (or for stop_after seconds if > 0),
    sleeping `pause` seconds between operations."""
    accessor = Accessor.from_url(url)
    rng = random.Random(seed)
    fd = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    deadline = time.monotonic() + stop_after if stop_after > 0 else float("inf")
    start = seed * 1000  # distinct batch numbers per worker (one writer at a time: they share metrics)
    for batch in _batches(start):
        if time.monotonic() > deadline:
            break
        if pause and batch > start:
            time.sleep(pause)
        if kind == "write":
            points = write_batch(batch)
            _ack(fd, f"send {batch}")  # sent, not yet acknowledged
            result = accessor.insert_points({n: [p] for n, p in points.items()}, now=BASE + 60 * batch + 30,
                                            create=META)
            assert result.stored == len(points), result
            _ack(fd, f"write {batch}")
        elif kind == "create":
            accessor.create_metrics([(n, META) for n in create_batch(batch)])
            _ack(fd, f"create {batch}")
        elif kind == "clean":
            # leave stale metrics behind, in their own subtrees and beside live ones, then clean
            now = int(time.time())
            stale = [f"s.b{batch}.h{i % 4}.m{i}" for i in range(50)] + [f"w.h{i % 8}.stale{batch}" for i in range(8)]
            accessor.create_metrics([(n, META) for n in stale], now=now - STALE_AGE)
            report = clean(accessor, max_age=3600, now=now)
            _ack(fd, f"clean {batch} {report.metrics_removed}")
        elif kind == "find":
            found = accessor.glob_metrics(rng.choice(["w.*.*", "w.new.*.*.*", "c.*.h1.*", "s.**", "**.m1"]))
            _ack(fd, f"find {len(found)}")
        elif kind == "read":
            names = accessor.glob_metrics("w.h*.m*")
            if names:
                now = BASE + 60 * (batch - start) + 86400
                accessor.fetch(rng.sample(names, min(10, len(names))), now - 86400, now, now=now)
            _ack(fd, f"read {len(names)}")
        else:
            raise ValueError(f"unknown worker kind {kind!r}")
    os.close(fd)
    accessor.close()


def acknowledged(ack_path: str) -> dict[str, list[list[str]]]:
    """The acknowledged operations of an ack file, by kind (a torn last line is not one)."""
    by_kind: dict[str, list[list[str]]] = {}
    try:
        text = open(ack_path).read()
    except FileNotFoundError:
        return by_kind
    for line in text.split("\n")[:-1]:  # what follows the last newline was never acknowledged
        kind, *fields = line.split()
        by_kind.setdefault(kind, []).append(fields)
    return by_kind


def integrity(path: str) -> str:
    """SQLite's `PRAGMA integrity_check` of the file ('ok' when sound)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def orphans(accessor: Accessor) -> list[str]:
    """Metrics missing an ancestor directory (invisible to globs)."""
    directories = {d for page in accessor.scan_directories() for d in page.items}
    return [m.name for page in accessor.scan_metrics() for m in page.items
            if not set(names_mod.ancestors(m.name)) <= directories]


def check_store(url: str, acks: dict[str, list[list[str]]]) -> dict[str, int]:
    """Check what the workers acknowledged is stored and the store is consistent.

    Returns the counts (acknowledged and stored points, metrics created); raises
    AssertionError naming what was lost or inconsistent.
    """
    status = integrity(url[len("sqlite://"):])
    assert status == "ok", f"integrity_check: {status}"
    accessor = Accessor.from_url(url)
    try:
        expected: dict[str, dict[int, float]] = {}
        for fields in acks.get("write", []):
            for name, (timestamp, value) in write_batch(int(fields[0])).items():
                expected.setdefault(name, {})[timestamp] = value
        created = [n for fields in acks.get("create", []) for n in create_batch(int(fields[0]))]
        present = accessor.store.get_metrics(sorted(set(expected) | set(created)))
        missing = sorted((set(expected) | set(created)) - set(present))
        assert not missing, f"{len(missing)} acknowledged metrics missing, e.g. {missing[:5]}"
        # a metric's ring holds its last day at 60 s: older acknowledged points were replaced
        # by newer ones, as in whisper; the check reads each metric's last day at stage 0
        by_last: dict[int, list[str]] = {}
        for name, points in expected.items():
            by_last.setdefault(max(points), []).append(name)
        stored = acknowledged_points = 0
        lost: list[tuple[str, int]] = []
        for last, group in sorted(by_last.items()):
            first = last - 86400 + 120
            for start in range(0, len(group), 200):
                chunk = group[start:start + 200]
                series = accessor.fetch(chunk, first, last + 60, now=last + 60)
                for name in chunk:
                    got = series[name]
                    values = {} if got is None else {got.start + i * got.step: v
                                                     for i, v in enumerate(got.values_list()) if v is not None}
                    for timestamp, value in expected[name].items():
                        if timestamp < first:
                            continue
                        acknowledged_points += 1
                        if values.get(timestamp) == value:
                            stored += 1
                        else:
                            lost.append((name, timestamp))
        assert not lost, f"{len(lost)} acknowledged points lost, e.g. {lost[:5]}"
        orphaned = orphans(accessor)
        assert not orphaned, f"metrics without their parent directory: {orphaned[:5]}"
        return {"points_acknowledged": acknowledged_points, "points_stored": stored,
                "metrics_created_acknowledged": len(created), "metrics": accessor.store.stats().get("metrics", -1)}
    finally:
        accessor.close()


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), *(float(a) for a in sys.argv[5:7]))
