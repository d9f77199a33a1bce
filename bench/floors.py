#!/usr/bin/env python3
"""Lower bounds that decide whether two issue aims can be met with SQLite from Python.

    python bench/floors.py --json             # both parts, a minute or two
    python bench/floors.py --only young       # the young store's bytes a metric

- young: the fewest bytes a metric of the peer bench's young store
  (`bench.host0001.service001.value`, 100,000 of them, 5 points each) can take on SQLite
  with the store's names (the name tree: a `metrics` row, the `directories` row of its
  parent, their child indexes and the inverted index of components, as the store writes
  them through Accessor.create_metrics, then packed by VACUUM), then with one row of
  points a metric: today's open tail of five 12-byte records, the five points as an open
  chunk and as a sealed chunk, and a row of one byte under an open and a sealed id.
  Compare with 2x VictoriaMetrics' whole metric (the peer bench's young store: 13.8
  bytes a point in the table of record, 5 points a metric: 138 bytes).
- find: the time of the cheapest possible read behind findSeries with one `=` term, on
  tags_bench's 1,000,000 series (t7, ~100 series a value): one range read of a table that
  keeps every series' path clustered by its (tag, value) pair (a layout that would cost
  ~100 MB a covered tag and a B-tree insert a series and tag at indexing), through
  Python's sqlite3 with a 1 GiB mmap, as graphite-web's finder opens the store. Compare
  with LocalDatabaseTagDB's findSeries p50 / 20 (tags_bench's find_eq).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.tags_bench import CARDINALITIES, tag_value  # noqa: E402
from biggraphite_like import chunks  # noqa: E402
from biggraphite_like.accessor import Accessor  # noqa: E402
from biggraphite_like.metric import MetricMetadata  # noqa: E402
from biggraphite_like.settings import DEFAULT_RETENTION  # noqa: E402
from biggraphite_like.stores.sqlite.windows import OPEN, TAIL, window_ids  # noqa: E402

YOUNG_POINTS = 5  # points a metric in the peer bench's young store
VM_YOUNG_BYTES_PER_POINT = 13.8  # VictoriaMetrics' young store in the table of record (bench/README.md)


def _file_bytes(path: str, vacuum: bool = True) -> int:
    """The file's size once its WAL is checkpointed into it (and, with `vacuum`, rewritten
    by VACUUM: every page as full as SQLite packs it)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    if vacuum:
        conn.execute("VACUUM")
    conn.close()
    return os.path.getsize(path)


def young(workdir: str, metrics: int = 100_000) -> dict:
    """Bytes a metric at each step of the lower bound of the young store on SQLite (file
    size / metrics, after VACUUM): the names as the store lays them out (the name tree, its
    indexes, the interned strings), then with the smallest row a window of points can be
    kept in: its 5 points as today's open tail (12-byte records), as an open chunk, as a
    sealed chunk (a shorter row id), then a row of one byte under an open id and under a
    sealed id (nothing can be smaller); for scale, the names without the inverted index
    of components that globs with `**` start from."""
    names_path = os.path.join(workdir, "young-names.db")
    accessor = Accessor.from_url(f"sqlite://{names_path}")
    try:
        accessor.syncdb()
        metadata = MetricMetadata.create(DEFAULT_RETENTION)
        names = [f"bench.host{i // 1000:04d}.service{i % 1000:03d}.value" for i in range(metrics)]
        for start in range(0, metrics, 10_000):
            accessor.create_metrics([(name, metadata) for name in names[start:start + 10_000]])
    finally:
        accessor.close()
    figures: dict = {"metrics": metrics, "names_as_written": _file_bytes(names_path, vacuum=False) / metrics,
                     "names": _file_bytes(names_path) / metrics}
    conn = sqlite3.connect(names_path)
    keys = [key for (key,) in conn.execute("SELECT key FROM metrics ORDER BY key")]
    conn.close()
    assert len(keys) == metrics, len(keys)
    now = int(time.time()) // 3600 * 3600
    stamps = np.arange(now - YOUNG_POINTS * 60, now, 60, dtype=np.int64)
    values = [np.arange(YOUNG_POINTS, dtype=np.float64) + i % 97 for i in range(metrics)]
    tail_dtype = np.dtype([("ts", "<u4"), ("value", "<f8")])

    def tail(i: int) -> bytes:
        records = np.zeros(YOUNG_POINTS, tail_dtype)
        records["ts"], records["value"] = stamps, values[i]
        return records.tobytes()

    encoded = chunks.encode_many([chunks.Points(stamps, v) for v in values])
    sealed = window_ids(np.array(keys, np.int64), np.zeros(metrics, np.int64)).tolist()
    rows = {"with_tails": ((w | OPEN | TAIL, tail(i)) for i, w in enumerate(sealed)),
            "with_open_chunks": ((w | OPEN, encoded[i]) for i, w in enumerate(sealed)),
            "with_chunks": ((w, encoded[i]) for i, w in enumerate(sealed)),
            "with_one_byte_open_rows": ((w | OPEN | TAIL, b"\x00") for w in sealed),
            "with_one_byte_rows": ((w, b"\x00") for w in sealed)}
    for label, generator in rows.items():
        path = os.path.join(workdir, f"young-{label}.db")
        shutil.copyfile(names_path, path)
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE points(id INTEGER PRIMARY KEY, newest INTEGER NOT NULL, points BLOB NOT NULL)")
        conn.executemany("INSERT INTO points VALUES (?, ?, ?)", ((w, int(stamps[-1]), blob) for w, blob in generator))
        conn.commit()
        conn.close()
        figures[label] = _file_bytes(path) / metrics
        os.remove(path)
    figures["chunk_bytes"] = sum(map(len, encoded)) / metrics
    conn = sqlite3.connect(names_path)
    conn.execute("DROP INDEX metrics_leaf")
    conn.execute("DROP INDEX directories_component")
    conn.commit()
    conn.close()
    figures["names_without_component_index"] = _file_bytes(names_path) / metrics
    os.remove(names_path)
    figures["aim_2x_vm"] = 2 * VM_YOUNG_BYTES_PER_POINT * YOUNG_POINTS
    return figures


def find(workdir: str, series: int = 1_000_000, queries: int = 2_000) -> dict:
    """p50 and p99 (µs) of one range read of t7's paths, clustered by pair."""
    path = os.path.join(workdir, "find.db")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("CREATE TABLE paths(pair INTEGER, path TEXT, PRIMARY KEY(pair, path)) WITHOUT ROWID")
    rows = sorted((int(tag_value(7, i)[1:]), f"m{i % 7}.metric;" + ";".join(f"t{k}={tag_value(k, i)}" for k in range(10)))
                  for i in range(series))
    conn.executemany("INSERT INTO paths VALUES (?, ?)", rows)
    conn.commit()
    conn.close()
    del rows
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA mmap_size=1073741824")
    rng = random.Random(1)
    times, sizes = [], []
    for _ in range(queries):
        value = rng.randrange(CARDINALITIES[7])
        start = time.perf_counter()
        found = [p for (p,) in conn.execute("SELECT path FROM paths WHERE pair = ?", (value,))]
        times.append(time.perf_counter() - start)
        sizes.append(len(found))
    conn.close()
    times.sort()
    return {"series": series, "queries": queries, "paths_p50": statistics.median(sizes),
            "p50_us": times[len(times) // 2] * 1e6, "p99_us": times[int(len(times) * 0.99)] * 1e6,
            "bytes": os.path.getsize(path)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=("young", "find"), help="run this part (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    parts = args.only or ["young", "find"]
    with tempfile.TemporaryDirectory(prefix="bgl-floors-") as workdir:
        figures = {part: {"young": young, "find": find}[part](workdir) for part in parts}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for part, values in figures.items():
            print(part, ", ".join(f"{k} {v:,.1f}" if isinstance(v, float) else f"{k} {v:,}" for k, v in values.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
