#!/usr/bin/env python3
"""What bounds the wall time of creating N new names on SQLite (issue 36's names aim).

    python bench/names_floor.py --metrics 1000000            # ~20 s
    python bench/names_floor.py --metrics 1000000 --json

- flusher: the receiver flusher's work in one thread, without the receiver:
  `Accessor.insert_columns` of the peer bench's names (`tree.dcN.hostNNNN.cpuN`, one point
  each) in batches of `--batch` points, with the receiver's default storage rules, on a
  fresh SQLite file. Its wall time and thread CPU, and the time spent inside SQLite calls
  (the connection's `execute`, by statement): the only part of it that releases the GIL.
  The rest is Python holding the GIL, which no second thread can overlap; add the
  receiver's main thread (bench/receiver_profile.py) for the GIL-bound wall time.
- rows: SQLite alone inserting the N `metrics` rows as the store does (same table, both
  indexes, the AUTOINCREMENT sequence, 1,000 rows of 2 bound values a statement), the
  values prepared before the clock starts.
"""
from __future__ import annotations

import argparse
import collections
import functools
import itertools
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.graphite_bench import tree_names  # noqa: E402


def flusher(metrics: int, batch: int, root: str) -> dict:
    inside: collections.Counter = collections.Counter()

    class TimedConnection(sqlite3.Connection):
        def execute(self, sql, *args):
            start = time.perf_counter()
            try:
                return super().execute(sql, *args)
            finally:
                inside[sql[:60]] += time.perf_counter() - start

    from biggraphite_like.accessor import Accessor
    from biggraphite_like.receiver.rules import StorageRules
    connect = sqlite3.connect
    sqlite3.connect = functools.partial(connect, factory=TimedConnection)
    try:
        accessor = Accessor.from_url(f"sqlite://{root}/bgl.db")
        accessor.syncdb()
        rules = StorageRules.load(None, None)
        names = tree_names(metrics)
        now = int(time.time())
        inside.clear()
        wall, cpu = time.perf_counter(), time.thread_time()
        for start in range(0, len(names), batch):
            part = names[start:start + batch]
            accessor.insert_columns(part, np.arange(len(part)), np.full(len(part), now - 60, np.int64),
                                    np.ones(len(part)), now=now, create=rules.metadata_for, checked=True)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        accessor.close()
    finally:
        sqlite3.connect = connect
    return {"wall_seconds": wall, "thread_cpu_seconds": cpu, "sqlite_seconds": sum(inside.values()),
            "gil_seconds": cpu - sum(inside.values()),
            "sqlite_by_statement": {sql: seconds for sql, seconds in inside.most_common(8)}}


def rows(metrics: int, root: str, per: int = 1_000) -> dict:
    conn = sqlite3.connect(f"{root}/rows.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE metrics (key INTEGER PRIMARY KEY AUTOINCREMENT, parent INTEGER NOT NULL,"
                 " leaf INTEGER NOT NULL, metadata INTEGER NOT NULL, created_on INTEGER NOT NULL DEFAULT 0,"
                 " updated_on INTEGER NOT NULL DEFAULT 0, read_on INTEGER NOT NULL DEFAULT 0)")
    conn.execute("CREATE UNIQUE INDEX metrics_child ON metrics (parent, leaf)")
    conn.execute("CREATE INDEX metrics_leaf ON metrics (leaf)")
    def statement(rows: int) -> str:
        values = ", ".join(f"(?1 + {i}, ?{6 + 2 * i}, ?{7 + 2 * i}, ?2, ?3, ?4, ?5)" for i in range(rows))
        return f"INSERT INTO metrics VALUES {values} ON CONFLICT (parent, leaf) DO NOTHING"

    pairs = list(itertools.chain.from_iterable((100 + i // 10, 1 + i % 10) for i in range(metrics)))
    statements = [(statement(min(per, metrics - first)), [first + 1, 1, 1, 1, 0, *pairs[first * 2:(first + per) * 2]])
                  for first in range(0, metrics, per)]
    conn.execute("BEGIN IMMEDIATE")
    wall, cpu = time.perf_counter(), time.process_time()
    for sql, parameters in statements:
        conn.execute(sql, parameters)
    conn.execute("COMMIT")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert conn.execute("SELECT count(*) FROM metrics").fetchone()[0] == metrics
    conn.close()
    return {"wall_seconds": wall, "cpu_seconds": cpu}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metrics", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=500_000, help="points a flush (the receiver's flush_size)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="bgl-names-floor-")
    try:
        figures = {"metrics": args.metrics, "flusher": flusher(args.metrics, args.batch, root),
                   "rows": rows(args.metrics, root)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    f, r = figures["flusher"], figures["rows"]
    print(f"{args.metrics:,} new names, batches of {args.batch:,} points:")
    print(f"  flusher's work: {f['wall_seconds']:.2f} s wall, {f['thread_cpu_seconds']:.2f} CPU-s, of which"
          f" {f['sqlite_seconds']:.2f} s inside SQLite calls and {f['gil_seconds']:.2f} s of Python (GIL held)")
    for sql, seconds in f["sqlite_by_statement"].items():
        print(f"    {seconds:6.2f} s  {sql}")
    print(f"  SQLite alone, the metrics rows: {r['wall_seconds']:.2f} s wall, {r['cpu_seconds']:.2f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
