"""The SQLite file's free pages (stores/sqlite/free_pages.py): a store made by syncdb gives
back, as it commits, the pages a transaction freed (a window's tail and open chunk when it
seals, deleted metrics), at most FREE_PAGES_PER_COMMIT a commit; a file made before keeps
them (shown by `bgl stats` and `bgl du`) until `bgl syncdb --vacuum`."""
from __future__ import annotations

import io
import json
import os
import sqlite3

import numpy as np

from biggraphite_like import cli
from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.retention import Stage
from biggraphite_like.stores.base import StageTable
from biggraphite_like.stores.sqlite import SQLiteStore, free_pages

STAGE = StageTable(Stage(60, 1440), False)  # windows of 720 slots
NAMES = [f"free.h{i:03d}.cpu" for i in range(300)]
START = 1_700_000_000 // 43_200 * 43_200  # slot 0 of the ring: the first window ends at START + 720 min


def pragma(path, name: str) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]


def older_file(path) -> None:
    """A file as syncdb made it before incremental vacuum: WAL mode set before the first
    table leaves auto_vacuum off (today's syncdb sets it first)."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")


def store_with_metrics(path) -> SQLiteStore:
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    accessor.create_metrics([(n, MetricMetadata.create("1440*60s", "average", 0.0)) for n in NAMES],
                            now=START + 86_400)
    accessor.store.close()
    return SQLiteStore(str(path))


def write_minutes(store: SQLiteStore, first: int, last: int, every: int = 20) -> list[int]:
    """Minutes first..last of every metric, `every` minutes a write batch as a receiver
    flushes; the free pages after each commit."""
    free = []
    for minute in range(first, last, every):
        minutes = np.arange(minute, min(minute + every, last))
        timestamps = np.tile(START + 60 * minutes, len(NAMES))
        values = np.round(np.sin(timestamps / 3000.0) * 50 + np.repeat(np.arange(len(NAMES)), len(minutes)), 2)
        store.write_points(STAGE, np.repeat(NAMES, len(minutes)).tolist(), timestamps, values)
        free.append(pragma(store.path, "freelist_count"))
    return free


def test_a_new_store_gives_back_the_pages_its_windows_free_as_they_seal(tmp_path):
    path = tmp_path / "bgl.db"
    store = store_with_metrics(path)
    assert pragma(path, "auto_vacuum") == 2  # incremental
    free = write_minutes(store, 560, 800)  # tails merged into open chunks, then window 0 seals at 720
    reads = store.read_points(STAGE, NAMES, np.full(len(NAMES), START), np.full(len(NAMES), START + 800 * 60))
    store.close()
    assert free == [0] * len(free)
    assert len(reads.values) == len(NAMES) * 240

    # the same writes on a file made before: the pages freed stay on its freelist
    old = tmp_path / "old.db"
    older_file(old)
    store = store_with_metrics(old)
    assert pragma(old, "auto_vacuum") == 0
    kept = write_minutes(store, 560, 800)
    store.close()
    assert max(kept) > 20 and kept[-1] > 10, kept  # reused by later writes, in part
    # the store in use is as big, the new file has no free page (and a pointer-map page)
    assert pragma(path, "page_count") <= pragma(old, "page_count") - kept[-1] + 1


def test_a_commit_gives_back_at_most_its_bound_and_the_next_commits_the_rest(tmp_path, monkeypatch):
    path = tmp_path / "bgl.db"
    store = store_with_metrics(path)
    write_minutes(store, 0, 720, every=240)  # sealed chunks: ~1 KB a metric
    monkeypatch.setattr(free_pages, "FREE_PAGES_PER_COMMIT", 5)
    store.delete_metrics(NAMES[:200])  # one batch frees their chunks' pages: 5 given back
    left = pragma(path, "freelist_count")
    assert left > 10
    with store.write_batch():
        pass
    assert pragma(path, "freelist_count") == left - 5
    monkeypatch.setattr(free_pages, "FREE_PAGES_PER_COMMIT", 10_000)
    pages = pragma(path, "page_count")
    with store.write_batch():
        pass
    assert pragma(path, "freelist_count") == 0 and pragma(path, "page_count") == pages - (left - 5)
    store.close()


def run_bgl(path, *arguments: str) -> str:
    """`bgl --store sqlite://path ARGUMENTS`, in this process (the console script's main); its stdout."""
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["--store", f"sqlite://{path}", *arguments], stdout=out, stderr=err) == 0, err.getvalue()
    return out.getvalue()


def test_stats_and_du_show_the_free_pages_and_syncdb_vacuum_gives_them_back(tmp_path):
    path = tmp_path / "old.db"
    older_file(path)
    store = store_with_metrics(path)
    write_minutes(store, 560, 800)
    store.close()
    free_bytes = pragma(path, "freelist_count") * pragma(path, "page_size")
    assert free_bytes > 40_000

    stats = json.loads(run_bgl(path, "stats", "--format", "json"))["store"]
    assert stats["disk_bytes.free"] == free_bytes
    assert stats["free_pages"].startswith("none: kept for later writes") and "syncdb --vacuum" in stats["free_pages"]
    du = run_bgl(path, "du")
    assert f"{free_bytes / 1024:.1f}K" in next(line for line in du.splitlines() if "free pages" in line)
    assert "syncdb --vacuum" in run_bgl(path, "syncdb")  # the note

    before = SQLiteStore(str(path))
    reads = before.read_points(STAGE, NAMES, np.full(len(NAMES), START), np.full(len(NAMES), START + 800 * 60))
    before.close()
    pages = pragma(path, "page_count")
    vacuumed = json.loads(run_bgl(path, "syncdb", "--vacuum", "--format", "json"))["vacuum"]
    assert vacuumed["auto_vacuum_before"] == "none" and not os.path.getsize(f"{path}-wal")  # checkpointed
    assert vacuumed["file_bytes_after"] == os.path.getsize(path) <= (pages + 1) * 4096 - free_bytes
    assert pragma(path, "auto_vacuum") == 2 and pragma(path, "freelist_count") == 0
    stats = json.loads(run_bgl(path, "stats", "--format", "json"))["store"]
    assert stats["disk_bytes.free"] == 0 and stats["free_pages"] == "incremental"
    assert "note" not in run_bgl(path, "syncdb")

    after = SQLiteStore(str(path))
    again = after.read_points(STAGE, NAMES, np.full(len(NAMES), START), np.full(len(NAMES), START + 800 * 60))
    assert np.array_equal(again.request, reads.request) and np.array_equal(again.timestamps, reads.timestamps)
    assert again.values.tobytes() == reads.values.tobytes()
    assert write_minutes(after, 800, 1200) == [0] * 20  # the next seal's pages given back
    after.close()
