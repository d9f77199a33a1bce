"""`bgl` as a new operator runs it (issue #19 items 2, 3, 4, 6; issue #15 item 7): real
subprocesses on a real SQLite file.

Global options on either side of the subcommand and --version; one line and status 2
when cassandra-driver cannot be imported; `read` of a glob (JSON lines, csv with a name
column, bounded); --format json of every job; exit statuses in --help; names holding
glob characters deleted, read and shown exactly.
"""
from __future__ import annotations

import csv
import importlib.metadata
import io
import json
import subprocess
import time

from tests.cli.bgl_process import BGL, ok

GLOB_NAMES = ["g.a*b", "g.a{b,c}", "g.a[x]b", "g.ab", "g.ac", "g.axb", "g.aXb", "g.a*b.child"]


def bgl(env, *args, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([BGL, *args], input=stdin, env=env, capture_output=True, text=True, timeout=120)


def write_lines(env, url, names, values=None, now=None):
    now = int(time.time()) if now is None else now
    values = values or list(range(1, len(names) + 1))
    stdin = "".join(f"{n} {v} {now}\n" for n, v in zip(names, values))
    return ok(bgl(env, "--store", url, "write", "-", stdin=stdin))


# -- item 2: global options, --version -------------------------------------------------
def test_version_is_the_package_version(env):
    shown = ok(bgl(env, "--version")).stdout.strip()
    assert shown == f"bgl (biggraphite_like) {importlib.metadata.version('biggraphite_like')}"


def test_store_option_before_or_after_the_subcommand(env, url, tmp_path):
    write_lines(env, url, ["s.a", "s.b"])
    before = ok(bgl(env, "--store", url, "list", "s.*")).stdout
    after = ok(bgl(env, "list", "--store", url, "s.*")).stdout
    last = ok(bgl(env, "list", "s.*", "--store", url)).stdout
    assert before == after == last == "s.a\ns.b\n"
    # the default store (BGL_DATA_DIR) is empty: the URL really was used, not taken for the glob
    default = bgl(env, "list", "s.*")
    assert default.stdout == ""
    # given twice, the one after the subcommand wins (it is closer to what it configures)
    other = f"sqlite://{tmp_path / 'other.db'}"
    ok(bgl(env, "--store", other, "syncdb"))
    assert ok(bgl(env, "--store", other, "list", "--store", url, "s.*")).stdout == "s.a\ns.b\n"


def test_format_option_before_or_after_the_subcommand(env, url):
    write_lines(env, url, ["f.a", "f.b"])
    before = json.loads(ok(bgl(env, "--format", "json", "--store", url, "list", "f.*")).stdout)
    after = json.loads(ok(bgl(env, "list", "f.*", "--format", "json", "--store", url)).stdout)
    assert before == after and before["names"] == ["f.a", "f.b"]
    text = ok(bgl(env, "--format", "csv", "read", "--store", url, "--from", "-5m", "f.a")).stdout
    assert text.splitlines()[0] == "name,timestamp,value"
    assert ok(bgl(env, "--store", url, "list", "f.*")).stdout == "f.a\nf.b\n"  # the default: text
    wrong = bgl(env, "--format", "csv", "--store", url, "list", "f.*")
    assert wrong.returncode == 2 and "--format csv: `bgl list` takes text, json" in wrong.stderr
    useless = bgl(env, "--format", "json", "--store", url, "write", "f.c", "1")
    assert useless.returncode == 2 and "--format does not apply to `bgl write`" in useless.stderr
    assert ok(bgl(env, "--store", url, "list", "f.*")).stdout == "f.a\nf.b\n"  # nothing was written


# -- item 3: no traceback without cassandra-driver -------------------------------------
def test_missing_cassandra_driver_is_one_line_and_status_2(env, tmp_path):
    broken = tmp_path / "no_driver" / "cassandra"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('No module named cassandra (hidden by the test)')\n")
    env = dict(env, PYTHONPATH=str(tmp_path / "no_driver"))
    process = bgl(env, "--store", "cassandra://127.0.0.1:9042/biggraphite", "list", "a.*")
    assert process.returncode == 2, process
    assert "Traceback" not in process.stderr
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "cassandra-driver" in lines[0] and "pip install 'biggraphite_like[cassandra]'" in lines[0]
    # the SQLite store does not need the driver at all
    ok(bgl(env, "--store", f"sqlite://{tmp_path / 'x.db'}", "syncdb"))


# -- item 4: read a glob ------------------------------------------------------------------
def test_read_a_glob_reads_every_match(env, url):
    now = int(time.time())
    write_lines(env, url, ["r.m1", "r.m2", "r.other.m3"], [1.5, 2.5, 3.5], now)
    lines = ok(bgl(env, "--store", url, "read", "--from", "-5m", "r.m*")).stdout.splitlines()
    documents = [json.loads(line) for line in lines]
    assert [d["name"] for d in documents] == ["r.m1", "r.m2"]
    assert [[v for v in d["values"] if v is not None] for d in documents] == [[1.5], [2.5]]
    text = ok(bgl(env, "--store", url, "read", "--from", "-5m", "--format", "csv", "r.{m1,other}.*")).stdout
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["name", "timestamp", "value"]
    assert {row[0] for row in rows[1:]} == {"r.other.m3"}
    assert [float(row[2]) for row in rows[1:] if row[2]] == [3.5]
    text = ok(bgl(env, "--store", url, "read", "--from", "-5m", "--format", "csv", "r.m{1,2}")).stdout
    rows = list(csv.reader(io.StringIO(text)))
    assert {row[0] for row in rows[1:]} == {"r.m1", "r.m2"}
    assert sorted((row[0], float(row[2])) for row in rows[1:] if row[2]) == [("r.m1", 1.5), ("r.m2", 2.5)]
    # bounded as globs are
    refused = bgl(env, "--store", url, "read", "--max-series", "1", "r.m*")
    assert refused.returncode == 1 and "matches more than 1 names" in refused.stderr
    missing = bgl(env, "--store", url, "read", "r.nothing*")
    assert missing.returncode == 1 and "no metric matches 'r.nothing*'" in missing.stderr


# -- item 6: --format json, exit statuses ---------------------------------------------------
def test_help_documents_exit_statuses(env):
    text = ok(bgl(env, "--help")).stdout
    assert "exit status:" in text
    for status in ("0  success", "1  the operation failed", "2  usage error"):
        assert status in text


def test_usage_error_is_status_2(env, url):
    assert bgl(env, "--store", url, "list").returncode == 2  # GLOB missing


def test_every_job_speaks_json(env, url, tmp_path):
    document = json.loads(ok(bgl(env, "--store", url, "syncdb", "--format", "json")).stdout)
    assert document["command"] == "syncdb" and any("CREATE TABLE" in s for s in document["statements"])
    write_lines(env, url, ["j.a", "j.b", "j.c.d"])
    assert json.loads(ok(bgl(env, "--store", url, "list", "--format", "json", "j.*")).stdout)["names"] == ["j.a", "j.b"]
    listed = json.loads(ok(bgl(env, "--store", url, "list", "--directories", "--format", "json", "j.*")).stdout)
    assert listed == {"glob": "j.*", "kind": "directories", "names": ["j.c"]}
    deleted = json.loads(ok(bgl(env, "--store", url, "delete", "--format", "json", "--dry-run", "j.?")).stdout)
    assert deleted["metrics"] == ["j.a", "j.b"] and deleted["dry_run"] is True
    assert deleted["counters"]["metrics_removed"] == 2
    deleted = json.loads(ok(bgl(env, "--store", url, "delete", "--format", "json", "j.a")).stdout)
    assert deleted["metrics"] == ["j.a"] and deleted["dry_run"] is False
    clean = json.loads(ok(bgl(env, "--store", url, "clean", "--format", "json")).stdout)
    assert clean["command"] == "clean" and "metrics_removed" in clean["counters"]
    repair = json.loads(ok(bgl(env, "--store", url, "repair", "--format", "json")).stdout)
    assert repair["command"] == "repair" and repair["examples"] == {}
    whisper_dir = tmp_path / "whisper"
    (whisper_dir / "w").mkdir(parents=True)
    import whisper

    whisper.create(str(whisper_dir / "w" / "x.wsp"), [(60, 60)])
    whisper.update(str(whisper_dir / "w" / "x.wsp"), 4.0, int(time.time()) - 60)
    (whisper_dir / "w" / "bad.wsp").write_bytes(b"not whisper")
    imported = bgl(env, "--store", url, "import-whisper", "--format", "json", str(whisper_dir))
    assert imported.returncode == 1  # one file failed
    document = json.loads(imported.stdout)
    assert document["counters"]["metrics_imported"] == 1 and document["counters"]["files_failed"] == 1
    assert len(document["errors"]) == 1 and "bad.wsp" in document["errors"][0]
    assert ok(bgl(env, "--store", url, "list", "w.*")).stdout == "w.x\n"


# -- issue #15 item 7: names holding glob characters, named exactly ------------------------
def test_names_with_glob_characters_are_named_exactly(env, url):
    write_lines(env, url, GLOB_NAMES)
    assert ok(bgl(env, "--store", url, "list", "g.**")).stdout.split() == sorted(GLOB_NAMES)
    for name, value in zip(GLOB_NAMES, range(1, len(GLOB_NAMES) + 1)):
        (document,) = [json.loads(line) for line in
                       ok(bgl(env, "--store", url, "read", "--exact", "--from", "-5m", name)).stdout.splitlines()]
        assert document["name"] == name and [v for v in document["values"] if v is not None] == [value]
        assert json.loads(ok(bgl(env, "--store", url, "info", name)).stdout)["name"] == name
    # without --exact the same text is a glob: g.a{b,c} reads g.ab and g.ac
    names = [json.loads(line)["name"] for line in
             ok(bgl(env, "--store", url, "read", "--from", "-5m", "g.a{b,c}")).stdout.splitlines()]
    assert names == ["g.ab", "g.ac"]
    # delete --exact removes only that name, even with --recursive on a name that is not a directory
    removed = ok(bgl(env, "--store", url, "delete", "--exact", "--recursive", "g.a{b,c}")).stdout.split()
    assert removed == ["g.a{b,c}"]
    removed = ok(bgl(env, "--store", url, "delete", "--exact", "g.a[x]b")).stdout.split()
    assert removed == ["g.a[x]b"]
    # g.a*b is a metric and a directory: without --recursive only the metric goes
    process = ok(bgl(env, "--store", url, "delete", "--exact", "g.a*b"))
    assert process.stdout.split() == ["g.a*b"] and "use --recursive" in process.stderr
    left = ok(bgl(env, "--store", url, "list", "g.**")).stdout.split()
    assert left == sorted(["g.ab", "g.ac", "g.axb", "g.aXb", "g.a*b.child"])
    assert ok(bgl(env, "--store", url, "delete", "--exact", "--recursive", "g.a*b")).stdout.split() == ["g.a*b.child"]
    assert ok(bgl(env, "--store", url, "list", "g.**")).stdout.split() == sorted(["g.ab", "g.ac", "g.axb", "g.aXb"])
    assert ok(bgl(env, "--store", url, "list", "--directories", "g.**")).stdout == ""
    nothing = ok(bgl(env, "--store", url, "delete", "--exact", "g.a?b"))
    assert nothing.stdout == "" and "nothing is named 'g.a?b'" in nothing.stderr
    assert ok(bgl(env, "--store", url, "list", "g.**")).stdout.split() == sorted(["g.ab", "g.ac", "g.axb", "g.aXb"])
