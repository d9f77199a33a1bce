"""`bgl`: the operator's command line (schema, write, list, read, info, maintenance jobs, and
`run` for the whole local stack)."""
from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys
import time
from typing import Iterator, Sequence, TextIO

from biggraphite_like import settings
from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor, WriteResult, check_point
from biggraphite_like.errors import BglError, InvalidMaintenanceOption, InvalidPoint, InvalidTimeRange, StackError
from biggraphite_like.maintenance import metrics_file
from biggraphite_like.maintenance.clean import HELP as CLEAN_HELP
from biggraphite_like.maintenance.clean import clean
from biggraphite_like.maintenance.delete import delete
from biggraphite_like.maintenance.import_whisper import import_whisper
from biggraphite_like.maintenance.progress import format_summary
from biggraphite_like.maintenance.repair import repair
from biggraphite_like.maintenance.usage import disk_usage, statistics
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.retention import parse_duration

STDIN_BATCH_LINES = 50_000


def parse_time(text: str, now: int) -> int:
    """Epoch seconds from `1700000000`, `now`, or `-3600` / `-1h` / `-7d` (relative to now)."""
    text = text.strip()
    if text == "now":
        return now
    if text.startswith("-"):
        return now - parse_duration(text[1:], "relative time")
    try:
        return int(float(text))
    except ValueError:
        raise InvalidTimeRange(f"invalid time {text!r}: use epoch seconds, 'now' or a relative time like -1h") from None


def _metadata(args: argparse.Namespace) -> MetricMetadata:
    return MetricMetadata.create(args.retention, args.aggregation, args.xff)


def _open(args: argparse.Namespace) -> Accessor:
    url = args.store or settings.default_store_url()
    if url == f"sqlite://{os.path.join(settings.default_data_dir(), settings.DB_FILE_NAME)}":
        os.makedirs(settings.default_data_dir(), exist_ok=True)
    return Accessor.from_url(url)


def cmd_syncdb(args: argparse.Namespace, out: TextIO) -> int:
    accessor = _open(args)
    statements = accessor.syncdb(dry_run=args.dry_run)
    if args.dry_run:
        out.write("\n".join(statements) + "\n")
    else:
        out.write(f"schema ready in {accessor.store.url} ({len(statements)} statements)\n")
    return 0


@dataclasses.dataclass
class _LineBatch:
    """Points read from stdin, with the line each came from, to report refusals by line."""

    points: dict[str, list[tuple[float, float]]] = dataclasses.field(default_factory=dict)
    lines: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    size: int = 0

    def add(self, name: str, point: tuple[float, float], line: int) -> None:
        self.points.setdefault(name, []).append(point)
        self.lines.setdefault(name, []).append(line)
        self.size += 1


def _stdin_batches(lines: TextIO, total: WriteResult, err: TextIO) -> Iterator[_LineBatch]:
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


def _report_refused_lines(batch: _LineBatch, err: TextIO) -> None:
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


def _add(total: WriteResult, result: WriteResult) -> None:
    total.stored += result.stored
    total.too_old += result.too_old
    total.rejected += result.rejected


def cmd_write(args: argparse.Namespace, out: TextIO, err: TextIO, stdin: TextIO) -> int:
    accessor = _open(args)
    if accessor.store.url.startswith("sqlite:"):
        accessor.syncdb()  # the embedded store sets itself up on first use
    metadata = _metadata(args)
    now = int(time.time())
    total = WriteResult()
    if args.name == "-":
        if args.value is not None:
            raise InvalidPoint("`bgl write -` reads lines from stdin and takes no VALUE")
        for batch in _stdin_batches(stdin, total, err):
            result = accessor.insert_points(batch.points, now=now, create=metadata)
            if result.rejected:
                _report_refused_lines(batch, err)
            _add(total, result)
    else:
        if args.value is None:
            raise InvalidPoint("bgl write NAME VALUE [TIMESTAMP]: VALUE is missing")
        try:
            value = float(args.value)
            timestamp = float(args.timestamp) if args.timestamp is not None else float(now)
        except ValueError:
            raise InvalidPoint(f"value {args.value!r} or timestamp {args.timestamp!r} is not a number") from None
        names_mod.normalize(args.name)  # a bad name or point is an error, not a skipped line
        check_point(timestamp, value)
        _add(total, accessor.insert_points({args.name: [(timestamp, value)]}, now=now, create=metadata))
    err.write(
        f"bgl write: {total.stored} point(s) stored, {total.rejected} rejected, {total.too_old} older than the retention\n"
    )
    return 1 if total.rejected or total.too_old else 0


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    accessor = _open(args)
    found = accessor.glob_directories(args.glob) if args.directories else accessor.glob_metrics(args.glob)
    for name in found:
        out.write(name + "\n")
    return 0


def cmd_read(args: argparse.Namespace, out: TextIO) -> int:
    accessor = _open(args)
    now = parse_time(args.now, int(time.time())) if args.now else int(time.time())
    start = parse_time(args.from_, now) if args.from_ else now - 86400
    end = parse_time(args.until, now) if args.until else now
    if start > end:
        raise InvalidTimeRange(f"--from {start} is after --until {end}")
    series = accessor.fetch([args.name], start, end, now)
    name, result = next(iter(series.items()))
    values = result.values_list() if result is not None else []
    if args.format == "json":
        document = {
            "name": name,
            "start": result.start if result else None,
            "end": result.end if result else None,
            "step": result.step if result else None,
            "values": values,
        }
        out.write(json.dumps(document) + "\n")
    else:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["timestamp", "value"])
        if result is not None:
            for index, value in enumerate(values):
                writer.writerow([result.start + index * result.step, "" if value is None else repr(value)])
    return 0


def cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    accessor = _open(args)
    metric = accessor.get_metric(args.name)
    if metric is None:
        from biggraphite_like.errors import MetricNotFound

        raise MetricNotFound(f"metric {args.name!r} does not exist")
    info = metric.as_dict()
    info["stages"] = [
        {"precision": s.precision, "points": s.points, "duration": s.duration} for s in metric.retention.stages
    ]
    out.write(json.dumps(info, indent=2) + "\n")
    return 0


def _finish_job(args: argparse.Namespace, job: str, counters: dict, out: TextIO, help_texts: dict | None = None) -> None:
    """Print a job's summary line and write its Prometheus text file if asked."""
    out.write(format_summary(job, counters, getattr(args, "dry_run", False)) + "\n")
    if getattr(args, "metrics_file", None):
        metrics_file.write(args.metrics_file, job.replace("-", "_"), counters, help_texts)


def _check_metrics_file(args: argparse.Namespace) -> None:
    """Refuse an unwritable --metrics-file before the job runs, not after."""
    path = getattr(args, "metrics_file", None)
    if path:
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
            raise InvalidMaintenanceOption(f"--metrics-file {path}: directory {directory} does not exist or is not writable")


def cmd_clean(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    max_age = parse_duration(args.max_age, "max age") if args.max_age is not None else None
    accessor = _open(args)
    report = clean(accessor, max_age=max_age, shard=args.shard, nshards=args.nshards, dry_run=args.dry_run,
                   progress_stream=err)
    _finish_job(args, "clean", report.counters(), out, CLEAN_HELP)
    return 0


def cmd_delete(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    accessor = _open(args)
    report = delete(accessor, args.glob, recursive=args.recursive, dry_run=args.dry_run)
    for name in report.metrics:
        out.write(name + "\n")
    if report.matched_directories and not args.recursive:
        err.write(
            f"bgl delete: {args.glob!r} matches {len(report.matched_directories)} director"
            f"{'y' if len(report.matched_directories) == 1 else 'ies'} (e.g. {report.matched_directories[0]}):"
            " only metrics were deleted; use --recursive to delete everything beneath them\n"
        )
    if not report.metrics and not (args.recursive and report.matched_directories):
        err.write(f"bgl delete: nothing matches {args.glob!r}\n")
    _finish_job(args, "delete", report.counters(), err)
    return 0


def cmd_repair(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    accessor = _open(args)
    report = repair(accessor, shard=args.shard, nshards=args.nshards, dry_run=args.dry_run, progress_stream=err)
    for kind, names in report.examples.items():
        out.write(f"{kind}: {', '.join(names)}{' ...' if len(names) >= 20 else ''}\n")
    _finish_job(args, "repair", report.counters(), out)
    return 0


def cmd_import_whisper(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    accessor = _open(args)
    if accessor.store.url.startswith("sqlite:") and not args.dry_run:
        accessor.syncdb()  # the embedded store sets itself up on first use
    report = import_whisper(accessor, args.directory, prefix=args.prefix, jobs=args.jobs, dry_run=args.dry_run,
                            progress_stream=err, err=err)
    _finish_job(args, "import-whisper", report.counters(), out)
    return 1 if report.files_failed else 0


def _human_bytes(count: int) -> str:
    for unit in ("B", "K", "M", "G", "T"):
        if count < 1024 or unit == "T":
            return f"{count:.0f}{unit}" if unit == "B" else f"{count:.1f}{unit}"
        count /= 1024
    raise AssertionError


def cmd_du(args: argparse.Namespace, out: TextIO) -> int:
    accessor = _open(args)
    rows, total = disk_usage(accessor, args.glob)
    if args.format == "json":
        document = {"entries": [dataclasses.asdict(r) for r in rows], "total": dataclasses.asdict(total)}
        out.write(json.dumps(document, indent=2) + "\n")
        return 0
    out.write(f"{'BYTES':>10} {'METRICS':>9} {'POINTS':>12}  NAME\n")
    for row in [*rows, total]:
        name = row.name + ("/" if row.kind == "directory" else "")
        out.write(f"{_human_bytes(row.bytes):>10} {row.metrics:>9} {row.points:>12}  {name}\n")
    return 0


def cmd_stats(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    accessor = _open(args)
    facts = statistics(accessor, progress_stream=err)
    if args.format == "json":
        out.write(json.dumps(facts, indent=2) + "\n")
        return 0
    for key, value in facts.items():
        if isinstance(value, dict):
            out.write(f"{key}:\n")
            for inner, count in value.items():
                out.write(f"  {inner}: {count}\n")
        else:
            out.write(f"{key}: {value}\n")
    return 0


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from biggraphite_like import stack

    if args.web_workers < 1:
        raise StackError(f"--web-workers {args.web_workers}: give at least 1")
    config = stack.StackConfig.create(
        args.data_dir or settings.default_data_dir(), args.store, bind=args.bind, line_port=args.line_port,
        pickle_port=args.pickle_port, carbonlink_port=args.carbonlink_port, web_port=args.web_port,
        web_workers=args.web_workers)
    return stack.run(config, out, err)


def _add_shard_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=int, default=0, metavar="N", help="which shard to work on, 0..M-1 (default 0)")
    p.add_argument("--nshards", type=int, default=1, metavar="M", help="how many shards the work is split in (default 1)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bgl", description="Operate a biggraphite_like store.")
    parser.add_argument(
        "--store",
        help=f"store URL (default: ${settings.STORE_ENV}, else sqlite://<data dir>/{settings.DB_FILE_NAME};"
        f" data dir: ${settings.DATA_DIR_ENV} or ~/.local/share/biggraphite_like)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("syncdb", help="create the schema (idempotent)")
    p.add_argument("--dry-run", action="store_true", help="print the statements instead of running them")

    p = sub.add_parser("write", help="write one point, or carbon plaintext lines from stdin with NAME '-'")
    p.add_argument("--retention", default=settings.DEFAULT_RETENTION,
                   help=f"retention of new metrics (default {settings.DEFAULT_RETENTION})")
    p.add_argument("--aggregation", default=settings.DEFAULT_AGGREGATION,
                   help=f"aggregation method of new metrics (default {settings.DEFAULT_AGGREGATION})")
    p.add_argument("--xff", default=settings.DEFAULT_XFILESFACTOR, type=str,
                   help=f"xFilesFactor of new metrics (default {settings.DEFAULT_XFILESFACTOR})")
    p.add_argument("name", metavar="NAME", help="metric name, or - to read 'NAME VALUE TIMESTAMP' lines from stdin")
    p.add_argument("value", metavar="VALUE", nargs="?")
    p.add_argument("timestamp", metavar="TIMESTAMP", nargs="?", help="epoch seconds (default: now)")

    p = sub.add_parser("list", help="list metrics (or directories) matching a Graphite glob, sorted")
    p.add_argument("--directories", action="store_true", help="list directories instead of metrics")
    p.add_argument("glob", metavar="GLOB")

    p = sub.add_parser("read", help="read a metric's points as whisper.fetch would")
    p.add_argument("--from", dest="from_", metavar="T", help="start: epoch, 'now' or relative like -1h (default -24h)")
    p.add_argument("--until", metavar="T", help="end (default now)")
    p.add_argument("--now", metavar="T", help="the time the read happens at (default: the clock)")
    p.add_argument("--format", choices=["json", "csv"], default="json")
    p.add_argument("name", metavar="NAME")

    p = sub.add_parser("info", help="show a metric's metadata as JSON")
    p.add_argument("name", metavar="NAME")

    p = sub.add_parser("clean", help="remove stale metrics, empty directories and expired points")
    p.add_argument("--max-age", metavar="DURATION",
                   help="remove metrics not written for this long, like 30d (default: their whole retention)")
    p.add_argument("--dry-run", action="store_true", help="count what would be removed, change nothing")
    _add_shard_options(p)
    p.add_argument("--metrics-file", metavar="PATH", help="write the run's counters there (Prometheus text format)")

    p = sub.add_parser("delete", help="delete metrics matching a glob, their points, and directories left empty")
    p.add_argument("--recursive", action="store_true", help="also delete everything beneath matching directories")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted, change nothing")
    p.add_argument("--metrics-file", metavar="PATH", help="write the run's counters there (Prometheus text format)")
    p.add_argument("glob", metavar="GLOB")

    p = sub.add_parser("repair", help="re-create missing directories, remove invalid metadata rows")
    p.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")
    _add_shard_options(p)
    p.add_argument("--metrics-file", metavar="PATH", help="write the run's counters there (Prometheus text format)")

    p = sub.add_parser("import-whisper", help="import a tree of whisper files")
    p.add_argument("--prefix", metavar="P", help="prepend P. to every metric name")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="parallel processes (default 1)")
    p.add_argument("--dry-run", action="store_true", help="read and check the files, write nothing")
    p.add_argument("--metrics-file", metavar="PATH", help="write the run's counters there (Prometheus text format)")
    p.add_argument("directory", metavar="DIR")

    p = sub.add_parser("du", help="metrics, points capacity and whisper-equivalent bytes per metric or directory")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("glob", metavar="GLOB", nargs="?", default="*", help="what to measure (default: top level, *)")

    p = sub.add_parser("stats", help="store facts and counts an operator can act on")
    p.add_argument("--format", choices=["text", "json"], default="text")

    p = sub.add_parser("run", help="run carbon-cache and graphite-web on the store until Ctrl-C")
    p.add_argument("--store", default=argparse.SUPPRESS, help="store URL (the same as bgl --store URL run)")
    p.add_argument("--data-dir", metavar="DIR",
                   help="configuration, logs and the default store (default: the data dir above)")
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS",
                   help="address every service listens on (default 127.0.0.1; 0.0.0.0 for every interface)")
    for option, default, what in (("--line-port", 2003, "carbon's plaintext receiver"),
                                  ("--pickle-port", 2004, "carbon's pickle receiver"),
                                  ("--carbonlink-port", 7002, "carbon's cache queries (graphite-web's CarbonLink)"),
                                  ("--web-port", 8080, "graphite-web")):
        p.add_argument(option, type=int, default=default, metavar="PORT", help=f"{what} (default {default})")
    p.add_argument("--web-workers", type=int, default=2, metavar="N",
                   help="graphite-web processes, 4 threads each (default 2)")
    return parser


_TIME_OPTIONS = ("--from", "--until", "--now")


def _attach_time_values(argv: Sequence[str]) -> list[str]:
    """`--from -1h` -> `--from=-1h`: argparse would take `-1h` for an option."""
    result: list[str] = []
    index = 0
    while index < len(argv):
        if argv[index] in _TIME_OPTIONS and index + 1 < len(argv):
            result.append(f"{argv[index]}={argv[index + 1]}")
            index += 2
        else:
            result.append(argv[index])
            index += 1
    return result


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    args = build_parser().parse_args(_attach_time_values(sys.argv[1:] if argv is None else list(argv)))
    try:
        if args.command == "syncdb":
            return cmd_syncdb(args, stdout)
        if args.command == "write":
            return cmd_write(args, stdout, stderr, stdin)
        if args.command == "list":
            return cmd_list(args, stdout)
        if args.command == "read":
            return cmd_read(args, stdout)
        if args.command == "info":
            return cmd_info(args, stdout)
        if args.command == "run":
            return cmd_run(args, stdout, stderr)
        _check_metrics_file(args)
        if args.command == "clean":
            return cmd_clean(args, stdout, stderr)
        if args.command == "delete":
            return cmd_delete(args, stdout, stderr)
        if args.command == "repair":
            return cmd_repair(args, stdout, stderr)
        if args.command == "import-whisper":
            return cmd_import_whisper(args, stdout, stderr)
        if args.command == "du":
            return cmd_du(args, stdout)
        if args.command == "stats":
            return cmd_stats(args, stdout, stderr)
    except BglError as exc:
        stderr.write(f"bgl {args.command}: error: {exc}\n")
        return 1
    except BrokenPipeError:
        return 0
    raise AssertionError(args.command)


def main_entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    main_entry()
