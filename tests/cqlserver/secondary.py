"""Candidate lookup for indexed columns of the CQL test server (test tool only).

Each column with a secondary index (SASI, SAI or legacy) gets a ``ColumnIndex``:
value -> partition keys, plus, for text, the values kept sorted so a ``LIKE
'abc%'`` prefix is a bisect. Entries are only ever added: a value overwritten,
deleted or expired stays as a stale candidate, and every candidate row is
checked again against all restrictions, so answers stay exact while index
queries cost the matching partitions rather than the whole table. As in
Cassandra, SASI and SAI skip empty values: ``col = ''`` finds nothing.
"""
from __future__ import annotations

from bisect import bisect_left, insort


class ColumnIndex:
    __slots__ = ("text", "eq", "sorted", "skip_empty")

    def __init__(self, text: bool, skip_empty: bool = False):
        self.text = text
        self.skip_empty = skip_empty  # SASI and SAI do not index empty values
        self.eq: dict[bytes, set[bytes]] = {}
        self.sorted: list[tuple[str, bytes]] = []  # (decoded text value, partition key)

    def add(self, value: bytes, key: bytes) -> None:
        if not value and self.skip_empty:
            return
        keys = self.eq.get(value)
        if keys is None:
            keys = self.eq[value] = set()
        elif key in keys:
            return
        keys.add(key)
        if self.text:
            insort(self.sorted, (value.decode("utf-8", "replace"), key))

    def equal(self, value: bytes) -> set[bytes]:
        return self.eq.get(value, set())

    def prefix(self, prefix: str) -> set[bytes]:
        out = set()
        entries = self.sorted
        i = bisect_left(entries, (prefix, b""))
        n = len(entries)
        while i < n:
            value, key = entries[i]
            if not value.startswith(prefix):
                break
            out.add(key)
            i += 1
        return out

    def clear(self) -> None:
        self.eq.clear()
        self.sorted.clear()
