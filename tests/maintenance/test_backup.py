"""`bgl backup` / `bgl restore` on real SQLite files, under a real writer process that
acknowledges each committed point: what was acknowledged before the backup began comes
back from the restored store, nothing else does, and every refusal says why."""
from __future__ import annotations

import os
import pty
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.carbon_env import REPO_ROOT

METADATA = MetricMetadata.create("60s:8d,1h:2y", "average", 0.5)
NOW = int(time.time()) // 60 * 60

# Writes one point a transaction and prints `NAME TIMESTAMP VALUE` once it is committed;
# SIGTERM ends it after the point in hand.
WRITER = """
import signal, sys
from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
accessor = Accessor.from_url(sys.argv[1])
metadata = MetricMetadata.create("60s:8d,1h:2y", "average", 0.5)
now, index = int(sys.argv[2]), 0
while not stop:
    name, timestamp = f"live.m{index % 40}", now - 60 * (index // 40)
    accessor.insert_points({name: [(timestamp, float(index))]}, create=metadata)
    print(name, timestamp, float(index), flush=True)
    index += 1
"""


def bgl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "biggraphite_like.cli", *args], capture_output=True, text=True,
                          timeout=300, input=stdin, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))


def _filled_store(path: Path, metrics: int = 100, points: int = 1000) -> str:
    url = f"sqlite://{path}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    rng = random.Random(7)
    for start in range(0, metrics, 50):
        accessor.insert_points({f"fill.m{i}": [(NOW - 60 * k, rng.random()) for k in range(points)]
                                for i in range(start, start + 50)}, create=METADATA)
    accessor.close()
    return url


class Writer:
    """The writer process and the points it acknowledged, in order."""

    def __init__(self, url: str):
        self.process = subprocess.Popen([sys.executable, "-c", WRITER, url, str(NOW)], stdout=subprocess.PIPE,
                                        text=True, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
        self.acked: list[tuple[str, int, float]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            name, timestamp, value = line.split()
            self.acked.append((name, int(timestamp), float(value)))

    def wait_for(self, count: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert self.process.poll() is None and time.monotonic() < deadline, (self.process.poll(), len(self.acked))
            time.sleep(0.02)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(60) == 0
        self._reader.join(60)


def _stored_points(url: str) -> set[tuple[str, int, float]]:
    accessor = Accessor.from_url(url)
    try:
        names = accessor.glob_metrics("live.*")
        found = set()
        for name, result in accessor.fetch(names, NOW - 86400, NOW + 60, now=NOW + 60).items():
            found |= {(name, result.start + i * result.step, value)
                      for i, value in enumerate(result.values_list()) if value is not None}
        return found
    finally:
        accessor.close()


def test_a_backup_under_live_writes_restores_every_point_acknowledged_before_it(tmp_path):
    url = _filled_store(tmp_path / "bgl.db")
    writer = Writer(url)
    try:
        writer.wait_for(200)
        acked_before = set(writer.acked)  # every point acknowledged before the backup starts
        result = bgl("--store", url, "backup", str(tmp_path / "backup.db"))
        acked_during = len(writer.acked) - len(acked_before)
        writer.wait_for(len(writer.acked) + 50)  # and the writer goes on after it
    finally:
        writer.stop()
    assert result.returncode == 0, result.stderr
    assert acked_during > 0  # the writer committed while `bgl backup` ran
    assert f"{tmp_path / 'backup.db'}: a copy of {tmp_path / 'bgl.db'}, PRAGMA integrity_check ok" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("bgl backup: pages ")
    assert not (tmp_path / "backup.db.partial").exists()
    copy = sqlite3.connect(tmp_path / "backup.db")
    assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # one self-contained file
    copy.close()
    assert not (tmp_path / "backup.db-wal").exists()

    restored_url = f"sqlite://{tmp_path / 'restored' / 'bgl.db'}"
    (tmp_path / "restored").mkdir()
    result = bgl("--store", restored_url, "restore", str(tmp_path / "backup.db"))
    assert result.returncode == 0, result.stderr
    restored = _stored_points(restored_url)
    assert acked_before <= restored, sorted(acked_before - restored)[:10]
    assert restored <= set(writer.acked)  # a snapshot of committed points, nothing else
    assert len(restored) < len(writer.acked)  # what came after the backup is not in it
    conn = sqlite3.connect(tmp_path / "restored" / "bgl.db")
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert conn.execute("SELECT count(*) FROM metrics").fetchone()[0] == 140  # 100 fill.* + 40 live.*
    conn.close()


def test_restore_refuses_a_store_in_use_and_replaces_one_only_when_forced(tmp_path):
    url = _filled_store(tmp_path / "bgl.db", metrics=50, points=10)
    assert bgl("--store", url, "backup", str(tmp_path / "backup.db")).returncode == 0
    writer = Writer(url)
    try:
        writer.wait_for(10)
        result = bgl("--store", url, "restore", "--force", str(tmp_path / "backup.db"))
        assert result.returncode == 1
        assert f"bgl restore: error: {tmp_path / 'bgl.db'} is open in pid {writer.process.pid} (" in result.stderr
        assert "stop them (bgl run, bgl receive, carbon-cache, graphite-web) first" in result.stderr
    finally:
        writer.stop()
    live = _stored_points(url)
    assert live == set(writer.acked)  # the refused restore changed nothing

    result = bgl("--store", url, "restore", str(tmp_path / "backup.db"))
    assert result.returncode == 1
    assert "exists: a restore replaces it; give --force to do so" in result.stderr
    assert _stored_points(url) == live

    result = bgl("--store", url, "restore", "--force", str(tmp_path / "backup.db"))
    assert result.returncode == 0, result.stderr
    assert _stored_points(url) == set()  # the backup was taken before the writer ran
    kept = tmp_path / result.stdout.split("kept as ")[1].splitlines()[0].split("/")[-1]
    assert kept.name.startswith("bgl.db.replaced-") and kept.exists()
    assert _stored_points(f"sqlite://{kept}") == live  # the replaced store, its WAL with it, is whole


def test_backups_never_overwrite_and_bad_sources_are_refused(tmp_path):
    url = _filled_store(tmp_path / "bgl.db", metrics=50, points=10)
    (tmp_path / "taken.db").write_text("mine")
    result = bgl("--store", url, "backup", str(tmp_path / "taken.db"))
    assert result.returncode == 1 and "taken.db exists: give a new file name" in result.stderr
    assert (tmp_path / "taken.db").read_text() == "mine"

    result = bgl("--store", f"sqlite://{tmp_path / 'none.db'}", "backup", str(tmp_path / "b.db"))
    assert result.returncode == 1 and f"the store file {tmp_path / 'none.db'} does not exist" in result.stderr

    result = bgl("--store", f"sqlite://{tmp_path / 'new.db'}", "restore", str(tmp_path / "taken.db"))
    assert result.returncode == 1 and "restore of" in result.stderr and "the store was not changed" in result.stderr
    assert not (tmp_path / "new.db").exists()
    other = sqlite3.connect(tmp_path / "other.db")
    other.execute("CREATE TABLE t (x)")
    other.close()
    result = bgl("--store", f"sqlite://{tmp_path / 'new.db'}", "restore", str(tmp_path / "other.db"))
    assert result.returncode == 1 and "is not a biggraphite_like store (no table metrics" in result.stderr
    assert not (tmp_path / "new.db").exists() and not (tmp_path / "new.db.restoring").exists()

    result = bgl("--store", "cassandra://127.0.0.1:1/ks", "backup", str(tmp_path / "c.db"))
    assert result.returncode == 1
    assert "Back up Cassandra with `nodetool snapshot` on every node" in result.stderr
    assert "docs/operations.md#cassandra-backups" in result.stderr
    assert (REPO_ROOT / "docs" / "operations.md").read_text().count("## Cassandra backups") == 1


def test_progress_is_drawn_on_a_terminal(tmp_path):
    url = _filled_store(tmp_path / "bgl.db", metrics=200, points=1000)
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "biggraphite_like.cli", "--store", url, "backup",
                                str(tmp_path / "b.db")], stdout=subprocess.PIPE, stderr=follower,
                               env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    assert process.wait(120) == 0
    text = drawn.decode()
    assert "bgl backup: pages [" in text and "100%" in text, text
