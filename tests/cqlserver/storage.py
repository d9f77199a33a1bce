"""In-memory cells, rows and partitions of the CQL test server (test tool only).

Cassandra's write semantics, in miniature:

- every cell carries a write timestamp (microseconds); the highest wins
  (last-write-wins), a tombstone winning a tie;
- an INSERT also writes a row marker, so a row inserted with only key columns
  exists; an UPDATE does not;
- partition, row and range deletions are tombstones with a timestamp: they
  shadow writes whose timestamp is lower or equal, never newer ones;
- a cell or marker written with a TTL expires at ``write time + ttl`` on the
  server clock; an expired cell is invisible; a row with no live cell and no
  live marker is invisible.

Partitions hold their rows in clustering order: a list of sort keys kept sorted
(bisect) beside the row dictionary, so slices cost O(log n + rows returned).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Any, Iterator

NO_DELETION = -(1 << 63)


class Desc:
    """Wraps a sort key so that it orders in reverse (clustering order DESC)."""

    __slots__ = ("v",)

    def __init__(self, v: Any):
        self.v = v

    def __lt__(self, other: Any) -> bool:
        if not isinstance(other, Desc):
            return NotImplemented
        return other.v < self.v

    def __gt__(self, other: Any) -> bool:
        if not isinstance(other, Desc):
            return NotImplemented
        return other.v > self.v

    def __le__(self, other: Any) -> bool:
        if not isinstance(other, Desc):
            return NotImplemented
        return other.v <= self.v

    def __ge__(self, other: Any) -> bool:
        if not isinstance(other, Desc):
            return NotImplemented
        return other.v >= self.v

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Desc) and other.v == self.v

    def __hash__(self) -> int:
        return hash(self.v)

    def __repr__(self) -> str:
        return f"Desc({self.v!r})"


class _Top:
    """Greater than every sort key component: closes a prefix range."""

    __slots__ = ()

    def __lt__(self, other: Any) -> bool:
        return False

    def __le__(self, other: Any) -> bool:
        return other is self

    def __gt__(self, other: Any) -> bool:
        return other is not self

    def __ge__(self, other: Any) -> bool:
        return True

    def __eq__(self, other: Any) -> bool:
        return other is self

    def __hash__(self) -> int:
        return 0


TOP = _Top()


class Row:
    """One CQL row: optional marker (ts, expires_at, ttl), row tombstone, cells.

    A cell is ``(value bytes or None for a tombstone, ts, expires_at or None, ttl)``.
    """

    __slots__ = ("marker", "deleted_at", "cells")

    def __init__(self) -> None:
        self.marker: tuple | None = None
        self.deleted_at = NO_DELETION
        self.cells: dict[str, tuple] = {}

    def write_marker(self, ts: int, expires: int | None, ttl: int) -> None:
        m = self.marker
        if m is None or ts > m[0] or (ts == m[0] and (expires is None or (m[1] is not None and expires > m[1]))):
            self.marker = (ts, expires, ttl)

    def write_cell(self, name: str, value: bytes | None, ts: int, expires: int | None, ttl: int) -> None:
        old = self.cells.get(name)
        if old is not None:
            ots = old[1]
            if ts < ots:
                return
            if ts == ots:
                ov = old[0]
                if ov is None:
                    return
                if value is not None and value <= ov:
                    return
        self.cells[name] = (value, ts, expires, ttl)

    def delete(self, ts: int) -> None:
        if ts > self.deleted_at:
            self.deleted_at = ts

    def live_cells(self, deleted_at: int, now: int) -> dict | None:
        """The live cells, or None when the row itself is dead."""
        if self.deleted_at > deleted_at:
            deleted_at = self.deleted_at
        live = {}
        for name, c in self.cells.items():
            if c[0] is not None and c[1] > deleted_at and (c[2] is None or c[2] > now):
                live[name] = c
        if live:
            return live
        m = self.marker
        if m is not None and m[0] > deleted_at and (m[1] is None or m[1] > now):
            return live
        return None


class Partition:
    """A partition: key, token, tombstones and rows in clustering order."""

    __slots__ = ("key", "token", "components", "deleted_at", "rows", "keys", "cks", "range_tombstones")

    def __init__(self, key: bytes, token: int, components: tuple):
        self.key = key
        self.token = token
        self.components = components
        self.deleted_at = NO_DELETION
        self.rows: dict[tuple, Row] = {}
        self.keys: list = []  # sort keys, ascending
        self.cks: list[tuple] = []  # clustering bytes, parallel to keys
        self.range_tombstones: list[tuple] = []  # (lo, lo_incl, hi, hi_incl, ts)

    def row(self, ck: tuple, sort_key_of: Any) -> Row:
        """The row at clustering ``ck``, created (and placed in order) if absent."""
        r = self.rows.get(ck)
        if r is None:
            r = Row()
            self.rows[ck] = r
            sort_key = sort_key_of(ck)
            i = bisect_left(self.keys, sort_key)
            self.keys.insert(i, sort_key)
            self.cks.insert(i, ck)
        return r

    def delete(self, ts: int) -> None:
        if ts > self.deleted_at:
            self.deleted_at = ts

    def delete_range(self, lo: tuple, lo_incl: bool, hi: tuple, hi_incl: bool, ts: int) -> None:
        self.range_tombstones.append((lo, lo_incl, hi, hi_incl, ts))

    def deletion_for(self, sort_key: tuple) -> int:
        d = self.deleted_at
        for lo, lo_incl, hi, hi_incl, ts in self.range_tombstones:
            if ts <= d:
                continue
            if lo:
                p = sort_key[: len(lo)]
                if p < lo or (p == lo and not lo_incl):
                    continue
            if hi:
                p = sort_key[: len(hi)]
                if p > hi or (p == hi and not hi_incl):
                    continue
            d = ts
        return d

    def index_range(self, lo: tuple | None, lo_incl: bool, hi: tuple | None, hi_incl: bool) -> tuple[int, int]:
        """Indices [start, stop) of rows whose sort-key prefix lies within the bounds."""
        keys = self.keys
        if lo is None or not lo:
            start = 0
        elif lo_incl:
            start = bisect_left(keys, lo)
        else:
            start = bisect_right(keys, lo + (TOP,))
        if hi is None or not hi:
            stop = len(keys)
        elif hi_incl:
            stop = bisect_right(keys, hi + (TOP,))
        else:
            stop = bisect_left(keys, hi)
        return start, max(start, stop)

    def iter_range(self, start: int, stop: int, reverse: bool) -> Iterator[tuple[tuple, Any, Row]]:
        keys, cks, rows = self.keys, self.cks, self.rows
        rng = range(stop - 1, start - 1, -1) if reverse else range(start, stop)
        for i in rng:
            ck = cks[i]
            yield ck, keys[i], rows[ck]


def insort_ring(ring: list, entry: tuple) -> None:
    insort(ring, entry)
