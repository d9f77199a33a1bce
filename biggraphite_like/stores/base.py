"""The one interface every store implements, and the shapes of data crossing it.

Stores keep bytes; everything that is not storage-specific (name rules, glob matching,
whisper's downsampling, retention arithmetic) lives above them. Data is addressed by
metric name and `StageTable`; points cross the interface as numpy arrays.
"""
from __future__ import annotations

import abc
import contextlib
import dataclasses
import logging
from typing import Generic, Hashable, Iterable, Iterator, Mapping, Sequence, TypeVar

import numpy as np

from biggraphite_like.errors import InvalidShard, UnreadableMetadata
from biggraphite_like.glob import GlobPattern
from biggraphite_like.metric import Metric, MetricMetadata, stored_metric
from biggraphite_like.retention import Stage
from biggraphite_like.tags.index import TagIndex

_log = logging.getLogger("biggraphite_like.stores")


@dataclasses.dataclass(frozen=True, order=True)
class StageTable:
    """Where one stage of a metric is kept: stage 0 holds raw values, later stages (value, count)."""

    stage: Stage
    aggregated: bool

    @property
    def name(self) -> str:
        suffix = "aggr" if self.aggregated else "0"
        return f"datapoints_{self.stage.points}p_{self.stage.precision}s_{suffix}"

    @classmethod
    def of(cls, metric: Metric, stage_index: int) -> "StageTable":
        return cls(metric.retention.stages[stage_index], stage_index > 0)


@dataclasses.dataclass
class PointReads:
    """Points answering a batch of window reads, flat: request index, timestamp, value."""

    request: np.ndarray  # int64, index into the requests
    timestamps: np.ndarray  # int64
    values: np.ndarray  # float64

    @classmethod
    def empty(cls) -> "PointReads":
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))


def place_on_grid(grid: np.ndarray, rows: np.ndarray, timestamps: np.ndarray, values: np.ndarray, first: int,
                  step: int) -> None:
    """grid[rows, (timestamps - first) // step] = values for the points inside the grid's
    time range [first, first + columns * step); rows broadcasts against timestamps (a row
    per chunk of a (chunks, points) group, or one per point)."""
    if not timestamps.size:
        return
    columns = timestamps - first
    columns //= step
    place_columns(grid, rows, columns, values)


def place_columns(grid: np.ndarray, rows: np.ndarray, columns: np.ndarray, values: np.ndarray) -> None:
    """grid[rows, columns] = values for the columns inside the grid (0 <= column < width;
    `columns` may be changed); rows broadcasts against columns. Columns of a row in
    ascending order (as a chunk's are) let the check be done on its first and last."""
    if not columns.size:
        return
    width = grid.shape[1]
    if columns.ndim == 2:
        inside = bool((columns[:, 0] >= 0).all() and (columns[:, -1] < width).all())
    else:
        inside = bool(columns.min() >= 0 and columns.max() < width)
    if not inside:
        keep = (columns >= 0) & (columns < width)
        rows, columns, values = np.broadcast_to(rows, columns.shape)[keep], columns[keep], values[keep]
    if not grid.flags.c_contiguous:
        grid[rows, columns] = values
        return
    columns += rows * width  # one flat index: numpy places by it three times faster than by two
    grid.reshape(-1)[columns] = values


@dataclasses.dataclass
class SealCounts:
    """What sealing windows into chunks did (see Store.seal_points)."""

    windows_sealed: int = 0
    windows_resealed: int = 0  # sealed again: a point arrived after the window was first sealed
    points_sealed: int = 0
    rows_deleted: int = 0
    rows_past_retention: int = 0  # per-point rows of windows already past retention: left to expire

    def add(self, other: "SealCounts") -> None:
        for field in dataclasses.fields(other):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


T = TypeVar("T")


@dataclasses.dataclass
class ScanPage(Generic[T]):
    """One page of a full scan; pass `cursor` back to resume after it (None: the scan is over)."""

    items: list[T]
    cursor: str | None
    # metric scans: rows that hold a name but no readable metadata, name -> why (see
    # metric.stored_metric); `bgl repair` removes them, other jobs count them
    unreadable: dict[str, str] = dataclasses.field(default_factory=dict)


def metrics_page(rows: Iterable[Sequence], cursor: str | None) -> ScanPage[Metric]:
    """A page of a metric scan from rows (name, retention, aggregator, xfilesfactor,
    created_on, updated_on, read_on): unreadable rows go to `unreadable`, not `items`."""
    page: ScanPage[Metric] = ScanPage([], cursor)
    for row in rows:
        try:
            page.items.append(stored_metric(*row))
        except UnreadableMetadata as exc:
            page.unreadable[row[0]] = str(exc)
    return page


def check_shard(shard: int, nshards: int) -> None:
    """Shard k of n: the scans of shards 0..n-1 together see every row once."""
    if nshards < 1 or not 0 <= shard < nshards:
        raise InvalidShard(
            f"shard {shard} of {nshards} (--shard {shard} --nshards {nshards}):"
            " need nshards >= 1 and 0 <= shard < nshards"
        )


class Store(abc.ABC):
    """A place for metric metadata, directories and datapoints."""

    url: str
    unreadable_rows_seen = 0  # rows get_metrics left out: their metadata cannot be read (logged)
    # write_batch() is one serializable transaction: no other writer's change lands between
    # two of its statements (the accessor then skips re-checking what it just wrote in it)
    atomic_write_batch = False

    # -- lifecycle -------------------------------------------------------------------
    @abc.abstractmethod
    def schema_statements(self) -> list[str]:
        """The statements `syncdb` runs to create the schema, in order."""

    @abc.abstractmethod
    def syncdb(self) -> None:
        """Create what is missing of the schema; idempotent."""

    def upgrade_notes(self) -> list[str]:
        """What an operator may still do after `syncdb` to bring an older store up to date
        (optional steps, too long to run unasked), each with its command; none by default."""
        return []

    def vacuum(self) -> dict[str, int | float | str]:
        """Rewrite the store's files to give back the space they hold unused (`bgl syncdb
        --vacuum`); what was done. Nothing by default: the servers of a networked store
        manage their space (Cassandra: compaction)."""
        return {"vacuum": f"nothing to do: {type(self).__name__} manages its own space"}

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the store may be reopened by using it again."""

    def release_mapped_pages(self) -> bool:
        """Give back the resident pages this thread's reads mapped from the store's files
        (SQLite read through mmap); False when there were none to give."""
        return False

    @contextlib.contextmanager
    def write_batch(self) -> Iterator[None]:
        """Group writes so they apply together (one transaction where the store has them)."""
        yield

    def change_token(self) -> Hashable | None:
        """A value that changes whenever points may have changed in the store, by anyone.

        Two equal values (read inside write_batch) mean no point was written, deleted,
        expired or rolled back in between, by this process or another. The downsampler
        trusts what it remembers of the store only while the token it took after its own
        writes is unchanged. None means the store cannot tell (nothing is remembered).
        """
        return None

    def names_token(self) -> Hashable | None:
        """A value that changes whenever a metric or directory is created or deleted, by any
        process (one cheap read).

        Caches of glob answers (graphite-web's workers) compare it to the value they saw
        when they filled up, so a new or deleted metric shows up in every process as soon
        as they next look. None means the store cannot tell (caches then rely on their TTL).
        """
        return None

    @contextlib.contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """Group reads so they see one state of the store (where the store can)."""
        yield

    # -- metadata ----------------------------------------------------------------------
    @abc.abstractmethod
    def create_metrics(self, metrics: Sequence[Metric]) -> set[str] | None:
        """Create (or replace the metadata of) metrics and all their ancestor directories.

        May return the names of those it created that certainly hold no point (none
        existed: the downsampler then reads nothing of them back); None: cannot tell."""

    @abc.abstractmethod
    def get_metrics(self, names: Sequence[str]) -> dict[str, Metric]:
        """The existing metrics among names (normalised names).

        A row whose metadata cannot be read is left out, as if missing, and logged (see
        `readable_metrics`): one bad row must not fail the lookup of the others."""

    def glob_nodes(self, pattern: GlobPattern, max_results: int) -> tuple[list[str], list[str]]:
        """(glob_metrics, glob_directories) of one pattern; a store may share their work."""
        return self.glob_metrics(pattern, max_results), self.glob_directories(pattern, max_results)

    def glob_node_spans(self, pattern: GlobPattern, max_results: int
                        ) -> tuple[list[str], list[str], dict[str, tuple[int, int]] | None]:
        """glob_nodes and the metrics' metric_spans, when the store reads them in the same
        walk (else None: the caller asks metric_spans, a chunk of names at a time)."""
        return (*self.glob_nodes(pattern, max_results), None)

    def metric_spans(self, names: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(retention duration in seconds, updated_on) of the existing metrics among names:
        what a find's intervals need (graphite_plugin.find_view). A store may read them
        without building a Metric each; unreadable rows are left out as get_metrics leaves them."""
        return {name: (m.retention.duration, m.updated_on) for name, m in self.get_metrics(names).items()}

    def readable_metrics(self, rows: Iterable[Sequence]) -> dict[str, Metric]:
        """Metrics by name from get_metrics' rows (as metrics_page takes them); unreadable
        rows are logged with what is wrong and counted in `unreadable_rows_seen`."""
        page = metrics_page(rows, None)
        for why in page.unreadable.values():
            self.unreadable_rows_seen += 1
            _log.warning("%s", why)
        return {m.name: m for m in page.items}

    def glob_metrics(self, pattern: GlobPattern, max_results: int) -> list[str]:
        """Sorted metric names matching pattern; TooManyResults past max_results."""
        return self._glob("metrics", pattern, max_results)

    def glob_directories(self, pattern: GlobPattern, max_results: int) -> list[str]:
        """Sorted directory names matching pattern; TooManyResults past max_results."""
        return self._glob("directories", pattern, max_results)

    @abc.abstractmethod
    def _glob(self, table: str, pattern: GlobPattern, max_results: int) -> list[str]:
        """The store's glob: sorted names of `table` ("metrics" or "directories") matching
        pattern; TooManyResults past max_results."""

    @abc.abstractmethod
    def update_metadata(self, name: str, metadata: MetricMetadata) -> None:
        """Replace a metric's metadata; data of stages that no longer exist is no longer read."""

    @abc.abstractmethod
    def touch_metrics(self, names: Sequence[str], field: str, timestamp: int) -> None:
        """Set `updated_on` or `read_on` of metrics to timestamp."""

    def record_reads(self, reads: Mapping[str, int]) -> bool:
        """Set `read_on` of metrics (name -> read time) without waiting for anyone: False
        when that would wait (another writer holds the store's lock) and nothing was
        written. A read must never block behind a writer to record itself."""
        by_time: dict[int, list[str]] = {}
        for name, timestamp in reads.items():
            by_time.setdefault(timestamp, []).append(name)
        for timestamp, names in sorted(by_time.items()):
            self.touch_metrics(names, "read_on", timestamp)
        return True

    @abc.abstractmethod
    def delete_metrics(self, names: Sequence[str]) -> None:
        """Remove metrics and their points (directories stay: cleanup removes empty ones)."""

    # -- directories and full scans (maintenance jobs) -----------------------------------
    @abc.abstractmethod
    def create_directories(self, names: Sequence[str]) -> None:
        """Create directories and all their ancestors (existing ones are kept)."""

    @abc.abstractmethod
    def delete_directories(self, names: Sequence[str]) -> None:
        """Remove directory rows (only those rows: their children are the caller's concern)."""

    @abc.abstractmethod
    def existing_directories(self, names: Sequence[str]) -> set[str]:
        """The directories among names that exist."""

    @abc.abstractmethod
    def directories_with_children(self, names: Sequence[str]) -> set[str]:
        """The names among names that are the parent of at least one metric or directory."""

    @abc.abstractmethod
    def scan_metrics(
        self, shard: int = 0, nshards: int = 1, cursor: str | None = None, page_size: int = 1000
    ) -> Iterator[ScanPage[Metric]]:
        """Every metric once, in pages, without a glob.

        Shard k of n sees a disjoint part; the n shards together see every metric. A scan
        resumes after the page whose cursor it is given (order is the store's own). Rows
        whose metadata cannot be read are in `unreadable`, not `items` (see metrics_page).
        """

    @abc.abstractmethod
    def scan_directories(
        self, shard: int = 0, nshards: int = 1, cursor: str | None = None, page_size: int = 1000
    ) -> Iterator[ScanPage[str]]:
        """Every directory name once, in pages; sharded and resumable as scan_metrics."""

    def tag_index(self) -> "TagIndex":
        """The store's index of tagged series (biggraphite_like.tags.index)."""
        raise NotImplementedError(f"{type(self).__name__} has no tag index")

    def stats(self) -> dict[str, int | float | str]:
        """Facts about the store an operator can act on (counts, sizes); store-specific keys,
        except the bytes on disk `bgl du` reads (maintenance.usage.store_disk_usage):
        `disk_bytes.table.<table>` per table with its indexes, their sums
        `disk_bytes.points` and `disk_bytes.metadata`, or `disk_bytes.tables` saying why
        there are none; `disk_bytes.free`, bytes the files hold unused (SQLite's free pages)."""
        return {}

    # -- datapoints --------------------------------------------------------------------
    @abc.abstractmethod
    def write_points(
        self,
        table: StageTable,
        names: Sequence[str],
        timestamps: np.ndarray,
        values: np.ndarray,
        counts: np.ndarray | None = None,
    ) -> None:
        """Store points (names[i], timestamps[i], values[i]); a timestamp written again is replaced.

        A stage keeps `points` slots like a whisper archive: a point replaces whatever
        occupied its slot, so a stage never holds more than `points` values per metric.
        """

    @abc.abstractmethod
    def read_points(
        self, table: StageTable, names: Sequence[str], starts: np.ndarray, ends: np.ndarray
    ) -> PointReads:
        """Points of names[i] with starts[i] <= timestamp < ends[i], for every request i.

        Each window is at most the stage's duration long.
        """

    def read_grid(self, table: StageTable, names: Sequence[str], first: int, last: int, step: int) -> np.ndarray:
        """The points of every name over [first, last) on the step grid a fetch hands out:
        grid[i, j] is names[i]'s value at first + j * step, NaN where there is none
        (timestamps are multiples of the stage's precision, `step`). Stores that can place
        decoded points there directly override this; here read_points' answer is placed."""
        count = len(names)
        grid = np.full((count, (last - first) // step), np.nan)
        reads = self.read_points(table, names, np.full(count, first, np.int64), np.full(count, last, np.int64))
        place_on_grid(grid, reads.request, reads.timestamps, reads.values, first, step)
        return grid

    @abc.abstractmethod
    def expire_points(self, now: int) -> int:
        """Remove points older than their stage's duration; returns how many were removed."""

    def announce_seal(self, horizon: int) -> bool:
        """Let readers know windows ending by horizon may be sealed from now on; True when that
        is news (the sealing job then waits for reads started before to end). Stores that seal
        as they write (SQLite) have nothing to announce."""
        return False

    def seal_points(self, metrics: Sequence[Metric], horizon: int, now: int) -> SealCounts:
        """Encode the windows of metrics' stages that end by horizon into chunks (Cassandra:
        per-point rows become one chunk a window); reads give the same points before and after.
        Stores that seal as they write (SQLite) have nothing to do."""
        return SealCounts()
