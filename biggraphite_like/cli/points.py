"""`bgl write` and `bgl read`: points in and out of the store."""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import time
from typing import Iterator, TextIO

from biggraphite_like import names as names_mod
from biggraphite_like import settings
from biggraphite_like.accessor import Accessor, WriteResult, check_point
from biggraphite_like.cli.common import (UsageError, add_format_option, format_metadata, new_metric_metadata,
                                        open_accessor, parse_time)
from biggraphite_like.cli.streams import Streams
from biggraphite_like.errors import BglError, InvalidPoint, InvalidTimeRange, MetricNotFound, StoreError, StoreFull
from biggraphite_like.glob import DEFAULT_MAX_RESULTS, is_glob
from biggraphite_like.ingest.batch_writer import write_halving
from biggraphite_like.maintenance.progress import LOG_INTERVAL, Progress
from biggraphite_like.metric import MetricMetadata

STDIN_BATCH_LINES = 50_000
MAX_WARNED_METRICS = 5  # existing metrics named in `write`'s warnings; the rest are counted


@dataclasses.dataclass
class _LineBatch:
    """Points read from stdin, with the line each came from, to report refusals by line."""

    points: dict[str, list[tuple[float, float]]] = dataclasses.field(default_factory=dict)
    lines: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    size: int = 0
    first_line: int = 0
    last_line: int = 0

    def add(self, name: str, point: tuple[float, float], line: int) -> None:
        self.points.setdefault(name, []).append(point)
        self.lines.setdefault(name, []).append(line)
        self.size += 1
        self.first_line = self.first_line or line
        self.last_line = line

    def __len__(self) -> int:
        return self.size

    def halves(self) -> tuple["_LineBatch", "_LineBatch"]:
        """The lines before the middle one and the rest, in input order."""
        entries = sorted((line, name, point) for name, points in self.points.items()
                         for line, point in zip(self.lines[name], points))
        middle = len(entries) // 2
        halves = (_LineBatch(), _LineBatch())
        for index, (line, name, point) in enumerate(entries):
            halves[index >= middle].add(name, point, line)
        return halves


def _stdin_batches(lines: TextIO, total: WriteResult, err: TextIO | Progress) -> Iterator[_LineBatch]:
    """Batches of carbon plaintext lines; malformed lines are reported and skipped."""
    batch = _LineBatch()
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3:
            total.rejected += 1
            err.write(f"bgl write: line {number}: expected 'NAME VALUE TIMESTAMP', got {len(fields)} field(s); skipped\n")
            continue
        name, value, timestamp = fields
        try:
            batch.add(name, (float(timestamp), float(value)), number)
        except ValueError:
            total.rejected += 1
            err.write(f"bgl write: line {number}: value {value!r} or timestamp {timestamp!r} is not a number; skipped\n")
            continue
        if batch.size >= STDIN_BATCH_LINES:
            yield batch
            batch = _LineBatch()
    if batch.size:
        yield batch


def _report_refused_lines(batch: _LineBatch, err: TextIO | Progress) -> None:
    """Name the line of every point the accessor refused (bad name or point)."""
    for name, points in batch.points.items():
        try:
            names_mod.normalize(name)
        except BglError as exc:
            for number in batch.lines[name]:
                err.write(f"bgl write: line {number}: {exc}; skipped\n")
            continue
        for (timestamp, value), number in zip(points, batch.lines[name]):
            try:
                check_point(timestamp, value)
            except InvalidPoint as exc:
                err.write(f"bgl write: line {number}: {str(exc).replace('point: ', '')}; skipped\n")


@dataclasses.dataclass
class _Committed:
    """How far the input is stored: every line up to `line` is committed (or was refused
    and reported)."""

    line: int = 0


def _write_lines(accessor: Accessor, batch: _LineBatch, metadata: MetricMetadata, total: WriteResult,
                 err: TextIO | Progress, committed: _Committed) -> None:
    """Write one batch (one transaction) and advance `committed`.

    A batch the disk cannot hold is written in halves (batch_writer.write_halving), in input
    order, down to 1,000 lines, so as many leading lines as fit are committed; past that
    the StoreFull goes up, `committed` telling how far the input was stored."""
    def write(part: _LineBatch) -> None:
        result = accessor.insert_points(part.points, create=metadata)  # now: when the batch is written
        if result.rejected:
            _report_refused_lines(part, err)
        _add(total, result)
        committed.line = part.last_line

    write_halving(batch, write, may_split=lambda exc: isinstance(exc, StoreFull))


@dataclasses.dataclass
class _IgnoredOptions:
    """Warns, once a metric, when --retention, --aggregation or --xff was given for
    metrics that exist with other metadata: a write never changes an existing metric."""

    args: argparse.Namespace
    asked: MetricMetadata
    err: TextIO | Progress
    warned: int = 0
    unnamed: int = 0

    def check(self, accessor: Accessor, names: list[str]) -> None:
        given = [(option, getattr(self.args, attr), field) for option, attr, field in _METADATA_OPTIONS
                 if getattr(self.args, attr) is not None]
        if not given:
            return
        for name, metric in accessor.get_metrics(_valid_names(names)).items():
            ignored = [(option, text) for option, text, field in given
                       if getattr(metric.metadata, field) != getattr(self.asked, field)]
            if not ignored:
                continue
            self.warned += 1
            if self.warned > MAX_WARNED_METRICS:
                self.unnamed += 1
                continue
            options = " ".join(f"{option} {text}" for option, text in ignored)
            self.err.write(f"bgl write: warning: {name} exists with {format_metadata(metric.metadata)}:"
                           f" {', '.join(f'{o} {t}' for o, t in ignored)} ignored (change it with"
                           f" `bgl set-metadata {name} {options}`)\n")

    def close(self) -> None:
        if self.unnamed:
            self.err.write(f"bgl write: warning: {self.unnamed} more existing metric(s) keep their own metadata\n")


def _valid_names(names: list[str]) -> list[str]:
    """The names that can be looked up (the write reports the others, by line)."""
    valid = []
    for name in names:
        try:
            valid.append(names_mod.normalize(name))
        except BglError:
            continue
    return valid


_METADATA_OPTIONS = (("--retention", "retention", "retention"), ("--aggregation", "aggregation", "aggregator"),
                     ("--xff", "xff", "xfilesfactor"))


def _add(total: WriteResult, result: WriteResult) -> None:
    total.stored += result.stored
    total.too_old += result.too_old
    total.rejected += result.rejected


def cmd_write(args: argparse.Namespace, io: Streams) -> int:
    if args.name == "-" and args.value is not None:
        raise UsageError("`bgl write -` reads lines from stdin and takes no VALUE")
    if args.name != "-" and args.value is None:
        raise UsageError("bgl write NAME VALUE [TIMESTAMP]: VALUE is missing")
    metadata = new_metric_metadata(args)  # a bad --retention is refused before the store is touched
    accessor = open_accessor(args)
    if accessor.store.url.startswith("sqlite:"):
        accessor.syncdb()  # the embedded store sets itself up on first use
    ignored = _IgnoredOptions(args, metadata, io.err)
    now = accessor.now()
    total = WriteResult()
    if args.name == "-":
        committed = _Committed()
        progress = Progress("bgl write: lines", stream=io.err, log_interval=LOG_INTERVAL)  # input lines handled
        ignored.err = progress  # messages (refused lines, warnings) erase the bar: a line each
        try:
            for batch in _stdin_batches(io.stdin, total, progress):
                ignored.check(accessor, list(batch.points))
                _write_lines(accessor, batch, metadata, total, progress, committed)
                progress.advance(committed.line - progress.done)
        except StoreError as exc:
            progress.close()
            io.err.write(
                f"bgl write: error: {exc}\n"
                f"bgl write: lines 1-{committed.line} were committed ({total.stored} point(s) stored);"
                f" nothing from line {committed.line + 1} on was written: send those lines again\n"
            )
            return 1
        progress.close()
    else:
        try:
            value = float(args.value)
            timestamp = float(args.timestamp) if args.timestamp is not None else float(now)
        except ValueError:
            raise InvalidPoint(f"value {args.value!r} or timestamp {args.timestamp!r} is not a number") from None
        names_mod.normalize(args.name)  # a bad name or point is an error, not a skipped line
        check_point(timestamp, value)
        ignored.check(accessor, [args.name])
        _add(total, accessor.insert_points({args.name: [(timestamp, value)]}, now=now, create=metadata))
    ignored.close()
    io.err.write(
        f"bgl write: {total.stored} point(s) stored, {total.rejected} rejected, {total.too_old} older than the retention\n"
    )
    return 1 if total.rejected or total.too_old else 0


def _read_names(accessor, args: argparse.Namespace) -> list[str]:
    """The metrics a read names: NAME itself with --exact or when it is no glob, else every
    metric the glob matches (bounded like every glob: TooManyResults past the limit)."""
    if args.exact or not is_glob(args.name):
        return [args.name]
    found = accessor.store.glob_metrics(accessor.glob(args.name), args.max_series)
    if not found:
        raise MetricNotFound(f"no metric matches {args.name!r} (use --exact if it is a name holding glob characters)")
    return found


def cmd_read(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    now = parse_time(args.now, int(time.time())) if args.now else int(time.time())
    start = parse_time(args.from_, now) if args.from_ else now - 86400
    end = parse_time(args.until, now) if args.until else now
    if start > end:
        raise InvalidTimeRange(f"--from {start} is after --until {end}")
    series = accessor.fetch(_read_names(accessor, args), start, end, now)
    writer = csv.writer(io.out, lineterminator="\n")
    if args.format == "csv":
        writer.writerow(["name", "timestamp", "value"])
    for name, result in series.items():
        values = result.values_list() if result is not None else []
        if args.format == "json":  # one document a line (JSON lines), one line a series
            document = {
                "name": name,
                "start": result.start if result else None,
                "end": result.end if result else None,
                "step": result.step if result else None,
                "values": values,
            }
            io.out.write(json.dumps(document) + "\n")
        elif result is not None:
            for index, value in enumerate(values):
                writer.writerow([name, result.start + index * result.step, "" if value is None else repr(value)])
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("write", help="write one point, or carbon plaintext lines from stdin with NAME '-'")
    p.add_argument("--retention", help=f"retention of new metrics (default {settings.DEFAULT_RETENTION}); an"
                   " existing metric keeps its own (a warning says so: see set-metadata)")
    p.add_argument("--aggregation", help="aggregation method of new metrics (default"
                   f" {settings.DEFAULT_AGGREGATION})")
    p.add_argument("--xff", type=str, help=f"xFilesFactor of new metrics (default {settings.DEFAULT_XFILESFACTOR})")
    p.add_argument("name", metavar="NAME", help="metric name, or - to read 'NAME VALUE TIMESTAMP' lines from stdin")
    p.add_argument("value", metavar="VALUE", nargs="?")
    p.add_argument("timestamp", metavar="TIMESTAMP", nargs="?", help="epoch seconds (default: now)")
    p.set_defaults(handler=cmd_write)

    p = sub.add_parser("read", help="read the points of a metric (or of every metric a glob matches) as whisper.fetch would")
    p.add_argument("--from", dest="from_", metavar="T", help="start (default -24h); T is Graphite's: -1d, now-1h,"
                   " 2026-01-01, 2026-01-01T10:00, 10:00_20260101, epoch seconds, today (UTC unless given)")
    p.add_argument("--until", metavar="T", help="end (default now); the same forms")
    p.add_argument("--now", metavar="T", help="the time the read happens at (default: the clock)")
    add_format_option(p, ("json", "csv"),
                      help="json: one line a series (JSON lines); csv: name,timestamp,value rows (default json)")
    p.add_argument("--exact", action="store_true",
                   help="NAME is an exact name, not a glob (for names holding *, ?, [ ], { })")
    p.add_argument("--max-series", type=int, default=DEFAULT_MAX_RESULTS, metavar="N",
                   help=f"refuse a glob matching more than N metrics (default {DEFAULT_MAX_RESULTS}, the glob limit)")
    p.add_argument("name", metavar="NAME", help="a metric name or a Graphite glob")
    p.set_defaults(handler=cmd_read)
