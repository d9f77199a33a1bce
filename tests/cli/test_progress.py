"""Progress of the long `bgl` commands (issue 33, item 6): `du`, `delete --recursive`,
`copy`/`rename` of a subtree, `write -` and `syncdb --vacuum` show their progress on stderr
(a bar on a terminal, reaching the total), never on stdout, whose answer (JSON) is the same
with or without a terminal. Real processes on real SQLite files; stderr on a pseudo-terminal."""
from __future__ import annotations

import json
import os
import subprocess
import time

from tests.cli.bgl_process import bgl, ok, run_in_pty
from tests.ops.fake_pip import fake_pip_env
from tests.paths import REPO_ROOT

METRICS = 2_500  # more than a batch (1,000 metrics): the bar moves more than once


def _fill(env, url, metrics: int = METRICS, points: int = 1) -> None:
    """`metrics` metrics under t.dNN.mNN with `points` points each, through `bgl write -`."""
    now = int(time.time())
    lines = "".join(f"t.d{i // 100:02d}.m{i % 100:02d} {j} {now - 60 * j}\n"
                    for i in range(metrics) for j in range(points))
    ok(bgl(env, url, "write", "-", stdin=lines))


def _bar(terminal: str, label: str, total: int) -> None:
    """The bar of `label` was drawn on the terminal and reached `total`."""
    assert f"\r{label} [" in terminal, terminal
    assert f"\r{label} [{'#' * 30}] {total}/{total} 100% " in terminal, terminal


def test_du_shows_progress_and_the_same_answer(env, url):
    _fill(env, url)
    piped = ok(bgl(env, url, "du", "--format", "json", "t.*"))
    assert "\r" not in piped.stderr and "[" not in piped.stderr  # no terminal, short job: no line
    status, stdout, terminal = run_in_pty(env, ["--store", url, "du", "--format", "json", "t.*"])
    assert status == 0, terminal
    _bar(terminal, "bgl du: metrics", METRICS)
    assert stdout == piped.stdout
    assert json.loads(stdout)["total"]["metrics"] == METRICS


def test_delete_recursive_shows_progress(env, url):
    _fill(env, url)
    status, stdout, terminal = run_in_pty(
        env, ["--store", url, "delete", "--recursive", "--yes", "--format", "json", "t"])
    assert status == 0, terminal
    _bar(terminal, "bgl delete: metrics", METRICS)
    document = json.loads(stdout)  # the answer alone: no progress in it
    assert document["counters"]["metrics_removed"] == METRICS and len(document["metrics"]) == METRICS
    assert ok(bgl(env, url, "list", "--directories", "*")).stdout == ""


def test_copy_and_rename_show_progress(env, url):
    _fill(env, url)
    status, stdout, terminal = run_in_pty(env, ["--store", url, "copy", "--format", "json", "t", "c"])
    assert status == 0, terminal
    _bar(terminal, "bgl copy: metrics", METRICS)
    assert json.loads(stdout)["counters"]["metrics_copied"] == METRICS
    status, stdout, terminal = run_in_pty(env, ["--store", url, "rename", "--format", "json", "c", "r"])
    assert status == 0, terminal
    _bar(terminal, "bgl rename (copy): metrics", METRICS)
    _bar(terminal, "bgl rename (delete sources): metrics", METRICS)
    counters = json.loads(stdout)["counters"]
    assert (counters["metrics_copied"], counters["sources_deleted"]) == (METRICS, METRICS)
    assert len(ok(bgl(env, url, "list", "r.*.*")).stdout.split()) == METRICS
    # the same answer without a terminal, where a short job writes no progress line
    piped = ok(bgl(env, url, "copy", "--format", "json", "r", "p"))
    assert "\r" not in piped.stderr and "[" not in piped.stderr
    assert json.loads(piped.stdout)["counters"]["metrics_copied"] == METRICS


def test_write_from_stdin_shows_progress(env, url, tmp_path):
    now = int(time.time())
    lines = [f"w.m{i % 600:03d} 1 {now - 60 * (i // 600)}\n" for i in range(60_000)]  # two batches
    lines.insert(55_000, "w.bad 1\n")  # line 55001, in the second batch: after the bar was drawn
    (tmp_path / "lines.txt").write_text("".join(lines))
    status, stdout, terminal = _run_in_pty_with_stdin(env, ["--store", url, "write", "-"], tmp_path / "lines.txt")
    assert status == 1, terminal  # a line was refused
    assert "\rbgl write: lines 50000 " in terminal and "\rbgl write: lines 60001 " in terminal, terminal
    # the message erased the bar to have a line of its own (the terminal ends lines with CR LF)
    assert ("\r\x1b[Kbgl write: line 55001: expected 'NAME VALUE TIMESTAMP', got 2 field(s); skipped\r\n"
            in terminal), terminal
    assert "bgl write: 60000 point(s) stored, 1 rejected" in terminal
    assert stdout == ""


def _run_in_pty_with_stdin(env, args, path):
    """run_in_pty with stdin read from path (bgl's stdin is inherited from this process)."""
    saved = os.dup(0)
    try:
        with open(path) as stdin:
            os.dup2(stdin.fileno(), 0)
        return run_in_pty(env, args)
    finally:
        os.dup2(saved, 0)
        os.close(saved)


def test_vacuum_says_when_it_starts_and_ends(env, url):
    _fill(env, url, metrics=500, points=20)
    ok(bgl(env, url, "delete", "--recursive", "--yes", "t.d0*"))
    result = ok(bgl(env, url, "syncdb", "--vacuum", "--format", "json"))
    document = json.loads(result.stdout)  # stdout: the JSON answer alone
    vacuum = document["vacuum"]
    path = url[len("sqlite://"):]
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"bgl syncdb --vacuum: rewriting {path} (") and "writers wait" in lines[0], lines
    mib = lambda count: f"{count / (1 << 20):.1f}"  # noqa: E731
    assert lines[1] == (f"bgl syncdb --vacuum: done in {vacuum['seconds']:.1f}s,"
                        f" {mib(vacuum['file_bytes_before'])} MiB -> {mib(vacuum['file_bytes_after'])} MiB"), lines


def test_run_sh_says_when_it_installs(tmp_path):
    """The first start of scripts/run.sh says why it waits for pip; a later one is silent."""
    env, venv = fake_pip_env(tmp_path), tmp_path / "venv"
    starts = [subprocess.run(["bash", str(REPO_ROOT / "scripts" / "run.sh"), "--help"], env=env, capture_output=True,
                             text=True, timeout=300) for _ in range(2)]
    assert [start.returncode for start in starts] == [0, 0], starts
    assert starts[0].stderr == (f"installing the pinned dependencies into {venv} (first start, or"
                                " setup.cfg/constraints.txt changed)...\n")
    assert starts[1].stderr == ""
    assert starts[0].stdout.startswith("usage: bgl run") and starts[1].stdout == starts[0].stdout
