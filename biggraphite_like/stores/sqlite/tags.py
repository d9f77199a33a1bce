"""The tag index of the SQLite store (see biggraphite_like.tags.index).

Five tables of the store's file: interned tag names and tag=value pairs, the series count
of each pair, packed postings (a row holds up to 256 series of one pair in one chunk of
32,768 series ids, as two-byte offsets) and the tagged series by canonical path;
docs/format/sqlite.md#tags gives their columns, keys and invariants. Why so: interned
integer ids keep postings and counts small; packed postings let a batch of new series
write one row per pair and chunk, in its chunk's region of the B-tree, not one row per
series and pair; `=` is one lookup, a prefix a range over (tag id, value).

Indexing maps a batch's pairs to their ids in Python (_PairIds: ids never change once
committed; a rollback makes the store forget them) and groups the postings with numpy; a
transaction indexing BULK_SERIES new series or more defers its checkpoint until the WAL
passes BULK_WAL_BYTES (store.defer_checkpoint). Measurements: bench/README.md, docs/tags.md.
"""
from __future__ import annotations

import functools
import json
import operator
import struct
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from biggraphite_like.errors import SchemaMissing, StoreError
from biggraphite_like.stores.sqlite.name_strings import NameStrings
from biggraphite_like.tags.index import SizedPairs, TagIndex, range_conditions
from biggraphite_like.tags.series import tags_of_path

if TYPE_CHECKING:
    from biggraphite_like.stores.sqlite import SQLiteStore

_CHUNK = 500
CHUNK_BITS = 15  # series per postings chunk: 32,768 (offsets fit in uint16 up to 16 bits)
_BATCH = 50_000  # series per bulk round of add_series (below a chunk: a round spans at most two)
ROW_SERIES = 256  # series a postings row holds at most: 512 bytes of offsets, never an overflow page
_READ_WHOLE = 128  # intersection: a list at most this many times the candidates is read whole, else probed
# (on a million series, p50 ms read whole / probed: 1,000 candidates in 333,000 8.0 / 3.8, in 100,000 1.7 /
# 2.6; 3,333 in 333,000 11.1 / 9.6, in 100,000 2.6 / 5.8; 333 in 100,000 1.5 / 1.5)
TAG_SLOT_BITS = 20  # _PairIds: tags of the pairs kept (at most MAX_CACHED_PAIRS < 2**20)
BULK_SERIES = 1000  # a write batch indexing at least this many new series defers its checkpoint ...
BULK_WAL_BYTES = 64 << 20  # ... until the WAL passes this (store.defer_checkpoint)
MAX_CACHED_PAIRS = 1_000_000  # tag=value ids a process keeps (about 120 MB when full: ~120 bytes a pair)

POSTINGS_SQL = ("CREATE TABLE IF NOT EXISTS tag_postings (\n  chunk INTEGER NOT NULL,\n  value_id INTEGER NOT NULL,\n"
                "  first INTEGER NOT NULL,\n  offsets BLOB NOT NULL,\n  PRIMARY KEY (chunk, value_id, first)\n"
                ") WITHOUT ROWID;")
COUNTS_SQL = "CREATE TABLE IF NOT EXISTS tag_value_counts (\n  id INTEGER PRIMARY KEY,\n  series INTEGER NOT NULL\n);"
TAG_TABLES = ("tag_names", "tag_values", "tag_value_counts", "tag_postings", "tagged_series")
SCHEMA_SQL = [
    "-- Graphite tags (biggraphite_like.stores.sqlite.tags): interned tag names and tag=value",
    "-- pairs, series counts per pair, postings per pair, tagged series by canonical path.",
    "CREATE TABLE IF NOT EXISTS tag_names (\n  id INTEGER PRIMARY KEY,\n  tag TEXT NOT NULL UNIQUE,\n"
    "  series INTEGER NOT NULL DEFAULT 0\n);",
    "CREATE TABLE IF NOT EXISTS tag_values (\n  id INTEGER PRIMARY KEY,\n  tag_id INTEGER NOT NULL,\n"
    "  value TEXT NOT NULL,\n  UNIQUE (tag_id, value)\n);",
    "-- Series count of each tag=value pair (tag_values.id), narrow: a batch updates thousands.",
    COUNTS_SQL,
    "-- Postings, packed: up to 256 series of one tag=value pair in one chunk of 32,768 series",
    "-- ids (chunk = id >> 15), as offsets in the chunk (uint16 little-endian, ascending); first",
    "-- is the lowest id of the row, and the rows of a pair in a chunk hold disjoint ranges of ids.",
    POSTINGS_SQL,
    "CREATE TABLE IF NOT EXISTS tagged_series (\n  id INTEGER PRIMARY KEY,\n  path TEXT NOT NULL UNIQUE,\n"
    "  updated_on INTEGER NOT NULL\n);",
]


def _chunks(chunk_bits: int) -> str:
    """The postings chunks in use, a recursive CTE: `chunk IN chunks` seeks each chunk's rows of a pair."""
    return ("chunks (chunk) AS (SELECT 0 UNION ALL SELECT chunk + 1 FROM chunks"
            f" WHERE chunk < (SELECT coalesce(max(id), 0) FROM tagged_series) >> {chunk_bits})")


SERIES_IDS = "bgl_series_ids"
"""SQL function (registered on each connection that reads tags): the series ids of a postings
row (chunk, offsets) as a JSON array, for json_each: postings become rows inside a statement."""


@functools.lru_cache(maxsize=2)
def _sized_postings_sql(chunk_bits: int) -> str:
    """SQLiteTagIndex.sized_postings' statement: ?1 the pairs (JSON [[tag, value], ...]), ?2
    the most series the driver may cover."""
    return (f"WITH RECURSIVE {_chunks(chunk_bits)}, pairs (k, id, series) AS MATERIALIZED (SELECT j.key, v.id,"
            " c.series FROM json_each(?1) j JOIN tag_names n ON n.tag = j.value ->> 0 JOIN tag_values v"
            " ON v.tag_id = n.id AND v.value = j.value ->> 1 JOIN tag_value_counts c ON c.id = v.id),"
            " driver (id) AS (SELECT id FROM pairs WHERE (SELECT count(*) FROM pairs) = json_array_length(?1)"
            " ORDER BY series, k LIMIT 1)"
            " SELECT k, id, series FROM pairs"
            " UNION ALL SELECT NULL, s.path, NULL FROM driver JOIN tag_postings p ON p.chunk IN chunks"
            f" AND p.value_id = driver.id AND (SELECT min(series) FROM pairs) <= ?2, json_each({SERIES_IDS}(p.chunk,"
            " p.offsets)) j JOIN tagged_series s ON s.id = j.value")


def _series_ids(chunk: int, offsets: bytes) -> str:
    """SERIES_IDS: a postings row's series ids, a JSON array."""
    base = chunk << CHUNK_BITS
    return "[" + ",".join([str(base + o) for o in struct.unpack(f"<{len(offsets) >> 1}H", offsets)]) + "]"


def _range(column: str, prefix: str, after: str | None, limit: int) -> tuple[str, list]:
    """Conditions of an ordered, limited range read (see range_conditions)."""
    sql, params = range_conditions(column, prefix, after)
    return sql + f" ORDER BY {column} LIMIT ?", params + [limit]


class _PairIds(NameStrings):
    """Ids of tag=value pairs, keyed `tag=value` as a canonical path spells them (the name
    as `name=<metric>`): tag_names and tag_values rows are never deleted nor renumbered, so
    a process keeps the ids it has seen (at most MAX_CACHED_PAIRS) and a pair seen before
    costs no SQL; the store forgets them on a rollback (write_batch). Each is kept coded
    with a slot of its tag (`value id << TAG_SLOT_BITS | slot`, the tag `tags[slot]`):
    counting the series of each tag of a batch is then one numpy bincount."""

    limit = MAX_CACHED_PAIRS

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self._slots: dict[str, int] = {}

    def known(self) -> dict[str, int]:
        """The ids kept (read it, never change it): pairs missing from it go through ids()."""
        return self._ids

    def forget(self) -> None:
        super().forget()
        self.tags, self._slots = [], {}

    def _intern(self, conn, missing: list[str]) -> Iterable[tuple[str, int]]:
        if not self._ids:  # the cache starts again (at its limit): so do the slots
            self.tags, self._slots = [], {}
        split = [pair.split("=", 1) for pair in missing]
        encoded = json.dumps(split)
        conn.execute("INSERT OR IGNORE INTO tag_names (tag) SELECT DISTINCT value ->> 0 FROM json_each(?)", (encoded,))
        conn.execute("INSERT OR IGNORE INTO tag_values (tag_id, value) SELECT n.id, j.value ->> 1"
                     " FROM json_each(?) j JOIN tag_names n ON n.tag = j.value ->> 0", (encoded,))
        slots = self._slots
        for tag, _ in split:
            if tag not in slots:
                if len(self.tags) == 1 << TAG_SLOT_BITS:
                    raise StoreError(f"a batch of tagged series holds more than {1 << TAG_SLOT_BITS} distinct tags:"
                                     " index it in smaller batches")
                slots[tag] = len(self.tags)
                self.tags.append(tag)
        return [(missing[key], value_id << TAG_SLOT_BITS | slots[split[key][0]]) for key, value_id in conn.execute(
            "SELECT j.key, v.id FROM json_each(?) j JOIN tag_names n ON n.tag = j.value ->> 0"
            " JOIN tag_values v ON v.tag_id = n.id AND v.value = j.value ->> 1", (encoded,))]


class _ReadPairs(NameStrings):
    """(id, series count) of the tag=value pairs queries sized, keyed `tag=value`: the
    planner sizes every `=` term (value_count) just before their postings are read, which
    then need no lookup of their own. Ids never change once committed (forgotten on a
    rollback like every cache of ids); the counts kept only choose how an intersection
    reads a list (whole or probed), never what it answers."""

    def remember(self, key: str, value_id: int, count: int) -> None:
        if len(self._ids) >= self.limit:
            self._ids.clear()
        self._ids[key] = (value_id, count)  # type: ignore[assignment]

    def get(self, key: str) -> tuple[int, int] | None:
        return self._ids.get(key)  # type: ignore[return-value]


def _execute_rows(conn, head: str, row: str, params: list, tail: str = "") -> None:
    """`head row, row, ... tail` over params (the rows' parameters one after the other), up
    to 999 parameters a statement: many rows a statement cost about half what
    executemany's row a statement does."""
    width = row.count("?")
    per = max(1, 999 // width) * width
    full = len(params) - len(params) % per
    if full:
        conn.executemany(head + ", ".join([row] * (per // width)) + tail,
                         (params[i:i + per] for i in range(0, full, per)))
    if len(params) > full:
        conn.execute(head + ", ".join([row] * ((len(params) - full) // width)) + tail, params[full:])


def _interleaved(*columns: list) -> list:
    """The rows of columns (equal lengths) as one list of parameters, row after row."""
    params = [None] * (len(columns) * len(columns[0]))
    for k, column in enumerate(columns):
        params[k::len(columns)] = column
    return params


def _packed(series: np.ndarray, value_ids: np.ndarray) -> tuple[list, np.ndarray, np.ndarray]:
    """Postings rows of the (series id, value id) pairs, one per value id and chunk, as one
    list of parameters (chunk, value id, first, offsets, chunk, ...); and each row's value
    id and number of series."""
    if not series.size:
        return [], np.zeros(0, np.int64), np.zeros(0, np.int64)
    base = int(series.min()) >> CHUNK_BITS
    if (int(series.max()) >> CHUNK_BITS) - base >= 1 << 7:  # the key holds 7 bits of chunk: 128 at a time
        cut = series >> CHUNK_BITS < base + (1 << 7)
        rows, values, counts = _packed(series[cut], value_ids[cut])
        more_rows, more_values, more_counts = _packed(series[~cut], value_ids[~cut])
        return rows + more_rows, np.concatenate([values, more_values]), np.concatenate([counts, more_counts])
    value_bits = 56 - CHUNK_BITS
    if int(value_ids.max()) >> value_bits:
        raise StoreError(f"tag value id {int(value_ids.max())} is past the 2**{value_bits} ids the postings of chunks"
                         f" of 2**{CHUNK_BITS} series can hold")
    # one int64 key per posting, (chunk - base, value id, offset): sorting it groups the rows
    mask = (1 << CHUNK_BITS) - 1
    keys = np.sort((((series >> CHUNK_BITS) - base) << 56) | (value_ids << CHUNK_BITS) | (series & mask))
    groups = keys >> CHUNK_BITS
    starts = np.flatnonzero(np.concatenate(([True], groups[1:] != groups[:-1])))
    lengths = np.diff(np.append(starts, keys.size))
    if lengths.max() > ROW_SERIES:  # a group longer than a row holds: cut it every ROW_SERIES
        starts = np.flatnonzero((np.arange(keys.size) - np.repeat(starts, lengths)) % ROW_SERIES == 0)
    ends = np.append(starts[1:], keys.size)
    offsets = (keys & mask).astype("<u2")
    packed = offsets.tobytes()
    chunks = (groups[starts] >> value_bits) + base
    row_values = groups[starts] & ((1 << value_bits) - 1)
    firsts = (chunks << CHUNK_BITS) + offsets[starts]
    blobs = [packed[a:b] for a, b in zip((2 * starts).tolist(), (2 * ends).tolist())]
    return _interleaved(chunks.tolist(), row_values.tolist(), firsts.tolist(), blobs), row_values, ends - starts


def _among(candidates: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The candidates that are among ids (a binary search each: np.isin hashes both)."""
    if not ids.size:
        return ids
    if not (ids[1:] >= ids[:-1]).all():  # a pair's rows come in key order: its ids ascending, as a rule
        ids = np.sort(ids)
    return candidates[ids[np.minimum(np.searchsorted(ids, candidates), ids.size - 1)] == candidates]


def _insert_postings(conn, params: list) -> None:
    """Insert postings rows given as _packed's parameters."""
    _execute_rows(conn, "INSERT INTO tag_postings (chunk, value_id, first, offsets) VALUES ", "(?, ?, ?, ?)", params)


def _unpacked(rows: Sequence[tuple[int, bytes]]) -> np.ndarray:
    """Series ids of postings rows (chunk, offsets), in the rows' order."""
    if not rows:
        return np.zeros(0, np.int64)
    offsets = np.frombuffer(b"".join(r[1] for r in rows), "<u2").astype(np.int64)
    return offsets + np.repeat([r[0] << CHUNK_BITS for r in rows], [len(r[1]) >> 1 for r in rows])


def postings_layout(conn) -> str | None:
    """None when tag_postings is packed (or absent: syncdb creates it), else a description
    of the older layout it has."""
    columns = [row[0] for row in conn.execute("SELECT name FROM pragma_table_info('tag_postings')")]
    if not columns or "offsets" in columns:
        return None
    return "one row per series and tag=value pair" + (" (chunked)" if "chunk" in columns else "")


def counts_in_values(conn) -> bool:
    """Whether tag_values holds the series counts (the layout before tag_value_counts)."""
    return any(row[0] == "series" for row in conn.execute("SELECT name FROM pragma_table_info('tag_values')"))


def upgrade(conn) -> None:
    """syncdb's in-place upgrade of older tag tables, inside its transaction (after the
    schema statements): postings packed (convert_postings), counts moved out of tag_values
    into tag_value_counts."""
    convert_postings(conn)
    if counts_in_values(conn):
        conn.execute("INSERT INTO tag_value_counts (id, series) SELECT id, series FROM tag_values WHERE series != 0"
                     " ON CONFLICT (id) DO UPDATE SET series = excluded.series")
        conn.execute("ALTER TABLE tag_values DROP COLUMN series")


def convert_postings(conn) -> int:
    """Rewrite postings of an older layout (one row per series and pair, with or without
    a chunk column) packed, in place, inside the caller's transaction (syncdb's); how many
    postings were converted. The chunked layout is read one of its chunks at a time (its
    primary key leads with the chunk: memory bounded by a chunk's postings); the unchunked
    one, in series order, a block at a time (SQLite sorts it first)."""
    layout = postings_layout(conn)
    if layout is None:
        return 0
    conn.execute("ALTER TABLE tag_postings RENAME TO tag_postings_rows")
    conn.execute(POSTINGS_SQL)
    if "chunked" in layout:
        blocks = (conn.execute("SELECT series_id, value_id FROM tag_postings_rows WHERE chunk = ?", chunk).fetchall()
                  for chunk in conn.execute("SELECT DISTINCT chunk FROM tag_postings_rows").fetchall())
    else:
        cursor = conn.execute("SELECT series_id, value_id FROM tag_postings_rows ORDER BY series_id")
        blocks = iter(lambda: cursor.fetchmany(500_000), [])
    converted = 0
    for block in blocks:
        if block:
            converted += len(block)
            array = np.array(block, np.int64)
            # a pair's series cut by the end of a block go on in the next one: another row, above
            _insert_postings(conn, _packed(array[:, 0], array[:, 1])[0])
    conn.execute("DROP TABLE tag_postings_rows")
    return converted


class SQLiteTagIndex(TagIndex):
    """Tags in the store's SQLite file, in its transactions (one per store: the store
    forgets its pair ids on a rollback)."""

    intersects = True

    def __init__(self, store: "SQLiteStore"):
        self.store = store
        self._layout_checked = False
        self._ids = _PairIds()
        self._read = _ReadPairs()
        store._id_caches += [self._ids, self._read]

    def _ready(self) -> None:
        """The schema exists and the postings are packed (else: run syncdb, which converts)."""
        self.store._check_schema()
        if self._layout_checked:
            return
        with self.store._errors("check the tag postings layout"):
            conn = self.store._conn
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'tag_postings'").fetchone():
                raise SchemaMissing(f"the store {self.store.path} has no tag tables (written before tags):"
                                    f" run `bgl --store {self.store.url} syncdb` to add them")
            layout = postings_layout(conn)
            old_counts = counts_in_values(conn)
        if layout is not None:
            raise SchemaMissing(f"the tag postings of {self.store.path} have the layout of {layout}, before packed"
                                f" postings: run `bgl --store {self.store.url} syncdb` to convert them in place")
        if old_counts:
            raise SchemaMissing(f"the tag value counts of {self.store.path} are in tag_values (the layout before"
                                f" tag_value_counts): run `bgl --store {self.store.url} syncdb` to move them in place")
        self._layout_checked = True

    def _query(self, what: str, sql: str, params: Sequence = (), functions: bool = False) -> list[tuple]:
        """Rows of a read; with `functions`, SERIES_IDS is registered on this thread's connection first."""
        self._ready()
        with self.store._errors(what):
            conn = self.store._conn
            if functions:
                local = self.store._local
                if getattr(local, "tag_functions", None) is not conn:
                    conn.create_function(SERIES_IDS, 2, _series_ids, deterministic=True)
                    local.tag_functions = conn
            return conn.execute(sql, params).fetchall()

    # -- writes ------------------------------------------------------------------------
    def add_series(self, paths: Sequence[str], now: int) -> int:
        """Bulk, per batch of _BATCH series: the series rows in one statement, the pairs
        mapped to their ids in Python (self._ids: only pairs this process has not seen cost
        SQL), the postings grouped by numpy into one packed row per pair and chunk, the
        counts with one executemany each."""
        if not paths:
            return 0
        self._ready()
        conn = self.store._conn
        new = 0
        with self.store.write_batch(), self.store._errors("index tagged series"):
            paths = sorted(set(paths))  # in path order, the path index's inserts follow one another
            for start in range(0, len(paths), _BATCH):
                new += self._add_batch(conn, paths[start:start + _BATCH], now)
            if new >= BULK_SERIES:
                self.store.defer_checkpoint(BULK_WAL_BYTES)
        return new

    def _add_batch(self, conn, paths: list[str], now: int) -> int:
        # One statement inserts the new series and sets the time of the others. SQLite gives
        # a new row max(id) + 1 (the writer lock is held) as INSERT ... SELECT reads the
        # batch, in its order: when every series is new, the series of id first + k is
        # paths[k]; otherwise the new rows (ids from first on) are read back with their paths.
        first = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM tagged_series").fetchone()[0]
        conn.execute("INSERT INTO tagged_series (path, updated_on) SELECT value, ? FROM json_each(?) WHERE true"
                     " ON CONFLICT (path) DO UPDATE SET updated_on = excluded.updated_on", (now, json.dumps(paths)))
        top = conn.execute("SELECT coalesce(max(id), 0) FROM tagged_series").fetchone()[0]
        if top < first:
            return 0
        if top - first + 1 == len(paths):
            self._add_postings(conn, np.arange(first, top + 1, dtype=np.int64), paths)
        else:
            new = conn.execute("SELECT id, path FROM tagged_series WHERE id >= ?", (first,)).fetchall()
            self._add_postings(conn, np.array([row[0] for row in new], np.int64), [row[1] for row in new])
        return top - first + 1

    def _add_postings(self, conn, series: np.ndarray, paths: Sequence[str]) -> None:
        """Postings of new series (ids above those of their chunk's postings) and the
        counts of their tags and values."""
        (value_ids, counts), per_tag = self._write_postings(conn, series, paths)
        _execute_rows(conn, "INSERT INTO tag_value_counts (id, series) VALUES ", "(?, ?)",
                      _interleaved(value_ids.tolist(), counts.tolist()),
                      " ON CONFLICT (id) DO UPDATE SET series = series + excluded.series")
        conn.executemany("UPDATE tag_names SET series = series + ? WHERE tag = ?", per_tag)

    def _write_postings(self, conn, series: np.ndarray, paths: Sequence[str]
                        ) -> tuple[tuple[np.ndarray, np.ndarray], list[tuple[int, str]]]:
        """Packed postings rows of series (ids, with their paths), in chunks where they
        have none yet or above the ids they have; (value ids, their numbers of series), and
        the number of series of each tag."""
        if not paths:
            return (np.zeros(0, np.int64), np.zeros(0, np.int64)), []
        flat = ("name=" + ";name=".join(paths)).split(";")  # every path's pairs, as _PairIds keys them
        pick = operator.itemgetter(*flat) if len(flat) > 1 else (lambda known: [known[flat[0]]])
        try:  # every pair seen before, the steady state: no set of the batch's pairs
            coded = np.fromiter(pick(self._ids.known()), np.int64, len(flat))
        except KeyError:
            coded = np.fromiter(pick(self._ids.ids(conn, set(flat))), np.int64, len(flat))
        rows, row_values, row_counts = _packed(np.repeat(series, [p.count(";") + 1 for p in paths]),
                                               coded >> TAG_SLOT_BITS)
        _insert_postings(conn, rows)
        value_ids, rows_of = np.unique(row_values, return_inverse=True)  # a pair in two chunks: added up
        per_slot = np.bincount(coded & ((1 << TAG_SLOT_BITS) - 1))
        return ((value_ids, np.bincount(rows_of, weights=row_counts).astype(np.int64)),
                [(int(per_slot[slot]), self._ids.tags[slot]) for slot in np.flatnonzero(per_slot)])

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
                    if self._remove_posting(conn, value_id, series_id):
                        conn.execute("UPDATE tag_value_counts SET series = series - 1 WHERE id = ?", (value_id,))
                        conn.execute("UPDATE tag_names SET series = series - 1 WHERE id = ?", (tag_id,))
                conn.execute("DELETE FROM tagged_series WHERE id = ?", (series_id,))
                removed += 1
        return removed

    @staticmethod
    def _remove_posting(conn, value_id: int, series_id: int) -> bool:
        """Take series_id out of the pair's row that may hold it (the greatest first <= it);
        whether it was there."""
        chunk = series_id >> CHUNK_BITS
        row = conn.execute("SELECT first, offsets FROM tag_postings WHERE chunk = ? AND value_id = ? AND first <= ?"
                           " ORDER BY first DESC LIMIT 1", (chunk, value_id, series_id)).fetchone()
        if row is None:
            return False
        offsets = np.frombuffer(row[1], "<u2")
        kept = offsets[offsets != series_id - (chunk << CHUNK_BITS)]
        if kept.size == offsets.size:
            return False
        conn.execute("DELETE FROM tag_postings WHERE chunk = ? AND value_id = ? AND first = ?", (chunk, value_id, row[0]))
        if kept.size:
            conn.execute("INSERT INTO tag_postings (chunk, value_id, first, offsets) VALUES (?, ?, ?, ?)",
                         (chunk, value_id, (chunk << CHUNK_BITS) + int(kept[0]), kept.tobytes()))
        return True

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
        return self._query("read tag values", "SELECT v.value, c.series FROM tag_names n JOIN tag_values v"
                           " ON v.tag_id = n.id JOIN tag_value_counts c ON c.id = v.id WHERE n.tag = ?"
                           " AND c.series > 0" + sql, [tag, *params])

    def value_count(self, tag: str, value: str) -> int:
        """The pair's count, its id and count kept for the postings read that follows."""
        rows = self._query("read a tag value", "SELECT v.id, c.series FROM tag_names n JOIN tag_values v"
                           " ON v.tag_id = n.id JOIN tag_value_counts c ON c.id = v.id"
                           " WHERE n.tag = ? AND v.value = ?", (tag, value))
        if not rows:
            return 0
        self._read.remember(f"{tag}={value}", *rows[0])
        return rows[0][1]

    def tags(self, prefix: str = "", after: str | None = None, limit: int = 1000) -> list[str]:
        sql, params = _range("tag", prefix, after, limit)
        return [r[0] for r in self._query("read tags", "SELECT tag FROM tag_names WHERE series > 0" + sql, params)]

    def _series_of(self, value_ids: Sequence[int]) -> np.ndarray:
        """Series ids of the postings of value ids (each pair read whole: a seek per chunk
        in use, the chunks counted in the same statement)."""
        return self._postings_rows("SELECT value FROM json_each(?)", (json.dumps(list(value_ids)),))

    def _series_of_values(self, tag: str, values: Sequence[str]) -> np.ndarray:
        """Series ids of the postings of tag=v for v in values (their ids found in the same
        statement)."""
        return self._postings_rows("SELECT v.id FROM tag_names n JOIN tag_values v ON v.tag_id = n.id WHERE n.tag = ?"
                                   " AND v.value IN (SELECT value FROM json_each(?))", (tag, json.dumps(list(values))))

    def _postings_rows(self, value_ids_sql: str, params: tuple) -> np.ndarray:
        return _unpacked(self._query(
            "read tag postings", f"WITH RECURSIVE {_chunks(CHUNK_BITS)} SELECT chunk, offsets FROM tag_postings"
            f" WHERE chunk IN chunks AND value_id IN ({value_ids_sql})", params))

    def _paths(self, series: np.ndarray) -> list[str]:
        """Canonical paths of series ids (those whose row exists)."""
        if not series.size:
            return []
        return [row[0] for row in self._query("read tagged series", "SELECT path FROM tagged_series WHERE id IN"
                                              " (SELECT value FROM json_each(?))", (json.dumps(series.tolist()),))]

    def postings(self, tag: str, values: Sequence[str]) -> list[str]:
        paths: list[str] = []
        values = list(values)
        known = self._read.get(f"{tag}={values[0]}") if len(values) == 1 else None
        if known is not None:  # an = term the planner sized: its id is known
            return self._paths(self._series_of([known[0]]))
        for start in range(0, len(values), _CHUNK):
            paths.extend(self._paths(self._series_of_values(tag, values[start:start + _CHUNK])))
        return paths

    def sized_postings(self, pairs: Sequence[tuple[str, str]], small: int) -> SizedPairs:
        """Every pair sized, and the rarest one's paths when it covers at most `small`
        series, in one statement (_sized_postings_sql: the pairs' ids and counts, and when
        every pair is there and the rarest small enough, its postings rows decoded by
        SERIES_IDS and joined to their paths); the ids and counts kept for postings_of_all."""
        rows = self._query("size tag values", _sized_postings_sql(CHUNK_BITS), (json.dumps(pairs), small),
                           functions=True)
        counts: list[int | None] = [0] * len(pairs)
        paths = []
        for key, value, count in rows:
            if key is None:
                paths.append(value)
            else:
                counts[key] = count
                self._read.remember("=".join(pairs[key]), value, count)
        driver = min(range(len(pairs)), key=counts.__getitem__)
        return SizedPairs(counts, driver, paths if counts[driver] <= small else None)

    def postings_of_all(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The first pair's series (the rarest, the planner's driver), kept if they are in
        every other pair's postings, rarest first: a list at most _READ_WHOLE times the
        candidates is read whole, a longer one probed (for each candidate, its row). The
        ids and counts are those the planner's value_count read, else read here."""
        found = []
        for tag, value in pairs:
            known = self._read.get(f"{tag}={value}")
            if known is None and self.value_count(tag, value):
                known = self._read.get(f"{tag}={value}")
            if known is None or not known[1]:
                return []
            found.append(known)
        series = self._series_of([found[0][0]])
        for value_id, count in sorted(found[1:], key=lambda f: f[1]):
            if not series.size:
                break
            other = self._series_of([value_id]) if count <= _READ_WHOLE * series.size else self._probe(value_id, series)
            series = _among(series, other)
        return self._paths(series)

    def _probe(self, value_id: int, series: np.ndarray) -> np.ndarray:
        """Series ids of the rows of a pair that may hold some of series (for each, the row
        with the greatest first <= it: one index seek)."""
        return _unpacked(self._query(
            "probe tag postings",
            f"WITH probed (chunk, first) AS (SELECT DISTINCT j.value >> {CHUNK_BITS}, (SELECT q.first FROM"
            f" tag_postings q WHERE q.chunk = j.value >> {CHUNK_BITS} AND q.value_id = ?1 AND q.first <= j.value"
            " ORDER BY q.first DESC LIMIT 1) FROM json_each(?2) j)"
            " SELECT p.chunk, p.offsets FROM probed JOIN tag_postings p ON p.chunk = probed.chunk"
            " AND p.value_id = ?1 AND p.first = probed.first", (value_id, json.dumps(series.tolist()))))

    def scan_series(self, after: str | None = None, limit: int = 1000) -> list[tuple[str, int]]:
        return self._query("scan tagged series", "SELECT path, updated_on FROM tagged_series WHERE path > ?"
                           " ORDER BY path LIMIT ?", ("" if after is None else after, limit))

    def counts(self) -> dict[str, int]:
        row = self._query("count tags", "SELECT (SELECT count(*) FROM tagged_series),"
                          " (SELECT count(*) FROM tag_names WHERE series > 0),"
                          " (SELECT count(*) FROM tag_value_counts WHERE series > 0)")[0]
        return {"tagged_series": row[0], "tags": row[1], "tag_values": row[2]}

    # -- repair ------------------------------------------------------------------------
    def repair(self, dry_run: bool = False) -> dict[str, int]:
        """Chunk by chunk: postings whose series is gone and series whose postings are not
        one per tag are found by decoding the chunk's rows; a chunk with either has its
        postings rewritten from its series' paths (packed again, one row per pair). Then
        every count is set from the postings."""
        self._ready()
        orphans = missing = 0
        counted: dict[int, int] = {}
        with self.store.write_batch(), self.store._errors("repair the tag index"):
            conn = self.store._conn
            chunks = [row[0] for row in conn.execute(
                f"SELECT DISTINCT chunk FROM tag_postings UNION SELECT DISTINCT id >> {CHUNK_BITS} FROM tagged_series")]
            for chunk in chunks:
                low = chunk << CHUNK_BITS
                series = dict(conn.execute("SELECT id, path FROM tagged_series WHERE id >= ? AND id < ?",
                                           (low, low + (1 << CHUNK_BITS))))
                rows = conn.execute("SELECT value_id, chunk, offsets FROM tag_postings WHERE chunk = ?",
                                    (chunk,)).fetchall()
                ids = _unpacked([row[1:] for row in rows]) - low
                present = np.zeros(1 << CHUNK_BITS, bool)
                present[np.array(list(series), np.int64) - low] = True
                orphans += int(np.count_nonzero(~present[ids]))
                have = np.bincount(ids, minlength=1 << CHUNK_BITS)
                wrong = [i for i, path in series.items() if have[i - low] != path.count(";") + 1]
                missing += len(wrong)
                if (wrong or not present[ids].all()) and not dry_run:
                    conn.execute("DELETE FROM tag_postings WHERE chunk = ?", (chunk,))
                    self._write_postings(conn, np.array(list(series), np.int64), list(series.values()))
                    rows = conn.execute("SELECT value_id, chunk, offsets FROM tag_postings WHERE chunk = ?",
                                        (chunk,)).fetchall()
                for value_id, _, offsets in rows:
                    counted[value_id] = counted.get(value_id, 0) + (len(offsets) >> 1)
            fixed = 0
            if not dry_run:
                wrong_counts = [(i, counted.get(i, 0)) for i, c in conn.execute(
                    "SELECT v.id, coalesce(c.series, 0) FROM tag_values v LEFT JOIN tag_value_counts c ON c.id = v.id")
                    if counted.get(i, 0) != c]
                conn.executemany("INSERT INTO tag_value_counts (id, series) VALUES (?, ?)"
                                 " ON CONFLICT (id) DO UPDATE SET series = excluded.series", wrong_counts)
                conn.execute("UPDATE tag_names SET series = (SELECT coalesce(sum(c.series), 0) FROM tag_values v"
                             " JOIN tag_value_counts c ON c.id = v.id WHERE v.tag_id = tag_names.id)")
                fixed = len(wrong_counts)
        return {"postings_without_series": orphans, "series_without_postings": missing, "counts_fixed": fixed}
