"""The accessor's cache of metrics (metadata), trusted for at most its ttl.

Two generations of plain dicts instead of an expiry per entry: a metric loaded or created
goes into the young generation; every ttl/2 the young one becomes the old one and the old
one is dropped, so an entry is trusted between ttl/2 and ttl after it was loaded. A
tuple and a float per metric cost about 60 bytes (6 MiB at 100,000 metrics in the
receiver, issue 21); a generation costs nothing per metric. Not thread-safe by itself:
the accessor writes it under its lock.
"""
from __future__ import annotations

import itertools
import operator
from typing import Iterable

from biggraphite_like.metric import Metric

_NAME = operator.attrgetter("name")


class MetricCache:
    """name -> Metric, each trusted for at most `ttl` seconds of a monotonic clock."""

    def __init__(self, ttl: float):
        self.ttl = ttl
        self._young: dict[str, Metric] = {}
        self._old: dict[str, Metric] = {}
        self._young_since = float("-inf")  # when the young generation started
        self._old_since = float("-inf")

    def __contains__(self, name: str) -> bool:
        return name in self._young or name in self._old

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def get(self, name: str) -> Metric | None:
        """The cached metric (call rotate(now) first: it was loaded less than ttl ago)."""
        metric = self._young.get(name)
        if metric is None:
            metric = self._old.get(name)
        return metric

    def get_many(self, names: list[str]) -> tuple[dict[str, Metric], list[str]]:
        """(the cached metrics among names, by name in their order; the names not cached).
        When the young generation holds them all (a writer's steady state), a few C-level
        calls for the whole list rather than a Python loop."""
        hits = list(map(self._young.get, names))
        if not any(map(operator.is_, hits, itertools.repeat(None))):
            return dict(zip(names, hits)), []
        if not self._old:  # nothing else to look in (new metrics, a young cache): no loop either
            cached = list(map(operator.is_not, hits, itertools.repeat(None)))
            return (dict(zip(itertools.compress(names, cached), itertools.compress(hits, cached))),
                    list(itertools.compress(names, map(operator.not_, cached))))
        found: dict[str, Metric] = {}
        missing = []
        for name, metric in zip(names, hits):
            if metric is None:
                metric = self._old.get(name)
            if metric is not None:
                found[name] = metric
            else:
                missing.append(name)
        return found, missing

    def rotate(self, now: float) -> None:
        """Age the generations: what was loaded ttl ago or more is dropped."""
        if self._old and now - self._old_since >= self.ttl:
            self._old = {}
        if now - self._young_since < self.ttl / 2:
            return
        if now - self._young_since < self.ttl:
            self._old, self._old_since = self._young, self._young_since
        else:
            self._old = {}
        self._young, self._young_since = {}, now

    def put(self, metrics: Iterable[Metric], now: float) -> None:
        self.rotate(now)
        metrics = metrics if isinstance(metrics, list) else list(metrics)
        self._young.update(zip(map(_NAME, metrics), metrics))
        if self._old:
            for metric in metrics:
                self._old.pop(metric.name, None)

    def clear(self) -> None:
        self._young.clear()
        self._old.clear()

    def pop(self, name: str) -> None:
        self._young.pop(name, None)
        self._old.pop(name, None)
