"""`bgl` run as a real process by the CLI tests: on a store, checked, or on a pseudo-terminal."""
from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
import threading

BGL = shutil.which("bgl", path=os.path.dirname(sys.executable)) or shutil.which("bgl")


def bgl(env, url, *args, stdin=None) -> subprocess.CompletedProcess:
    return subprocess.run([BGL, "--store", url, *args], input=stdin, env=env, capture_output=True, text=True, timeout=120)


def ok(process):
    assert process.returncode == 0, (process.args, process.stdout, process.stderr)
    return process


def fails(process, *fragments):
    assert process.returncode != 0, (process.args, process.stdout, process.stderr)
    for fragment in fragments:
        assert fragment in process.stderr, (fragment, process.stderr)
    return process


def run_in_pty(env, args) -> tuple[int, str, str]:
    """Run bgl with stderr on a pseudo-terminal; returns (status, stdout, terminal output)."""
    master, slave = pty.openpty()
    process = subprocess.Popen([BGL, *args], stdout=subprocess.PIPE, stderr=slave, env=env, text=True)
    os.close(slave)
    chunks: list[bytes] = []

    def drain():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the other side is closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    stdout = process.stdout.read()
    status = process.wait(timeout=300)
    reader.join(30)
    os.close(master)
    return status, stdout, b"".join(chunks).decode(errors="replace")
