"""Reading series for graphite-web: one batched accessor read, graphite's value lists,
and the points still in carbon-cache merged in as graphite's whisper reader merges them."""
from __future__ import annotations

import dataclasses
import gc
import time
from typing import Sequence

import numpy as np
from django.conf import settings
from graphite.intervals import Interval, IntervalSet
from graphite.readers.utils import BaseReader, merge_with_cache

from biggraphite_like.accessor import Accessor, FetchedGrid, TimeSeries
from biggraphite_like.metric import Metric, per_retention
from biggraphite_like.urls import redact_url
from graphite_plugin.carbonlink import cached_points
from graphite_plugin.errors import FetchAbandoned, RenderTooLarge

TimeInfo = tuple[int, int, int]
GraphiteSeries = tuple[TimeInfo, list]


def graphite_values(series: TimeSeries) -> list:
    """Values as graphite-web wants them: Python floats, None for gaps."""
    return _listed(series.values)


def graphite_lists(grid: np.ndarray) -> list[list]:
    """graphite_values of each row of a grid (the series of one read). Row by row, each
    list's gaps set to None right after its `tolist`, while its floats are still in the
    CPU's cache (patching after one `tolist` of the whole grid freed cache-cold floats,
    about a sixth of the cost); a row mostly of gaps goes through _listed."""
    width = grid.shape[1]
    where = np.flatnonzero(np.isnan(grid))
    rows = where // width
    columns = (where - rows * width).tolist()
    bounds = np.searchsorted(rows, np.arange(len(grid) + 1)).tolist()
    lists = _settled_lists(len(grid))
    for row, values in enumerate(grid):
        first, last = bounds[row], bounds[row + 1]
        listed = lists[row]
        if 2 * (last - first) > width:
            listed[:] = _listed(values)
            continue
        listed[:] = values.tolist()
        for column in columns[first:last]:
            listed[column] = None
    return lists


def _settled_lists(count: int) -> list[list]:
    """count empty lists, already past the garbage collector's youngest generation:
    CPython's collector scans every young container item by item, and each series' list
    filled while young (a thousand series of 1,440 floats, enough allocations to set it
    off) was scanned once or twice per fetch, about a tenth of its time. Filled after
    one collection of the youngest generation while they are empty (cheap), they are
    left to the rarer older collections. Before them, one collection of the two young
    generations (cheap: what is young then is mostly garbage) resets the count that sets
    off the middle one: otherwise one fetch in two or three, depending on what ran before,
    paid a middle collection scanning its filled lists item by item (20-30 ms on a
    thousand series), which made the fetch's time a matter of the collector's phase.
    Nothing is collected while the collector is off."""
    if not gc.isenabled():
        return [[] for _ in range(count)]
    gc.collect(1)
    lists: list[list] = [[] for _ in range(count)]
    gc.collect(0)
    return lists


def _listed(values: np.ndarray) -> list:
    """One series' values as a list of floats and Nones: `tolist` then the gaps set to None
    one by one, or, for a series mostly of gaps, Nones then its few floats (either way
    about the cost of the floats; the object array this once went through cost twice that)."""
    gaps = np.isnan(values)
    count = int(np.count_nonzero(gaps))
    if 2 * count <= len(values):
        listed = values.tolist()
        if count:
            for index in gaps.nonzero()[0].tolist():
                listed[index] = None
        return listed
    listed = [None] * len(values)
    present = (~gaps).nonzero()[0]
    for index, value in zip(present.tolist(), values[present].tolist()):
        listed[index] = value
    return listed


# requestContext key of a dict the finder's fetch fills with each series' float64 array
# (graphite_plugin.render_view sets it; graphite-web ignores keys it does not know)
FETCHED_ARRAYS = "graphite_plugin.fetched_arrays"
FETCH_CHUNK = 1000  # series read at once; a fetch past its deadline stops between two chunks


@dataclasses.dataclass(frozen=True)
class ReadLimits:
    """What one fetch may cost: points summed over its series (None: unbounded), and a
    monotonic deadline past which it stops (None: none)."""

    max_points: int | None = None
    deadline: float | None = None


def read_series(
    accessor: Accessor, names: Sequence[str], start: float, end: float, now: float | None = None,
    limits: ReadLimits = ReadLimits(), arrays: dict | None = None,
) -> dict[str, GraphiteSeries | None]:
    """((start, end, step), values) per name, as graphite's WhisperReader.fetch returns them.

    One accessor read for every name (the store batches it); None for a name with
    nothing in range and for a name that is no longer a metric. With CARBONLINK_HOSTS,
    each series is completed with carbon-cache's unwritten points, asked for all series
    at once (graphite_plugin.carbonlink) and merged by graphite's own `merge_with_cache`
    (same aggregation method and raw step as whisper's reader).

    `arrays`, when given, receives `name: (values, float64 array)` for each series read
    (NaN for None; not for series completed from carbon-cache): the JSON encoder
    (graphite_plugin.render_json) uses the array for a series still holding these values.
    """
    metrics, grids = read_grids(accessor, names, start, end, now, limits)
    fetched: dict[str, tuple[TimeInfo, list, np.ndarray]] = {}
    for read in grids:
        time_info = (read.start, read.end, read.step)
        for name, values, array in zip(read.names, graphite_lists(read.grid), read.grid):
            fetched[name] = (time_info, values, array)
    cached = None
    if getattr(settings, "CARBONLINK_HOSTS", None):
        cached = cached_points(list(fetched))
    results: dict[str, GraphiteSeries | None] = {}
    for name in names:
        read = fetched.get(name)
        if read is None:
            results[name] = None
            continue
        time_info, values, array = read
        if cached is not None and cached.get(name):
            metric = metrics[name]
            values = merge_with_cache(
                cached[name], time_info[0], time_info[2], values,
                metric.metadata.aggregator.value, metric.retention.stages[0].precision)
        elif arrays is not None:
            arrays[name] = (values, array)
        results[name] = (time_info, values)
    return results


def read_grids(
    accessor: Accessor, names: Sequence[str], start: float, end: float | None, now: float | None = None,
    limits: ReadLimits = ReadLimits(),
) -> tuple[dict[str, Metric], list[FetchedGrid]]:
    """(the metrics among names, the grids read of those with points in range): the
    accessor's batched read, FETCH_CHUNK series at a time, within the limits (RenderTooLarge
    past max_points before anything is read, FetchAbandoned past the deadline)."""
    metrics = accessor.get_metrics(names)
    present = [n for n in names if n in metrics]  # deleted since the glob: nothing to read
    now = accessor.now() if now is None else int(now)
    end = now if end is None else int(end)
    start = int(start)
    if limits.max_points is not None:
        _check_points(metrics, present, start, end, now, limits.max_points)
    grids: list[FetchedGrid] = []
    for offset in range(0, len(present), FETCH_CHUNK):
        if limits.deadline is not None and time.monotonic() > limits.deadline:
            raise FetchAbandoned(
                f"fetch of {len(present)} series stopped after {offset}: past graphite-web's FETCH_TIMEOUT"
                f" ({getattr(settings, 'FETCH_TIMEOUT', '?')} s), which has answered the request with an error")
        grids += accessor.fetch_grids(present[offset:offset + FETCH_CHUNK], start, end, now)[0]
    return metrics, grids


def _check_points(metrics: dict[str, Metric], names: Sequence[str], start: int, end: int, now: int,
                  max_points: int) -> None:
    """Raise RenderTooLarge when reading the names over [start, end) would read more than
    max_points points (each series' stage as whisper would choose it)."""
    @per_retention
    def points_read(metric: Metric) -> int:
        window = metric.retention.read_window(start, end, now)
        return 0 if window is None else window.size

    total = sum(points_read(metrics[name]) for name in names)
    if total > max_points:
        raise RenderTooLarge(
            f"this render reads {total} points ({len(names)} series from {start} to {end}), more than"
            f" {max_points} (graphite-web setting BG_MAX_RENDER_POINTS); narrow the targets or the time"
            " range, or raise the setting")


class MetadataBatch:
    """Metadata of the leaves of one find, loaded in one query the first time a reader needs
    it, and again once older than the accessor's metadata cache (cache_ttl): the nodes of a
    cached find are reused by later requests (Finder.find_nodes), and their intervals must
    not be staler than the accessor's own cache would make them."""

    __slots__ = ("accessor", "names", "_loaded")

    def __init__(self, accessor: Accessor, names: Sequence[str]):
        self.accessor = accessor
        self.names = names
        self._loaded: tuple[float, dict[str, Metric]] | None = None

    def get(self, name: str) -> Metric | None:
        loaded, now = self._loaded, time.monotonic()
        if loaded is None or now - loaded[0] >= self.accessor.cache_ttl:
            loaded = self._loaded = (now, self.accessor.peek_metrics(self.names))  # kept here, not twice
        return loaded[1].get(name)


def data_interval(accessor: Accessor, metric: Metric, now: float) -> tuple[float, float]:
    """(start, end) of where a metric's data may be at `now`: its retention up to its last
    write (as whisper's reader, which uses the file's mtime; updated_on is recorded once
    per touch interval, and known to readers within the metadata cache's TTL)."""
    return span_interval(accessor, metric.retention.duration, metric.updated_on, now)


def span_interval(accessor: Accessor, duration: int, updated_on: int, now: float) -> tuple[float, float]:
    """data_interval of a metric whose retention covers `duration` seconds, last written at updated_on."""
    start = now - duration
    last_write = updated_on + accessor.touch_interval + accessor.cache_ttl
    return start, max(min(now, last_write), start)


class Reader(BaseReader):
    """graphite-web reader of one metric (LeafNode.reader)."""

    __slots__ = ("accessor", "name", "metadata")

    def __init__(self, accessor: Accessor, name: str, metadata: MetadataBatch | None = None):
        self.accessor = accessor
        self.name = name
        self.metadata = metadata or MetadataBatch(accessor, [name])

    def get_intervals(self) -> IntervalSet:
        """Where data may be: the retention up to the last write (as whisper's reader, which
        uses the file's mtime; updated_on is recorded once per touch interval)."""
        metric = self.metadata.get(self.name)
        if metric is None:
            return IntervalSet([])
        return IntervalSet([Interval(*data_interval(self.accessor, metric, time.time()))])

    def fetch(self, startTime, endTime, now=None, requestContext=None) -> GraphiteSeries | None:
        return read_series(self.accessor, [self.name], startTime, endTime, now)[self.name]

    def __repr__(self) -> str:
        return f"<biggraphite_like Reader {self.name} on {redact_url(self.accessor.store.url)}>"
