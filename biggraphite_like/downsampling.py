"""Whisper's write semantics over any store: routing, replacement and propagation.

For the same writes, every stage holds what whisper's archives would hold:
- a point goes to the finest stage whose duration covers its age (`now - timestamp`);
  points older than the coarsest stage are dropped (and counted by the caller);
- a point is aligned to its stage's precision and replaces what that slot held; within
  one batch, the point with the greatest timestamp in an interval wins, and between equal
  timestamps the last one given (whisper would keep the first: we keep the design's rule);
- after a stage is written, each coarser interval the batch touched is recomputed from
  the finer stage: known points / all points >= xFilesFactor gives the aggregate (whisper's
  `__propagate`, with xFilesFactor rounded to 32 bits as whisper's header stores it);
  propagation goes one stage further only if some interval propagated.
Aggregates are computed with numpy in time order with sequential sums, so values are
bit-for-bit whisper's.

Recomputing an interval needs its finer points. Reading them back from the store is most
of a write's cost, so the downsampler keeps the finer points of the latest interval of each
metric in memory (`open_intervals.OpenIntervals`: a few bytes a point) and reads back only
what it does not hold. The memory is trusted only while the store's `change_token` says
nothing else wrote in between. A batch's points of a metric may span several intervals
(a batch across the hour): the memory still serves and keeps them while no point of the
batch can have replaced a slot of another interval's (less than a ring apart). The
metrics a batch creates hold nothing before it (the store says so): nothing of them is
read back either.
"""
from __future__ import annotations

import itertools
import operator
from typing import Hashable, Sequence

import numpy as np

from biggraphite_like.aggregation import Aggregator
from biggraphite_like.metric import Metric, MetricMetadata
from biggraphite_like.open_intervals import DEFAULT_OPEN_INTERVALS, OpenIntervals
from biggraphite_like.retention import Retention
from biggraphite_like.stores.base import StageTable, Store


def aggregate(
    aggregator: Aggregator, grid: np.ndarray, xfilesfactor: "float | np.ndarray"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Aggregate each row of grid (NaN = no point) as whisper does.

    xfilesfactor is one value or one per row. Returns (values, known counts, mask of rows
    that propagate).
    """
    rows, width = grid.shape
    known = ~np.isnan(grid)
    counts = known.sum(axis=1)
    propagate = _enough(counts, width, xfilesfactor)
    zeroed = np.where(known, grid, 0.0)
    if aggregator in (Aggregator.AVERAGE, Aggregator.SUM, Aggregator.AVG_ZERO):
        # cumsum is sequential (numpy's sum is pairwise): the same rounding as sum() in whisper.
        # "+ 0.0" turns -0.0 into 0.0 as Python's sum(), which starts from 0, does.
        total = (np.cumsum(zeroed, axis=1)[:, -1] + 0.0) if width else np.zeros(rows)
        if aggregator is Aggregator.SUM:
            values = total
        elif aggregator is Aggregator.AVG_ZERO:
            values = total / float(width)
        else:
            values = total / np.maximum(counts, 1).astype(np.float64)
    elif aggregator is Aggregator.LAST:
        last = width - 1 - np.argmax(known[:, ::-1], axis=1)
        values = grid[np.arange(rows), last]
    elif aggregator is Aggregator.MAX:
        values = np.where(known, grid, -np.inf).max(axis=1)
    elif aggregator is Aggregator.MIN:
        values = np.where(known, grid, np.inf).min(axis=1)
    elif aggregator is Aggregator.ABSMAX:
        pick = np.argmax(np.where(known, np.abs(grid), -1.0), axis=1)  # first of equal: as max(key=abs)
        values = grid[np.arange(rows), pick]
    elif aggregator is Aggregator.ABSMIN:
        pick = np.argmin(np.where(known, np.abs(grid), np.inf), axis=1)
        values = grid[np.arange(rows), pick]
    else:  # pragma: no cover - the enum is closed
        raise AssertionError(aggregator)
    return values, counts, propagate


def _enough(counts: np.ndarray, width: int, xfilesfactor: "float | np.ndarray") -> np.ndarray:
    """Whether intervals of `width` finer slots holding `counts` points propagate."""
    # whisper keeps xFilesFactor as a 32-bit float: 0.2 acts as 0.20000000298...
    threshold = np.asarray(xfilesfactor, dtype=np.float32).astype(np.float64)
    return (counts > 0) & (counts / float(width) >= threshold)


def _propagates(grid: np.ndarray, xfilesfactor: np.ndarray) -> np.ndarray:
    """Which rows of grid `aggregate` says propagate (the same test, without aggregating)."""
    return _enough(np.count_nonzero(~np.isnan(grid), axis=1), grid.shape[1], xfilesfactor)


def _in_order(who: np.ndarray, timestamps: np.ndarray) -> bool:
    """Whether points are sorted by metric, then by strictly increasing timestamp (then
    already in the order of (metric, interval, timestamp, arrival))."""
    step = np.diff(who)
    return bool(((step > 0) | ((step == 0) & (np.diff(timestamps) > 0))).all())


def _unique_sorted(keys: np.ndarray) -> np.ndarray:
    """np.unique(keys), without its sort when keys are in order already (propagation's
    (metric, interval) keys of points sorted by metric and time)."""
    if (keys[1:] < keys[:-1]).any():
        return np.unique(keys)
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    return keys[first]


def route(metric: Metric, timestamps: np.ndarray, now: int) -> np.ndarray:
    """Stage index of each point (whisper's routing by age); -1 for points too old to keep."""
    return _route(metric.retention, timestamps, now)


def _route(retention: Retention, timestamps: np.ndarray, now: int) -> np.ndarray:
    durations = np.array([s.duration for s in retention.stages], dtype=np.int64)
    index = np.searchsorted(durations, now - timestamps, side="left")
    return np.where(index < len(durations), index, -1)


_AGGREGATORS = list(Aggregator)
_NAME, _METADATA, _RETENTION = (operator.attrgetter(field) for field in ("name", "metadata", "retention"))
_INTERVAL_BITS = 33  # timestamps are below 2**32: (metric, interval) packs into one int64
# Intervals read back per store call at most: a store's read decodes whole blocks of points
# (SQLite: 10,000 metrics' windows at once took 64 MiB), so a big batch reads in parts.
READ_BACK_SIZE = 2_000


class Downsampler:
    """Writes batches of points into a store with whisper's semantics (see module docstring).

    A batch is flat arrays (owner metric index, timestamp, value), processed a retention at
    a time with a few numpy operations and one store call per stage, however many metrics.
    """

    def __init__(self, store: Store, open_intervals: int = DEFAULT_OPEN_INTERVALS):
        self._store = store
        self._open = OpenIntervals(open_intervals)
        self.read_back_size = READ_BACK_SIZE
        self._token: Hashable | None = None  # store.change_token() after our last write
        self._caching = False  # whether the store has a change token (set by each write)

    def write(self, metrics: Sequence[Metric], owner: np.ndarray, timestamps: np.ndarray, values: np.ndarray,
              now: int, empty: np.ndarray | None = None) -> int:
        """Write point i (timestamps[i], values[i]) to metrics[owner[i]]; returns how many were too old.

        Call it inside the store's write_batch, so that nobody writes between the check of
        the store's change token and our writes. `empty[j]`: metrics[j] holds no point in
        the store (created in this batch): nothing of it is read back.
        """
        token = self._store.change_token()
        self._caching = token is not None
        if token is None or token != self._token:
            self._open.clear()
        self._token = None
        try:
            too_old = self._write(metrics, owner, timestamps, values, now, empty)
        except BaseException:
            self._open.clear()
            raise
        self._token = token if token is None else self._store.change_token()
        return too_old

    def _write(self, metrics: Sequence[Metric], owner: np.ndarray, timestamps: np.ndarray, values: np.ndarray,
               now: int, empty: np.ndarray | None) -> int:
        # group by object identity first: hashing a Retention per metric costs more than the rest
        metadatas = list(map(_METADATA, metrics))
        if all(map(operator.is_, metadatas, itertools.repeat(metadatas[0]))):  # one object (a receiver's rules)
            return self._write_retention(metadatas[0].retention, metrics, owner, timestamps, values, now, empty,
                                         metadatas[0])
        retentions = list(map(_RETENTION, metrics))
        if len(set(map(id, retentions))) == 1:  # one shared object: no grouping
            return self._write_retention(retentions[0], metrics, owner, timestamps, values, now, empty)
        by_id: dict[int, tuple[Retention, list[int]]] = {}
        for index, metric in enumerate(metrics):
            retention = metric.retention
            entry = by_id.get(id(retention))
            if entry is None:
                entry = by_id[id(retention)] = (retention, [])
            entry[1].append(index)
        by_retention: dict[Retention, list[int]] = {}
        for retention, members in by_id.values():
            by_retention.setdefault(retention, []).extend(members)
        too_old = 0
        for retention, members in by_retention.items():
            if len(by_retention) == 1:
                sel = slice(None)
            else:
                sel = np.isin(owner, members)
            too_old += self._write_retention(retention, metrics, owner[sel], timestamps[sel], values[sel], now, empty)
        return too_old

    def _write_retention(self, retention: Retention, metrics: Sequence[Metric], owner: np.ndarray,
                         timestamps: np.ndarray, values: np.ndarray, now: int, empty: np.ndarray | None,
                         metadata: MetricMetadata | None = None) -> int:
        """`metadata`: every metric's, when they share one object."""
        stage_of = _route(retention, timestamps, now)
        names = np.array(list(map(_NAME, metrics)), dtype=object)
        if metadata is not None:
            aggregators = np.full(len(metrics), _AGGREGATORS.index(metadata.aggregator), np.int64)
            xfilesfactors = np.full(len(metrics), metadata.xfilesfactor, np.float64)
        else:  # per metadata object (a batch shares a few), then per metric by index
            metadatas = list(map(_METADATA, metrics))
            first_of: dict[int, int] = {}  # id of a metadata -> index of its first metric
            first = np.fromiter(map(first_of.setdefault, map(id, metadatas), itertools.count()), dtype=np.int64,
                                count=len(metadatas))
            firsts, of_metric = np.unique(first, return_inverse=True)
            codes = {a: i for i, a in enumerate(_AGGREGATORS)}
            shared = [metadatas[i] for i in firsts.tolist()]
            aggregators = np.array([codes[md.aggregator] for md in shared], dtype=np.int64)[of_metric.reshape(-1)]
            xfilesfactors = np.array([md.xfilesfactor for md in shared], dtype=np.float64)[of_metric.reshape(-1)]
        # whisper writes the newest points (finest stage) first, each followed by its propagation
        for index, stage in enumerate(retention.stages):
            sel = stage_of == index
            if not sel.any():
                continue
            who, ts, vs = owner[sel], timestamps[sel], values[sel]
            aligned = ts - ts % stage.precision
            # per (metric, interval): the greatest timestamp wins, then the last given
            if not _in_order(who, ts):  # (a receiver's batches come grouped by metric, in time order)
                # by (metric, interval, timestamp, arrival): the interval follows the timestamp, and a
                # stable sort of one packed key keeps arrival order (timestamps are below 2**_INTERVAL_BITS)
                if len(ts) and 0 <= ts.min() and ts.max() < 1 << _INTERVAL_BITS:
                    sort = np.argsort((who.astype(np.int64) << _INTERVAL_BITS) | ts, kind="stable")
                else:
                    sort = np.lexsort((np.arange(len(ts)), ts, who))
                who, aligned, vs = who[sort], aligned[sort], vs[sort]
            last = np.ones(len(who), dtype=bool)
            last[:-1] = (who[1:] != who[:-1]) | (aligned[1:] != aligned[:-1])
            who, aligned, vs = who[last], aligned[last], vs[last]
            self._store.write_points(StageTable(stage, index > 0), names[who].tolist(), aligned, vs)
            self._propagate(retention, index, names, aggregators, xfilesfactors, who, aligned, vs, empty)
            # the stages this batch wrote now hold its points: no metric is empty in the next round
            empty = None
        return int(np.count_nonzero(stage_of < 0))

    @staticmethod
    def _spans(req_who: np.ndarray, new_who: np.ndarray, new_ts: np.ndarray) -> np.ndarray:
        """For each requested interval (of metric req_who[i]), how far apart the first and
        last points just written to its metric lie (new_who sorted, as req_who)."""
        if not len(new_who):
            return np.zeros(len(req_who), np.int64)
        bounds = np.flatnonzero(np.diff(new_who, prepend=-1))
        span = np.maximum.reduceat(new_ts, bounds) - np.minimum.reduceat(new_ts, bounds)
        return span[np.searchsorted(new_who[bounds], req_who)]

    def _grid(self, retention: Retention, higher: int, table: StageTable, names: np.ndarray, req_who: np.ndarray,
              starts: np.ndarray, req_names: list[str], slots: np.ndarray | None, new_who: np.ndarray,
              new_ts: np.ndarray, new_values: np.ndarray, request: np.ndarray, empty: np.ndarray | None) -> np.ndarray:
        """The finer points of each requested interval (metric req_who[i], from starts[i]) as
        a grid row: from memory where it holds them (then the points just written, at
        `request`, go over them), else read back from the store; memory then keeps them."""
        caching = self._caching
        fine = retention.stages[higher].precision
        coarse = retention.stages[higher + 1].precision
        grid = np.full((len(starts), coarse // fine), np.nan)
        held = np.zeros(len(starts), dtype=bool)
        ring = retention.stages[higher].duration
        same = req_who[1:] == req_who[:-1]  # req_who is sorted
        if caching or empty is not None:
            # an interval's slots of the finer stage hold its own points only when no point this
            # batch wrote there lies a ring or more from one the interval held (same slot):
            # points of one interval, or of intervals close enough
            alone = np.ones(len(req_who), dtype=bool)
            alone[1:] &= ~same
            alone[:-1] &= ~same
            sure = fresh = alone
            if not alone.all():
                span = self._spans(req_who, new_who, new_ts)
                sure = alone | (span + coarse <= ring)
                fresh = alone | (span < ring)  # no point held before: less than a ring apart will do
        if caching:
            held = self._open.lookup(table.name, req_names, starts, grid, sure, slots)
        if empty is not None:
            held |= empty[req_who] & fresh
        if held.any():
            # what we just wrote goes over what the store held before
            mine = held[request]
            grid[request[mine], (new_ts[mine] - starts[request[mine]]) // fine] = new_values[mine]
        unheld = np.flatnonzero(~held)
        for first in range(0, len(unheld), self.read_back_size):
            missing = unheld[first:first + self.read_back_size]
            reads = self._store.read_points(
                table, names[req_who[missing]].tolist(), starts[missing], starts[missing] + coarse
            )
            rows = missing[reads.request]
            grid[rows, (reads.timestamps - starts[rows]) // fine] = reads.values
        if caching:
            latest = np.ones(len(req_who), dtype=bool)  # each metric's last interval
            latest[:-1] = ~same
            self._open.remember(table.name, req_names, starts, grid, sure & latest, slots)
        return grid

    def _propagate(self, retention: Retention, index: int, names: np.ndarray, aggregators: np.ndarray,
                   xfilesfactors: np.ndarray, who: np.ndarray, aligned: np.ndarray, written: np.ndarray,
                   empty: np.ndarray | None = None) -> None:
        """Recompute the coarser intervals the points (who, aligned, written) of stage `index` touched.

        names, aggregators (index in _AGGREGATORS) and xfilesfactors are per metric of the batch.
        `empty`: per metric, whether the store held none of its points before this stage's
        writes and the ones they propagate to (the first stage a batch writes): the store
        then holds, in each interval, just the points this propagation wrote, and nothing is
        read back. A metric with points in several intervals of one stage counts only if
        they are less than the stage's ring apart (no point replaced another's slot).
        """
        caching = self._caching
        higher = index
        # the points just written to stage `higher`: (metric, timestamp, value)
        new_who, new_ts, new_values = who, aligned, written
        while higher + 1 < len(retention.stages) and len(who):
            lower = higher + 1
            fine, coarse = retention.stages[higher].precision, retention.stages[lower].precision
            packed = _unique_sorted((who.astype(np.int64) << _INTERVAL_BITS) | (aligned - aligned % coarse))
            req_who = packed >> _INTERVAL_BITS
            starts = packed & ((1 << _INTERVAL_BITS) - 1)
            table = StageTable(retention.stages[higher], higher > 0)
            req_names = names[req_who].tolist() if caching else []
            width = coarse // fine
            key = (new_who.astype(np.int64) << _INTERVAL_BITS) | (new_ts - new_ts % coarse)
            request = np.searchsorted(packed, key)  # the interval of each point just written
            slots = self._open.slots(table.name, req_names) if caching else None
            totals = None
            if caching and not (req_who[1:] == req_who[:-1]).any():
                # one interval a metric (the steady state): if memory holds each and the new
                # points come after its points, they are appended there, no grid of every interval
                totals = self._open.extend(table.name, slots, starts, width, request,
                                           (new_ts - starts[request]) // fine, new_values)
            if totals is not None:
                ok = _enough(totals, width, xfilesfactors[req_who])
                chosen = np.flatnonzero(ok)
                grid = np.full((len(chosen), width), np.nan)  # only the intervals that propagate
                self._open.lookup(table.name, [req_names[i] for i in chosen.tolist()], starts[chosen], grid,
                                  np.ones(len(chosen), dtype=bool), slots[chosen])
            else:
                grid = self._grid(retention, higher, table, names, req_who, starts, req_names, slots, new_who,
                                  new_ts, new_values, request, empty)
                ok = _propagates(grid, xfilesfactors[req_who])
                chosen = np.flatnonzero(ok)
                grid = grid[chosen]
            values = np.empty(len(starts))
            counts = np.empty(len(starts), dtype=np.int64)
            # only the intervals with enough points to propagate are aggregated (most of an hour's
            # first half at 60 s: xFilesFactor 0.5 wants 30 of its 60 minutes)
            codes = aggregators[req_who[chosen]]
            for code in np.unique(codes).tolist():
                mine = codes == code
                rows = chosen[mine]
                values[rows], counts[rows], ok[rows] = aggregate(_AGGREGATORS[code], grid[mine], xfilesfactors[req_who[rows]])
            if ok.any():
                self._store.write_points(
                    StageTable(retention.stages[lower], True), names[req_who[ok]].tolist(), starts[ok], values[ok], counts[ok]
                )
            new_who, new_ts, new_values = req_who[ok], starts[ok], values[ok]
            # whisper goes on with every interval of a metric of which some interval propagated
            keep = np.isin(who, req_who[ok])
            who, aligned = who[keep], aligned[keep]
            higher = lower
