"""The operator's answers from `bgl` (issue 33): hints on empty answers, "would" in dry runs,
confirmation of big deletes, exit statuses as documented, Graphite's time forms, a readable
`info`, `du GLOB` limited to GLOB, one default retention, the missing-store message. Real
processes on real SQLite files."""
from __future__ import annotations

import json
import os
import pty
import re
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone

from biggraphite_like import settings
from tests.carbon_env import REPO_ROOT
from tests.receiver_env import BglReceive


def bgl(*args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """`bgl ARGS` with `env` over this environment (None: unset), $BGL_STORE unset."""
    merged = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "BGL_STORE": None, **(env or {})}
    return subprocess.run([sys.executable, "-m", "biggraphite_like.cli", *args], capture_output=True, text=True,
                          timeout=300, input=stdin, env={k: v for k, v in merged.items() if v is not None})


def _store(tmp_path, names: list[str]) -> str:
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    now = int(time.time())
    result = bgl("--store", url, "write", "-", stdin="".join(f"{name} 1 {now}\n" for name in names))
    assert result.returncode == 0, result.stderr
    return url


def test_an_empty_list_says_why(tmp_path):
    url = _store(tmp_path, ["servers.web1.cpu", "servers.web2.cpu", "apps.a"])
    result = bgl("--store", url, "list", "*")
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == ("bgl list: no metric matches '*', but 2 directories do (e.g. apps): list them with"
                             " --directories; or a glob one level deeper, like '*.*'\n")
    result = bgl("--store", url, "list", "--directories", "servers.*.*")
    assert result.stderr == ("bgl list: no directory matches 'servers.*.*', but 2 metrics do (e.g. servers.web1.cpu):"
                             " list them without --directories\n")
    assert bgl("--store", url, "list", "nothing.*").stderr == "bgl list: nothing matches 'nothing.*'\n"
    assert bgl("--store", url, "list", "*.*").stderr == ""  # an answer needs no hint
    read = bgl("--store", url, "read", "nothing.*")
    assert read.returncode == 1 and "no metric matches 'nothing.*'" in read.stderr


def test_dry_runs_say_would_and_never_contradict_themselves(tmp_path):
    url = _store(tmp_path, ["x.a.m1", "x.a.m2", "x.b"])
    dry = bgl("--store", url, "delete", "--dry-run", "x.a")
    assert dry.returncode == 0 and dry.stdout == ""
    assert dry.stderr.splitlines() == [
        "bgl delete: 'x.a' matches 1 directory (e.g. x.a): no metric would be deleted; use --recursive to delete"
        " everything beneath them",
        "bgl delete (dry run, nothing changed): metrics that would be removed 0, directories matched 1, duration 0.0s"]
    dry = bgl("--store", url, "delete", "--dry-run", "x.*")
    assert dry.stdout == "x.b\n" and "only metrics would be deleted" in dry.stderr and "nothing matches" not in dry.stderr
    dry = bgl("--store", url, "delete", "--dry-run", "--recursive", "x")
    assert dry.stdout.split() == ["x.a.m1", "x.a.m2", "x.b"] and "metrics that would be removed 3" in dry.stderr
    clean = bgl("--store", url, "clean", "--dry-run")
    assert "bgl clean (dry run, nothing changed): metrics scanned 3, metrics that would be removed 0" in clean.stdout
    copy = bgl("--store", url, "copy", "--dry-run", "x.a", "y")
    assert "metrics that would be copied 2, points that would be copied" in copy.stdout
    assert bgl("--store", url, "list", "**").stdout.split() == ["x.a.m1", "x.a.m2", "x.b"]  # all there still


def test_a_big_delete_or_a_delete_of_everything_needs_a_yes(tmp_path):
    url = _store(tmp_path, [f"big.m{i}" for i in range(150)] + ["small.a"])
    refused = bgl("--store", url, "delete", "big.*")
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == ("bgl delete: error: 'big.*' would delete 150 metric(s) (e.g. big.m0, big.m1, big.m10):"
                              " give --yes to confirm (more than 100 metrics, or **); --dry-run lists them. Nothing was"
                              " deleted\n")
    refused = bgl("--store", url, "delete", "**")
    assert refused.returncode == 1 and "'**' would delete 151 metric(s)" in refused.stderr
    assert len(bgl("--store", url, "list", "**").stdout.split()) == 151
    assert bgl("--store", url, "delete", "small.*").returncode == 0  # a small delete needs nothing

    # on a terminal, it asks
    assert _delete_on_terminal(url, "big.*", "n\n") == (1, "bgl delete: 'big.*' would delete 150 metric(s) (e.g."
                                                        " big.m0, big.m1, big.m10). Delete them? [y/N] ")
    assert len(bgl("--store", url, "list", "big.*").stdout.split()) == 150
    status, _ = _delete_on_terminal(url, "big.*", "y\n")
    assert status == 0 and bgl("--store", url, "list", "big.*").stdout == ""
    _store(tmp_path, [f"big.m{i}" for i in range(150)])
    done = bgl("--store", url, "delete", "--yes", "big.*")
    assert done.returncode == 0 and len(done.stdout.split()) == 150


def _delete_on_terminal(url: str, glob: str, answer: str) -> tuple[int, str]:
    """`bgl delete GLOB` with stdin and stderr on a terminal, typing `answer`; (status, prompt)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "biggraphite_like.cli", "--store", url, "delete", glob],
                               stdin=follower, stdout=subprocess.PIPE, stderr=follower, text=True,
                               env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    os.close(follower)
    seen = b""
    while b"[y/N] " not in seen:
        seen += os.read(leader, 4096)
    os.write(leader, answer.encode())
    status = process.wait(120)
    os.close(leader)
    return status, seen.decode().replace("\r\n", "\n")


def test_usage_errors_exit_with_2_as_help_says(tmp_path):
    url = _store(tmp_path, ["a.b"])
    help_text = bgl("--help").stdout
    assert "2  usage error" in help_text and "3  `bgl run`: another `bgl run` holds the data directory" in help_text
    for args, message in [
        (("write", "a.b"), "VALUE is missing"),
        (("write", "-", "5"), "takes no VALUE"),
        (("set-metadata", "a.*"), "give --retention, --aggregation, --xff, --storage-schemas or --storage-aggregation"),
        (("run", "--data-dir", str(tmp_path / "d"), "--web-workers", "0"), "--web-workers 0: give at least 1"),
        (("read", "--bogus", "a.b"), "unrecognized arguments"),
        (("list",), "required: GLOB"),
    ]:
        result = bgl("--store", url, *args)
        assert result.returncode == 2 and message in result.stderr, (args, result.returncode, result.stderr)
    assert not (tmp_path / "d").exists()
    # refusals and failures are 1
    assert bgl("--store", url, "write", "a.b", "x").returncode == 1
    assert bgl("--store", url, "info", "no.such").returncode == 1


def test_read_takes_graphites_time_forms(tmp_path):
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    now = int(time.time()) // 3600 * 3600 - 3600  # an hour boundary in the past
    lines = "".join(f"t.m {k} {now - 60 * k}\n" for k in range(180))
    assert bgl("--store", url, "write", "-", stdin=lines).returncode == 0

    def read(start: str) -> dict:
        result = bgl("--store", url, "read", "--now", str(now), "--from", start, "--until", "now", "t.m")
        assert result.returncode == 0, (start, result.stderr)
        return json.loads(result.stdout)

    utc = datetime.fromtimestamp(now - 7200, timezone.utc)
    epoch = read(str(now - 7200))
    assert epoch["start"] == now - 7200 + 60 and len([v for v in epoch["values"] if v is not None]) == 120
    for form in ("-2h", "-120min", "-7200", "now-2h", utc.strftime("%Y-%m-%dT%H:%M"), utc.strftime("%H:%M_%Y%m%d"),
                 utc.strftime("%Y-%m-%dT%H:%M:%SZ"), utc.astimezone(_plus_two()).isoformat()):
        assert read(form) == epoch, form
    midnight = now - now % 86400
    day = read(datetime.fromtimestamp(midnight, timezone.utc).strftime("%Y-%m-%d"))
    assert day["start"] == min(midnight + 60, now - 180 * 60 + 60) or day["start"] == midnight + 60
    assert read("today")["start"] == day["start"] and read(time.strftime("%Y%m%d", time.gmtime(now)))["start"] == \
        day["start"]
    bad = bgl("--store", url, "read", "--from", "last tuesday", "t.m")
    assert bad.returncode == 1
    assert "invalid time 'last tuesday': use epoch seconds" in bad.stderr and "now-30min" in bad.stderr


def _plus_two():
    from datetime import timedelta

    return timezone(timedelta(hours=2))


def test_info_is_readable(tmp_path):
    url = _store(tmp_path, ["i.m"])
    info = json.loads(bgl("--store", url, "info", "i.m").stdout)
    assert info["retention"] == settings.DEFAULT_RETENTION == "60s:8d,1h:2y"
    assert [stage["retention"] for stage in info["stages"]] == ["60s:8d", "1h:2y"]
    assert [(s["precision"], s["points"]) for s in info["stages"]] == [(60, 11520), (3600, 17520)]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", info["created_on"]), info["created_on"]
    assert abs(datetime.fromisoformat(info["created_on"]).timestamp() - time.time()) < 600
    assert info["read_on"] is None  # never read
    # what info prints, --retention takes back
    assert bgl("--store", url, "write", "--retention", info["retention"], "i.n", "1").returncode == 0
    assert json.loads(bgl("--store", url, "info", "i.n").stdout)["stages"] == info["stages"]


def test_du_of_a_glob_shows_that_subtree_only(tmp_path):
    url = _store(tmp_path, ["a.x.m", "a.y", "b.z"])
    subtree = bgl("--store", url, "du", "a.*").stdout.splitlines()
    assert [line.split()[-1] for line in subtree[1:]] == ["a.x/", "a.y", "total"]
    assert "on disk" not in "\n".join(subtree) and "table" not in "\n".join(subtree)
    whole = bgl("--store", url, "du").stdout
    assert "  on disk: the whole store" in whole and "table metrics" in whole
    empty = bgl("--store", url, "du", "none.*")
    assert empty.returncode == 0 and empty.stderr == "bgl du: nothing matches 'none.*'\n"


def test_receive_write_and_run_give_new_metrics_one_default_retention(tmp_path):
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    assert bgl("--store", url, "write", "by.write", "1").returncode == 0
    receiver = BglReceive(tmp_path / "receiver", url).start()  # no storage-schemas.conf
    try:
        with socket.create_connection(("127.0.0.1", receiver.line_port), timeout=30) as sock:
            sock.sendall(f"by.receive 1 {int(time.time())}\n".encode())
        deadline = time.monotonic() + 60
        while bgl("--store", url, "list", "by.receive").stdout != "by.receive\n":
            assert time.monotonic() < deadline, receiver.output()
            time.sleep(0.2)
    finally:
        assert receiver.stop() == 0
    retentions = {name: json.loads(bgl("--store", url, "info", name).stdout)["retention"]
                  for name in ("by.write", "by.receive")}
    assert retentions == {"by.write": "60s:8d,1h:2y", "by.receive": "60s:8d,1h:2y"}
    from biggraphite_like.stack.config import SCHEMAS  # what `bgl run` writes in conf/storage-schemas.conf

    assert "[default]\npattern = .*\nretentions = 60s:8d,1h:2y" in SCHEMAS
    assert "60s:8d,1h:2y" in bgl("receive", "--help").stdout.replace("\n", " ").replace("  ", " ")


def test_a_missing_store_says_where_bgl_looked_and_how_to_point_it_elsewhere(tmp_path):
    env = {"HOME": str(tmp_path / "home"), "BGL_DATA_DIR": str(tmp_path / "data")}
    result = bgl("list", "*", env=env)
    assert result.returncode == 1
    assert result.stderr.startswith(f"bgl list: error: no store at {tmp_path / 'data' / 'bgl.db'} (the default store of"
                                    " the data directory $BGL_DATA_DIR). Point bgl at yours: --store")
    assert "$BGL_DATA_DIR=DIR for DIR/bgl.db (what `bgl run --data-dir DIR` uses)" in result.stderr
    home = {"HOME": str(tmp_path / "home"), "BGL_DATA_DIR": None, "XDG_DATA_HOME": None}
    result = bgl("read", "a.b", env=home)
    assert f"no store at {tmp_path / 'home' / '.local' / 'share' / 'biggraphite_like' / 'bgl.db'} (the default store," \
           " in ~/.local/share/biggraphite_like ($BGL_DATA_DIR and $XDG_DATA_HOME are not set))" in result.stderr
    result = bgl("--store", f"sqlite://{tmp_path / 'typo.db'}", "info", "a.b", env=home)
    assert f"no store at {tmp_path / 'typo.db'} (given with --store)" in result.stderr
    # a file without schema is another matter: syncdb
    (tmp_path / "empty.db").write_bytes(b"")
    result = bgl("--store", f"sqlite://{tmp_path / 'empty.db'}", "list", "*", env=home)
    assert result.returncode == 1 and "syncdb" in result.stderr and "no store at" not in result.stderr
