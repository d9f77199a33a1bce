"""`bgl copy` and `bgl rename` (issue #19 item 7, bgutil parity), run as subprocesses on
each store kind of the conformance fixtures: SQLite and Cassandra (the CQL test server).

A subtree with several retentions and points in every stage is copied, then renamed:
every read window (each stage) returns the same series from the copy as from the
original, metadata included; --dry-run changes nothing; an existing destination and a
destination inside the source are refused; names holding glob characters are exact.
"""
from __future__ import annotations

import json
import subprocess
import time

from tests.cli.bgl_process import BGL, ok

RETENTION = "10s:10m,60s:1h"
SOURCE = ["src.a", "src.b.c", "src.b.d", "src.*x"]
OTHER = ["srcfoo.e", "other.f"]  # must not be copied: srcfoo shares the prefix, not the subtree


def bgl(env, url, *args, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([BGL, *args, "--store", url], input=stdin, env=env, capture_output=True, text=True,
                          timeout=120)


def reads(env, url, names, now):
    """name -> [(start, step, values)] for windows in stage 0 and stage 1: one `bgl read
    FIRST.**` a window and first component (a name's glob characters match themselves too),
    so each process reads several series; a name missing from the answer fails."""
    result = {name: [] for name in names}
    for start in (now - 300, now - 3000):
        for first in sorted({name.split(".")[0] for name in names}):
            lines = ok(bgl(env, url, "read", "--from", str(start), "--until", str(now), "--now", str(now),
                           f"{first}.**")).stdout.splitlines()
            documents = {document["name"]: document for document in map(json.loads, lines)}
            for name in names:
                if name.split(".")[0] == first:
                    document = documents[name]
                    result[name].append((document["start"], document["step"], document["values"]))
    return result


def info(env, url, name):
    document = json.loads(ok(bgl(env, url, "info", name)).stdout)
    return {k: document[k] for k in ("retention", "aggregator", "xfilesfactor")}


def test_copy_then_rename_a_subtree(env, store_url):
    ok(bgl(env, store_url, "syncdb"))
    now = int(time.time())
    lines = []
    for index, name in enumerate(SOURCE + OTHER):
        for offset in (15, 75, 400, 1300, 2500):  # stage 0 and stage 1 only
            lines.append(f"{name} {index * 100 + offset / 7} {now - offset}\n")
    ok(bgl(env, store_url, "write", "--retention", "60s:1h", "--aggregation", "sum", "src.a", "42", str(now - 60)))
    ok(bgl(env, store_url, "write", "--retention", RETENTION, "--aggregation", "max", "--xff", "0", "-",
           stdin="".join(lines)))
    before = reads(env, store_url, SOURCE, now)
    assert all(any(v is not None for v in values) for windows in before.values() for _, _, values in windows)

    dry = ok(bgl(env, store_url, "copy", "--dry-run", "src", "dst"))
    assert dry.stdout.splitlines()[:4] == ["src.*x -> dst.*x", "src.a -> dst.a", "src.b.c -> dst.b.c",
                                           "src.b.d -> dst.b.d"]
    assert "dry run, nothing changed" in dry.stdout
    assert ok(bgl(env, store_url, "list", "dst.**")).stdout == ""

    copied = json.loads(ok(bgl(env, store_url, "copy", "--format", "json", "src", "dst")).stdout)
    assert copied["counters"]["metrics_copied"] == 4 and copied["counters"]["points_copied"] > 0
    assert ok(bgl(env, store_url, "list", "dst.**")).stdout.split() == ["dst.*x", "dst.a", "dst.b.c", "dst.b.d"]
    assert ok(bgl(env, store_url, "list", "--directories", "dst.**")).stdout.split() == ["dst.b"]
    after = reads(env, store_url, [n.replace("src", "dst", 1) for n in SOURCE], now)
    assert list(after.values()) == list(before.values())
    assert info(env, store_url, "dst.a") == info(env, store_url, "src.a")
    assert info(env, store_url, "dst.a")["aggregator"] == "sum"
    assert info(env, store_url, "dst.b.c")["aggregator"] == "max"
    assert reads(env, store_url, SOURCE, now) == before  # the source is untouched

    refused = bgl(env, store_url, "copy", "src", "dst")
    assert refused.returncode == 1 and "4 destination metric(s) already exist" in refused.stderr
    inside = bgl(env, store_url, "rename", "src", "src.b.z")
    assert inside.returncode == 1 and "beneath it" in inside.stderr
    missing = bgl(env, store_url, "rename", "nothing.here", "x")
    assert missing.returncode == 1 and "neither a metric nor a directory" in missing.stderr

    # a metric alone, whose name holds a glob character
    ok(bgl(env, store_url, "rename", "src.*x", "moved.star"))
    assert ok(bgl(env, store_url, "list", "src.**")).stdout.split() == ["src.a", "src.b.c", "src.b.d"]
    assert reads(env, store_url, ["moved.star"], now)["moved.star"] == before["src.*x"]

    renamed = ok(bgl(env, store_url, "rename", "src.b", "renamed"))
    assert renamed.stdout.splitlines()[:2] == ["src.b.c -> renamed.c", "src.b.d -> renamed.d"]
    assert ok(bgl(env, store_url, "list", "**")).stdout.split() == sorted(
        ["dst.*x", "dst.a", "dst.b.c", "dst.b.d", "moved.star", "other.f", "renamed.c", "renamed.d", "src.a",
         "srcfoo.e"])
    assert ok(bgl(env, store_url, "list", "--directories", "src.*")).stdout == ""  # src.b went with its metrics
    assert reads(env, store_url, ["renamed.c", "renamed.d"], now) == {
        "renamed.c": before["src.b.c"], "renamed.d": before["src.b.d"]}


def test_du_says_what_it_measures_on_each_store(env, store_url):
    ok(bgl(env, store_url, "syncdb"))
    ok(bgl(env, store_url, "write", "--retention", RETENTION, "u.a", "1"))
    lines = ok(bgl(env, store_url, "du")).stdout.splitlines()
    assert lines[0].split()[0] == "WSP-BYTES" and "not disk" in lines[0]
    assert lines[1].split()[1:] == ["1", "120", "u/"]
    on_disk = next(line for line in lines if "  on disk: " in line)
    size, _, what = on_disk.partition("  on disk: ")
    if store_url.startswith("cassandra:") and "system_views.disk_usage" in what:  # a real node (4.0+)
        assert size.strip()[-1] in "KMG" or size.strip() == "0B", on_disk
    elif store_url.startswith("cassandra:"):  # the CQL test server has no system_views
        assert size.strip() == "unknown" and "nodetool tablestats" in what
    else:
        assert size.strip().endswith("K") and what.startswith("the whole store: SQLite file")
