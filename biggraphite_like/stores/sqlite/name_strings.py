"""Interned name strings: the components of metric and directory names, each stored once
in `name_strings` and referred to by its integer id (seed 001's string ids): the name
tree's `directories.component` and `metrics.leaf` (see name_tree).

Ids never change and are never reused (rows are never deleted), so a process may cache
them for as long as it likes; only a rolled-back transaction can take back ids it handed
out (`NameStrings.forget`, which write_batch calls on every cache of ids the store has).
Strings reach SQLite as bound parameters (a JSON list of them, read with json_each).
"""
from __future__ import annotations

import json
import sqlite3
from typing import Iterable

CACHE_LIMIT = 1_000_000  # ids kept in memory per store and cache; past it the cache starts again

SCHEMA_SQL = [
    "-- Interned strings of names (biggraphite_like.stores.sqlite.name_strings): every component once;",
    "-- directories.component and metrics.leaf hold their ids.",
    "CREATE TABLE IF NOT EXISTS name_strings (\n  id INTEGER PRIMARY KEY,\n  value TEXT NOT NULL UNIQUE\n);",
    "INSERT OR IGNORE INTO name_strings (id, value) VALUES (0, '__END__');",
]


class NameStrings:
    """One store's cache of string ids; `ids` interns what it does not know yet. Other
    interned strings of the store (the tag index's tag=value pairs) extend it with their
    own `_intern`; write_batch makes every such cache `forget` on a rollback."""

    limit = CACHE_LIMIT  # ids kept; past it the cache starts again

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}

    def ids(self, conn: sqlite3.Connection, strings: Iterable[str]) -> dict[str, int]:
        """Ids of strings, interning the new ones (call inside a write transaction): two
        statements for the whole set, whatever its size. The cache itself is returned:
        read it, never change it."""
        known = self._ids
        wanted = strings if isinstance(strings, set) else set(strings)
        missing = list(wanted.difference(known))
        if missing:
            if len(known) + len(missing) > self.limit:
                known.clear()
                missing = list(wanted)
            known.update(self._intern(conn, missing))
        return known

    def lookup(self, conn: sqlite3.Connection, strings: Iterable[str]) -> dict[str, int]:
        """Ids of those of strings that are interned, interning nothing (reads). The cache
        itself is returned: read it, never change it."""
        known = self._ids
        missing = [s for s in set(strings) if s not in known]
        if missing:
            if len(known) + len(missing) > self.limit:
                known.clear()
            known.update(conn.execute("SELECT value, id FROM name_strings WHERE value IN"
                                      " (SELECT value FROM json_each(?))", (json.dumps(missing),)).fetchall())
        return known

    def _intern(self, conn: sqlite3.Connection, missing: list[str]) -> Iterable[tuple[str, int]]:
        """(string, id) of each of missing (distinct), inserting the new ones: the rows
        inserted come back from the INSERT, only the others are looked up."""
        found = conn.execute("INSERT OR IGNORE INTO name_strings (value) SELECT value FROM json_each(?)"
                             " RETURNING value, id", (json.dumps(missing),)).fetchall()
        if len(found) < len(missing):
            rest = set(missing).difference(value for value, _ in found)
            found += conn.execute("SELECT value, id FROM name_strings WHERE value IN (SELECT value FROM json_each(?))",
                                  (json.dumps(list(rest)),)).fetchall()
        return found

    def forget(self) -> None:
        """Drop every cached id (after a rollback, which may have taken some back)."""
        self._ids.clear()
