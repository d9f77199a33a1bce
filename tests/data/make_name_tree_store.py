"""Writes tests/data/before_name_tree.sql and before_name_tree.json: the dump (`iterdump`)
of a store written by commit 9cc4e88, the last release whose metrics and directories rows
hold full names and 64 interned component columns, and what that code read back from it
(every metric with its key, metadata and times, every directory, every point, the tag
index's answers, globs). The upgrade test (tests/stores/sqlite/test_name_tree.py) runs today's
`bgl syncdb` on it and asks the same questions.

Run with that commit's code, never today's:
    mkdir /tmp/release && git archive 9cc4e88 biggraphite_like | tar -x -C /tmp/release
    PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=/tmp/release python tests/data/make_name_tree_store.py
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
GLOBS = ["*", "**", "a.*", "a.b.*", "*.cpu.*", "host-*.cpu.{user,system}", "a.**.p59", "deep.**", "x.*.z",
         "tree.dc[0-1].host00?.cpu1", "tree.**.cpu2", "**.user", "kept.*", "kept.*.*", "empty.**", "new.*"]
TAG_QUERIES = [["name=cpu"], ["dc=us"], ["host=~web"], ["dc=eu", "name=cpu"]]


def names() -> list[str]:
    deep = "a.deep." + ".".join(f"p{i}" for i in range(60))  # 62 components
    tree = [f"tree.dc{d}.host{h:03d}.cpu{c}" for d in range(2) for h in range(12) for c in range(3)]
    hosts = [f"host-{i}.cpu.{kind}" for i in range(3) for kind in ("user", "system", "idle")]
    return ["top", "a.b.c", "a.b.d", "a.b", deep, "x.y.z", "kept.under.m1", "kept.under.m2", *tree, *hosts]


def main() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    work = tempfile.mkdtemp()
    path = os.path.join(work, "bgl.db")
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    fine = MetricMetadata.create("60s:1d,1h:30d", aggregator="sum", xfilesfactor=0.0)
    coarse = MetricMetadata.create("10s:1h", aggregator="max", xfilesfactor=0.25)
    all_names = names()
    accessor.create_metrics([(n, fine if i % 3 else coarse) for i, n in enumerate(all_names)], now=NOW)
    accessor.store.create_directories(["empty.dir.here"])
    for index, name in enumerate(all_names):
        accessor.insert_points({name: [(NOW - 120, index + 0.5), (NOW - 60, -0.0 if index == 3 else index * 1.25)]},
                               now=NOW)
    accessor.store.touch_metrics(["a.b.c"], "read_on", NOW + 5)
    accessor.store.delete_directories(["kept.under"])  # its metrics stay: a metric without its directory row
    tagged = [f"cpu;dc={'us' if i % 2 else 'eu'};host={'web' if i % 3 else 'db'}{i}" for i in range(8)]
    accessor.tags.tag_series(tagged, now=NOW)
    accessor.create_metrics([(t, fine) for t in tagged[:3]], now=NOW)
    accessor.insert_points({tagged[0]: [(NOW - 60, 7.0)]}, now=NOW)
    accessor.create_metrics([("gone.last", fine)], now=NOW)  # deleted: it held the last key
    accessor.delete_metrics(["gone.last"])
    accessor.store.delete_directories(["gone"])

    store = accessor.store
    directories = sorted(d for page in store.scan_directories(page_size=1000) for d in page.items)
    points = {}
    for name in sorted(n for page in store.scan_metrics(page_size=1000) for n in (m.name for m in page.items)):
        series = accessor.fetch([name], NOW - 3600, NOW, now=NOW)[name]
        points[name] = [[series.start + i * series.step, float(v).hex()] for i, v in enumerate(series.values_list())
                        if v is not None]
    metrics = {}
    for page in store.scan_metrics(page_size=1000):
        for metric in page.items:  # after the fetches, which set read_on
            metrics[metric.name] = {"key": store._key(metric.name), "retention": str(metric.retention),
                                    "aggregator": metric.metadata.aggregator.value,
                                    "xfilesfactor": metric.metadata.xfilesfactor,
                                    "created_on": metric.created_on, "updated_on": metric.updated_on,
                                    "read_on": metric.read_on}
    expected = {
        "now": NOW,
        "metrics": metrics,
        "directories": directories,
        "points": points,
        "globs": {p: [accessor.glob_metrics(p), accessor.glob_directories(p)] for p in GLOBS},
        "tags": {json.dumps(q): accessor.tags.find_series(q) for q in TAG_QUERIES},
        "next_key": max(m["key"] for m in metrics.values()) + 2,  # gone.last's key (the last) is never given again
    }
    accessor.close()
    conn = sqlite3.connect(path)
    with open(os.path.join(here, "before_name_tree.sql"), "w") as out:
        for line in conn.iterdump():
            out.write(line + "\n")
    conn.close()
    with open(os.path.join(here, "before_name_tree.json"), "w") as out:
        json.dump(expected, out, indent=1, sort_keys=True)
        out.write("\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
