"""Writes tests/data/tags_store.sql and tags_store.json: the dump (`iterdump`) of a store
whose tag index was written by commit 54a8d8a (postings one row per series and tag=value
pair, keyed (chunk, value id, series id)), and what that code answered on it. The
upgrade test runs today's `bgl syncdb` on it and asks the same questions.

Run with that commit's code, never today's:
    git archive 54a8d8a biggraphite_like | tar -x -C /tmp/release
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/tmp/release python tests/data/make_tags_store.py
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata

NOW = 1_700_000_000
QUERIES = [["name=cpu"], ["dc=us"], ["dc=us", "name=cpu"], ["host=~web"], ["core!=0", "name=cpu"], ["dc=eu", "host=db1"],
           ["rack=~r1"], ["name=gone"]]


def series() -> list[str]:
    names = [f"cpu;core={i % 4};dc={'us' if i % 3 else 'eu'};host={'web' if i % 2 else 'db'}{i % 7};rack=r{i}"
             for i in range(60)]
    return names + [f"disk.used;dc=us;host=web{i};rack=r{i}" for i in range(20)] + ["gone;host=web1"]


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    work = tempfile.mkdtemp()
    path = os.path.join(work, "bgl.db")
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    names = series()
    accessor.create_metrics([(n, MetricMetadata.create("60s:1d")) for n in names[:10]], now=NOW)  # metrics
    accessor.tags.tag_series(names[10:40], now=NOW)  # index only, as graphite-web's tagSeries
    accessor.tags.tag_series(names[40:], now=NOW + 60)
    accessor.tags.del_series(["gone;host=web1", names[11], names[65]])  # holes in the ids, counts fallen
    tags = accessor.tags
    expected = {
        "find": {json.dumps(q): tags.find_series(q) for q in QUERIES},
        "values": {tag: tags.list_values(tag) for tag in tags.list_tags()},
        "counts": tags.index.counts(),
    }
    accessor.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with open(os.path.join(here, "tags_store.sql"), "w") as out:
        out.write("\n".join(conn.iterdump()) + "\n")
    conn.close()
    with open(os.path.join(here, "tags_store.json"), "w") as out:
        json.dump(expected, out, indent=1, sort_keys=True)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
