"""`bgl set-metadata`: the same points in a whisper file and in our store, resized by the
real whisper-resize.py (its default path, the clock frozen) and by ours: every fetch
equal. Then the command itself: dry runs, refusals, crash safety, `bgl write`'s warning."""
from __future__ import annotations

import os
import random
import runpy
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
import whisper

from biggraphite_like.accessor import Accessor
from biggraphite_like.maintenance.resize import MetadataChange, set_metadata
from biggraphite_like.metric import MetricMetadata
from tests.carbon_env import REPO_ROOT

NOW = 1_700_003_600
WHISPER_RESIZE = Path(sys.executable).parent / "whisper-resize.py"

# (old retention, old aggregation, old xff, new retention or None, new aggregation or None, new xff or None)
CASES = [
    ("60s:1h,5m:1d", "average", 0.5, "60s:2h,10m:2d", None, None),  # longer, coarser second stage
    ("10s:10m,60s:1h,300s:6h", "average", 0.5, "60s:30m,600s:2h", "max", 0.3),  # shorter: points dropped
    ("10s:10m,60s:1h", "average", 0.5, None, "sum", 0.0),  # aggregation and xff only: still a rewrite
    ("60s:1h,300s:6h", "min", 0.2, "10s:30m,60s:2h,300s:12h", "last", None),  # a finer first stage
]


def _history(rng: random.Random, retention: str) -> list[tuple[int, list[tuple[int, float]]]]:
    """Batches as a live writer sends them: (now, points of the 10 minutes before now), over the
    whole retention, some seconds missing, some slots written again by the next batch (within
    one batch whisper keeps the first of equal timestamps, we the last: not compared here)."""
    duration = max(s.duration for s in MetricMetadata.create(retention).retention.stages)
    batches = []
    for end in range(NOW - duration, NOW + 1, 600):
        points = [(t, float(rng.randint(-100, 1000))) for t in range(end - 600, end, 10) if rng.random() < 0.7]
        batches.append((end, points))
        batches.append((end, [(t, v + 0.5) for t, v in points if rng.random() < 0.05]))
    return batches


def _whisper_resize(path: Path, retention: str, aggregation: str | None, xff: float | None) -> None:
    """Run the installed whisper-resize.py in this process with the clock at NOW."""
    argv = [str(WHISPER_RESIZE), str(path), *retention.split(","), "--nobackup"]
    if aggregation:
        argv.append(f"--aggregationMethod={aggregation}")
    if xff is not None:
        argv.append(f"--xFilesFactor={xff}")
    with mock.patch.object(time, "time", lambda: float(NOW)), mock.patch.object(sys, "argv", argv), \
            mock.patch("sys.stdout"), mock.patch("signal.signal"):
        runpy.run_path(str(WHISPER_RESIZE), run_name="__main__")


def _windows(retention: str) -> list[tuple[int, int]]:
    stages = MetricMetadata.create(retention).retention.stages
    spans = sorted({s.duration for s in stages} | {s.duration - s.precision for s in stages} | {600, 3700, 86400})
    return [(NOW - span, NOW) for span in spans] + [(NOW - span, NOW - span // 3) for span in spans]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}->{c[3] or 'same'}" for c in CASES])
def test_set_metadata_rewrites_points_as_whisper_resize_does(tmp_path, case):
    old_retention, old_aggregation, old_xff, new_retention, new_aggregation, new_xff = case
    rng = random.Random(hash(case) & 0xFFFF)
    path = tmp_path / "m.wsp"
    old = MetricMetadata.create(old_retention, old_aggregation, old_xff)
    whisper.create(str(path), old.retention.as_tuples(), xFilesFactor=old_xff, aggregationMethod=old_aggregation)
    accessor = Accessor.from_url(f"sqlite://{tmp_path / 'bgl.db'}")
    accessor.syncdb()
    accessor.create_metric("m", old, now=NOW)
    for now, points in _history(rng, old_retention):
        if points:
            whisper.update_many(str(path), points, now=now)
            accessor.insert_points({"m": points}, now=now)
    before = whisper.fetch(str(path), NOW - 3600, NOW, now=NOW)
    assert before == _ours(accessor, NOW - 3600, NOW)  # same start (the differential suite's property)

    _whisper_resize(path, new_retention or old_retention, new_aggregation, new_xff)
    report = set_metadata(accessor, "m", MetadataChange.parse(new_retention, new_aggregation,
                                                              None if new_xff is None else str(new_xff)), now=NOW)
    assert len(report.changes) == 1 and report.points_written > 0

    info = whisper.info(str(path))
    metric = accessor.get_metric("m")
    assert metric.retention.as_tuples() == [(a["secondsPerPoint"], a["points"]) for a in info["archives"]]
    assert metric.metadata.aggregator.value == info["aggregationMethod"]
    assert abs(metric.metadata.xfilesfactor - info["xFilesFactor"]) < 1e-6
    compared = 0
    for start, end in _windows(new_retention or old_retention):
        expected = whisper.fetch(str(path), start, end, now=NOW)
        assert _ours(accessor, start, end) == expected, (start, end)
        compared += sum(v is not None for v in expected[1]) if expected else 0
    assert compared > 100  # the windows hold points, not only gaps


def _ours(accessor: Accessor, start: int, end: int):
    series = accessor.fetch(["m"], start, end, NOW)["m"]
    return None if series is None else ((series.start, series.end, series.step), series.values_list())


# -- the command ---------------------------------------------------------------------------
def bgl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "biggraphite_like.cli", *args], capture_output=True, text=True,
                          timeout=300, input=stdin, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))


def _store(tmp_path: Path, metrics: int = 3) -> str:
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    now = int(time.time())
    lines = "".join(f"srv.m{i} {k} {now - 60 * k}\n" for i in range(metrics) for k in range(100))
    assert bgl("--store", url, "write", "-", stdin=lines).returncode == 0
    return url


def _metadata(url: str) -> dict[str, tuple]:
    conn = sqlite3.connect(url.removeprefix("sqlite://"))
    try:
        return {row[0]: row[1:] for row in conn.execute("SELECT name, retention, aggregator, xfilesfactor FROM named_metrics")}
    finally:
        conn.close()


def test_the_command_changes_metrics_says_what_it_did_and_dry_runs_change_nothing(tmp_path):
    url = _store(tmp_path)
    before = _metadata(url)
    dry = bgl("--store", url, "set-metadata", "srv.*", "--retention", "60s:1d", "--aggregation", "max", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == ("srv.m0: would change 60s:8d,1h:2y average xff 0.5 -> 60s:1d max xff 0.5"
                                          " (keeps 1d of 2y: older points are dropped)")
    assert dry.stdout.splitlines()[-1].startswith("bgl set-metadata (dry run, nothing changed): metrics that would be"
                                                  " changed 3, metrics unchanged 0, duration")
    assert _metadata(url) == before

    done = bgl("--store", url, "set-metadata", "srv.*", "--retention", "60s:1d", "--aggregation", "max")
    assert done.returncode == 0, done.stderr
    assert "srv.m2: changed 60s:8d,1h:2y average xff 0.5 -> 60s:1d max xff 0.5" in done.stdout
    summary = dict(part.rsplit(" ", 1) for part in done.stdout.splitlines()[-1].split(": ", 1)[1].split(", "))
    assert summary["metrics changed"] == "3" and summary["metrics unchanged"] == "0"
    # the minutes (300), and the hours they filled enough (xff 0.5) from the old 1h stage
    assert int(summary["points read"]) == int(summary["points written"]) >= 300 and summary["points dropped"] == "0"
    assert set(_metadata(url).values()) == {("1440*60s", "max", 0.5)}
    # every minute is kept (and, as whisper-resize does, an hour of the old 1h stage may fill an empty minute)
    assert {float(k) for k in range(100)} <= {float(point.split(",")[1]) for point in _points(url, "srv.m1")}

    again = bgl("--store", url, "set-metadata", "srv.*", "--retention", "60s:1d", "--aggregation", "max")
    assert "metrics changed 0, metrics unchanged 3" in again.stdout  # a second run finds the work done


def test_refusals_name_what_is_wrong(tmp_path):
    url = _store(tmp_path)
    before = _metadata(url)
    for args, status, message in [
        (("srv.*",), 2, "give --retention, --aggregation, --xff, --storage-schemas or --storage-aggregation"),
        (("nothing.*", "--xff", "0.1"), 1, "no metric matches 'nothing.*'"),
        (("srv.*", "--retention", "60s:bad"), 1, "invalid"),
        (("srv.*", "--aggregation", "median"), 1, "median"),
        (("srv.*", "--xff", "2"), 1, "xFilesFactor"),
    ]:
        result = bgl("--store", url, "set-metadata", *args)
        assert result.returncode == status and message in result.stderr, (args, result.stderr)
    result = bgl("--store", "cassandra://127.0.0.1:1/ks", "set-metadata", "a.*", "--xff", "0.1")
    assert result.returncode == 1 and "in one transaction; this store has none (Cassandra)" in result.stderr
    assert _metadata(url) == before


def test_a_store_in_use_is_refused(tmp_path):
    url = _store(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1]);"
                               "c.execute('select count(*) from metrics').fetchone(); print('open', flush=True);"
                               "time.sleep(600)", url.removeprefix("sqlite://")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "open\n"
        result = bgl("--store", url, "set-metadata", "srv.*", "--xff", "0.1")
        assert result.returncode == 1
        assert f"is open in pid {holder.pid}" in result.stderr and "stop them" in result.stderr
        assert bgl("--store", url, "set-metadata", "srv.*", "--xff", "0.1", "--dry-run").returncode == 0
    finally:
        holder.kill()
        holder.wait()


def test_an_interrupted_run_leaves_each_metric_whole_and_a_second_run_finishes(tmp_path):
    url = _store(tmp_path, metrics=300)
    before = {name: _points(url, name) for name in ("srv.m0", "srv.m150", "srv.m299")}
    # killed in its second batch (SIGKILL after the first one committed)
    script = ("import os, signal, sys\n"
              "from biggraphite_like.accessor import Accessor\n"
              "import biggraphite_like.maintenance.resize as resize\n"
              "rewrite, calls = resize._rewrite, []\n"
              "def killing(*args):\n"
              "    calls.append(1)\n"
              "    rewrite(*args)\n"
              "    if len(calls) == 2: os.kill(os.getpid(), signal.SIGKILL)\n"
              "resize._rewrite = killing\n"
              "resize.set_metadata(Accessor.from_url(sys.argv[1]), 'srv.*',"
              " resize.MetadataChange.parse('60s:2d', None, None))\n")
    killed = subprocess.run([sys.executable, "-c", script, url], env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
                            timeout=300)
    assert killed.returncode == -signal.SIGKILL
    retentions = [retention for retention, _, _ in _metadata(url).values()]
    assert retentions.count("2880*60s") == 100 and len(retentions) == 300  # batch 1 done, batch 2 rolled back
    conn = sqlite3.connect(url.removeprefix("sqlite://"))
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    result = bgl("--store", url, "set-metadata", "srv.*", "--retention", "60s:2d")
    assert "metrics changed 200, metrics unchanged 100" in result.stdout
    after = {name: _points(url, name) for name in before}
    # every metric holds the same points (the first batch's, rewritten before the kill, as the others)
    assert after["srv.m0"] == after["srv.m150"] == after["srv.m299"]
    assert set(before["srv.m0"]) <= set(after["srv.m0"]) and before["srv.m0"] == before["srv.m299"]


def _points(url: str, name: str) -> list[str]:
    result = bgl("--store", url, "read", name, "--from", "-3h", "--format", "csv")
    return [line.split(",", 1)[1] for line in result.stdout.splitlines()[1:] if not line.endswith(",")]


def test_write_warns_when_it_ignores_the_metadata_options_of_an_existing_metric(tmp_path):
    url = _store(tmp_path, metrics=1)
    result = bgl("--store", url, "write", "--retention", "10s:1d", "--aggregation", "sum", "srv.m0", "5")
    assert result.returncode == 0
    assert ("bgl write: warning: srv.m0 exists with 60s:8d,1h:2y average xff 0.5: --retention 10s:1d, --aggregation"
            " sum ignored (change it with `bgl set-metadata srv.m0 --retention 10s:1d --aggregation sum`)") \
        in result.stderr
    assert _metadata(url)["srv.m0"] == ("11520*60s:17520*3600s", "average", 0.5)
    quiet = bgl("--store", url, "write", "srv.m0", "6")  # no option given: nothing to warn about
    assert "warning" not in quiet.stderr
    same = bgl("--store", url, "write", "--retention", "60s:8d,1h:2y", "srv.m0", "7")  # what it has already
    assert "warning" not in same.stderr
    lines = "".join(f"new.m{i} 1 {int(time.time())}\nsrv.m0 2 {int(time.time())}\n" for i in range(3))
    batch = bgl("--store", url, "write", "--retention", "10s:1d", "-", stdin=lines)
    assert batch.stderr.count("warning") == 1 and "srv.m0 exists" in batch.stderr
    assert _metadata(url)["new.m1"][0] == "8640*10s"


def test_carbon_rules_report_the_metrics_that_differ_and_set_what_they_give(tmp_path):
    """--storage-schemas/--storage-aggregation: the dry run is the report of the metrics whose
    settings differ from what the files give their names; the run sets exactly that; the
    schemas alone leave the aggregation as it is."""
    url = _store(tmp_path, metrics=4)  # srv.m0..m3 at the default 60s:8d,1h:2y, average, 0.5
    hits = bgl("--store", url, "write", "--retention", "60s:1d", "--aggregation", "sum", "app.hits", "1")
    assert hits.returncode == 0, hits.stderr
    schemas = tmp_path / "storage-schemas.conf"
    schemas.write_text("[srv_two]\npattern = ^srv\\.m[23]$\nretentions = 60s:2d\n"
                       "[app]\npattern = ^app\\.\nretentions = 60s:1d\n")
    aggregation = tmp_path / "storage-aggregation.conf"
    aggregation.write_text("[hits]\npattern = hits$\naggregationMethod = sum\nxFilesFactor = 0\n")
    files = ("--storage-schemas", str(schemas), "--storage-aggregation", str(aggregation))
    before = _metadata(url)

    report = bgl("--store", url, "set-metadata", "**", *files, "--dry-run")
    assert report.returncode == 0, report.stderr
    differing = sorted(line.split(":")[0] for line in report.stdout.splitlines() if " would change " in line)
    assert differing == ["app.hits", "srv.m2", "srv.m3"]  # app.hits: xff 0.5 -> 0; srv.m0, m1: the default already
    assert "srv.m2: would change 60s:8d,1h:2y" in report.stdout and "-> 60s:2d" in report.stdout
    assert _metadata(url) == before

    done = bgl("--store", url, "set-metadata", "**", "--storage-schemas", str(schemas))
    assert done.returncode == 0, done.stderr
    after = _metadata(url)
    assert after["srv.m2"][0] == after["srv.m3"][0] != before["srv.m2"][0]
    # srv.m0 already had it; app.hits keeps its sum: no aggregation file was given
    assert after["srv.m0"] == before["srv.m0"] and after["app.hits"] == before["app.hits"]
    assert bgl("--store", url, "set-metadata", "**", *files).returncode == 0
    again = bgl("--store", url, "set-metadata", "**", *files, "--dry-run")
    assert ": would change " not in again.stdout and "metrics that would be changed 0, metrics unchanged 5" in \
        again.stdout, again.stdout
