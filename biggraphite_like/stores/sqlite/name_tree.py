"""The SQLite store's name tree: names as a trie of interned components.

A directory is a node, `directories` (key, parent directory key, component id); a metric
is a leaf under its parent directory, `metrics` (key, parent directory key, leaf id, ...).
Neither row holds its full name: names are rebuilt from the directories' paths, which a
process caches both ways (path -> key, key -> path) for the directories it looks up (not
those it inserts, see `NameTree.keys`). The root is key 0 (no row).

Keys of both tables come from AUTOINCREMENT and are never reused, and a row never changes
its parent or component, so key -> path stays true for as long as the key exists; path ->
key can go stale when a directory is deleted (and made again under a new key), so it is
dropped whenever `store_state.directory_deletions` changes (SQLiteStore._check_deletions),
and on a rollback (`forget`), like every cache of ids. A deleted directory that still has
children stays as a hidden node (`hidden` = 1): globs of directories and the directory
reads skip it, metrics under it keep their names; it goes once its last child does.

Metric metadata (retention, aggregator, xFilesFactor) is interned in `metadatas`: a store
holds a handful of distinct ones, and the retention text alone was 44 bytes a metric.
See docs/format/sqlite.md#names-metrics-directories-and-metadatas-the-name-tree.
"""
from __future__ import annotations

import json
import sqlite3
from typing import Iterable

from biggraphite_like.stores.sqlite.name_strings import NameStrings

ROOT = 0  # the parent key of top-level names
CACHE_LIMIT = 1_000_000  # paths cached (each way; ~200 bytes each); past it the cache starts again
_LOOKUPS = 20_000  # (parent, component) pairs per json_each() lookup

SCHEMA_SQL = [
    "-- Metric metadata, interned: metrics.metadata is the id of its (retention, aggregator,",
    "-- xfilesfactor) row; rows are never deleted nor changed.",
    "CREATE TABLE IF NOT EXISTS metadatas (\n  id INTEGER PRIMARY KEY,\n  retention TEXT NOT NULL,\n"
    "  aggregator TEXT NOT NULL,\n  xfilesfactor REAL NOT NULL,\n  UNIQUE (retention, aggregator, xfilesfactor)\n);",
    "-- The name tree (biggraphite_like.stores.sqlite.name_tree): a directory is a node under its",
    "-- parent directory (key 0: the root), named by one interned component; hidden = 1: deleted",
    "-- while it still had children (skipped by directory globs and reads). No full name is stored.",
    "CREATE TABLE IF NOT EXISTS directories (\n  key INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  parent INTEGER NOT NULL,\n  component INTEGER NOT NULL,\n  hidden INTEGER NOT NULL DEFAULT 0\n);",
    "CREATE UNIQUE INDEX IF NOT EXISTS directories_child ON directories (parent, component);",
    "-- the inverted index of components: globs with `**` or leading wildcards start from a literal",
    "CREATE INDEX IF NOT EXISTS directories_component ON directories (component);",
    "CREATE INDEX IF NOT EXISTS directories_hidden ON directories (key) WHERE hidden;",
    "-- A metric is a leaf of the tree: its parent directory's key and its last component's id.",
    "CREATE TABLE IF NOT EXISTS metrics (\n  key INTEGER PRIMARY KEY AUTOINCREMENT,\n"
    "  parent INTEGER NOT NULL,\n  leaf INTEGER NOT NULL,\n  metadata INTEGER NOT NULL,\n"
    "  created_on INTEGER NOT NULL DEFAULT 0,\n  updated_on INTEGER NOT NULL DEFAULT 0,\n"
    "  read_on INTEGER NOT NULL DEFAULT 0\n);",
    "CREATE UNIQUE INDEX IF NOT EXISTS metrics_child ON metrics (parent, leaf);",
    "CREATE INDEX IF NOT EXISTS metrics_leaf ON metrics (leaf);",
    "-- Full names for people and scripts (sqlite3 FILE.db 'SELECT name FROM named_metrics'): views,",
    "-- no bytes; each query rebuilds the whole tree (the store itself caches paths instead).",
    "CREATE VIEW IF NOT EXISTS named_directories (key, name, hidden) AS\n"
    "  WITH RECURSIVE tree (key, name, hidden) AS (\n"
    "    SELECT d.key, s.value, d.hidden FROM directories AS d JOIN name_strings AS s ON s.id = d.component"
    " WHERE d.parent = 0\n"
    "    UNION ALL\n"
    "    SELECT d.key, tree.name || '.' || s.value, d.hidden FROM tree JOIN directories AS d ON d.parent = tree.key\n"
    "    JOIN name_strings AS s ON s.id = d.component)\n"
    "  SELECT key, name, hidden FROM tree;",
    "CREATE VIEW IF NOT EXISTS named_metrics (key, name, retention, aggregator, xfilesfactor, created_on,"
    " updated_on, read_on) AS\n"
    "  SELECT m.key, CASE WHEN m.parent = 0 THEN s.value ELSE p.name || '.' || s.value END, d.retention,"
    " d.aggregator,\n"
    "    d.xfilesfactor, m.created_on, m.updated_on, m.read_on FROM metrics AS m\n"
    "    JOIN name_strings AS s ON s.id = m.leaf LEFT JOIN named_directories AS p ON p.key = m.parent\n"
    "    LEFT JOIN metadatas AS d ON d.id = m.metadata;",
]

# a metric's row as get_metrics and scans read it (its name is rebuilt from parent and leaf)
METRIC_SELECT = ("SELECT m.key, m.parent, s.value, d.retention, d.aggregator, d.xfilesfactor, m.created_on,"
                 " m.updated_on, m.read_on FROM metrics AS m JOIN name_strings AS s ON s.id = m.leaf"
                 " LEFT JOIN metadatas AS d ON d.id = m.metadata")


def join(parent: str, component: str) -> str:
    """The name of component under the directory parent ('' for the root)."""
    return f"{parent}.{component}" if parent else component


def split(name: str) -> tuple[str, str]:
    """(parent path, last component) of a name."""
    parent, _, last = name.rpartition(".")
    return parent, last


class NameTree:
    """One store's caches of directory keys and paths, and of metadata ids."""

    limit = CACHE_LIMIT

    def __init__(self) -> None:
        self._keys: dict[str, int] = {"": ROOT}
        self._paths: dict[int, str] = {ROOT: ""}
        self._metadatas: dict[tuple, int] = {}

    def forget(self) -> None:
        """Drop every cached key, path and metadata id (after a rollback)."""
        self.forget_keys()
        self._paths = {ROOT: ""}
        self._metadatas.clear()

    def forget_keys(self) -> None:
        """Drop the path -> key cache (a directory was deleted: its path may come back under another key)."""
        self._keys = {"": ROOT}

    def _remember(self, path: str, key: int) -> None:
        self._keys[path] = key
        self._paths[key] = path

    # -- path -> key ------------------------------------------------------------------
    def keys(self, conn: sqlite3.Connection, strings: NameStrings, paths: Iterable[str],
             create: bool = False) -> dict[str, int]:
        """Keys of the directories at paths (hidden ones too); with create (inside a write
        transaction), the missing ones and their ancestors are inserted, visible. Without,
        paths with no directory are left out. Read the answer only (it may be the cache).

        Directories found are cached; those inserted are not: a writer creating names
        rarely needs a new directory's key again (a later batch under it looks it up, and
        caches it then), and caching every one kept a path string and two entries for
        each (about 180 bytes a directory: 18 MiB for the receiver's 100,000 new metrics of
        the peer bench, a directory each, before any was needed again)."""
        known = self._keys
        paths = paths if isinstance(paths, set) else set(paths)
        if create and not self._cached_keys_exist(conn, paths):
            self.forget_keys()  # a read in another thread cached a key from before a deletion
            known = self._keys
        todo = {p for p in paths if p not in known}
        if not todo:
            return known
        if len(known) + len(todo) > self.limit:
            self.forget_keys()
            known = self._keys
        levels: dict[int, dict[str, tuple[str, str]]] = {}  # depth: {path: (parent path, last component)}
        for path in todo:
            while path not in known:
                level = levels.setdefault(path.count("."), {})
                if path in level:  # an ancestor of an earlier path
                    break
                parent, _, last = path.rpartition(".")
                level[path] = (parent, last)
                path = parent
        components = {last for level in levels.values() for _, last in level.values()}
        ids = strings.ids(conn, components) if create else strings.lookup(conn, components)
        inserted: dict[str, int] = {}  # this call's new directories (not cached)
        for depth in sorted(levels):
            wanted = [(p, known[parent] if parent in known else inserted[parent], ids[last])
                      for p, (parent, last) in sorted(levels[depth].items())
                      if (parent in known or parent in inserted) and last in ids]
            self._lookup(conn, wanted)
            if create:
                inserted.update(self._insert(conn, [w for w in wanted if w[0] not in known]))
        if not inserted:
            return known
        return {path: known[path] if path in known else inserted[path] for path in paths}

    def _cached_keys_exist(self, conn: sqlite3.Connection, paths: set[str]) -> bool:
        """Whether every cached key a creation under paths would use (theirs and their
        ancestors') still has its row: one indexed query before inserting under them."""
        known, keys, seen = self._keys, set(), set()
        for path in paths:
            while path and path not in seen:
                seen.add(path)
                if path in known:
                    keys.add(known[path])
                path = path.rpartition(".")[0]
        if not keys:
            return True
        found = conn.execute("SELECT count(*) FROM directories WHERE key IN (SELECT value FROM json_each(?))",
                             (json.dumps(sorted(keys)),)).fetchone()[0]
        return found == len(keys)

    def _lookup(self, conn: sqlite3.Connection, wanted: list[tuple[str, int, int]]) -> None:
        for start in range(0, len(wanted), _LOOKUPS):
            chunk = wanted[start:start + _LOOKUPS]
            rows = conn.execute(
                "SELECT j.key, d.key FROM json_each(?) AS j JOIN directories AS d"
                " ON d.parent = j.value ->> 0 AND d.component = j.value ->> 1",
                (json.dumps([[parent, component] for _, parent, component in chunk]),)).fetchall()
            for index, key in rows:
                self._remember(chunk[index][0], key)

    def _insert(self, conn: sqlite3.Connection, missing: list[tuple[str, int, int]]) -> dict[str, int]:
        """Insert directories (path, parent key, component id); their keys by path."""
        keys: dict[str, int] = {}
        for start in range(0, len(missing), _LOOKUPS):
            chunk = missing[start:start + _LOOKUPS]
            by_pair = {(parent, component): path for path, parent, component in chunk}
            rows = conn.execute(
                "INSERT INTO directories (parent, component) SELECT j.value ->> 0, j.value ->> 1 FROM json_each(?) AS j"
                " RETURNING parent, component, key",
                (json.dumps([[parent, component] for _, parent, component in chunk]),)).fetchall()
            for parent, component, key in rows:
                keys[by_pair[parent, component]] = key
        return keys

    # -- key -> path ------------------------------------------------------------------
    def paths(self, conn: sqlite3.Connection, keys: Iterable[int]) -> dict[int, str]:
        """Paths of the directories with keys (those that exist); the cache itself is returned."""
        known = self._paths
        missing = {k for k in keys if k not in known}
        if not missing:
            return known
        if len(known) + len(missing) > self.limit:
            self._paths = known = {ROOT: ""}
            missing = set(keys)
        rows: dict[int, tuple[int, str]] = {}
        while missing:
            found = conn.execute("SELECT d.key, d.parent, s.value FROM directories AS d JOIN name_strings AS s"
                                 " ON s.id = d.component WHERE d.key IN (SELECT value FROM json_each(?))",
                                 (json.dumps(sorted(missing)),)).fetchall()
            for key, parent, component in found:
                rows[key] = (parent, component)
            missing = {parent for parent, _ in rows.values() if parent not in known and parent not in rows}
        for key in rows:
            chain = []
            while key not in known and key in rows:
                chain.append(key)
                key = rows[key][0]
            if key not in known:
                continue  # an orphan (its parent row is gone): no path
            for child in reversed(chain):
                known[child] = join(known[rows[child][0]], rows[child][1])
        return known

    # -- metadata ids -----------------------------------------------------------------
    def metadata_ids(self, conn: sqlite3.Connection, fields: Iterable[tuple[str, str, float]]) -> dict[tuple, int]:
        """Ids of (retention, aggregator, xfilesfactor) rows, inserting new ones (inside a
        write transaction). The cache itself is returned: read it only."""
        known = self._metadatas
        for row in set(fields).difference(known):
            conn.execute("INSERT OR IGNORE INTO metadatas (retention, aggregator, xfilesfactor) VALUES (?, ?, ?)", row)
            known[row] = conn.execute("SELECT id FROM metadatas WHERE retention = ? AND aggregator = ?"
                                      " AND xfilesfactor = ?", row).fetchone()[0]
        return known
