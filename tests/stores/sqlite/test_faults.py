"""Faults: a full disk, and kill -9 at random points of writes, creation and clean.

kill -9: worker processes (tests/fault_workers.py) write, create, clean, find and read on
one SQLite store and append a line to an ack file after each operation the store
acknowledged; they are killed with SIGKILL at random moments, then the store must pass
`integrity_check`, hold every acknowledged point and metric, and have no metric without
its parent directory.

Each case counts what was sent, what the store acknowledged (a committed transaction
reported to the caller) and what is stored, then checks nothing acknowledged is lost,
SQLite's `PRAGMA integrity_check` is ok and no metric lacks its parent directory.

The full disk is real: as root, a small tmpfs is mounted for the test (and grown with
`mount -o remount` to give space back); without root the tests fall back to SQLite's
`PRAGMA max_page_count` on the test's own connection, which SQLite reports as the same
SQLITE_FULL (the CLI case needs root and is skipped without it).
"""
from __future__ import annotations

import os
import random
import signal
import shutil
import subprocess
import sys
import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import StoreFull
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.stores import sqlite as sqlite_store
from tests import fault_workers
from tests.fault_workers import integrity, orphans
from tests.paths import REPO_ROOT
from tests.small_disk import IS_ROOT, SmallDisk

NOW = 1_699_999_980  # a multiple of 60: points keep their timestamps at the 60 s precision
META = MetricMetadata.create("60s:1d", "average", 0.5)
BGL = shutil.which("bgl", path=os.path.dirname(sys.executable)) or shutil.which("bgl")
REPO = str(REPO_ROOT)


# -- helpers shared by the cases ---------------------------------------------------------------
def stored_points(accessor: Accessor, names: list[str], now: int = NOW) -> dict[str, dict[int, float]]:
    """Every stored stage-0 point of names, read back through the accessor."""
    found: dict[str, dict[int, float]] = {}
    present = accessor.store.get_metrics(names)
    for start in range(0, len(names), 500):
        chunk = [n for n in names[start:start + 500] if n in present]
        if not chunk:
            continue
        for name, series in accessor.fetch(chunk, now - 3600, now, now=now).items():
            if series is not None:
                found[name] = {series.start + i * series.step: v
                               for i, v in enumerate(series.values_list()) if v is not None}
    return found


@pytest.fixture
def small_disk(tmp_path):
    if not IS_ROOT:
        yield None
        return
    disk = SmallDisk(tmp_path / "disk", 12)
    try:
        yield disk
    finally:
        disk.unmount()


def _limit_pages(store, pages: int | None) -> None:
    """Without root: cap the file at `pages` pages on this connection (SQLITE_FULL past it)."""
    store._conn.execute(f"PRAGMA max_page_count = {pages or 2**31 - 2}")


# -- a full disk ---------------------------------------------------------------------------------
def test_a_full_disk_loses_nothing_acknowledged_and_writing_resumes_with_space(tmp_path, small_disk):
    """Issue 15 item 6: a creation burst (new metrics with points, 1,000 a transaction) runs
    into a full disk. Every acknowledged batch stays stored and readable, every refused one
    fails with StoreFull (nothing of it stored), the WAL is checkpointed and bounded, the
    file passes integrity_check, and writing resumes once space returns."""
    directory = small_disk.path if small_disk else tmp_path
    path = directory / "bgl.db"
    writer = Accessor.from_url(f"sqlite://{path}")
    writer.syncdb()
    if small_disk is None:
        _limit_pages(writer.store, 3000)
    sent: dict[str, tuple[int, float]] = {}
    acknowledged: dict[str, tuple[int, float]] = {}
    refused: list[str] = []
    errors: list[StoreFull] = []
    batch_index = 0
    while len(errors) < 3 and batch_index < 200:
        batch = {f"burst.b{batch_index:03d}.h{i // 100}.m{i % 100}": (NOW - 60 * (i % 50), float(batch_index * 1000 + i))
                 for i in range(1000)}
        batch_index += 1
        sent.update(batch)
        try:
            result = writer.insert_points({n: [p] for n, p in batch.items()}, now=NOW, create=META)
        except StoreFull as exc:
            errors.append(exc)
            refused.extend(batch)
            continue
        assert result.stored == len(batch)
        acknowledged.update(batch)
    assert errors, "the disk never filled up"
    assert len(acknowledged) >= 3000, "too few batches fit to make the test meaningful"
    message = str(errors[0])
    assert "is full" in message and "free some space and write again" in message and str(path) in message
    wal = path.parent / "bgl.db-wal"
    wal_size = wal.stat().st_size if wal.exists() else 0
    assert wal_size <= sqlite_store.WAL_LIMIT_BYTES, f"WAL of {wal_size} bytes on a full disk"

    # full, but readable and consistent: everything acknowledged is there, nothing refused is
    reader = Accessor.from_url(f"sqlite://{path}")
    assert integrity(path) == "ok"
    stored = stored_points(reader, sorted(sent))
    lost = [n for n, (ts, value) in acknowledged.items() if stored.get(n, {}).get(ts) != value]
    assert not lost, f"{len(lost)} acknowledged points lost, e.g. {lost[:3]}"
    assert not set(stored) & set(refused), "a refused batch left points behind"
    assert reader.store.get_metrics(refused) == {}
    assert reader.glob_metrics("burst.b000.h0.m1") == ["burst.b000.h0.m1"]
    assert orphans(reader) == []
    print(f"\nfull disk: sent {len(sent)}, acknowledged {len(acknowledged)}, stored {len(stored)},"
          f" refused {len(refused)}, WAL {wal_size} bytes")

    # space returns: the refused batch is written again, and more
    if small_disk:
        small_disk.resize(64)
    else:
        _limit_pages(writer.store, None)
    retry = {n: sent[n] for n in refused}
    assert writer.insert_points({n: [p] for n, p in retry.items()}, now=NOW, create=META).stored == len(retry)
    stored = stored_points(reader, sorted(sent))
    assert all(stored.get(n, {}).get(ts) == value for n, (ts, value) in sent.items())
    assert integrity(path) == "ok" and orphans(reader) == []
    writer.close()
    reader.close()


def test_the_wal_is_checkpointed_and_truncated_after_a_creation_burst(tmp_path):
    """Issue 15 item 6: the WAL reached 6x the database during a creation burst and stayed
    so. While a reader holds a snapshot no checkpoint can pass it, so the WAL grows; after
    the reader is gone, the next commit checkpoints and truncates it (wal_limit, here
    256 KiB; journal_size_limit the same: a burst of 8,000 names is ~1 MiB of WAL)."""
    limit = 256 << 10
    path = tmp_path / "bgl.db"
    writer = Accessor.from_url(f"sqlite://{path}")
    writer.store.wal_limit = limit
    writer.syncdb()
    reader = Accessor.from_url(f"sqlite://{path}")
    writer.insert_points({"first.m": [(NOW, 1.0)]}, now=NOW, create=META)
    wal = tmp_path / "bgl.db-wal"
    with reader.store.read_snapshot():  # a long render: its snapshot pins the WAL
        reader.store.get_metrics(["first.m"])
        for batch in range(4):
            writer.insert_points({f"burst.b{batch}.h{i // 100}.m{i % 100}": [(NOW, 1.0)] for i in range(2000)},
                                 now=NOW, create=META)
        pinned = wal.stat().st_size
    assert pinned > 2 * limit  # grew past the limit while pinned
    writer.insert_points({"after.m": [(NOW, 1.0)]}, now=NOW, create=META)
    after = wal.stat().st_size
    assert after <= limit, f"WAL still {after} bytes after the reader left (was {pinned})"
    assert integrity(path) == "ok"
    assert len(reader.glob_metrics("burst.*.*.*")) == 8000
    print(f"\nWAL: {pinned >> 20} MiB while a reader pinned it, {after >> 10} KiB after the next commit,"
          f" database {path.stat().st_size >> 20} MiB")
    writer.close()
    reader.close()


@pytest.mark.skipif(not IS_ROOT, reason="needs root to mount a small tmpfs for the bgl process")
def test_bgl_write_reports_the_lines_committed_before_a_full_disk(tmp_path, small_disk, env):
    """`bgl write -` of 60,000 lines (new metrics) onto a disk with room for fewer: it
    commits as many leading lines as fit (halving a batch that does not), then says which
    lines were committed; exactly those are stored. Sending the rest again, once space
    returns, stores everything."""
    small_disk.resize(4)  # a name takes ~60 bytes (the name tree): 60,000 new names overflow 4 MiB, not 12
    path = small_disk.path / "bgl.db"
    url = f"sqlite://{path}"
    now = int(time.time()) // 60 * 60
    lines = [f"cli.h{i // 100:04d}.m{i % 100:02d} {i} {now - 60 * (i % 30)}\n" for i in range(60_000)]
    done = subprocess.run([BGL, "--store", url, "write", "--retention", "60s:1d", "-"], input="".join(lines),
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "bgl write: error: " in done.stderr and "is full" in done.stderr
    summary = done.stderr.strip().splitlines()[-1]
    assert summary.startswith("bgl write: lines 1-"), done.stderr
    committed = int(summary.split("lines 1-")[1].split(" ")[0])
    assert f"({committed} point(s) stored); nothing from line {committed + 1} on was written" in summary
    assert 1000 <= committed < len(lines)

    reader = Accessor.from_url(url)
    assert integrity(path) == "ok"
    names = [line.split()[0] for line in lines]
    stored = stored_points(reader, names, now)
    assert sorted(stored) == sorted(names[:committed])  # the committed lines exactly, nothing after
    assert all(stored[names[i]] == {now - 60 * (i % 30): float(i)} for i in range(committed))

    small_disk.resize(256)
    again = subprocess.run([BGL, "--store", url, "write", "--retention", "60s:1d", "-"],
                           input="".join(lines[committed:]), env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert len(stored_points(reader, names, now)) == len(lines)
    assert integrity(path) == "ok" and orphans(reader) == []
    reader.close()
    print(f"\nbgl write on a full disk: sent {len(lines)} lines, committed {committed} before the failure, all stored after")


# -- kill -9 at random points --------------------------------------------------------------------
def _wait_until_each_acknowledged(tmp_path, kinds, round_index: int, limit: float = 60) -> None:
    """Until every worker has had round_index + 1 operations acknowledged in all (or limit s)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if all(sum(len(v) for v in fault_workers.acknowledged(str(tmp_path / f"acks-{kind}")).values()) > round_index
               for kind in kinds):
            return
        time.sleep(0.05)


@pytest.mark.parametrize("kinds", [
    ("write",), ("create",), ("clean", "create"), ("write", "create", "clean", "find", "read"),
], ids=["write", "create", "clean+create", "everything"])
def test_kill_9_at_random_points_loses_nothing_acknowledged(tmp_path, kinds):
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    Accessor.from_url(url).syncdb()
    rng = random.Random(" ".join(kinds))
    counts: dict[str, int] = {}
    for round_index in range(4):
        workers = [subprocess.Popen([sys.executable, "-m", "tests.fault_workers", kind, url,
                                     str(tmp_path / f"acks-{kind}"), str(round_index)], cwd=REPO)
                   for kind in kinds]
        _wait_until_each_acknowledged(tmp_path, kinds, round_index)  # past their start-up...
        time.sleep(rng.uniform(0, 1.0))  # ...then at a random point of their work
        for worker in rng.sample(workers, len(workers)):
            os.kill(worker.pid, signal.SIGKILL)
            time.sleep(rng.uniform(0, 0.05))
        for worker in workers:
            assert worker.wait(timeout=30) == -signal.SIGKILL, "a worker ended before it was killed"
        acks: dict[str, list[list[str]]] = {}
        for kind in kinds:
            for name, entries in fault_workers.acknowledged(str(tmp_path / f"acks-{kind}")).items():
                acks.setdefault(name, []).extend(entries)
        counts = fault_workers.check_store(url, acks)
        counts.update({f"{kind}_acknowledged": len(acks.get(kind, [])) for kind in kinds})
    print(f"\nkill -9 x4 of {'+'.join(kinds)}: {counts}")
    for kind in kinds:
        assert counts[f"{kind}_acknowledged"] > 0, f"no {kind} was ever acknowledged: the kills came too early"
    if "write" in kinds:
        assert counts["points_stored"] == counts["points_acknowledged"] > 0
