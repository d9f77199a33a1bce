"""Wide JSON renders without a graphite object per series.

graphite's renderView turns every series read into a TimeSeries (a list of Python floats,
its tags parsed from its name), and `sumSeries` adds them column by column in Python:
for 20,000 series of an hour that is most of the render's time, growing with the number
of series rather than with the points. A render whose one target is a plain path
expression (`a.*.b`) or `sumSeries()` of one is read here as the finder reads it (same
glob, render budget and FETCH_TIMEOUT: graphite_plugin.finder.fetch_plan) and kept as the
store's grids: the raw series go to the JSON encoder as arrays
(graphite_plugin.render_json.GridSeries), the sum is computed with numpy in graphite's
order (series by name, each column summed from the first series on, row after row, missing points
skipped: the float additions of Python 3.11's `sum` in graphite's safeSum, so the same
bits), its name, tags, xFilesFactor and step as graphite's `aggregate` gives them.

Whenever graphite would do more than that, graphite's own objects and functions are
built from the same read instead (the answer is graphite's; only the read is shared):
several steps or windows among the series, names with tags, points from carbon-cache,
maxDataPoints that consolidates raw series, RENDER_TRIM_RECENT_IN_AGGREGATE, Python past
3.11 (its `sum` compensates). A process reads for one such render at a time (WIDE_READS),
as graphite's worker pool does. A read past FETCH_TIMEOUT answers graphite's timeout (503
with a one-line reason, graphite_plugin.error_views).
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Sequence

import numpy as np
from django.conf import settings
from graphite.render.datalib import TimeSeries
from graphite.readers.utils import merge_with_cache
from graphite.render.grammar import grammar
from graphite.util import timebounds

from biggraphite_like.accessor import FetchedGrid
from graphite_plugin.carbonlink import cached_points
from graphite_plugin.errors import FetchAbandoned
from graphite_plugin.finder import REFUSED, fetch_plan, refused, shared_backend
from graphite_plugin.reader import graphite_lists, read_grids
from graphite_plugin.render_json import GridSeries

SUM = "sumSeries"
# one read at a time per process, as graphite's worker pool (one thread per finder) reads:
# a worker's memory holds one wide read's names and grids, not one per request thread
WIDE_READS = threading.Lock()


def simple_target(targets: Sequence) -> tuple[str | None, str] | None:
    """(None or "sumSeries", the path expression) of a render's one target of that form, else None."""
    if len(targets) != 1 or not isinstance(targets[0], str) or not targets[0].strip():
        return None
    try:
        tokens = grammar.parseString(targets[0])
    except Exception:  # noqa: BLE001 - graphite's evaluator answers its own error
        return None
    if tokens.template or not tokens.expression:
        return None
    expression = tokens.expression
    if expression.pathExpression and not expression.pipedCalls:
        return None, expression.pathExpression
    call = expression.call
    if not call or call.funcname != SUM or len(call.args) != 1 or call.kwargs or expression.pipedCalls:
        return None
    argument = call.args[0].expression if call.args[0].expression else call.args[0]
    if argument.pathExpression and not argument.pipedCalls:
        return SUM, argument.pathExpression
    return None


def wide_render(context: dict, targets: Sequence, raw_arrays: bool) -> list | None:
    """The series of renderView's evaluateTarget for a simple target (see the module
    docstring), or None for graphite's evaluator. `raw_arrays`: whether raw series may be
    GridSeries (no data cache keeps them for graphite's other views)."""
    from graphite_plugin.find_view import only_this_finder

    simple = simple_target(targets)
    if simple is None or not only_this_finder():
        return None
    function, pattern = simple
    start, end, now = timebounds(context)
    backend = shared_backend()
    started = time.monotonic()
    try:
        with WIDE_READS:
            _, names, limits = fetch_plan(backend, [pattern], context)
            metrics, grids = read_grids(backend.accessor, names, start, end, now, limits)
    except REFUSED as exc:  # 400, as graphite's prefetch raises it (the budget's too)
        raise refused(exc).error from exc
    except FetchAbandoned as exc:  # graphite's pool timeout, as error_views answers it
        raise Exception(f"Timed out after {time.monotonic() - started:f}s for fetch of {pattern!r}: {exc}") from exc
    except Exception:  # noqa: BLE001 - a store error: graphite's evaluator fails (and logs) its own way
        return None
    read = _in_name_order(grids)
    if read is None or not read[0]:
        return _graphite_series(context, function, pattern, grids, metrics) if read is None else []
    names, (first, last, step), grid = read
    if settings.CARBONLINK_HOSTS:
        cached = cached_points(names)
        if any(cached.get(name) for name in names):
            return _graphite_series(context, function, pattern, grids, metrics, cached)
    if any(";" in name or name.startswith("~") or (name.endswith('"}') and "{" in name) for name in names):
        return _graphite_series(context, function, pattern, grids, metrics)  # tagged: graphite parses them
    if function is None:
        if not raw_arrays or _consolidates(context.get("maxDataPoints"), first, last, step):
            return _graphite_series(context, function, pattern, grids, metrics)
        return [GridSeries(name, first, last, step, row) for name, row in zip(names, grid)]
    if settings.RENDER_TRIM_RECENT_IN_AGGREGATE or sys.version_info >= (3, 12):
        return _graphite_series(context, function, pattern, grids, metrics)
    return [_summed(context, pattern, names, first, last, step, grid)]


def _in_name_order(grids: list[FetchedGrid]) -> tuple[list[str], tuple[int, int, int], np.ndarray] | None:
    """(names sorted, their one (start, end, step), their rows in that order), or None when
    the grids have several windows."""
    if not grids:
        return [], (0, 0, 0), np.zeros((0, 0))
    windows = {(read.start, read.end, read.step) for read in grids}
    if len(windows) != 1:
        return None
    names = [name for read in grids for name in read.names]
    grid = np.concatenate([read.grid for read in grids]) if len(grids) > 1 else grids[0].grid
    in_order = sorted(names)
    if in_order == names:  # as a glob's names are read: no row to move
        return names, windows.pop(), grid
    position = {name: row for row, name in enumerate(names)}
    return in_order, windows.pop(), grid[[position[name] for name in in_order]]


def _consolidates(max_data_points: int | None, start: int, end: int, step: int) -> bool:
    """Whether renderViewJson's maxDataPoints handling changes series of this window."""
    return max_data_points is not None and (max_data_points == 1 or max_data_points < (end - start) / step)


def _summed(context: dict, pattern: str, names: list[str], start: int, end: int, step: int,
            grid: np.ndarray) -> TimeSeries:
    """graphite's sumSeries of the series (rows of grid, in name order), as `aggregate` builds it."""
    xff = context.get("xFilesFactor")
    present = ~np.isnan(grid)
    counts = np.count_nonzero(present, axis=0)
    kept = (counts > 0) & (counts / len(names) >= (xff if xff is not None else settings.DEFAULT_XFILES_FACTOR))
    # a running sum row by row, as Python's sum: numpy adds along the first axis of a
    # C-ordered grid of 2 columns or more row after row (its pairwise summation is for the
    # contiguous axis, which a single column becomes: cumsum then), faster than cumsum
    # (7 ms against 10 for 20,000 x 60); + 0.0: Python's sum starts from 0, which turns a
    # lone -0.0 into 0.0
    filled = np.where(present, grid, 0.0)
    if filled.shape[1] >= 2 and filled.flags.c_contiguous:
        sums = np.add.reduce(filled, axis=0) + 0.0
    else:
        sums = np.cumsum(filled, axis=0, out=filled)[-1] + 0.0
    values = [value if keep else None for value, keep in zip(sums.tolist(), kept.tolist())]
    name = f"{SUM}({pattern})"
    tags = {"name": names[0]} if len(names) == 1 else {"name": name}
    tags["aggregatedBy"] = "sum"
    return TimeSeries(name, start, end, step, values, xFilesFactor=xff, tags=tags)


def _graphite_series(context: dict, function: str | None, pattern: str, grids: list[FetchedGrid],
                     metrics: dict, cached: dict | None = None) -> list:
    """graphite's own series for the read: TimeSeries as fetchData makes them (carbon-cache's
    points merged as the finder merges them), then graphite's sumSeries."""
    series = []
    for read in grids:
        for name, values in zip(read.names, graphite_lists(read.grid)):
            if cached is not None and cached.get(name):
                metric = metrics[name]
                values = merge_with_cache(cached[name], read.start, read.step, values,
                                          metric.metadata.aggregator.value, metric.retention.stages[0].precision)
            one = TimeSeries(name, read.start, read.end, read.step, values, xFilesFactor=context.get("xFilesFactor"))
            one.pathExpression = pattern
            series.append(one)
    series.sort(key=lambda one: one.name)
    if function is None:
        return series
    from graphite.render.functions import sumSeries

    return sumSeries(context, series)

