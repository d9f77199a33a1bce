"""The maintenance subcommands of `bgl`, run as real processes against a real SQLite file.

`bgl clean` on 100,000 metrics runs under a pseudo-terminal to check the progress bar is
drawn there (and only there); every subcommand is run on bad input to check the error
names the problem and the exit status is not zero.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.cli.bgl_process import BGL, bgl, fails, ok, run_in_pty

DAY = 86400
META = MetricMetadata.create("60s:1d", "average", 0.5)


@pytest.fixture
def store(sqlite_accessor, url):
    """conftest's SQLite accessor (schema created), on the file `url` names."""
    assert sqlite_accessor.store.url == url
    return sqlite_accessor


# -- clean -----------------------------------------------------------------------------------
def test_clean_100k_metrics_with_progress_on_a_terminal(tmp_path, env, url, store):
    now = int(time.time())
    stale = [f"stale.h{i // 100:03d}.m{i % 100:02d}" for i in range(10_000)]
    live = [f"live.h{i // 100:03d}.m{i % 100:02d}" for i in range(90_000)]
    store.create_metrics([(n, META) for n in stale], now=now - 40 * DAY)
    store.create_metrics([(n, META) for n in live], now=now)
    prom = tmp_path / "clean.prom"
    status, stdout, terminal = run_in_pty(
        env, ["--store", url, "clean", "--max-age", "30d", "--metrics-file", str(prom)])
    assert status == 0, terminal
    assert "\rclean: metrics [" in terminal and "100000/100000" in terminal  # the bar, drawn on the terminal
    assert "clean: directories [" in terminal
    assert ("metrics scanned 100000, metrics removed 10000, metrics unreadable 0, directories scanned 1002, directories removed 101,"
            " directories restored 0, points expired 0") in stdout
    text = prom.read_text()
    assert "bgl_clean_metrics_removed 10000.0" in text and "bgl_clean_directories_removed 101.0" in text
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    check = Accessor.from_url(url)
    assert check.glob_metrics("stale.**") == [] and len(check.glob_metrics("live.*.*")) == 90_000
    assert check.glob_directories("*") == ["live"]
    # not a terminal: no bar, only the summary
    piped = ok(bgl(env, url, "clean", "--max-age", "30d"))
    assert "[" not in piped.stderr and "metrics scanned 90000, metrics removed 0" in piped.stdout


def test_clean_dry_run_and_shards(env, url, store):
    now = int(time.time())
    store.create_metrics([(f"s.a{i}", META) for i in range(5)], now=now - 40 * DAY)
    store.create_metrics([(f"s.b{i}", META) for i in range(5)], now=now)
    dry = ok(bgl(env, url, "clean", "--max-age", "30d", "--dry-run"))
    assert "bgl clean (dry run, nothing changed): metrics scanned 10, metrics that would be removed 5" in dry.stdout
    assert len(ok(bgl(env, url, "list", "s.*")).stdout.split()) == 10
    removed = 0
    for shard in range(2):
        out = ok(bgl(env, url, "clean", "--max-age", "30d", "--shard", str(shard), "--nshards", "2")).stdout
        removed += int(out.split("metrics removed ")[1].split(",")[0])
    assert removed == 5
    assert ok(bgl(env, url, "list", "s.*")).stdout.split() == [f"s.b{i}" for i in range(5)]


@pytest.mark.parametrize("args, message", [
    (["--max-age", "5x"], "invalid unit 'x' in max age '5x'"),
    (["--max-age", "ten"], "invalid max age 'ten'"),
    (["--max-age", "10m"], "shorter than the interval"),
    (["--shard", "2", "--nshards", "2"], "need nshards >= 1 and 0 <= shard < nshards"),
    (["--metrics-file", "/nonexistent/dir/clean.prom"], "directory /nonexistent/dir does not exist"),
])
def test_clean_bad_input(env, url, store, args, message):
    fails(bgl(env, url, "clean", *args), "bgl clean: error: ", message)


FAKETIME = shutil.which("faketime")


@pytest.mark.skipif(FAKETIME is None, reason="libfaketime's faketime is not installed")
def test_clean_max_age_accounts_for_the_touch_interval_under_faketime(env, url):
    """Issue 15 item 1 through the CLI, every process on libfaketime's clock: a metric
    written at T0 survives `clean --max-age 1h` at T0 + 1h05 (its updated_on may lag its
    last write by the 1 h touch interval) and goes once max age + touch interval + margin
    (2 h 10 min) has passed; a max age below the touch interval is refused with the reason."""
    t0 = 1_800_000_000

    def at(offset, *args):
        return subprocess.run([FAKETIME, f"@{t0 + offset}", BGL, "--store", url, *args], env=env,
                              capture_output=True, text=True, timeout=120)

    ok(at(0, "write", "--retention", "60s:30d", "c.m", "1"))
    assert f"{t0}," in ok(at(0, "read", "--from", "-5min", "c.m", "--format", "csv")).stdout  # the fake clock is used
    assert "metrics removed 0" in ok(at(3900, "clean", "--max-age", "1h")).stdout
    assert "metrics removed 0" in ok(at(2 * 3600 + 590, "clean", "--max-age", "1h")).stdout
    assert "metrics removed 1" in ok(at(2 * 3600 + 610, "clean", "--max-age", "1h")).stdout
    fails(at(0, "clean", "--max-age", "30min"), "bgl clean: error: max age 1800s is shorter than the interval",
          "cannot tell a metric idle for 1800s from one written a second ago")


def test_maintenance_on_a_store_without_schema(env, tmp_path):
    url = f"sqlite://{tmp_path / 'missing.db'}"
    for command in (["clean"], ["repair"], ["du"], ["stats"], ["delete", "a.b"]):
        fails(bgl(env, url, *command), f"bgl {command[0]}: error: ", "syncdb")


# -- delete ----------------------------------------------------------------------------------
def test_delete_then_rewrite_reads_only_new_points(env, url, store):
    now = int(time.time())
    lines = "".join(f"app.x.m {100 + k} {now - 60 * k}\napp.y.m 1 {now}\n" for k in range(30))
    ok(bgl(env, url, "write", "--retention", "60s:1d", "-", stdin=lines))
    deleted = ok(bgl(env, url, "delete", "app.x.*"))
    assert deleted.stdout.split() == ["app.x.m"]
    assert "metrics removed 1" in deleted.stderr and "directories removed 1" in deleted.stderr
    assert ok(bgl(env, url, "list", "--directories", "app.*")).stdout.split() == ["app.y"]
    ok(bgl(env, url, "write", "--retention", "60s:1d", "app.x.m", "5", str(now)))
    values = json.loads(ok(bgl(env, url, "read", "--from", "-1h", "--now", str(now), "app.x.m")).stdout)["values"]
    assert [v for v in values if v is not None] == [5.0]


def test_delete_directory_needs_recursive(env, url, store):
    store.create_metrics([("t.a", META), ("t.a.b", META), ("t.a.c.d", META)])
    first = ok(bgl(env, url, "delete", "t.a"))
    assert first.stdout.split() == ["t.a"]
    assert "matches 1 directory (e.g. t.a): only metrics were deleted; use --recursive" in first.stderr
    dry = ok(bgl(env, url, "delete", "--recursive", "--dry-run", "t.*"))
    assert dry.stdout.split() == ["t.a.b", "t.a.c.d"] and "dry run, nothing changed" in dry.stderr
    assert ok(bgl(env, url, "delete", "--recursive", "t.*")).stdout.split() == ["t.a.b", "t.a.c.d"]
    assert ok(bgl(env, url, "list", "--directories", "**")).stdout == ""
    nothing = ok(bgl(env, url, "delete", "no.such.*"))
    assert "nothing matches 'no.such.*'" in nothing.stderr


@pytest.mark.parametrize("pattern, message", [
    (".", "glob pattern '.' is empty"),
    ("{}", "is empty once braces are expanded"),
    ("{a,b}" * 20, "alternatives"),
])
def test_delete_bad_glob(env, url, store, pattern, message):
    fails(bgl(env, url, "delete", pattern), "bgl delete: error: ", message)


# -- repair ----------------------------------------------------------------------------------
def test_repair_reports_what_it_changed(env, url, store):
    store.create_metrics([("r.a.b.m", META), ("r.c", META)])
    store.store.delete_directories(["r.a", "r"])
    dry = ok(bgl(env, url, "repair", "--dry-run"))
    assert "missing directories created: r, r.a" in dry.stdout and "dry run" in dry.stdout
    assert ok(bgl(env, url, "list", "--directories", "*")).stdout == ""
    done = ok(bgl(env, url, "repair"))
    assert "directories created 2" in done.stdout
    assert ok(bgl(env, url, "list", "--directories", "**")).stdout.split() == ["r", "r.a", "r.a.b"]
    assert "directories created 0" in ok(bgl(env, url, "repair", "--nshards", "2", "--shard", "1")).stdout
    fails(bgl(env, url, "repair", "--shard", "-1"), "bgl repair: error: ")


# -- import-whisper ----------------------------------------------------------------------------
def test_import_whisper_bad_input(env, url, tmp_path):
    fails(bgl(env, url, "import-whisper", str(tmp_path / "nowhere")), "bgl import-whisper: error: ",
          f"{tmp_path / 'nowhere'} is not a directory")
    (tmp_path / "w").mkdir()
    fails(bgl(env, url, "import-whisper", "--jobs", "0", str(tmp_path / "w")), "--jobs 0: need at least one job")
    fails(bgl(env, url, "import-whisper", "--prefix", "a b", str(tmp_path / "w")), "contains whitespace")


# -- du and stats --------------------------------------------------------------------------------
def test_du_and_stats(env, url, store):
    now = int(time.time())
    store.create_metrics([("v.a.x", META), ("v.a.y", META)], now=now - 3 * DAY)
    store.create_metrics([("w", MetricMetadata.create("10s:1h", "sum", 0))], now=now)
    text = ok(bgl(env, url, "du")).stdout.splitlines()
    assert text[0].split()[:4] == ["WSP-BYTES", "METRICS", "POINTS", "NAME"]
    assert "what whisper files of these retentions would take, not disk" in text[0]
    assert text[1].split()[1:] == ["2", "2880", "v/"]
    assert text[2].split()[1:] == ["1", "360", "w"]
    total = next(i for i, line in enumerate(text) if line.split()[-1:] == ["total"])
    assert text[total].split()[1:] == ["3", "3240", "total"]
    # then the store's real size, the SQLite file and its WAL, its parts, each table with its indexes
    file_bytes = sum(os.path.getsize(p) for p in (store.store.path, store.store.path + "-wal") if os.path.exists(p))
    size, _, what = text[total + 1].partition("  on disk: ")
    assert what.startswith("the whole store: SQLite file and its WAL")
    assert "of which the datapoints tables (pages in use)" in text[total + 2]
    assert "of which metric and directory tables, indexes" in text[total + 3]
    assert "of which free pages (SQLite's freelist" in text[total + 4]
    table_lines = {line.split()[2]: line.split()[0] for line in text[total + 5:]}
    assert all(line.endswith("(with its indexes)") for line in text[total + 5:])
    assert {"metrics", "directories", "name_strings", "datapoints_1440p_60s_0", "datapoints_360p_10s_0"} <= set(
        table_lines), table_lines
    assert size.strip() == (f"{file_bytes / 1024:.1f}K" if file_bytes < 1024 ** 2 else f"{file_bytes / 1024 ** 2:.1f}M")
    subtree = json.loads(ok(bgl(env, url, "du", "--format", "json", "v.*")).stdout)
    assert subtree["entries"] == [{"name": "v.a", "kind": "directory", "metrics": 2, "points": 2880,
                                   "bytes": 2 * (16 + 12 + 12 * 1440), "tagged": 0}]
    assert "store_on_disk" not in subtree and "tag_index" not in subtree  # the subtree's, not the store's
    assert "on disk" not in ok(bgl(env, url, "du", "v.*")).stdout
    document = json.loads(ok(bgl(env, url, "du", "--format", "json")).stdout)
    assert document["tag_index"] == {"tagged_series": 0, "tags": 0, "tag_values": 0}
    assert document["bytes_meaning"].startswith("whisper-equivalent")
    assert document["store_on_disk"]["bytes"] == sum(
        os.path.getsize(p) for p in (store.store.path, store.store.path + "-wal") if os.path.exists(p))
    parts = document["store_on_disk"]["parts"]  # dbstat: pages in use, within the file
    assert set(parts) == {"points", "metadata", "free"} and parts["metadata"] > 0 and parts["free"] == 0
    assert sum(parts.values()) <= document["store_on_disk"]["bytes"]
    tables = document["store_on_disk"]["tables"]  # per table with its indexes: the parts, split
    assert all(isinstance(n, int) and n > 0 and n % 4096 == 0 for n in tables.values()), tables
    assert sum(n for t, n in tables.items() if t.startswith("datapoints_")) == parts["points"]
    assert sum(tables.values()) == parts["points"] + parts["metadata"]
    assert tables["metrics"] > tables["store_state"]  # 66 indexes against one
    facts = json.loads(ok(bgl(env, url, "stats", "--format", "json")).stdout)
    assert {k: v for k, v in facts["store"].items() if k.startswith("disk_bytes.table.")} == {
        f"disk_bytes.table.{t}": n for t, n in tables.items()}
    assert facts["store"]["disk_bytes.free"] >= 0
    assert (facts["metrics"], facts["directories"], facts["store"]["store"]) == (3, 2, "sqlite")
    assert facts["metrics_by_time_since_update"]["1d-7d"] == 2
    assert facts["metrics_by_retention"] == {"1440*60s": 2, "360*10s": 1}
    stats_text = ok(bgl(env, url, "stats")).stdout
    assert "metrics: 3" in stats_text and "  1d-7d: 2" in stats_text
    fails(bgl(env, url, "du", "{}"), "bgl du: error: ")
    assert bgl(env, url, "stats", "--format", "xml").returncode == 2  # argparse: invalid choice
