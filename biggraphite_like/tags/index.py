"""The tag index every store implements: series by canonical path, postings per
tag=value, values per tag with their series counts.

Stores keep only these primitives; the expression language, the planner and graphite's
operations live once above them (biggraphite_like.tags.queries). Values and tags are
returned sorted by their code points (SQLite's and Python's order of strings).
"""
from __future__ import annotations

import abc
from typing import Iterator, NamedTuple, Sequence


def range_conditions(column: str, prefix: str, after: str | None) -> tuple[str, list]:
    """` AND ...` conditions (SQL and CQL alike) and their parameters of a range read:
    strings starting with prefix (the range [prefix, prefix with its last character + 1))
    and greater than `after`."""
    sql, params = "", []
    if prefix:
        sql += f" AND {column} >= ? AND {column} < ?"
        params += [prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)]
    if after is not None:
        sql += f" AND {column} > ?"
        params.append(after)
    return sql, params


class SizedPairs(NamedTuple):
    """What TagIndex.sized_postings found: the series count of each pair (None: not
    sized), the index of the driving pair and its paths (None when it covers more than
    the `small` asked)."""

    counts: list[int | None]
    driver: int
    paths: list[str] | None


class TagIndex(abc.ABC):
    """Series, postings and value counts of one store."""

    intersects = False  # whether postings_of_all is the exact intersection (not the driver's superset)

    @abc.abstractmethod
    def add_series(self, paths: Sequence[str], now: int) -> int:
        """Index series by their canonical paths (valid: TaggedSeries made them; their tags
        are tags_of_path's), idempotent, and set their time of last write; how many were new."""

    @abc.abstractmethod
    def remove_series(self, paths: Sequence[str]) -> int:
        """Remove series and their postings (counts follow); returns how many existed."""

    @abc.abstractmethod
    def series_times(self, paths: Sequence[str]) -> dict[str, int]:
        """Time of last write of the indexed series among paths (absent ones are left out)."""

    @abc.abstractmethod
    def values(self, tag: str, prefix: str = "", after: str | None = None, limit: int = 1000) -> list[tuple[str, int]]:
        """(value, series count) of a tag, sorted, counts > 0, values starting with prefix
        and greater than `after`, at most limit."""

    @abc.abstractmethod
    def value_count(self, tag: str, value: str) -> int:
        """How many series have tag=value (0 if none)."""

    @abc.abstractmethod
    def tags(self, prefix: str = "", after: str | None = None, limit: int = 1000) -> list[str]:
        """Tags at least one series has, sorted, starting with prefix, greater than `after`."""

    @abc.abstractmethod
    def postings(self, tag: str, values: Sequence[str]) -> list[str]:
        """Paths of the series having tag=v for some v in values."""

    def sized_postings(self, pairs: Sequence[tuple[str, str]], small: int) -> SizedPairs:
        """The planner's sizing of `=` terms: the pairs' series counts, sized in order until
        one covers at most `small` series (it drives: the others are not sized), else all
        of them (the first of the fewest drives); the driver's paths when it covers at most
        `small` series. Stores that can do it in one read override it."""
        counts: list[int | None] = [None] * len(pairs)
        for k, (tag, value) in enumerate(pairs):
            counts[k] = count = self.value_count(tag, value)
            if count <= small:
                return SizedPairs(counts, k, self.postings(tag, [value]) if count else [])
        driver = min(range(len(pairs)), key=counts.__getitem__)
        return SizedPairs(counts, driver, None)

    def postings_of_all(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """Paths of the series having every tag=value of pairs (at least one), the first
        pair the rarest: its postings drive. Stores that can probe a posting list by series
        intersect them; this default returns the driving postings, a superset that the
        planner's filter reduces (every term is checked on the path anyway)."""
        return self.postings(pairs[0][0], [pairs[0][1]])

    @abc.abstractmethod
    def scan_series(self, after: str | None = None, limit: int = 1000) -> list[tuple[str, int]]:
        """(path, time of last write) of indexed series in path order after `after`."""

    @abc.abstractmethod
    def repair(self, dry_run: bool = False) -> dict[str, int]:
        """Remove postings whose series is gone, add missing postings of indexed series and
        set every count from the postings; how many of each were found
        (`postings_without_series`, `series_without_postings`, `counts_fixed`)."""

    @abc.abstractmethod
    def counts(self) -> dict[str, int]:
        """`tagged_series`, `tags` and `tag_values` (distinct tag=value pairs) in the index."""

    def iter_series(self, page_size: int = 1000) -> Iterator[tuple[str, int]]:
        """Every indexed series, in path order."""
        after = None
        while True:
            page = self.scan_series(after, page_size)
            yield from page
            if len(page) < page_size:
                return
            after = page[-1][0]
