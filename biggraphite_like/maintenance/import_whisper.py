"""`bgl import-whisper`: copy a tree of whisper files into the store, exactly.

Each `*.wsp` file becomes the metric named by its path relative to the tree (`a/b/c.wsp`
is `a.b.c`, after an optional prefix), with the retention, aggregation method and
xFilesFactor of its header. Each archive's points go into the stage of the same
precision as they are (`Store.write_points` per `StageTable`), not recomputed from the
finest one: coarse archives hold history the finest archive no longer covers. So after an
import, `Accessor.fetch` returns what `whisper.fetch` returns on the file, for any window.

A point is imported when whisper.fetch could return it: its timestamp sits in the slot
whisper would read it from (stale slots of an older cycle are left out, as whisper leaves
them out) and its value is finite (whisper would return a NaN it was given; our stores
keep no NaN, so such a slot reads as a gap). Aggregated stages get a count of 1 (whisper
keeps no counts). Files are read and written in parallel processes (`jobs`), in batches
of files per transaction. A file that cannot be read (truncated, bad header, retention
whisper itself would refuse, name that is not a valid metric name) is reported with its
path and reason and skipped; the rest is imported.
"""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import struct
import time
from typing import Iterator, Sequence, TextIO

import numpy as np

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import BglError
from biggraphite_like.maintenance.options import check_jobs
from biggraphite_like.maintenance.progress import Progress
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.stores.base import StageTable

SUFFIX = ".wsp"
FILES_PER_BATCH = 100
_METADATA = struct.Struct("!2LfL")  # aggregation type, max retention, xFilesFactor, archive count
_ARCHIVE_INFO = struct.Struct("!3L")  # offset, seconds per point, points
_POINT = np.dtype([("ts", ">u4"), ("value", ">f8")])
# whisper's aggregation type codes (whisper.aggregationTypeToMethod)
_METHODS = {1: "average", 2: "sum", 3: "last", 4: "max", 5: "min", 6: "avg_zero", 7: "absmax", 8: "absmin"}


class WhisperDirectoryMissing(BglError, FileNotFoundError):
    """The directory to import from does not exist or is not a directory."""


class BadWhisperFile(BglError, ValueError):
    """A whisper file that cannot be imported (the message names the file and the reason)."""


@dataclasses.dataclass
class WhisperData:
    """What one whisper file holds: its metadata and each archive's importable points."""

    name: str
    metadata: MetricMetadata
    archives: list[tuple[np.ndarray, np.ndarray]]  # per archive: (timestamps int64, values float64)

    @property
    def points(self) -> int:
        return sum(len(ts) for ts, _ in self.archives)


def read_whisper(path: str, name: str) -> WhisperData:
    """Parse a whisper file (header and archives) with whisper's own validity checks."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise BadWhisperFile(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) < _METADATA.size:
        raise BadWhisperFile(f"{path}: truncated header ({len(data)} bytes)")
    method_code, _, xff, count = _METADATA.unpack_from(data, 0)
    if method_code not in _METHODS:
        raise BadWhisperFile(f"{path}: unknown aggregation type {method_code} in the header")
    if not 0 <= xff <= 1:
        raise BadWhisperFile(f"{path}: xFilesFactor {xff} in the header is outside [0, 1]")
    if count < 1 or _METADATA.size + count * _ARCHIVE_INFO.size > len(data):
        raise BadWhisperFile(f"{path}: truncated archive list ({count} archives announced)")
    infos = [_ARCHIVE_INFO.unpack_from(data, _METADATA.size + i * _ARCHIVE_INFO.size) for i in range(count)]
    try:
        metadata = MetricMetadata.create([(step, points) for _, step, points in infos], _METHODS[method_code], xff)
    except BglError as exc:
        raise BadWhisperFile(f"{path}: {exc}") from None
    archives = []
    for offset, step, points in sorted(infos, key=lambda info: info[1]):
        end = offset + points * _POINT.itemsize
        if end > len(data):
            raise BadWhisperFile(f"{path}: truncated archive of {points} points at {step}s ({len(data)} bytes, need {end})")
        raw = np.frombuffer(data, _POINT, count=points, offset=offset)
        timestamps = raw["ts"].astype(np.int64)
        values = raw["value"].astype(np.float64)
        base = int(timestamps[0])
        if base == 0:  # whisper reads an archive whose first slot is empty as empty
            archives.append((np.empty(0, np.int64), np.empty(0, np.float64)))
            continue
        # keep the points whisper.fetch would return: in the slot their timestamp maps to
        expected_slot = ((timestamps - base) // step) % points
        keep = (timestamps > 0) & (timestamps % step == 0) & (expected_slot == np.arange(points)) & np.isfinite(values)
        archives.append((timestamps[keep], values[keep]))
    return WhisperData(name, metadata, archives)


def metric_name(root: str, path: str, prefix: str | None) -> str:
    """`root/a/b/c.wsp` -> `prefix.a.b.c`, normalised (InvalidMetricName if it cannot be a name)."""
    relative = os.path.relpath(path, root)[: -len(SUFFIX)]
    name = ".".join(relative.split(os.sep))
    return names_mod.normalize(f"{prefix}.{name}" if prefix else name)


def find_files(root: str) -> list[str]:
    """Every whisper file under root, sorted."""
    if not os.path.isdir(root):
        raise WhisperDirectoryMissing(f"{root} is not a directory: give the root of a whisper tree (e.g. /opt/graphite/storage/whisper)")
    found = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        found.extend(os.path.join(directory, f) for f in sorted(files) if f.endswith(SUFFIX))
    return found


@dataclasses.dataclass
class ImportReport:
    files_found: int = 0
    metrics_imported: int = 0
    points_imported: int = 0
    files_failed: int = 0
    duration_seconds: float = 0.0
    errors: list[str] = dataclasses.field(default_factory=list)

    def counters(self) -> dict[str, int | float]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "errors"}


_worker_accessor: Accessor | None = None


def _worker_init(url: str) -> None:
    global _worker_accessor
    _worker_accessor = Accessor.from_url(url)


def _import_batch(accessor: Accessor | None, root: str, paths: Sequence[str], prefix: str | None,
                  dry_run: bool, now: int) -> tuple[int, int, list[str]]:
    """Read and write one batch of files; returns (metrics, points, errors)."""
    parsed: list[WhisperData] = []
    errors: list[str] = []
    for path in paths:
        try:
            parsed.append(read_whisper(path, metric_name(root, path, prefix)))
        except BglError as exc:
            message = str(exc)
            errors.append(message if message.startswith(path) else f"{path}: {message}")
    if not parsed or dry_run:
        return len(parsed), sum(d.points for d in parsed), errors
    assert accessor is not None
    store = accessor.store
    tables: dict[StageTable, list[tuple[str, np.ndarray, np.ndarray]]] = {}
    for item in parsed:
        for index, (stage, (timestamps, values)) in enumerate(zip(item.metadata.retention.stages, item.archives)):
            if len(timestamps):
                tables.setdefault(StageTable(stage, index > 0), []).append((item.name, timestamps, values))
    with store.write_batch():
        accessor.create_metrics([(d.name, d.metadata) for d in parsed], now)
        for table, series in tables.items():
            names = [n for n, ts, _ in series for _ in range(len(ts))]
            store.write_points(table, names, np.concatenate([ts for _, ts, _ in series]),
                               np.concatenate([vs for _, _, vs in series]))
    return len(parsed), sum(d.points for d in parsed), errors


def _run_batch(args: tuple) -> tuple[int, int, int, list[str]]:
    root, paths, prefix, dry_run, now = args
    metrics, points, errors = _import_batch(_worker_accessor, root, paths, prefix, dry_run, now)
    return len(paths), metrics, points, errors


def import_whisper(accessor: Accessor, root: str, prefix: str | None = None, jobs: int = 1, dry_run: bool = False,
                   progress_stream: TextIO | None = None, err: TextIO | None = None,
                   now: int | None = None) -> ImportReport:
    """Import every whisper file under root (see module docstring); errors go to `err` as they come."""
    started = time.monotonic()
    check_jobs(jobs)
    if prefix:
        prefix = names_mod.normalize(prefix)
    now = int(time.time()) if now is None else now
    root = os.path.abspath(root)
    files = find_files(root)
    report = ImportReport(files_found=len(files))
    batches = [(root, files[i:i + FILES_PER_BATCH], prefix, dry_run, now) for i in range(0, len(files), FILES_PER_BATCH)]
    progress = Progress("import-whisper: files", len(files), progress_stream)

    def collect(results: Iterator[tuple[int, int, int, list[str]]]) -> None:
        for done, metrics, points, errors in results:
            report.metrics_imported += metrics
            report.points_imported += points
            report.files_failed += len(errors)
            for message in errors:
                report.errors.append(message)
                if err is not None:
                    err.write("\r\033[K" if progress.enabled else "")
                    err.write(f"bgl import-whisper: skipped {message}\n")
            progress.advance(done)

    if jobs == 1 or len(batches) <= 1:
        global _worker_accessor
        previous, _worker_accessor = _worker_accessor, accessor
        try:
            collect(_run_batch(batch) for batch in batches)
        finally:
            _worker_accessor = previous
    else:
        context = multiprocessing.get_context("spawn")
        with context.Pool(jobs, initializer=_worker_init, initargs=(accessor.store.url,)) as pool:
            collect(pool.imap_unordered(_run_batch, batches))
    progress.close()
    report.duration_seconds = round(time.monotonic() - started, 3)
    return report
