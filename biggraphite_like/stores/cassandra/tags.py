"""The tag index of the Cassandra store (see biggraphite_like.tags.index), on its own
tables in the metadata keyspace, without secondary indexes.

- `tag_names` (one partition, `bucket` 0): the tags at least one series has.
- `tag_values` (a partition per tag, values clustered in order): value -> series count.
  `=` is one row, a literal prefix a clustering slice, autocomplete a slice with a LIMIT.
  A partition holds one tag's distinct values (its cardinality: 100,000 values of a few
  dozen bytes is a few MB).
- `tag_postings` ((tag, value, bucket), path): the series of a pair, spread over
  POSTING_BUCKETS partitions by a hash of the path, so a pair held by a million series
  makes partitions of ~1/POSTING_BUCKETS of that.
- `tagged_series` (path): canonical paths with their time of last write.

Cassandra has no id allocation without lightweight transactions, so the strings are the
keys (no interning into integers as on SQLite).

Counts without counter columns (not idempotent under retries): a new series is claimed
with `INSERT ... IF NOT EXISTS` on `tagged_series` and a removed one with `DELETE ... IF
EXISTS`; only the writer whose statement applied changes the counts, by compare-and-set
(`UPDATE ... IF series = ?`, one per tag value per batch, retried when another writer
changed it in between). Writing a count costs the batch, never a count of the postings;
`bgl repair` recounts from the postings. A value whose count reaches 0 is removed, then
a tag left without values.
"""
from __future__ import annotations

import collections
import zlib
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Sequence

from biggraphite_like.errors import StoreError
from biggraphite_like.tags.index import TagIndex, range_conditions
from biggraphite_like.tags.series import tags_of_path

if TYPE_CHECKING:
    from biggraphite_like.stores.cassandra import CassandraStore

POSTING_BUCKETS = 8
PROBE_PATHS = 100  # candidate paths per `path IN` probe of postings_of_all
_BUCKETS = list(range(POSTING_BUCKETS))
_MAX_COUNT_ROUNDS = 20  # compare-and-set rounds before a count update gives up (repair recounts)


def schema_statements(meta: str) -> list[str]:
    """The tables, in the metadata keyspace `meta`."""
    return [
        "-- Graphite tags (biggraphite_like.stores.cassandra.tags): tags, values with series counts,",
        f"-- postings per tag=value spread over {POSTING_BUCKETS} buckets, tagged series by canonical path.",
        f"CREATE TABLE IF NOT EXISTS {meta}.tag_names (\n  bucket int,\n  tag text,\n  PRIMARY KEY (bucket, tag)\n);",
        f"CREATE TABLE IF NOT EXISTS {meta}.tag_values (\n  tag text,\n  value text,\n  series bigint,\n"
        "  PRIMARY KEY (tag, value)\n);",
        f"CREATE TABLE IF NOT EXISTS {meta}.tag_postings (\n  tag text,\n  value text,\n  bucket int,\n  path text,\n"
        "  PRIMARY KEY ((tag, value, bucket), path)\n);",
        f"CREATE TABLE IF NOT EXISTS {meta}.tagged_series (\n  path text PRIMARY KEY,\n  updated_on bigint\n);",
    ]


class _Series(NamedTuple):
    path: str
    tags: dict[str, str]


def bucket_of(path: str) -> int:
    return zlib.crc32(path.encode()) % POSTING_BUCKETS


class CassandraTagIndex(TagIndex):
    """Tags in the store's metadata keyspace."""

    intersects = True

    def __init__(self, store: "CassandraStore"):
        self.store = store
        self.meta = store.metadata_keyspace

    def _statement(self, query: str, write: bool = False):
        return self.store._prepare(query.format(meta=self.meta), "metadata_write" if write else "metadata_read")

    def _run(self, requests: list[tuple[Any, Any]], what: str) -> list[list[tuple]]:
        self.store._check_schema()
        return self.store._run(requests, what) if requests else []

    # -- writes ------------------------------------------------------------------------
    def add_series(self, paths: Sequence[str], now: int) -> int:
        if not paths:
            return 0
        series = [_Series(p, tags_of_path(p)) for p in dict.fromkeys(paths)]
        select = self._statement("SELECT path FROM {meta}.tagged_series WHERE path = ?")
        existing = {rows[0][0] for rows in self._run([(select, (s.path,)) for s in series],
                                                     f"read {len(series)} tagged series") if rows}
        upsert = self._statement("INSERT INTO {meta}.tagged_series (path, updated_on) VALUES (?, ?)", True)
        self._run([(upsert, (s.path, now)) for s in series if s.path in existing], "refresh tagged series")
        # the writer whose INSERT ... IF NOT EXISTS applies owns the new series: it alone
        # adds it to the counts, so concurrent writers of one series count it once
        claim = self._statement("INSERT INTO {meta}.tagged_series (path, updated_on) VALUES (?, ?) IF NOT EXISTS", True)
        candidates = [s for s in series if s.path not in existing]
        claimed = self._run([(claim, (s.path, now)) for s in candidates], f"create {len(candidates)} tagged series")
        fresh = [s for s, rows in zip(candidates, claimed) if rows and rows[0][0]]
        posting = self._statement("INSERT INTO {meta}.tag_postings (tag, value, bucket, path) VALUES (?, ?, ?, ?)", True)
        tag_name = self._statement("INSERT INTO {meta}.tag_names (bucket, tag) VALUES (0, ?)", True)
        self._run([(posting, (t, v, bucket_of(s.path), s.path)) for s in fresh for t, v in s.tags.items()],
                  f"write the postings of {len(fresh)} tagged series")
        self._run([(tag_name, (t,)) for t in sorted({t for s in fresh for t in s.tags})], "write tag names")
        self._add_counts(collections.Counter((t, v) for s in fresh for t, v in s.tags.items()))
        return len(fresh)

    def _add_counts(self, deltas: Mapping[tuple[str, str], int]) -> None:
        """Add deltas to the series counts of pairs with compare-and-set (lightweight
        transactions), one request per pair per round, retrying pairs another writer
        changed in between; a pair whose count reaches 0 is removed (then a tag left
        without values)."""
        pending = {pair: delta for pair, delta in deltas.items() if delta}
        read = self._statement("SELECT series FROM {meta}.tag_values WHERE tag = ? AND value = ?")
        create = self._statement("INSERT INTO {meta}.tag_values (tag, value, series) VALUES (?, ?, ?) IF NOT EXISTS",
                                 True)
        update = self._statement("UPDATE {meta}.tag_values SET series = ? WHERE tag = ? AND value = ? IF series = ?",
                                 True)
        delete = self._statement("DELETE FROM {meta}.tag_values WHERE tag = ? AND value = ? IF series = ?", True)
        emptied: set[str] = set()
        for _ in range(_MAX_COUNT_ROUNDS):
            if not pending:
                break
            pairs = sorted(pending)
            current = self._run([(read, pair) for pair in pairs], f"read the counts of {len(pairs)} tag values")
            requests, totals = [], []
            for (tag, value), rows in zip(pairs, current):
                old = rows[0][0] if rows else None
                total = (old or 0) + pending[(tag, value)]
                totals.append(total)
                if old is None:
                    requests.append((create, (tag, value, total)))
                elif total > 0:
                    requests.append((update, (total, tag, value, old)))
                else:
                    requests.append((delete, (tag, value, old)))
            applied = self._run(requests, f"write the counts of {len(pairs)} tag values")
            for pair, total, rows in zip(pairs, totals, applied):
                if rows and rows[0][0]:
                    del pending[pair]
                    if total <= 0:
                        emptied.add(pair[0])
        if pending:
            raise StoreError(f"the series counts of {len(pending)} tag values kept changing under"
                             f" {_MAX_COUNT_ROUNDS} attempts (e.g. {sorted(pending)[0]}): run `bgl repair` to recount")
        self._drop_tags_without_values(emptied)

    def _drop_tags_without_values(self, tags: set[str]) -> None:
        if not tags:
            return
        ordered = sorted(tags)
        probe = self._statement("SELECT value FROM {meta}.tag_values WHERE tag = ? LIMIT 1")
        left = self._run([(probe, (t,)) for t in ordered], "check tags for values")
        drop = self._statement("DELETE FROM {meta}.tag_names WHERE bucket = 0 AND tag = ?", True)
        self._run([(drop, (t,)) for t, rows in zip(ordered, left) if not rows], "remove tags without series")

    def _recount(self, pairs: set[tuple[str, str]]) -> None:
        """Set the series count of pairs from their postings (repair); drop pairs (and tags) left with none."""
        if not pairs:
            return
        pairs_list = sorted(pairs)
        count = self._statement("SELECT COUNT(*) FROM {meta}.tag_postings WHERE tag = ? AND value = ? AND bucket IN ?")
        results = self._run([(count, (t, v, _BUCKETS)) for t, v in pairs_list],
                            f"count the series of {len(pairs_list)} tag values")
        totals = [rows[0][0] for rows in results]
        update = self._statement("INSERT INTO {meta}.tag_values (tag, value, series) VALUES (?, ?, ?)", True)
        delete = self._statement("DELETE FROM {meta}.tag_values WHERE tag = ? AND value = ?", True)
        self._run([(update, (t, v, n)) if n else (delete, (t, v)) for (t, v), n in zip(pairs_list, totals)],
                  "write tag value counts")
        self._drop_tags_without_values({t for (t, _), n in zip(pairs_list, totals) if not n})

    def remove_series(self, paths: Sequence[str]) -> int:
        present = list(self.series_times(paths))
        if not present:
            return 0
        # as for creation: the writer whose DELETE ... IF EXISTS applies takes the series off the counts
        delete_series = self._statement("DELETE FROM {meta}.tagged_series WHERE path = ? IF EXISTS", True)
        applied = self._run([(delete_series, (p,)) for p in present], f"remove {len(present)} tagged series")
        removed = [p for p, rows in zip(present, applied) if rows and rows[0][0]]
        delete_posting = self._statement(
            "DELETE FROM {meta}.tag_postings WHERE tag = ? AND value = ? AND bucket = ? AND path = ?", True)
        self._run([(delete_posting, (t, v, bucket_of(p), p)) for p in removed for t, v in tags_of_path(p).items()],
                  "remove postings")
        self._add_counts(_negated(collections.Counter((t, v) for p in removed for t, v in tags_of_path(p).items())))
        return len(removed)

    # -- reads -------------------------------------------------------------------------
    def series_times(self, paths: Sequence[str]) -> dict[str, int]:
        select = self._statement("SELECT path, updated_on FROM {meta}.tagged_series WHERE path = ?")
        paths = list(dict.fromkeys(paths))
        return {rows[0][0]: rows[0][1] for rows in self._run([(select, (p,)) for p in paths], "read tagged series")
                if rows}

    def _slice(self, table_query: str, key: tuple, column: str, prefix: str, after: str | None, limit: int,
               what: str) -> list[tuple]:
        conditions, params = range_conditions(column, prefix, after)
        statement = self._statement(table_query + conditions + " LIMIT ?")
        return self._run([(statement, (*key, *params, limit))], what)[0]

    def values(self, tag: str, prefix: str = "", after: str | None = None, limit: int = 1000) -> list[tuple[str, int]]:
        rows = self._slice("SELECT value, series FROM {meta}.tag_values WHERE tag = ?", (tag,), "value",
                           prefix, after, limit, f"read values of tag {tag!r}")
        return [(v, n) for v, n in rows if n]

    def value_count(self, tag: str, value: str) -> int:
        select = self._statement("SELECT series FROM {meta}.tag_values WHERE tag = ? AND value = ?")
        rows = self._run([(select, (tag, value))], f"read tag value {tag}={value}")[0]
        return rows[0][0] or 0 if rows else 0

    def tags(self, prefix: str = "", after: str | None = None, limit: int = 1000) -> list[str]:
        rows = self._slice("SELECT tag FROM {meta}.tag_names WHERE bucket = ?", (0,), "tag", prefix, after, limit,
                           "read tags")
        return [r[0] for r in rows]

    def postings(self, tag: str, values: Sequence[str]) -> list[str]:
        select = self._statement("SELECT path FROM {meta}.tag_postings WHERE tag = ? AND value = ? AND bucket IN ?")
        results = self._run([(select, (tag, v, _BUCKETS)) for v in values],
                            f"read the postings of {len(values)} values of tag {tag!r}")
        return [row[0] for rows in results for row in rows]

    def postings_of_all(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The rarest pair's postings, then for each other pair (the planner passes them
        by increasing count) a probe of the candidates left: the bucket of a path is known
        from the path, so each statement reads one partition of the pair, `path IN` at most
        PROBE_PATHS candidates. Work is bounded by the rarest list: at most its length /
        PROBE_PATHS + POSTING_BUCKETS statements per other pair, never a full posting list
        of a common value."""
        tag, value = pairs[0]
        candidates = self.postings(tag, [value])
        probe = self._statement(
            "SELECT path FROM {meta}.tag_postings WHERE tag = ? AND value = ? AND bucket = ? AND path IN ?")
        for tag, value in pairs[1:]:
            if not candidates:
                break
            by_bucket: dict[int, list[str]] = collections.defaultdict(list)
            for path in candidates:
                by_bucket[bucket_of(path)].append(path)
            requests = [(probe, (tag, value, bucket, paths[i:i + PROBE_PATHS]))
                        for bucket, paths in sorted(by_bucket.items()) for i in range(0, len(paths), PROBE_PATHS)]
            kept = {row[0] for rows in self._run(requests, f"probe {len(candidates)} series in {tag}={value}")
                    for row in rows}
            candidates = [path for path in candidates if path in kept]
        return candidates

    def scan_series(self, after: str | None = None, limit: int = 1000) -> list[tuple[str, int]]:
        """Token order (Cassandra's), not path order: every series once all the same."""
        if after is None:
            statement = self._statement("SELECT path, updated_on FROM {meta}.tagged_series LIMIT ?")
            return self._run([(statement, (limit,))], "scan tagged series")[0]
        statement = self._statement(
            "SELECT path, updated_on FROM {meta}.tagged_series WHERE token(path) > token(?) LIMIT ?")
        return self._run([(statement, (after, limit))], "scan tagged series")[0]

    def counts(self) -> dict[str, int]:
        series = sum(1 for _ in self.iter_series())
        tags = self.tags(limit=1_000_000)
        values = sum(len(self._all_values(t)) for t in tags)
        return {"tagged_series": series, "tags": len(tags), "tag_values": values}

    def _all_values(self, tag: str) -> list[tuple[str, int]]:
        found, after = [], None
        while True:
            page = self._slice("SELECT value, series FROM {meta}.tag_values WHERE tag = ?", (tag,), "value", "",
                               after, 1000, f"read values of tag {tag!r}")
            found += page
            if len(page) < 1000:
                return found
            after = page[-1][0]

    # -- repair ------------------------------------------------------------------------
    def repair(self, dry_run: bool = False) -> dict[str, int]:
        """Walk the series (their postings must exist) and every tag's postings (their
        series must exist); recount what changed."""
        series = dict(self.iter_series())
        exists = self._statement(
            "SELECT path FROM {meta}.tag_postings WHERE tag = ? AND value = ? AND bucket = ? AND path = ?")
        wanted = [(t, v, bucket_of(p), p) for p in series for t, v in tags_of_path(p).items()]
        present = self._run([(exists, w) for w in wanted], "check postings of tagged series")
        missing = [w for w, rows in zip(wanted, present) if not rows]
        orphans = []
        for tag in self.tags(limit=1_000_000):
            for value, _ in self._all_values(tag):
                for path in self.postings(tag, [value]):
                    if path not in series:
                        orphans.append((tag, value, bucket_of(path), path))
        counts_before = {(t, v): n for t in self.tags(limit=1_000_000) for v, n in self._all_values(t)}
        touched = {(t, v) for t, v, _, _ in missing + orphans}
        if not dry_run:
            posting = self._statement("INSERT INTO {meta}.tag_postings (tag, value, bucket, path) VALUES (?, ?, ?, ?)",
                                      True)
            delete = self._statement(
                "DELETE FROM {meta}.tag_postings WHERE tag = ? AND value = ? AND bucket = ? AND path = ?", True)
            tag_name = self._statement("INSERT INTO {meta}.tag_names (bucket, tag) VALUES (0, ?)", True)
            self._run([(posting, m) for m in missing] + [(delete, o) for o in orphans], "repair postings")
            self._run([(tag_name, (t,)) for t in sorted({m[0] for m in missing})], "repair tag names")
            self._recount(set(counts_before) | touched)
            counts_after = {(t, v): n for t in self.tags(limit=1_000_000) for v, n in self._all_values(t)}
            fixed = sum(1 for k in set(counts_before) | set(counts_after) if counts_before.get(k) != counts_after.get(k))
        else:
            fixed = 0
        return {"postings_without_series": len(orphans),
                "series_without_postings": len({m[3] for m in missing}), "counts_fixed": fixed}


def _negated(counts: Mapping[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    return {pair: -n for pair, n in counts.items()}
