"""bench/names_floor.py at a small size: the flusher's work creates every name and tells
the time inside SQLite from the Python around it; SQLite alone writes every metrics row."""
from __future__ import annotations

import functools
import sqlite3

from bench import names_floor


def test_the_flusher_part_creates_every_name_and_splits_sqlite_from_python(tmp_path):
    figures = names_floor.flusher(2_500, 1_000, str(tmp_path))
    with sqlite3.connect(tmp_path / "bgl.db") as conn:
        assert conn.execute("SELECT count(*) FROM metrics").fetchone()[0] == 2_500
    assert 0 < figures["sqlite_seconds"] < figures["thread_cpu_seconds"]
    assert figures["gil_seconds"] == figures["thread_cpu_seconds"] - figures["sqlite_seconds"]
    assert any(sql.startswith("INSERT INTO metrics") for sql in figures["sqlite_by_statement"])
    assert not isinstance(sqlite3.connect, functools.partial)  # the timed connections are put back


def test_the_rows_part_writes_every_row_with_a_short_last_statement(tmp_path):
    figures = names_floor.rows(2_500, str(tmp_path))
    with sqlite3.connect(tmp_path / "rows.db") as conn:
        assert conn.execute("SELECT count(*), min(key), max(key), count(DISTINCT leaf) FROM metrics").fetchone() == (
            2_500, 1, 2_500, 10)
    assert figures["cpu_seconds"] > 0
