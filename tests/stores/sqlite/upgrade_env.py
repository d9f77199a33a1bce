"""Reading an upgraded store's rows with plain sqlite3, and `bgl syncdb` as a process: shared
by the upgrade tests."""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

BGL = shutil.which("bgl", path=os.path.dirname(sys.executable)) or shutil.which("bgl")


def rows(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def syncdb(path: Path, env: dict) -> None:
    process = subprocess.run([BGL, "--store", f"sqlite://{path}", "syncdb"], env=env, capture_output=True,
                             text=True, timeout=120)
    assert process.returncode == 0, process.stderr
