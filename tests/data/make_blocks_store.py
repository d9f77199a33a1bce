"""Writes tests/data/<prefix>.db.gz and <prefix>.json.gz: a store written by an older release,
and what that release read back from it. The upgrade tests run today's `bgl syncdb` on them:
- blocks_store: blocks of whisper slots (the release before windows of chunks), commit 42fcb59;
- windows_store: windows keyed metric first (metric << 32 | window << 1 | kind), chunks and
  open tails, commit d3091f5 (the release before window-first row ids); RETENTIONS gained
  1500*60s (a ring of three windows) after blocks_store was written;
- chunks_store: windows keyed window first, the layout of today, in a file whose free pages
  are never given back (auto_vacuum off), commit cb38a22 (the release before incremental
  vacuum); its free pages are kept (no VACUUM) for `bgl syncdb --vacuum` to give back.

Run with the release's own code, never today's:
    git archive 42fcb59 biggraphite_like | tar -x -C /tmp/release
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/tmp/release python tests/data/make_blocks_store.py [prefix]
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import sys
import tempfile

import numpy as np

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.stores.base import StageTable

NOW = 1_700_000_000
RETENTIONS = {"60*1s:30*10s:20*60s": "average", "100*60s:30*600s": "sum", "7*1s": "last", "1500*60s": "max"}


def main(prefix: str = "blocks_store") -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    work = tempfile.mkdtemp()
    path = os.path.join(work, "bgl.db")
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    rng = np.random.default_rng(16)
    names = []
    for i, (retention, aggregator) in enumerate(RETENTIONS.items()):
        meta = MetricMetadata.create(retention, aggregator, 0.0)
        group = [f"release.r{i}.m{j}" for j in range(4)] + [f"release.r{i}.deep.a.b.c{j}" for j in range(2)]
        accessor.create_metrics([(n, meta) for n in group], now=NOW - 200_000)
        names += group
    # carbon-like: rounds of one point per metric, across more than one turn of the short rings,
    # values with decimals, integers, large and negative ones
    for step, now in enumerate(range(NOW - 25_000, NOW, 50)):
        if step % 7 == 3:
            continue  # a gap
        batch = {}
        for k, name in enumerate(names):
            kind = k % 4
            value = [round(float(rng.uniform(0, 100)), 2), float(step * 10 + k), -1.5e300 * rng.random(), -0.0][kind]
            batch[name] = [(now - int(rng.integers(0, 3)), value)]
        assert accessor.insert_points(batch, now=now).stored == len(names)
    expected = {}
    for name in names:
        metric = accessor.get_metric(name)
        for index, stage in enumerate(metric.retention.stages):
            table = StageTable.of(metric, index)
            reads = accessor.store.read_points(table, [name], np.array([0]), np.array([2**32]))
            order = np.argsort(reads.timestamps)
            expected.setdefault(table.name, {})[name] = [
                [int(t), float(v).hex()] for t, v in zip(reads.timestamps[order], reads.values[order])]
    accessor.store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if prefix != "chunks_store":
            conn.execute("VACUUM")
    with open(path, "rb") as src, gzip.open(os.path.join(here, f"{prefix}.db.gz"), "wb", 9) as dst:
        shutil.copyfileobj(src, dst)
    with gzip.open(os.path.join(here, f"{prefix}.json.gz"), "wt") as out:
        json.dump({"now": NOW, "names": names, "points": expected}, out, sort_keys=True)
    shutil.rmtree(work)
    print(f"{len(names)} metrics, {sum(len(p) for t in expected.values() for p in t.values())} points", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:2])
