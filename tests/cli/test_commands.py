"""`bgl`, run as a real subprocess against a real SQLite file in tmp_path.

Covers syncdb (WAL, --dry-run equal to schema/sqlite.sql), write (one point, options, stdin
with thousands of lines across batches and malformed lines reported by line number), read
(json and csv, compared with whisper.fetch on the same points for many windows and several
aggregation methods), info, list (globs, --directories, limits, missing schema), errors,
and how the store is chosen ($BGL_STORE, $BGL_DATA_DIR, ~/.local/share).

Every subprocess gets HOME and BGL_DATA_DIR inside tmp_path: nothing touches the real home.
"""
from __future__ import annotations

import concurrent.futures
import csv
import io
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import whisper

from biggraphite_like.accessor import Accessor
from tests.paths import REPO_ROOT

SCHEMA_FILE = REPO_ROOT / "schema" / "sqlite.sql"
BGL = shutil.which("bgl", path=os.path.dirname(sys.executable)) or shutil.which("bgl")
RETENTION = "10s:10m,60s:1h"  # stage 0: 60 x 10s (600 s), stage 1: 60 x 60s (3600 s)
RETENTION_STAGES = [
    {"retention": "10s:10min", "precision": 10, "points": 60, "duration": 600},
    {"retention": "60s:1h", "precision": 60, "points": 60, "duration": 3600},
]
WHISPER_ARCHIVES = [(10, 60), (60, 60)]


# -- helpers ---------------------------------------------------------------------------
@pytest.fixture
def url(tmp_path) -> str:
    return f"sqlite://{tmp_path / 'store' / 'bgl.db'}"


@pytest.fixture(autouse=True)
def _store_dir(tmp_path):
    (tmp_path / "store").mkdir()


def bgl(env: dict, *args: str, stdin: str | None = None, module: bool = False) -> subprocess.CompletedProcess:
    """Run the installed console script (or `python -m biggraphite_like.cli`)."""
    command = [sys.executable, "-m", "biggraphite_like.cli"] if module else [BGL]
    return subprocess.run(
        command + list(args), input=stdin, env=env, capture_output=True, text=True, timeout=120
    )


def bgl_many(env: dict, commands: list[list[str]]) -> list[subprocess.CompletedProcess]:
    """Run many read-only `bgl` commands concurrently (startup dominates their cost)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda args: bgl(env, *args), commands))


def ok(process: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert process.returncode == 0, (process.args, process.returncode, process.stderr)
    return process


def fails(process: subprocess.CompletedProcess, command: str) -> str:
    """Assert the documented failure form: exit 1, `bgl <command>: error: ...`; return stderr."""
    assert process.returncode == 1, (process.args, process.returncode, process.stdout, process.stderr)
    assert process.stderr.startswith(f"bgl {command}: error: "), process.stderr
    assert "Traceback" not in process.stderr
    return process.stderr


def lines_of(text: str) -> list[str]:
    return text.splitlines()


def as_fetch(document: dict):
    """A `bgl read --format json` document in whisper.fetch's shape (None: nothing in range)."""
    if document["start"] is None:
        assert document["values"] == [] and document["end"] is None and document["step"] is None
        return None
    return (document["start"], document["end"], document["step"]), document["values"]


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_console_script_is_installed():
    assert BGL is not None and os.access(BGL, os.X_OK), "the `bgl` console script is not installed"


# -- 1. syncdb -------------------------------------------------------------------------
def test_syncdb_creates_wal_store_idempotently(env, url, tmp_path):
    path = tmp_path / "store" / "bgl.db"
    ok(bgl(env, "--store", url, "syncdb"))
    assert path.exists()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert {"metrics", "directories"} <= tables(path)
    ok(bgl(env, "--store", url, "syncdb"))  # idempotent
    assert {"metrics", "directories"} <= tables(path)


def test_syncdb_dry_run_prints_schema_file_and_creates_nothing(env, url, tmp_path):
    path = tmp_path / "store" / "bgl.db"
    process = ok(bgl(env, "--store", url, "syncdb", "--dry-run"))
    assert process.stdout == SCHEMA_FILE.read_text()
    assert not path.exists() or not tables(path)
    # the statements it prints are a working schema
    with sqlite3.connect(tmp_path / "by_hand.db") as conn:
        conn.executescript(process.stdout)
    assert {"metrics", "directories"} <= tables(tmp_path / "by_hand.db")


# -- 2. write one point, read, info ----------------------------------------------------
def test_write_one_point_read_back_and_info(env, url):
    now = int(time.time())
    ts = now - 30 - now % 10  # aligned on the 10 s step, well inside stage 0
    ok(bgl(env, "--store", url, "write", "--retention", RETENTION, "--aggregation", "max", "--xff", "0.3",
           "cli.one.metric", "42.5", str(ts)))

    document = json.loads(ok(bgl(env, "--store", url, "read", "--from", str(ts - 1), "--until", str(ts),
                                 "--now", str(now), "cli.one.metric")).stdout)
    assert document == {"name": "cli.one.metric", "start": ts, "end": ts + 10, "step": 10, "values": [42.5]}

    wider = json.loads(ok(bgl(env, "--store", url, "read", "--from", str(ts - 60), "--until", str(ts + 20),
                              "--now", str(now), "cli.one.metric")).stdout)
    assert (wider["start"], wider["end"], wider["step"]) == (ts - 50, ts + 30, 10)
    assert wider["values"] == [None] * 5 + [42.5, None, None]

    info = json.loads(ok(bgl(env, "--store", url, "info", "cli.one.metric")).stdout)
    assert info["name"] == "cli.one.metric"
    assert info["aggregator"] == "max"
    assert info["xfilesfactor"] == 0.3
    assert info["stages"] == RETENTION_STAGES

    # a second write with other options: the point is stored, the metadata stays
    ok(bgl(env, "--store", url, "write", "--retention", "1s:1m", "--aggregation", "sum", "--xff", "0.9",
           "cli.one.metric", "7", str(ts - 20)))
    again = json.loads(ok(bgl(env, "--store", url, "info", "cli.one.metric")).stdout)
    for key in ("retention", "aggregator", "xfilesfactor", "stages", "id", "created_on"):
        assert again[key] == info[key], key
    document = json.loads(ok(bgl(env, "--store", url, "read", "--from", str(ts - 21), "--until", str(ts),
                                 "--now", str(now), "cli.one.metric")).stdout)
    assert (document["step"], document["values"]) == (10, [7.0, None, 42.5])


def test_write_without_timestamp_uses_now(env, url):
    before = int(time.time())
    ok(bgl(env, "--store", url, "write", "--retention", RETENTION, "cli.now", "3.25"))
    after = int(time.time())
    document = json.loads(ok(bgl(env, "--store", url, "read", "--from", str(before - 60), "--until", str(after),
                                 "--now", str(after), "cli.now")).stdout)
    assert document["values"].count(3.25) == 1
    assert set(document["values"]) == {None, 3.25}
    written_at = document["start"] + document["values"].index(3.25) * document["step"]
    assert before - before % 10 <= written_at <= after


# -- 3. write - : thousands of lines, malformed ones ----------------------------------
def test_write_stdin_many_metrics_with_malformed_lines(env, url):
    rng = random.Random(20240601)
    now = int(time.time())
    top = now - now % 10 - 10
    stamps = [top - 10 * k for k in range(51)]  # ages 10..519 s: all in stage 0 (600 s)
    names = [f"stdin.host{i // 20:03d}.cpu{i % 20:02d}" for i in range(1000)]
    pairs = [(name, ts) for name in names for ts in stamps]
    rng.shuffle(pairs)  # timestamps of each metric arrive out of order
    pairs += [rng.choice(pairs) for _ in range(3000)]  # rewrites of a timestamp: the last value wins

    good = []
    expected: dict[tuple[str, int], float] = {}
    for name, ts in pairs:
        value = rng.choice([float(rng.randint(-100, 100)), rng.uniform(-1e9, 1e9), rng.uniform(-1, 1) * 1e-9])
        good.append(f"{name} {value!r} {ts}")
        expected[(name, ts)] = value
    good.append(f"stdin.tabs\t12.5\t{stamps[3]}")  # any whitespace separates fields, as in carbon
    expected[("stdin.tabs", stamps[3])] = 12.5

    bad = [
        "stdin.two.fields 1",
        f"stdin.four.fields 1 {top} extra",
        "lonely",
        f"bad.value abc {top}",
        f"bad.value 1,5 {top}",
        f"bad.nan nan {top}",
        f"bad.nan NaN {top}",
        f"bad.inf inf {top}",
        f"bad.inf -inf {top}",
        f"bad.inf Infinity {top}",
        f"bad.inf 1e400 {top}",
        "bad.ts 1 99999999999",
        "bad.ts 1 -5",
        "bad.ts 1 abc",
        "bad.ts 1 nan",
        f"... 1 {top}",
        f"{'.'.join(['deep'] * 65)} 1 {top}",
        f"{names[5]} nan {stamps[0]}",  # a metric that also has good points
        f"{names[6]} 1 99999999999",
    ]
    entries = [(line, False) for line in good]
    for line in bad:
        entries.insert(rng.randrange(len(entries) + 1), (line, True))
    entries.insert(len(entries) - 40, (f"bad.late nan {top}", True))  # past the 50,000-line batch
    assert len(entries) > 50_000
    bad_numbers = {number for number, (_, is_bad) in enumerate(entries, 1) if is_bad}

    process = bgl(env, "--store", url, "write", "--retention", RETENTION, "-",
                  stdin="".join(line + "\n" for line, _ in entries))
    assert process.returncode == 1, process.stderr[-2000:]
    reported = [int(n) for n in re.findall(r"\bline (\d+):", process.stderr)]
    assert sorted(reported) == sorted(bad_numbers)  # each bad line named once, no good line named
    assert re.search(rf"\b{len(bad_numbers)} rejected\b", process.stderr), process.stderr[-500:]

    listed = ok(bgl(env, "--store", url, "list", "stdin.*.*")).stdout
    assert lines_of(listed) == sorted(names)

    accessor = Accessor.from_url(url)
    try:
        all_names = names + ["stdin.tabs"]
        series = accessor.fetch(all_names, now - 590, now, now)
        for name in all_names:
            got = series[name]
            assert got.step == 10
            want = [expected.get((name, got.start + i * got.step)) for i in range(len(got.values))]
            assert got.values_list() == want, name
    finally:
        accessor.close()

    # and one through `bgl read`
    document = json.loads(ok(bgl(env, "--store", url, "read", "--from", str(now - 590), "--until", str(now),
                                 "--now", str(now), names[5])).stdout)
    assert document["values"] == [expected.get((names[5], document["start"] + i * 10))
                                  for i in range(len(document["values"]))]


def test_rejected_lines_create_no_metric(env, url):
    now = int(time.time())
    stdin = f"good.metric 1 {now - 5}\nbad.nan nan {now}\nbad.inf inf {now}\nbad.ts 1 99999999999\nbad.neg 1 -5\n"
    process = bgl(env, "--store", url, "write", "-", stdin=stdin)
    assert process.returncode == 1
    assert sorted(int(n) for n in re.findall(r"\bline (\d+):", process.stderr)) == [2, 3, 4, 5]
    assert ok(bgl(env, "--store", url, "list", "*.*")).stdout == "good.metric\n"


def test_write_stdin_all_good_exits_zero(env, url):
    now = int(time.time())
    stdin = "".join(f"ok.m{i % 7} {i} {now - 100 - i}\n" for i in range(200))
    process = ok(bgl(env, "--store", url, "write", "--retention", RETENTION, "-", stdin=stdin))
    assert "line " not in process.stderr
    assert lines_of(ok(bgl(env, "--store", url, "list", "ok.*")).stdout) == [f"ok.m{i}" for i in range(7)]


# -- 4. differential against whisper --------------------------------------------------
AGGREGATIONS = [("average", "0.5"), ("sum", "0.0"), ("last", "1.0"), ("avg_zero", "0.3"), ("absmin", "0.5")]


def test_read_equals_whisper_fetch(env, url, tmp_path):
    rng = random.Random(4242)
    now = int(time.time())
    chosen: dict[int, float] = {}
    for _ in range(220):
        # ages away from the 600 s stage boundary by 40 s: the seconds this test takes cannot change routing
        age = rng.randint(0, 560) if rng.random() < 0.6 else rng.randint(640, 3500)
        chosen[now - age] = float(rng.randint(-50, 100)) if rng.random() < 0.5 else rng.uniform(-1e3, 1e3)
    points = list(chosen.items())
    rng.shuffle(points)  # out of order, several raw timestamps per interval, gaps
    stdin_of = {}
    paths = {}
    for aggregation, xff in AGGREGATIONS:
        name = f"diff.{aggregation}"
        stdin_of[name] = "".join(f"{name} {value!r} {ts}\n" for ts, value in points)
        path = str(tmp_path / f"{aggregation}.wsp")
        whisper.create(path, WHISPER_ARCHIVES, xFilesFactor=float(xff), aggregationMethod=aggregation)
        whisper.update_many(path, points, now=now)
        paths[name] = path
        ok(bgl(env, "--store", url, "write", "--retention", RETENTION, "--aggregation", aggregation, "--xff", xff,
               "-", stdin=stdin_of[name]))

    # through `bgl read`: windows in stage 0, in stage 1, clamped, zero-length, empty
    cli_windows = [
        (now - 600, now),  # all of stage 0
        (now - 61, now - 59),
        (now - 50, now - 50),  # zero-length window
        (now - 601, now),  # just past stage 0: stage 1
        (now - 2000, now - 1000),
        (now - 4000, now + 100),  # clamped on both sides
        (now + 10, now + 20),  # in the future: nothing
        (now - 5000, now - 4000),  # past the retention: nothing
    ]
    commands, expected = [], []
    for name, path in paths.items():
        for start, until in cli_windows:
            commands.append(["--store", url, "read", "--from", str(start), "--until", str(until), "--now", str(now),
                             "--format", "json", name])
            fetched = whisper.fetch(path, start, until, now=now)
            expected.append(None if fetched is None else (tuple(fetched[0]), fetched[1]))
    for command, want, process in zip(commands, expected, bgl_many(env, commands)):
        document = json.loads(ok(process).stdout)
        if want is not None:
            assert document["name"] == command[-1]
        assert as_fetch(document) == want, command

    # many more windows over the same store, through the accessor (no process startup per window)
    windows = [(now - span - back, now - back) for span in (0, 5, 59, 60, 300, 599, 600, 601, 1200, 3599, 3600, 9000)
               for back in (0, 1, 9, 45, 300, 700, 2500)]
    stage1_windows = 0
    accessor = Accessor.from_url(url)
    try:
        for name, path in paths.items():
            for start, until in windows:
                fetched = whisper.fetch(path, start, until, now=now)
                want = None if fetched is None else (tuple(fetched[0]), fetched[1])
                series = accessor.fetch([name], start, until, now)[name]
                got = None if series is None else ((series.start, series.end, series.step), series.values_list())
                assert got == want, (name, start - now, until - now)
                stage1_windows += want is not None and want[0][2] == 60
    finally:
        accessor.close()
    assert stage1_windows >= 20 * len(AGGREGATIONS)
    # the comparison is not vacuous: both stages hold values
    for name, path in paths.items():
        for start in (now - 600, now - 3600):
            assert any(v is not None for v in whisper.fetch(path, start, now, now=now)[1]), (name, start)


# -- 5. csv ----------------------------------------------------------------------------
def test_read_csv_matches_json(env, url):
    now = int(time.time())
    base = now - now % 60 - 120
    stdin = "".join(f"csv.m {value!r} {base - offset}\n" for offset, value in
                    [(0, 1.5), (10, -2.0), (30, 1e-7), (70, 123456789.125), (1500, 9.0), (1510, 11.0)])
    ok(bgl(env, "--store", url, "write", "--retention", RETENTION, "--xff", "0", "-", stdin=stdin))
    for start in (now - 300, now - 2000):  # stage 0, then stage 1
        common = ["--store", url, "read", "--from", str(start), "--until", str(now), "--now", str(now), "csv.m"]
        document = json.loads(ok(bgl(env, *common, "--format", "json")).stdout)
        text = ok(bgl(env, *common, "--format", "csv")).stdout
        rows = list(csv.reader(io.StringIO(text)))
        assert rows[0] == ["name", "timestamp", "value"]
        assert {row[0] for row in rows[1:]} == {"csv.m"}
        rows = [row[1:] for row in rows]
        assert len(rows) - 1 == len(document["values"]) == (document["end"] - document["start"]) // document["step"]
        assert any(v is None for v in document["values"]) and any(v is not None for v in document["values"])
        for index, (row, value) in enumerate(zip(rows[1:], document["values"])):
            assert int(row[0]) == document["start"] + index * document["step"]
            if value is None:
                assert row[1] == ""
            else:
                assert float(row[1]) == value


# -- 6. list ---------------------------------------------------------------------------
LIST_METRICS = ["a", "a.b", "a.b.c", "a.b.d", "a.e", "ab.c", "b.x.y.z", "c1", "c2", "x.z", "x.y.z"]


def test_list_globs(env, url):
    now = int(time.time())
    stdin = "".join(f"{name} 1 {now - 5}\n" for name in reversed(LIST_METRICS))
    ok(bgl(env, "--store", url, "write", "-", stdin=stdin))
    cases = [
        ([], "*", ["a", "c1", "c2"]),
        ([], "a.*", ["a.b", "a.e"]),
        ([], "a.**", ["a.b", "a.b.c", "a.b.d", "a.e"]),
        ([], "{a,ab}.*", ["a.b", "a.e", "ab.c"]),
        ([], "{a,x}.{b,z}", ["a.b", "x.z"]),
        ([], "x.**.z", ["x.y.z", "x.z"]),
        ([], "c[12]", ["c1", "c2"]),
        ([], "c[!1]", ["c2"]),
        ([], "?", ["a"]),
        ([], "nothing.*", []),
        (["--directories"], "*", ["a", "ab", "b", "x"]),
        (["--directories"], "a.**", ["a.b"]),
        (["--directories"], "b.**", ["b.x", "b.x.y"]),
        (["--directories"], "{a,b}.*", ["a.b", "b.x"]),
    ]
    processes = bgl_many(env, [["--store", url, "list", *flags, pattern] for flags, pattern, _ in cases])
    for (flags, pattern, want), process in zip(cases, processes):
        assert lines_of(ok(process).stdout) == want, (flags, pattern)
    # python -m gives the same as the console script
    assert ok(bgl(env, "--store", url, "list", "a.**", module=True)).stdout == "a.b\na.b.c\na.b.d\na.e\n"


def test_list_glob_over_expansion_limit_fails(env, url):
    ok(bgl(env, "--store", url, "syncdb"))
    started = time.monotonic()
    message = fails(bgl(env, "--store", url, "list", "{a,b}" * 20), "list")
    assert time.monotonic() - started < 10
    assert "limit" in message and "10000" in message, message


def test_list_without_schema_tells_to_run_syncdb(env, url):
    for args in (["list", "*"], ["read", "a.b"], ["info", "a.b"]):
        message = fails(bgl(env, "--store", url, *args), args[0])
        assert "syncdb" in message, message


# -- 7. errors -------------------------------------------------------------------------
def test_read_and_info_of_missing_metric(env, url):
    ok(bgl(env, "--store", url, "write", "exists.metric", "1"))
    for command in ("read", "info"):
        message = fails(bgl(env, "--store", url, command, "no.such.metric"), command)
        assert "no.such.metric" in message


def test_read_from_after_until(env, url):
    ok(bgl(env, "--store", url, "write", "exists.metric", "1"))
    now = int(time.time())
    message = fails(bgl(env, "--store", url, "read", "--from", str(now - 10), "--until", str(now - 100),
                        "exists.metric"), "read")
    assert "--from" in message and "--until" in message and str(now - 10) in message


@pytest.mark.parametrize("store", ["foo://x", "sqlite://", "nonsense"])
def test_bad_store_url(env, store):
    message = fails(bgl(env, "--store", store, "list", "*"), "list")
    assert repr(store) in message or store in message
    assert "sqlite://" in message  # says what a good URL looks like


def test_missing_store_directory(env, tmp_path):
    message = fails(bgl(env, "--store", f"sqlite://{tmp_path / 'nowhere' / 'x.db'}", "list", "*"), "list")
    assert "nowhere" in message


def test_write_invalid_options(env, url):
    assert "foo" in fails(bgl(env, "--store", url, "write", "--aggregation", "foo", "a.b", "1"), "write")
    assert "xFilesFactor" in fails(bgl(env, "--store", url, "write", "--xff", "2", "a.b", "1"), "write")
    assert "bad" in fails(bgl(env, "--store", url, "write", "--retention", "bad", "a.b", "1"), "write")
    assert "abc" in fails(bgl(env, "--store", url, "write", "a.b", "abc"), "write")
    for args, message in ((["a.b"], "VALUE is missing"), (["-", "5"], "stdin")):  # usage errors: exit status 2
        process = bgl(env, "--store", url, "write", *args, stdin="a.b 1 1700000000\n")
        assert process.returncode == 2 and message in process.stderr, (args, process.stderr)
    assert ok(bgl(env, "--store", url, "list", "**")).stdout == ""  # nothing written


def test_relative_times(env, url):
    now = int(time.time())
    ok(bgl(env, "--store", url, "write", "--retention", RETENTION, "rel.m", "5", str(now - 1800)))
    absolute = ok(bgl(env, "--store", url, "read", "--from", str(now - 3600), "--until", str(now),
                      "--now", str(now), "rel.m")).stdout
    assert 5.0 in json.loads(absolute)["values"]
    for spelling in (["--from=-1h"], ["--from", "-3600"], ["--from=-60min"]):
        relative = ok(bgl(env, "--store", url, "read", *spelling, "--until", "now", "--now", str(now), "rel.m"))
        assert relative.stdout == absolute, spelling


def test_relative_time_as_separate_argument(env, url):
    now = int(time.time())
    ok(bgl(env, "--store", url, "write", "--retention", RETENTION, "rel.m", "5", str(now - 1800)))
    absolute = ok(bgl(env, "--store", url, "read", "--from", str(now - 3600), "--until", str(now),
                      "--now", str(now), "rel.m")).stdout
    relative = ok(bgl(env, "--store", url, "read", "--from", "-1h", "--until", "now", "--now", str(now), "rel.m"))
    assert relative.stdout == absolute


@pytest.mark.parametrize("args", [["cli.bad", "nan"], ["cli.bad", "inf"], ["...", "1"], ["cli.bad", "1", "-5"]])
def test_write_single_invalid_point_is_an_error(env, url, args):
    message = fails(bgl(env, "--store", url, "write", *args), "write")
    assert "line 0" not in message


# -- 8. choosing the store ------------------------------------------------------------
def test_bgl_store_environment_variable(env, tmp_path):
    env_db = tmp_path / "store" / "from_env.db"
    env = dict(env, BGL_STORE=f"sqlite://{env_db}")
    ok(bgl(env, "write", "env.metric", "1"))
    assert env_db.exists()
    assert not (tmp_path / "data").exists()
    assert ok(bgl(env, "list", "env.*")).stdout == "env.metric\n"
    # --store wins over $BGL_STORE
    other = f"sqlite://{tmp_path / 'store' / 'other.db'}"
    ok(bgl(env, "--store", other, "write", "other.metric", "1"))
    assert ok(bgl(env, "list", "*.*")).stdout == "env.metric\n"
    assert ok(bgl(env, "--store", other, "list", "*.*")).stdout == "other.metric\n"


def test_default_store_in_data_dir(env, tmp_path):
    default_db = tmp_path / "data" / "bgl.db"
    assert not default_db.parent.exists()
    ok(bgl(env, "write", "default.metric", "1"))  # creates the data directory and the file
    assert default_db.exists()
    with sqlite3.connect(default_db) as conn:
        assert conn.execute("SELECT name FROM named_metrics").fetchall() == [("default.metric",)]
    assert ok(bgl(env, "list", "default.*")).stdout == "default.metric\n"
    assert not (tmp_path / "home").exists()


def test_default_data_dir_under_home(env, tmp_path):
    env = dict(env)
    del env["BGL_DATA_DIR"]
    ok(bgl(env, "write", "home.metric", "1"))
    assert (tmp_path / "home" / ".local" / "share" / "biggraphite_like" / "bgl.db").exists()
    assert ok(bgl(env, "list", "home.*")).stdout == "home.metric\n"
