"""The tag index of the SQLite store (see biggraphite_like.tags.index).

Tables (schema/sqlite.sql): `tag_names` interns tag names with their series count,
`tag_values` interns each tag=value pair (id, tag id, value) with its series count,
`tag_postings` (chunk, value id, series id) lists the series of each pair, `tagged_series`
holds the canonical paths with their time of last write. `=` is one index lookup, a
prefix is a range over (tag id, value), autocomplete a range with a limit. Rows of names
and values whose count fell to 0 stay (their ids are reused) and are never listed.

Postings lead with the chunk of their series id (series id >> 16): series get increasing
ids, so a batch of new series appends its postings to one region of the B-tree instead
of one page per tag=value pair it touches (with (value id, series id) keys, a batch of
10,000 series rewrote most of the table's pages: write-ahead-log traffic grew with the
index). Reading a pair's postings is one seek per chunk (16 for a million series).
Stores written with the earlier (value id, series id) layout are converted on first use.

Indexing maps the tag=value pairs of a batch to their ids in Python (_PairIds: committed
ids never change, so a process keeps them) and writes the postings in key order.
"""
from __future__ import annotations

import collections
import json
from typing import TYPE_CHECKING, Mapping, Sequence

from biggraphite_like.tags.index import TagIndex, range_conditions
from biggraphite_like.tags.series import tags_of_path

if TYPE_CHECKING:
    from biggraphite_like.stores.sqlite import SQLiteStore

_CHUNK = 500
CHUNK_BITS = 16  # series per postings chunk: 65,536
_BATCH = 50_000  # series per bulk round of add_series
MAX_CACHED_PAIRS = 1_000_000  # tag=value ids a process keeps (about 120 MB when full: ~120 bytes a pair)

POSTINGS_SQL = ("CREATE TABLE IF NOT EXISTS tag_postings (\n  chunk INTEGER NOT NULL,\n  value_id INTEGER NOT NULL,\n"
                "  series_id INTEGER NOT NULL,\n  PRIMARY KEY (chunk, value_id, series_id)\n) WITHOUT ROWID;")
SCHEMA_SQL = [
    "-- Graphite tags (biggraphite_like.stores.sqlite.tags): interned tag names and tag=value",
    "-- pairs with their series counts, postings per pair, tagged series by canonical path.",
    "CREATE TABLE IF NOT EXISTS tag_names (\n  id INTEGER PRIMARY KEY,\n  tag TEXT NOT NULL UNIQUE,\n"
    "  series INTEGER NOT NULL DEFAULT 0\n);",
    "CREATE TABLE IF NOT EXISTS tag_values (\n  id INTEGER PRIMARY KEY,\n  tag_id INTEGER NOT NULL,\n"
    "  value TEXT NOT NULL,\n  series INTEGER NOT NULL DEFAULT 0,\n  UNIQUE (tag_id, value)\n);",
    POSTINGS_SQL,
    "CREATE TABLE IF NOT EXISTS tagged_series (\n  id INTEGER PRIMARY KEY,\n  path TEXT NOT NULL UNIQUE,\n"
    "  updated_on INTEGER NOT NULL\n);",
]


def _range(column: str, prefix: str, after: str | None, limit: int) -> tuple[str, list]:
    """Conditions of an ordered, limited range read (see range_conditions)."""
    sql, params = range_conditions(column, prefix, after)
    return sql + f" ORDER BY {column} LIMIT ?", params + [limit]


class _PairIds:
    """Ids of tag=value pairs, keyed `tag=value` as a canonical path spells them (the
    name as `name=<metric>`). Committed ids never change (tag_names and tag_values rows
    are never deleted nor renumbered), so a process keeps those it has seen: indexing then
    costs no SQL lookup for a pair seen before. Only what a transaction begun by
    add_series read or created is learned, once it committed (`learn`); pairs created
    inside a caller's transaction are looked up again later, as it may roll back."""

    def __init__(self, limit: int = MAX_CACHED_PAIRS):
        self.limit = limit
        self._ids: dict[str, int] = {}

    def learn(self, found: Mapping[str, int]) -> None:
        if len(self._ids) + len(found) <= self.limit:
            self._ids.update(found)

    def resolve(self, conn, pairs: list[str], learned: dict[str, int]) -> dict[str, int]:
        """Ids of pairs (distinct), interning those the store does not have; the ones read
        or made in SQL are added to learned."""
        cached = self._ids
        ids, missing = {}, []
        for pair in pairs:
            value_id = cached.get(pair)
            if value_id is None:
                missing.append(pair)
            else:
                ids[pair] = value_id
        if missing:
            split = json.dumps([pair.split("=", 1) for pair in missing])
            conn.execute("INSERT OR IGNORE INTO tag_names (tag) SELECT DISTINCT value ->> 0 FROM json_each(?)",
                         (split,))
            conn.execute("INSERT OR IGNORE INTO tag_values (tag_id, value) SELECT n.id, j.value ->> 1"
                         " FROM json_each(?) j JOIN tag_names n ON n.tag = j.value ->> 0", (split,))
            found = {missing[key]: value_id for key, value_id in conn.execute(
                "SELECT j.key, v.id FROM json_each(?) j JOIN tag_names n ON n.tag = j.value ->> 0"
                " JOIN tag_values v ON v.tag_id = n.id AND v.value = j.value ->> 1", (split,))}
            ids.update(found)
            learned.update(found)
        return ids


class SQLiteTagIndex(TagIndex):
    """Tags in the store's SQLite file, in its transactions."""

    intersects = True

    def __init__(self, store: "SQLiteStore"):
        self.store = store
        self._layout_checked = False
        self._ids = _PairIds()

    def _ready(self) -> None:
        """The schema exists and the postings have the chunked layout (converted once)."""
        self.store._check_schema()
        if self._layout_checked:
            return
        with self.store._errors("check the tag postings layout"):
            conn = self.store._conn
            if not conn.execute("SELECT 1 FROM pragma_table_info('tag_postings') WHERE name = 'chunk'").fetchone():
                with self.store.write_batch():
                    if not conn.execute("SELECT 1 FROM pragma_table_info('tag_postings')"
                                        " WHERE name = 'chunk'").fetchone():
                        conn.execute("ALTER TABLE tag_postings RENAME TO tag_postings_unchunked")
                        conn.execute(POSTINGS_SQL)
                        conn.execute(f"INSERT INTO tag_postings (chunk, value_id, series_id) SELECT series_id >>"
                                     f" {CHUNK_BITS}, value_id, series_id FROM tag_postings_unchunked ORDER BY 1, 2, 3")
                        conn.execute("DROP TABLE tag_postings_unchunked")
        self._layout_checked = True

    def _chunks(self) -> str:
        """JSON list of the postings chunks in use (bound to `chunk IN json_each(?)`)."""
        top = self._query("read tagged series", "SELECT coalesce(max(id), 0) FROM tagged_series")[0][0]
        return json.dumps(list(range((top >> CHUNK_BITS) + 1)))

    def _query(self, what: str, sql: str, params: Sequence = ()) -> list[tuple]:
        self._ready()
        with self.store._errors(what):
            return self.store._conn.execute(sql, params).fetchall()

    def _tag_id(self, tag: str) -> int | None:
        row = self.store._conn.execute("SELECT id FROM tag_names WHERE tag = ?", (tag,)).fetchone()
        return None if row is None else row[0]

    # -- writes ------------------------------------------------------------------------
    def add_series(self, paths: Sequence[str], now: int) -> int:
        """Bulk, per batch of _BATCH series: the pairs of the paths are mapped to their ids
        in Python (self._ids, see _PairIds), postings are written sorted by their key with
        one executemany, counts with one UPDATE per distinct pair; only pairs never seen
        by this process cost SQL lookups."""
        if not paths:
            return 0
        self._ready()
        conn = self.store._conn
        outermost = not conn.in_transaction  # rows read or made here are committed when it ends
        learned: dict[str, int] = {}
        new = 0
        with self.store.write_batch(), self.store._errors("index tagged series"):
            paths = list(dict.fromkeys(paths))
            for start in range(0, len(paths), _BATCH):
                new += self._add_batch(conn, paths[start:start + _BATCH], now, learned)
        if outermost:
            self._ids.learn(learned)
        return new

    def _add_batch(self, conn, paths: list[str], now: int, learned: dict[str, int]) -> int:
        batch = json.dumps(paths)
        existing = {row[0] for row in conn.execute(
            "SELECT s.path FROM json_each(?) j JOIN tagged_series s ON s.path = j.value", (batch,))}
        if existing:
            conn.execute("UPDATE tagged_series SET updated_on = ? WHERE path IN (SELECT value FROM json_each(?))",
                         (now, json.dumps(sorted(existing))))
            paths = [p for p in paths if p not in existing]
            if not paths:
                return 0
            batch = json.dumps(paths)
        # The writer lock is held (write_batch): ids from max(id) + 1 are ours to give.
        first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM tagged_series").fetchone()[0]
        conn.execute("INSERT INTO tagged_series (id, path, updated_on) SELECT ? + key, value, ? FROM json_each(?)",
                     (first, now, batch))
        # series ids of each pair (`tag=value` as in the path; the name as `name=<metric>`), ascending
        series_of: dict[str, list[int]] = collections.defaultdict(list)
        for series_id, path in enumerate(paths, first):
            pairs = path.split(";")
            pairs[0] = "name=" + pairs[0]
            for pair in pairs:
                series_of[pair].append(series_id)
        ids = self._ids.resolve(conn, list(series_of), learned)
        # In key order (chunk, value id, series id): the batch's postings go to its chunks'
        # regions in one pass (executemany of a generator: ~1.5 us a posting; INSERT ... SELECT
        # over nested json_each measured 9x slower into the full table).
        keyed = sorted((ids[pair], series) for pair, series in series_of.items())
        first_chunk, last_chunk = first >> CHUNK_BITS, (first + len(paths) - 1) >> CHUNK_BITS
        for chunk in range(first_chunk, last_chunk + 1):
            groups = keyed if first_chunk == last_chunk else [
                (v, [s for s in series if s >> CHUNK_BITS == chunk]) for v, series in keyed]
            conn.executemany("INSERT INTO tag_postings (chunk, value_id, series_id) VALUES (?, ?, ?)",
                             ((chunk, value_id, series_id) for value_id, series in groups for series_id in series))
        conn.execute("UPDATE tag_values SET series = series + j.value ->> 1 FROM json_each(?) j"
                     " WHERE tag_values.id = j.value ->> 0", (json.dumps([(v, len(s)) for v, s in keyed]),))
        per_tag: dict[str, int] = {}
        for pair, series in series_of.items():
            tag = pair[:pair.index("=")]
            per_tag[tag] = per_tag.get(tag, 0) + len(series)
        conn.executemany("UPDATE tag_names SET series = series + ? WHERE tag = ?", [(n, t) for t, n in per_tag.items()])
        return len(paths)

    def remove_series(self, paths: Sequence[str]) -> int:
        if not paths:
            return 0
        self._ready()
        removed = 0
        with self.store.write_batch(), self.store._errors("remove tagged series"):
            conn = self.store._conn
            for path in dict.fromkeys(paths):
                row = conn.execute("SELECT id FROM tagged_series WHERE path = ?", (path,)).fetchone()
                if row is None:
                    continue
                series_id = row[0]
                for value_id, tag_id in self._value_ids_of(path):
                    deleted = conn.execute("DELETE FROM tag_postings WHERE chunk = ? AND value_id = ?"
                                           " AND series_id = ?", (series_id >> CHUNK_BITS, value_id, series_id)).rowcount
                    if deleted:
                        conn.execute("UPDATE tag_values SET series = series - 1 WHERE id = ?", (value_id,))
                        conn.execute("UPDATE tag_names SET series = series - 1 WHERE id = ?", (tag_id,))
                conn.execute("DELETE FROM tagged_series WHERE id = ?", (series_id,))
                removed += 1
        return removed

    def _value_ids_of(self, path: str) -> list[tuple[int, int]]:
        """(value id, tag id) of the pairs of a canonical path that are interned."""
        conn = self.store._conn
        found = []
        for tag, value in tags_of_path(path).items():
            row = conn.execute("SELECT v.id, v.tag_id FROM tag_values v JOIN tag_names n ON n.id = v.tag_id"
                               " WHERE n.tag = ? AND v.value = ?", (tag, value)).fetchone()
            if row is not None:
                found.append((row[0], row[1]))
        return found

    # -- reads -------------------------------------------------------------------------
    def series_times(self, paths: Sequence[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        paths = list(dict.fromkeys(paths))
        for start in range(0, len(paths), _CHUNK):
            chunk = paths[start:start + _CHUNK]
            found.update(self._query("read tagged series", "SELECT path, updated_on FROM tagged_series"
                                     f" WHERE path IN ({', '.join('?' * len(chunk))})", chunk))
        return found

    def values(self, tag: str, prefix: str = "", after: str | None = None, limit: int = 1000) -> list[tuple[str, int]]:
        sql, params = _range("v.value", prefix, after, limit)
        return self._query("read tag values", "SELECT v.value, v.series FROM tag_values v JOIN tag_names n"
                           " ON n.id = v.tag_id WHERE n.tag = ? AND v.series > 0" + sql, [tag, *params])

    def value_count(self, tag: str, value: str) -> int:
        rows = self._query("read a tag value", "SELECT v.series FROM tag_values v JOIN tag_names n ON n.id = v.tag_id"
                           " WHERE n.tag = ? AND v.value = ?", (tag, value))
        return rows[0][0] if rows else 0

    def tags(self, prefix: str = "", after: str | None = None, limit: int = 1000) -> list[str]:
        sql, params = _range("tag", prefix, after, limit)
        return [r[0] for r in self._query("read tags", "SELECT tag FROM tag_names WHERE series > 0" + sql, params)]

    def postings(self, tag: str, values: Sequence[str]) -> list[str]:
        paths: list[str] = []
        values = list(values)
        for start in range(0, len(values), _CHUNK):
            chunk = values[start:start + _CHUNK]
            paths.extend(r[0] for r in self._query(
                "read tag postings",
                # CROSS JOIN: this order (tag, its values, their postings), whatever the statistics
                "SELECT s.path FROM tag_names n CROSS JOIN tag_values v ON v.tag_id = n.id CROSS JOIN tag_postings p"
                " ON p.chunk IN (SELECT value FROM json_each(?)) AND p.value_id = v.id"
                " JOIN tagged_series s ON s.id = p.series_id"
                f" WHERE n.tag = ? AND v.value IN ({', '.join('?' * len(chunk))})", [self._chunks(), tag, *chunk]))
        return paths

    def postings_of_all(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The rarest pair's postings, each probed (primary key lookups) in the others'."""
        value_id = "(SELECT v.id FROM tag_values v JOIN tag_names n ON n.id = v.tag_id WHERE n.tag = ? AND v.value = ?)"
        joins = "".join(f" JOIN tag_postings p{i} ON p{i}.chunk = p0.chunk AND p{i}.value_id = {value_id}"
                        f" AND p{i}.series_id = p0.series_id" for i in range(1, len(pairs)))
        params = [part for pair in pairs[1:] for part in pair] + [self._chunks(), *pairs[0]]
        return [row[0] for row in self._query(
            "intersect tag postings", f"SELECT s.path FROM tag_postings p0{joins}"
            " JOIN tagged_series s ON s.id = p0.series_id"
            f" WHERE p0.chunk IN (SELECT value FROM json_each(?)) AND p0.value_id = {value_id}", params)]

    def scan_series(self, after: str | None = None, limit: int = 1000) -> list[tuple[str, int]]:
        return self._query("scan tagged series", "SELECT path, updated_on FROM tagged_series WHERE path > ?"
                           " ORDER BY path LIMIT ?", ("" if after is None else after, limit))

    def counts(self) -> dict[str, int]:
        row = self._query("count tags", "SELECT (SELECT count(*) FROM tagged_series),"
                          " (SELECT count(*) FROM tag_names WHERE series > 0),"
                          " (SELECT count(*) FROM tag_values WHERE series > 0)")[0]
        return {"tagged_series": row[0], "tags": row[1], "tag_values": row[2]}

    # -- repair ------------------------------------------------------------------------
    def repair(self, dry_run: bool = False) -> dict[str, int]:
        self._ready()
        with self.store.write_batch(), self.store._errors("repair the tag index"):
            conn = self.store._conn
            orphans = conn.execute("SELECT count(*) FROM tag_postings WHERE series_id NOT IN"
                                   " (SELECT id FROM tagged_series)").fetchone()[0]
            have = dict(conn.execute("SELECT series_id, count(*) FROM tag_postings GROUP BY series_id"))
            missing = [(series_id, path) for series_id, path in conn.execute("SELECT id, path FROM tagged_series")
                       if have.get(series_id, 0) != len(tags_of_path(path))]
            before = conn.execute("SELECT id, series FROM tag_values").fetchall()
            if not dry_run:
                conn.execute("DELETE FROM tag_postings WHERE series_id NOT IN (SELECT id FROM tagged_series)")
                for series_id, path in missing:
                    for tag, value in tags_of_path(path).items():
                        conn.execute("INSERT OR IGNORE INTO tag_names (tag) VALUES (?)", (tag,))
                        tag_id = self._tag_id(tag)
                        conn.execute("INSERT OR IGNORE INTO tag_values (tag_id, value) VALUES (?, ?)", (tag_id, value))
                        conn.execute("INSERT OR IGNORE INTO tag_postings (chunk, value_id, series_id) SELECT ?, id, ?"
                                     " FROM tag_values WHERE tag_id = ? AND value = ?",
                                     (series_id >> CHUNK_BITS, series_id, tag_id, value))
                counted = dict(conn.execute("SELECT value_id, count(*) FROM tag_postings GROUP BY value_id"))
                wrong = [(counted.get(i, 0), i) for i, c in before if counted.get(i, 0) != c]
                conn.executemany("UPDATE tag_values SET series = ? WHERE id = ?", wrong)
                conn.execute("UPDATE tag_names SET series = (SELECT coalesce(sum(v.series), 0) FROM tag_values v"
                             " WHERE v.tag_id = tag_names.id)")
                fixed = len(wrong)
            else:
                fixed = 0
        return {"postings_without_series": orphans, "series_without_postings": len(missing), "counts_fixed": fixed}
