"""The accessor: the one API carbon's plugin, graphite-web's finder and `bgl` all use.

It validates names and points, routes writes through the downsampler, answers globs with
the glob engine's limits, and reads many series at once. Stores below it only store.

Where a name becomes canonical: once, where it enters. A public method taking names
normalises each one once (`names.normalize`, InvalidMetricName with the reason), unless
its caller says they are canonical already (`canonical=True`; `insert_columns` always
takes canonical names): the ingest buffer (biggraphite_like.ingest.buffer) interns each
spelling once for both ingest paths, and the carbon plugin's lookups normalise on their
side; below this, nothing normalises again.

Where a point is checked: once, by `point_check.invalid_points` (a finite timestamp in
1..MAX_TIMESTAMP, a finite value). The receiver calls it as it decodes (a refused point is
counted and logged with its sender) and hands `insert_columns` its points with
`checked=True`; every other writer (the carbon plugin, in its writer process; `bgl write`;
`insert_points`) has them checked by `insert_columns` / `insert_points`. A batch is cut
into parts one way: `batch_parts.cut_by_group`.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import math
import operator
import threading
import time
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from biggraphite_like import names as names_mod
from biggraphite_like.downsampling import Downsampler
from biggraphite_like.errors import InvalidMetricName, MetricNotFound, StoreError
from biggraphite_like.batch_parts import cut_by_group
from biggraphite_like.glob import DEFAULT_MAX_EXPANSION, DEFAULT_MAX_RESULTS, GlobPattern
from biggraphite_like.metric import Metric, MetricMetadata, make_metric, per_retention
from biggraphite_like.metric_cache import MetricCache
from biggraphite_like.point_check import MAX_TIMESTAMP, WriteResult, check_columns, check_pairs, check_point
from biggraphite_like.stores.base import ScanPage, StageTable, Store
from biggraphite_like.stores.registry import open_store
from biggraphite_like.tags.queries import TagQueries
from biggraphite_like.tags.series import is_tagged

_log = logging.getLogger(__name__)

DEFAULT_TOUCH_INTERVAL = 3600  # seconds between two updates of a metric's updated_on / read_on
DEFAULT_CACHE_TTL = 300  # seconds a metric's metadata is trusted without reading it again
MAX_UNRECORDED_READS = 100_000  # reads kept for a later attempt while writers hold the store
MAX_METRICS_PER_WRITE = 10_000  # metrics per store round of insert_columns (bounds transient memory)
_NAME = operator.attrgetter("name")
_UPDATED = operator.attrgetter("updated_on")
MAX_DIRECTORY_ROUNDS = 10  # write-then-check rounds before giving up on a directory that keeps vanishing


@dataclasses.dataclass
class TimeSeries:
    """Points of one metric over a window: values[i] is at start + i * step (NaN: no point)."""

    name: str
    start: int
    end: int
    step: int
    values: np.ndarray

    def values_list(self) -> list[float | None]:
        """Values with None for gaps (graphite-web's and JSON's form)."""
        return [None if math.isnan(v) else v for v in self.values.tolist()]


@dataclasses.dataclass
class FetchedGrid:
    """Series read together: names[i]'s values are grid[i], at start + j * step (NaN: no point)."""

    names: list[str]
    start: int
    end: int
    step: int
    grid: np.ndarray


_MAX_RAW_LOOKUP = names_mod.MAX_COMPONENTS * (names_mod.MAX_COMPONENT_LENGTH + 1)  # longer: never a stored name


class Accessor:
    """Metrics, globs and points over one store (thread-safe)."""

    def __init__(
        self,
        store: Store,
        max_glob_expansion: int = DEFAULT_MAX_EXPANSION,
        max_glob_results: int = DEFAULT_MAX_RESULTS,
        touch_interval: int = DEFAULT_TOUCH_INTERVAL,
        cache_ttl: float = DEFAULT_CACHE_TTL,
        clock: Callable[[], float] = time.time,
    ):
        self.store = store
        self.clock = clock  # wall clock (epoch seconds) for every default `now`; tests inject a simulated one
        self.max_glob_expansion = max_glob_expansion
        self.max_glob_results = max_glob_results
        self.touch_interval = touch_interval
        self._downsampler = Downsampler(store)
        self.max_metrics_per_write = MAX_METRICS_PER_WRITE
        self._cache = MetricCache(cache_ttl)
        self._touched: dict[str, dict[str, int]] = {"updated_on": {}, "read_on": {}}  # field -> name -> time
        self._lock = threading.Lock()
        self.directories_restored = 0  # ancestors found missing right after a creation, and re-created
        self.read_on_failures = 0  # reads whose read_on could not be recorded (logged)
        self.read_on_deferred = 0  # attempts to record reads put off because a writer held the store
        self._unrecorded_reads: dict[str, int] = {}  # name -> read time, for the next attempt
        # Test-only: called between writing names and checking their ancestors, to widen the race window.
        self._race_hook: Callable[[Sequence[str]], None] | None = None

    @property
    def cache_ttl(self) -> float:
        """Seconds a metric's metadata is trusted without reading it again (at most)."""
        return self._cache.ttl

    @cache_ttl.setter
    def cache_ttl(self, seconds: float) -> None:
        self._cache.ttl = seconds

    @classmethod
    def from_url(cls, url: str, **options) -> "Accessor":
        return cls(open_store(url), **options)

    def close(self) -> None:
        self.store.close()

    def now(self) -> int:
        """The current time in epoch seconds, from the accessor's clock."""
        return int(self.clock())

    def syncdb(self, dry_run: bool = False) -> list[str]:
        """Create the store's schema (or only list the statements); idempotent."""
        statements = self.store.schema_statements()
        if not dry_run:
            self.store.syncdb()
        return statements

    def vacuum(self) -> dict[str, int | float | str]:
        """Give back the space the store's files hold unused (Store.vacuum)."""
        return self.store.vacuum()

    # -- metrics -----------------------------------------------------------------------
    def create_metric(self, name: str, metadata: MetricMetadata, now: int | None = None) -> Metric:
        """Create a metric (and its directories), or replace its metadata if it exists."""
        return self.create_metrics([(name, metadata)], now)[0]

    def create_metrics(self, specs: Sequence[tuple[str, MetricMetadata]], now: int | None = None) -> list[Metric]:
        now = self.now() if now is None else now
        metrics = [make_metric(name, metadata, now) for name, metadata in specs]
        self._create(metrics, now, check_ancestors=True)
        return metrics

    def _create(self, metrics: list[Metric], now: int, check_ancestors: bool) -> set[str]:
        """Write metrics (names canonical) and their directories, index the tagged ones,
        cache them. Their updated_on is `now` in the store: they count as touched then.
        Returns the names the store says hold no point (Store.create_metrics).

        `check_ancestors` False: the caller holds the store's write batch and the store
        says it is one serializable transaction (`Store.atomic_write_batch`): no cleanup
        can delete a directory between the rows written here and the commit, so the
        re-check of the race protocol (see _check_ancestors) would find nothing missing."""
        empty = self.store.create_metrics(metrics)
        names = list(map(_NAME, metrics))
        joined = "\n".join(names)  # one search of every name for the marks of a tagged one (is_tagged)
        tagged = [name for name in names if is_tagged(name)] if ";" in joined or '"}' in joined else []
        if tagged:  # names are canonical (names.normalize): index them as graphite's TagDB would
            self.tags.tag_series(tagged, now)
        if check_ancestors:
            self._check_ancestors(names, set())
        with self._lock:
            self._cache.put(metrics, time.monotonic())  # their updated_on is `now`: touched (_touch_written)
        return empty or set()

    def create_directories(self, names: Sequence[str]) -> None:
        """Create directories and their ancestors so that a concurrent cleanup cannot leave a gap."""
        normalized = [names_mod.normalize(n) for n in names]
        if normalized:
            self.store.create_directories(normalized)
            self._check_ancestors(normalized, set(normalized))

    def _check_ancestors(self, names: Sequence[str], also: set[str]) -> None:
        """The creation side of the race protocol with directory cleanup (BigGraphite #204).

        Called after names (metrics or directories) were written: reads which of their
        ancestors (and of `also`) exist and writes the missing ones again, then checks what
        it wrote the same way, until a check finds nothing missing. Every write of a name is
        thus followed by a check of its parent; `biggraphite_like.maintenance.directories`
        explains why this, with the cleaner's delete-then-recheck, never orphans a name.
        """
        wanted = names_mod.all_ancestors(names) | also
        for _ in range(MAX_DIRECTORY_ROUNDS):
            if not wanted:
                return
            if self._race_hook is not None:
                self._race_hook(sorted(wanted))
            missing = wanted - self.store.existing_directories(sorted(wanted))
            if not missing:
                return
            self.store.create_directories(sorted(missing))
            with self._lock:
                self.directories_restored += len(missing)
            wanted = missing | names_mod.all_ancestors(missing)
        raise StoreError(
            f"directories {sorted(wanted)[:5]} vanished {MAX_DIRECTORY_ROUNDS} times in a row right after"
            " being created: is a cleanup job deleting directories without the re-check protocol?"
        )

    def get_metric(self, name: str) -> Metric | None:
        """The metric of that name, or None."""
        canonical = names_mod.normalize(name)
        return self._get_normalized([canonical]).get(canonical)

    def has_metric(self, name: str) -> bool:
        return self.get_metric(name) is not None

    def get_metrics(self, names: Iterable[str], canonical: bool = False) -> dict[str, Metric]:
        """Existing metrics among names, by normalised name (metadata cached for cache_ttl);
        `canonical`: the names are normalised already (see the module doc).

        Tagged names are first looked up as they are: the store holds only canonical names,
        so one it finds is canonical and is not parsed (a writer's first batch after a
        restart, whose tagged names carbon sent canonical: ~2.5 us a name less). Only those
        it lacks, and names that are not ASCII, are normalised (InvalidMetricName as
        before) and, if that changed them, looked up again."""
        names = names if isinstance(names, list) else list(names)
        if canonical:
            return self._get_normalized(names)
        _, tagged = self._cache.get_many([n for n in names if type(n) is str and ";" in n and n.isascii()
                                          and len(n) <= _MAX_RAW_LOOKUP])  # (ASCII: a lone surrogate cannot be bound)
        if not tagged:
            return self._get_normalized(self._canonical(names))
        found = self._load(tagged)  # not cached: straight to the store
        if len(found) == len(names):  # every name tagged, distinct and found: nothing to parse
            return found
        missed = set(tagged).difference(found)
        rest = [n for n in self._canonical([n for n in names if n not in found]) if n not in missed]
        if rest:
            found.update(self._get_normalized(rest))
        return found

    def peek_metrics(self, names: Sequence[str]) -> dict[str, Metric]:
        """Existing metrics among canonical names (a glob's answer): from the cache where it
        holds them, else read without being kept. For readers of many names once (a find's
        intervals), whose metadata would fill the cache (a few hundred bytes a metric) with
        metrics nothing reads again."""
        now = time.monotonic()
        with self._lock:
            self._cache.rotate(now)
        found, missing = self._cache.get_many(names if isinstance(names, list) else list(names))
        if missing:
            found.update(self.store.get_metrics(missing))
        return found

    def _canonical(self, names: Iterable[str]) -> list[str]:
        """names normalised; a name the metric cache keeps is canonical already (not parsed again)."""
        cache = self._cache
        return [name if name in cache else names_mod.normalize(name) for name in names]

    def _get_normalized(self, wanted: Sequence[str]) -> dict[str, Metric]:
        now = time.monotonic()
        with self._lock:
            self._cache.rotate(now)
        found, missing = self._cache.get_many(wanted if isinstance(wanted, list) else list(wanted))
        if missing:
            found.update(self._load(missing, now))
        return found

    def _load(self, names: Sequence[str], now: float | None = None) -> dict[str, Metric]:
        """The metrics of normalised names from the store, cached."""
        loaded = self.store.get_metrics(names)
        with self._lock:
            self._cache.put(loaded.values(), time.monotonic() if now is None else now)
        return loaded

    def update_metadata(self, name: str, metadata: MetricMetadata, canonical: bool = False) -> Metric:
        """Replace a stored metric's metadata (MetricNotFound if it is not stored); the metric
        as stored now. `canonical`: the name is normalised already (see the module doc)."""
        if not canonical:
            name = names_mod.normalize(name)
        self.store.update_metadata(name, metadata)
        self._forget([name])
        metric = self._get_normalized([name]).get(name)
        assert metric is not None
        return metric

    def delete_metrics(self, names: Sequence[str]) -> None:
        """Delete metrics and their points; written again, a metric starts empty."""
        normalized = [names_mod.normalize(n) for n in names]
        self.store.delete_metrics(normalized)
        tagged = [n for n in normalized if is_tagged(n)]
        if tagged:
            self.tags.index.remove_series(tagged)
        self._forget(normalized)

    @functools.cached_property
    def tags(self) -> TagQueries:
        """Tagged series of the store: graphite's TagDB operations, planned over its index."""
        return TagQueries(self.store.tag_index())

    def _forget(self, names: Iterable[str]) -> None:
        with self._lock:
            for name in names:
                self._cache.pop(name)
                for touched in self._touched.values():
                    touched.pop(name, None)

    def touch(self, names: Sequence[str], field: str = "updated_on", now: int | None = None, force: bool = False) -> None:
        """Record a write (updated_on) or read (read_on), at most once per touch_interval per metric."""
        now = self.now() if now is None else now
        due = self._due(names, field, now, force)
        if due:
            try:
                self.store.touch_metrics(due, field, now)
            except BaseException:
                self._undue(due, field, now)
                raise

    def _due(self, names: Sequence[str], field: str, now: int, force: bool = False) -> list[str]:
        """The names whose field was not recorded within touch_interval (marked as recorded now)."""
        due = []
        with self._lock:
            touched = self._touched.setdefault(field, {})
            if not force and names:  # all recorded within the interval (the steady state): one pass in C
                lasts = list(map(touched.get, names))
                if None not in lasts and now - min(lasts) < self.touch_interval:
                    return due
            for name in names:
                last = touched.get(name)
                if force or last is None or now - last >= self.touch_interval:
                    touched[name] = now
                    due.append(name)
        return due

    def _undue(self, names: Sequence[str], field: str, now: int) -> None:
        """Forget the marks _due set: the store did not record them (tried again next time)."""
        with self._lock:
            touched = self._touched.setdefault(field, {})
            for name in names:
                if touched.get(name) == now:
                    del touched[name]

    # -- full scans --------------------------------------------------------------------
    def scan_metrics(
        self, shard: int = 0, nshards: int = 1, cursor: str | None = None, page_size: int = 1000
    ) -> Iterator[ScanPage[Metric]]:
        """Every metric in pages, without a glob (see Store.scan_metrics)."""
        return self.store.scan_metrics(shard, nshards, cursor, page_size)

    def scan_directories(
        self, shard: int = 0, nshards: int = 1, cursor: str | None = None, page_size: int = 1000
    ) -> Iterator[ScanPage[str]]:
        """Every directory in pages, without a glob (see Store.scan_directories)."""
        return self.store.scan_directories(shard, nshards, cursor, page_size)

    # -- globs -------------------------------------------------------------------------
    def names_token(self):
        """A value that changes whenever any process creates or deletes a metric or a
        directory (Store.names_token; None: the store cannot tell)."""
        return self.store.names_token()

    def glob(self, pattern: str) -> GlobPattern:
        return GlobPattern(pattern, max_expansion=self.max_glob_expansion)

    def glob_metrics(self, pattern: str) -> list[str]:
        """Sorted metric names matching a Graphite glob."""
        glob = self.glob(pattern)
        return [] if glob.matches_nothing else self.store.glob_metrics(glob, self.max_glob_results)

    def glob_directories(self, pattern: str) -> list[str]:
        """Sorted directory names matching a Graphite glob."""
        glob = self.glob(pattern)
        return [] if glob.matches_nothing else self.store.glob_directories(glob, self.max_glob_results)

    def glob_nodes(self, pattern: str) -> tuple[list[str], list[str]]:
        """(glob_metrics, glob_directories) of a Graphite glob, their common work done once
        where the store shares it (Store.glob_nodes)."""
        glob = self.glob(pattern)
        return ([], []) if glob.matches_nothing else self.store.glob_nodes(glob, self.max_glob_results)

    def glob_node_spans(self, pattern: str) -> tuple[list[str], list[str], dict[str, tuple[int, int]] | None]:
        """glob_nodes and, where the store reads them in its walk, each metric's (retention
        seconds, last write) (Store.glob_node_spans; None otherwise)."""
        glob = self.glob(pattern)
        return ([], [], {}) if glob.matches_nothing else self.store.glob_node_spans(glob, self.max_glob_results)

    # -- points ------------------------------------------------------------------------
    def insert_points(
        self,
        points: Mapping[str, Sequence[tuple[float, float]]],
        now: int | None = None,
        create: MetricMetadata | None = None,
    ) -> WriteResult:
        """Store points of many metrics in one batch (one transaction where the store has them).

        Invalid points and points of unknown metrics (unless `create` gives the metadata to
        create them with) are refused and reported in the result; the rest are stored.
        """
        now = self.now() if now is None else int(now)
        result = WriteResult()
        position: dict[str, int] = {}  # normalised name -> index in `batch_names`
        batch_names: list[str] = []
        owners: list[int] = []
        flat: list = []
        for raw_name, series in points.items():
            if not len(series):
                continue
            name = raw_name if raw_name in self._cache else self._normalize(raw_name, len(series), result)
            if name is None:
                continue
            index = position.setdefault(name, len(batch_names))
            if index == len(batch_names):
                batch_names.append(name)
            flat.extend(series)
            owners.extend([index] * len(series))
        if not flat:
            return result
        owner, timestamps, values = check_pairs(batch_names, np.asarray(owners, np.int64), flat, result)
        return self._insert_valid(batch_names, owner, timestamps, values, now, create, result)

    def insert_columns(
        self,
        names: Sequence[str],
        owner: np.ndarray,
        timestamps: np.ndarray,
        values: np.ndarray,
        now: int | None = None,
        create: "MetricMetadata | Callable[[str], MetricMetadata] | None" = None,
        checked: bool = False,
    ) -> WriteResult:
        """insert_points for points already in flat arrays: point i is (timestamps[i],
        values[i]) of names[owner[i]]. Names must be normalised (names.normalize) and distinct.
        `checked`: every point passed `invalid_points` already (the receiver's, see the
        module doc); they are not checked again.

        The bulk writers' path (the receiver): no Python object per point. `create` is the
        metadata of unknown metrics, or a function giving it per name (storage rules); the
        unknown metrics of the batch are created together, in its transaction.

        A batch of more than `max_metrics_per_write` metrics is written in parts of that
        many metrics, one after the other in the one transaction: the store's and the
        downsampler's transient memory grow with the metrics of a call (a read-back grid
        per metric), and 100,000 new metrics at once peaked at about 900 MiB on SQLite.
        """
        now = self.now() if now is None else int(now)
        result = WriteResult()
        if not len(owner):
            return result
        owner, values = np.asarray(owner, np.int64), np.asarray(values, np.float64)
        if checked:  # whole seconds as they are (the receiver's), else truncated: 1..MAX_TIMESTAMP, no sign to mind
            timestamps = np.asarray(timestamps).astype(np.int64, copy=False)
        else:
            timestamps = np.asarray(timestamps, np.float64)
            owner, timestamps, values = check_columns(names, owner, timestamps, values,
                                                      np.zeros(len(owner), dtype=bool), result)
        names = list(names)
        step = self.max_metrics_per_write
        if len(names) <= step:
            return self._insert_valid(names, owner, timestamps, values, now, create, result)
        try:
            with self.store.write_batch():
                for part in cut_by_group(owner, np.arange(len(names)) // step):
                    self._insert_valid(part.names_of(names), part.owner, timestamps[part.points],
                                       values[part.points], now, create, result)
        except BaseException:
            self._forget(names)  # the whole transaction rolled back: earlier parts' creations too
            raise
        return result

    def _insert_valid(self, batch_names: list[str], owner: np.ndarray, timestamps: np.ndarray, values: np.ndarray,
                      now: int, create: "MetricMetadata | Callable[[str], MetricMetadata] | None",
                      result: WriteResult) -> WriteResult:
        # names whose every point was refused are neither created nor touched
        with_points = np.bincount(owner, minlength=len(batch_names)) > 0
        names_with_points = batch_names if with_points.all() else \
            [batch_names[i] for i in np.flatnonzero(with_points).tolist()]
        for attempt in (1, 2):
            try:
                outcome = self._write_batch(names_with_points, batch_names, owner, timestamps, values, now, create)
                break
            except MetricNotFound:
                # Another process deleted a metric we had cached: read the metadata again, once.
                self._forget(batch_names)
                if attempt == 2:
                    raise
            except BaseException:
                self._forget(batch_names)  # metrics created in a rolled back batch do not exist
                raise
        stored, too_old, refused, created = outcome
        result.stored += stored
        result.too_old += too_old
        result.created += created
        for name, count in refused:
            result.reject(count, f"metric {name!r} does not exist: create it first")
        return result

    def _write_batch(self, names: list[str], batch_names: list[str], owner: np.ndarray, timestamps: np.ndarray,
                     values: np.ndarray, now: int, create: "MetricMetadata | Callable[[str], MetricMetadata] | None"
                     ) -> tuple[int, int, list[tuple[str, int]], int]:
        """One write transaction; returns (stored, too old, [(unknown metric, points refused)], created).

        An unknown metric is created only when one of its points is recent enough for its
        retention: a metric whose every point is too old would be left empty (its points
        count as too old, as they would for an existing metric)."""
        refused: list[tuple[str, int]] = []
        created = too_old = 0
        with self.store.write_batch():
            metrics = self._get_normalized(names)
            unknown = list(itertools.filterfalse(metrics.__contains__, names)) if len(metrics) < len(names) else []
            fresh: set[str] = set()
            stale: set[str] = set()
            if unknown and create is not None:
                # names are canonical (insert_columns' contract, or normalised above)
                metadatas = list(map(create, unknown)) if callable(create) else [create] * len(unknown)
                made = list(map(Metric, unknown, metadatas, itertools.repeat(now), itertools.repeat(now)))
                made, stale = _with_points_to_keep(made, metadatas, batch_names, owner, timestamps, now)
                if made:
                    fresh = self._create(made, now, check_ancestors=not self.store.atomic_write_batch)
                metrics.update(zip(map(_NAME, made), made))
                created = len(made)
            # renumber owners over the metrics written (others are refused, or too old to create)
            every = len(metrics) == len(batch_names)  # names are distinct: each has its metric
            kept = np.ones(len(batch_names), dtype=bool) if every else np.array([n in metrics for n in batch_names])
            if not kept.all():
                per_name = np.bincount(owner, minlength=len(batch_names))
                too_old = sum(int(per_name[i]) for i, n in enumerate(batch_names) if n in stale)
                refused = [(n, int(per_name[i])) for i, n in enumerate(batch_names)
                           if not kept[i] and per_name[i] and n not in stale]
                mask = kept[owner]
                owner = (np.cumsum(kept) - 1)[owner[mask]]
                timestamps, values = timestamps[mask], values[mask]
            written = list(map(metrics.__getitem__, batch_names)) if every else [metrics[n] for n in batch_names
                                                                                  if n in metrics]
            empty = np.fromiter(map(fresh.__contains__, map(_NAME, written)), dtype=bool, count=len(written)) \
                if fresh else None
            if written:
                too_old_written = self._downsampler.write(written, owner, timestamps, values, now, empty)
                self._touch_written(written, now)
            else:
                too_old_written = 0
        return len(timestamps) - too_old_written, too_old + too_old_written, refused, created

    def _touch_written(self, written: list[Metric], now: int) -> None:
        """Record the write (updated_on) of metrics whose updated_on is touch_interval old:
        a metric's own updated_on (as stored, or as written here: the cache gets it) says
        when it was last recorded, no mark a metric besides (a dict entry a metric a writer
        keeps; `touch`'s marks are for its own callers)."""
        if now - min(map(_UPDATED, written)) < self.touch_interval:
            return  # all recorded within the interval (the steady state): one pass in C
        due = [metric for metric in written if now - metric.updated_on >= self.touch_interval]
        self.store.touch_metrics(list(map(_NAME, due)), "updated_on", now)
        with self._lock:
            self._cache.put([dataclasses.replace(metric, updated_on=now) for metric in due], time.monotonic())

    @staticmethod
    def _normalize(raw_name: str, count: int, result: WriteResult) -> str | None:
        try:
            return names_mod.normalize(raw_name)
        except InvalidMetricName as exc:
            result.reject(count, str(exc))
            return None

    def fetch(
        self, names: Sequence[str], start: int, end: int | None = None, now: int | None = None
    ) -> dict[str, TimeSeries | None]:
        """Read many metrics at once as whisper.fetch(start, end, now) would (None: nothing in range).

        Raises MetricNotFound if a name is not a metric.
        """
        grids, empty = self.fetch_grids(names, start, end, now)
        results: dict[str, TimeSeries | None] = dict.fromkeys(empty)
        for read in grids:
            for row, name in enumerate(read.names):
                results[name] = TimeSeries(name, read.start, read.end, read.step, read.grid[row])
        return results

    def fetch_grids(
        self, names: Sequence[str], start: int, end: int | None = None, now: int | None = None
    ) -> tuple[list["FetchedGrid"], list[str]]:
        """fetch's read as the store made it: the series read together (same stage and
        window) as one grid each, and the names with nothing in range. For callers that turn
        many series into other objects at once (graphite-web's lists)."""
        now = self.now() if now is None else int(now)
        end = now if end is None else int(end)
        start = int(start)
        canonical_names = self._canonical(names)
        metrics = self._get_normalized(canonical_names)
        empty: list[str] = []
        groups: dict[tuple[StageTable, int, int, int], list[str]] = {}

        @per_retention
        def group_of(metric: Metric) -> list[str] | None:
            """The names of the group of the metric's read (one list a group, found once
            per retention: a name costs no hash of its group's key)."""
            window = metric.retention.read_window(start, end, now)
            if window is None:
                return None
            return groups.setdefault((StageTable.of(metric, window.stage_index), window.start, window.end,
                                      window.step), [])

        for canonical in canonical_names:
            metric = metrics.get(canonical)
            if metric is None:
                raise MetricNotFound(f"metric {canonical!r} does not exist")
            group = group_of(metric)
            if group is None:
                empty.append(canonical)
            else:
                group.append(canonical)
        with self.store.read_snapshot():
            grids = [FetchedGrid(group, first, last, step, self.store.read_grid(table, group, first, last, step))
                     for (table, first, last, step), group in groups.items()]
        if groups or empty:
            self._record_reads(empty + [name for group in groups.values() for name in group], now)
        return grids, empty

    def _record_reads(self, names: list[str], now: int) -> None:
        """Set read_on without ever blocking or failing the read.

        The store is asked not to wait (`Store.record_reads`): while another writer holds
        the store, the reads are kept (at most MAX_UNRECORDED_READS names) and recorded
        with their own times by a later read (counted in read_on_deferred). A store the
        reader may not write is logged and counted (read_on_failures), and not tried again
        for those metrics before touch_interval.
        """
        due = self._due(names, "read_on", now)
        with self._lock:
            pending = self._unrecorded_reads
            if not due and not pending:
                return
            self._unrecorded_reads = {}
        reads = {**pending, **{name: now for name in due}}
        try:
            recorded = self.store.record_reads(reads)
        except StoreError as exc:  # not tried again before touch_interval
            self.read_on_failures += 1
            _log.warning("could not record the read of %d metric(s) (read_on): %s", len(reads), exc)
            return
        if not recorded:
            self.read_on_deferred += 1
            with self._lock:
                for name, timestamp in reads.items():
                    self._touched["read_on"].pop(name, None)
                    if name in self._unrecorded_reads or len(self._unrecorded_reads) < MAX_UNRECORDED_READS:
                        self._unrecorded_reads[name] = max(timestamp, self._unrecorded_reads.get(name, 0))

    def expire(self, now: int | None = None) -> int:
        """Remove points past their stage's retention (stores without TTL); returns the count."""
        return self.store.expire_points(self.now() if now is None else now)


def _with_points_to_keep(made: list[Metric], metadatas: list[MetricMetadata], batch_names: list[str],
                         owner: np.ndarray, timestamps: np.ndarray, now: int) -> tuple[list[Metric], set[str]]:
    """(the metrics of `made` with at least one point within their retention, the names of
    the others): a metric is created only to hold a point. `metadatas`: made's, in order
    (a batch shares a few objects: each distinct one's retention is read once)."""
    distinct = dict(zip(map(id, metadatas), metadatas)).values()
    if not len(timestamps) or now - float(timestamps.min()) <= min(md.retention.duration for md in distinct):
        return made, set()  # every point is recent enough for any of them
    newest = np.full(len(batch_names), -np.inf)
    np.maximum.at(newest, owner, timestamps)
    index = {name: i for i, name in enumerate(batch_names)}
    keep = [m for m in made if now - newest[index[m.name]] <= m.retention.duration]
    return keep, {m.name for m in made} - {m.name for m in keep}


__all__ = ["Accessor", "FetchedGrid", "MAX_TIMESTAMP", "TimeSeries", "WriteResult", "check_point"]
