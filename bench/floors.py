#!/usr/bin/env python3
"""Lower bounds that decide whether two issue aims can be met with SQLite from Python.

    python bench/floors.py --json             # both parts, a minute or two
    python bench/floors.py --only young       # the young store's metadata alone

- young: the fewest bytes a metric of the peer bench's young store
  (`bench.host0001.service001.value`, 100,000 of them) can take on SQLite while the 64
  component columns stay: a `metrics` row holding only its 4 interned component ids (no
  name, no retention, no point, no index), then with the `directories` row each of these
  names needs (its parent `bench.host0001.service001`), then with one partial index per
  used component column. Compare with 1.5x VictoriaMetrics' whole metric (the peer
  bench's young store: about 13 bytes a point, 5 points a metric).
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
import sqlite3
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.tags_bench import CARDINALITIES, tag_value  # noqa: E402

COMPONENTS = 64


def young(workdir: str, metrics: int = 100_000) -> dict:
    """Bytes a metric at each step of the lower bound (file size / metrics, after VACUUM)."""
    columns = ", ".join(f"component_{i} INTEGER" for i in range(COMPONENTS))
    steps = (("metrics_rows", False, False), ("with_directories", True, False), ("with_component_indexes", True, True))
    figures = {"metrics": metrics}
    for label, directories, indexes in steps:
        path = os.path.join(workdir, f"young-{label}.db")
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute(f"CREATE TABLE metrics(key INTEGER PRIMARY KEY, {columns})")
        conn.execute(f"CREATE TABLE directories(key INTEGER PRIMARY KEY, {columns})")
        if indexes:
            for i in range(4):
                conn.execute(f"CREATE INDEX metrics_{i} ON metrics(component_{i}) WHERE component_{i} IS NOT NULL")
        # interned ids: bench 1, host 2..101, service 102..1101, value 1102
        rest = [None] * (COMPONENTS - 4)
        marks = ",".join("?" * (COMPONENTS + 1))
        conn.executemany(f"INSERT INTO metrics VALUES ({marks})",
                         ((i + 1, 1, 2 + i // 1000, 102 + i % 1000, 1102, *rest) for i in range(metrics)))
        if directories:
            conn.executemany(f"INSERT INTO directories VALUES ({marks})",
                             ((i + 1, 1, 2 + i // 1000, 102 + i % 1000, *rest, None) for i in range(metrics)))
        conn.commit()
        conn.execute("VACUUM")
        conn.close()
        figures[label] = os.path.getsize(path) / metrics
        os.remove(path)
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
