"""The receiver's own entry (receiver/command.py): `python -m biggraphite_like.receiver` takes
what `bgl receive` takes, runs without importing the CLI package, and opens the store named
by $BGL_STORE (how `bgl run` starts it: the URL, a password in it, never in `ps`)."""
from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time

from biggraphite_like.accessor import Accessor
from biggraphite_like.cli import build_parser as bgl_parser
from biggraphite_like.receiver.command import build_parser
from biggraphite_like.receiver.options import ReceiverOptions
from tests.carbon_env import REPO_ROOT, free_port

SOME_OPTIONS = ["--bind", "127.0.0.2", "--line-port", "0", "--udp-port", "2003", "--flush-interval", "0.5",
                "--flush-size", "1000", "--max-buffered-points", "5000", "--stats-interval", "0",
                "--retries", "3", "--max-connections", "20", "--partial-timeout", "2.5", "--log-level", "debug",
                "--storage-schemas", "s.conf", "--metrics-file", "r.prom", "--prometheus-port", "9100",
                "--store", "sqlite:///x.db"]


def help_text(parser) -> str:
    return parser.format_help()


def test_bgl_receive_and_the_receiver_module_take_the_same_options():
    (receive,) = [action.choices["receive"] for action in bgl_parser()._actions if getattr(action, "choices", None)
                  and "receive" in action.choices]
    own = build_parser()
    # the same options with the same help (the usage line differs by the program's name only)
    assert help_text(receive).split("\noptions:\n", 1)[1] == help_text(own).split("\noptions:\n", 1)[1]
    for argv in ([], SOME_OPTIONS):
        mine = vars(own.parse_args(argv))
        theirs = vars(bgl_parser().parse_args(["receive", *argv]))
        assert mine == {key: theirs[key] for key in mine}, argv
    # every option of ReceiverOptions (but the host, not an option) was compared above
    fields = {field.name for field in dataclasses.fields(ReceiverOptions)} - {"host"}
    assert set(vars(own.parse_args([]))) == fields | {"log_level", "store"}


def receiver_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def test_importing_the_receiver_entry_does_not_import_the_cli():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, biggraphite_like.receiver.__main__, biggraphite_like.receiver.command;"
                               " print(sorted(m for m in sys.modules if m.startswith('biggraphite_like.')))"],
        env=receiver_env(), capture_output=True, text=True, timeout=120, check=True).stdout
    assert "biggraphite_like.receiver.command" in loaded and "biggraphite_like.cli" not in loaded, loaded


def test_the_receiver_module_serves_a_store_from_the_environment_without_the_cli(tmp_path):
    """`python -X importtime -m biggraphite_like.receiver` run as `bgl run` runs it: the store
    from $BGL_STORE (not on its command line), a point stored, stopped by SIGTERM with status
    0; no module of the CLI package imported on the way."""
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    line_port = free_port()
    command = [sys.executable, "-X", "importtime", "-m", "biggraphite_like.receiver", "--line-port", str(line_port),
               "--pickle-port", "0", "--carbonlink-port", "0", "--stats-interval", "0", "--flush-interval", "0.2"]
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "wb") as out_file, open(err, "wb") as err_file:
        process = subprocess.Popen(command, stdout=out_file, stderr=err_file, stdin=subprocess.DEVNULL,
                                   env=dict(receiver_env(), BGL_STORE=url))
    try:
        deadline = time.monotonic() + 60
        while "listening:" not in out.read_text():
            assert process.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
            time.sleep(0.05)
        assert url not in open(f"/proc/{process.pid}/cmdline").read()
        now = int(time.time())
        with socket.create_connection(("127.0.0.1", line_port), timeout=30) as sock:
            sock.sendall(f"entry.metric 42 {now}\n".encode())
        deadline = time.monotonic() + 60
        accessor = Accessor.from_url(url)
        try:
            while accessor.get_metric("entry.metric") is None:
                assert time.monotonic() < deadline, err.read_text()[-3000:]
                time.sleep(0.2)
            values = accessor.fetch(["entry.metric"], now - 60, now + 60, now=now + 60)["entry.metric"].values
        finally:
            accessor.close()
        assert [v for v in values.tolist() if v == v] == [42.0]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    imported = [line.rsplit("|", 1)[1].strip() for line in err.read_text().splitlines()
                if line.startswith("import time:") and "|" in line]
    assert "biggraphite_like.receiver.command" in imported
    assert not [name for name in imported if name.startswith("biggraphite_like.cli")], imported
