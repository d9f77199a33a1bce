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
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from biggraphite_like.aggregation import Aggregator
from biggraphite_like.metric import Metric
from biggraphite_like.stores.base import StageTable, Store


def aggregate(aggregator: Aggregator, grid: np.ndarray, xfilesfactor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Aggregate each row of grid (NaN = no point) as whisper does.

    Returns (values, known counts, mask of rows that propagate).
    """
    rows, width = grid.shape
    known = ~np.isnan(grid)
    counts = known.sum(axis=1)
    # whisper keeps xFilesFactor as a 32-bit float: 0.2 acts as 0.20000000298...
    threshold = float(np.float32(xfilesfactor))
    propagate = (counts > 0) & (counts / float(width) >= threshold)
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


@dataclasses.dataclass
class _Group:
    """The points of one metric routed to one stage, aligned and deduplicated."""

    metric: Metric
    timestamps: np.ndarray  # aligned to the stage, unique, ascending
    values: np.ndarray


def route(metric: Metric, timestamps: np.ndarray, now: int) -> np.ndarray:
    """Stage index of each point (whisper's routing by age); -1 for points too old to keep."""
    durations = np.array([s.duration for s in metric.retention.stages], dtype=np.int64)
    ages = now - timestamps
    index = np.searchsorted(durations, ages, side="left")
    return np.where(index < len(durations), index, -1)


def _dedupe(stage_precision: int, timestamps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Align to precision and keep, per interval, the greatest timestamp (last given on ties)."""
    order = np.lexsort((np.arange(len(timestamps)), timestamps))  # by timestamp, then input order
    ts, vs = timestamps[order], values[order]
    aligned = ts - ts % stage_precision
    keep = np.ones(len(aligned), dtype=bool)
    keep[:-1] = aligned[1:] != aligned[:-1]  # last of each run of equal intervals
    return aligned[keep], vs[keep]


class Downsampler:
    """Writes batches of points into a store with whisper's semantics (see module docstring)."""

    def __init__(self, store: Store):
        self._store = store

    def write(self, batch: Sequence[tuple[Metric, np.ndarray, np.ndarray]], now: int) -> int:
        """Write (metric, timestamps, values) triples; returns how many points were too old to keep."""
        too_old = 0
        max_stages = 0
        by_stage: dict[int, list[_Group]] = {}
        for metric, timestamps, values in batch:
            if not len(timestamps):
                continue
            stage_of = route(metric, timestamps, now)
            too_old += int(np.count_nonzero(stage_of < 0))
            max_stages = max(max_stages, len(metric.retention.stages))
            for index in np.unique(stage_of[stage_of >= 0]).tolist():
                mask = stage_of == index
                precision = metric.retention.stages[index].precision
                aligned, kept = _dedupe(precision, timestamps[mask], values[mask])
                by_stage.setdefault(index, []).append(_Group(metric, aligned, kept))
        # whisper writes the newest points (finest stage) first, each followed by its propagation
        for index in range(max_stages):
            groups = by_stage.get(index)
            if groups:
                self._write_groups(index, groups)
                self._propagate(index, groups)
        return too_old

    def _write_groups(self, index: int, groups: list[_Group], counts: list[np.ndarray] | None = None) -> None:
        by_table: dict[StageTable, list[int]] = {}
        for position, group in enumerate(groups):
            by_table.setdefault(StageTable.of(group.metric, index), []).append(position)
        for table, positions in by_table.items():
            names: list[str] = []
            for p in positions:
                names.extend([groups[p].metric.name] * len(groups[p].timestamps))
            timestamps = np.concatenate([groups[p].timestamps for p in positions])
            values = np.concatenate([groups[p].values for p in positions])
            table_counts = np.concatenate([counts[p] for p in positions]) if counts is not None else None
            self._store.write_points(table, names, timestamps, values, table_counts)

    def _propagate(self, index: int, groups: list[_Group]) -> None:
        """Recompute the coarser intervals touched by groups, stage after stage."""
        # Each entry: (metric, aligned timestamps of the points written at `index`).
        pending = [(g.metric, g.timestamps) for g in groups]
        higher = index
        while pending:
            lower = higher + 1
            pending = [(m, ts) for m, ts in pending if lower < len(m.retention.stages)]
            if not pending:
                return
            written: list[_Group] = []
            counts: list[np.ndarray] = []
            for (metric, intervals, values, known) in self._aggregate_intervals(higher, lower, pending):
                written.append(_Group(metric, intervals, values))
                counts.append(known)
            if written:
                self._write_groups(lower, written, counts)
            # whisper goes on with every interval of a metric whose propagation did anything
            propagated = {id(g.metric) for g in written}
            pending = [(m, ts) for m, ts in pending if id(m) in propagated]
            higher = lower

    def _aggregate_intervals(self, higher: int, lower: int, pending: list[tuple[Metric, np.ndarray]]):
        """Yield (metric, intervals, values, counts) of the intervals of `lower` that propagate."""
        by_table: dict[tuple[StageTable, int], list[tuple[Metric, np.ndarray]]] = {}
        for metric, timestamps in pending:
            coarse = metric.retention.stages[lower].precision
            intervals = np.unique(timestamps - timestamps % coarse)
            key = (StageTable.of(metric, higher), coarse)
            by_table.setdefault(key, []).append((metric, intervals))
        for (table, coarse), entries in by_table.items():
            fine = table.stage.precision
            width = coarse // fine
            names: list[str] = []
            for metric, intervals in entries:
                names.extend([metric.name] * len(intervals))
            starts = np.concatenate([intervals for _, intervals in entries])
            reads = self._store.read_points(table, names, starts, starts + coarse)
            grid = np.full((len(starts), width), np.nan)
            grid[reads.request, (reads.timestamps - starts[reads.request]) // fine] = reads.values
            offset = 0
            for metric, intervals in entries:
                rows = slice(offset, offset + len(intervals))
                offset += len(intervals)
                values, known, ok = aggregate(metric.metadata.aggregator, grid[rows], metric.metadata.xfilesfactor)
                if ok.any():
                    yield metric, intervals[ok], values[ok], known[ok]
