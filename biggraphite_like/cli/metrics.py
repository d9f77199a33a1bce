"""`bgl list` and `bgl info`: which metrics exist and what they are."""
from __future__ import annotations

import argparse

from biggraphite_like import settings
from biggraphite_like.cli.common import (add_format_option, finish_job, format_metadata, format_retention,
                                        format_seconds, format_time, open_accessor, wants_json, write_json)
from biggraphite_like.cli.streams import Streams
from biggraphite_like.errors import MetricNotFound
from biggraphite_like.maintenance.resize import MetadataChange, set_metadata
from biggraphite_like.retention import Retention


def cmd_list(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    found = accessor.glob_directories(args.glob) if args.directories else accessor.glob_metrics(args.glob)
    if wants_json(args):
        write_json(io.out, {"glob": args.glob, "kind": "directories" if args.directories else "metrics",
                            "names": found})
        return 0
    for name in found:
        io.out.write(name + "\n")
    if not found:
        io.err.write(_empty_list_hint(accessor, args) + "\n")
    return 0


def _empty_list_hint(accessor, args: argparse.Namespace) -> str:
    """Why a listing is empty and what to try: the glob may name directories (every top
    level name is one), or metrics when --directories was given."""
    if args.directories:
        others, kind, what, how = accessor.glob_metrics(args.glob), "directory", ("metric", "metrics"), "without"
    else:
        others, kind, what, how = accessor.glob_directories(args.glob), "metric", ("directory", "directories"), "with"
    if not others:
        return f"bgl list: nothing matches {args.glob!r}"
    deeper = "" if args.directories else f"; or a glob one level deeper, like {args.glob + '.*'!r}"
    return (f"bgl list: no {kind} matches {args.glob!r}, but {len(others)} {what[len(others) > 1]}"
            f" {'do' if len(others) > 1 else 'does'} (e.g. {others[0]}): list them {how} --directories{deeper}")


def cmd_info(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    metric = accessor.get_metric(args.name)
    if metric is None:
        raise MetricNotFound(f"metric {args.name!r} does not exist")
    info = metric.as_dict()
    info["retention"] = format_retention(metric.retention)  # what --retention takes
    for field in ("created_on", "updated_on", "read_on"):
        info[field] = format_time(info[field])  # null: never
    info["stages"] = [
        {"retention": format_retention(Retention((s,))), "precision": s.precision, "points": s.points,
         "duration": s.duration} for s in metric.retention.stages
    ]
    write_json(io.out, info)
    return 0


def cmd_set_metadata(args: argparse.Namespace, io: Streams) -> int:
    change = MetadataChange.parse(args.retention, args.aggregation, args.xff, args.storage_schemas,
                                  args.storage_aggregation)
    report = set_metadata(open_accessor(args), args.glob, change, dry_run=args.dry_run, progress_stream=io.err)
    if not wants_json(args):
        verb = "would change" if args.dry_run else "changed"
        for name, old, new in report.changes:
            shorter = new.retention.duration < old.retention.duration
            note = (f" (keeps {format_seconds(new.retention.duration)} of {format_seconds(old.retention.duration)}:"
                    " older points are dropped)" if shorter else "")
            io.out.write(f"{name}: {verb} {format_metadata(old)} -> {format_metadata(new)}{note}\n")
    details = {"metrics": [{"name": name, "old": old.as_dict(), "new": new.as_dict()}
                           for name, old, new in report.changes]}
    finish_job(args, "set-metadata", report.counters(args.dry_run), io.out, details=details)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list metrics (or directories) matching a Graphite glob, sorted (an empty"
                       " answer exits 0, with a hint on stderr)")
    p.add_argument("--directories", action="store_true", help="list directories instead of metrics")
    add_format_option(p)
    p.add_argument("glob", metavar="GLOB")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("info", help="show a metric's metadata as JSON: retention as --retention takes it (60s:8d),"
                       " times in ISO 8601 UTC (null: never); NAME is exact, never a glob")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=cmd_info)

    p = sub.add_parser(
        "set-metadata", help="change the retention, aggregation or xFilesFactor of existing metrics, rewriting"
        " their points as whisper-resize.py does",
        description="Change existing metrics (those GLOB matches) and rewrite their points as whisper-resize.py"
        " does by default: every stage read, coarsest first, and written again with the new metadata (points"
        " older than the new retention are dropped). One transaction per 100 metrics: interrupted, run it again."
        " SQLite only; no other process may have the store open (stop bgl run, bgl receive, carbon, graphite-web).")
    p.add_argument("--retention", metavar="R", help="new retention, like 60s:30d,1h:5y (default: keep)")
    p.add_argument("--aggregation", metavar="M", help="new aggregation method: average, sum, min, max, last, ..."
                   " (default: keep)")
    p.add_argument("--xff", metavar="F", help="new xFilesFactor, 0 to 1 (default: keep)")
    p.add_argument("--storage-schemas", metavar="FILE", help="carbon's storage-schemas.conf: each metric gets the"
                   " retention it gives the metric's name (the first section whose pattern matches, else the"
                   f" default {settings.DEFAULT_RETENTION}); with --dry-run, the report of metrics whose retention"
                   " differs from it")
    p.add_argument("--storage-aggregation", metavar="FILE", help="carbon's storage-aggregation.conf: each metric"
                   " gets the aggregation and xFilesFactor it gives the metric's name; with --dry-run, the report of"
                   " metrics whose settings differ from it")
    p.add_argument("--dry-run", action="store_true", help="list what would change, change nothing")
    add_format_option(p)
    p.add_argument("glob", metavar="GLOB")
    p.set_defaults(handler=cmd_set_metadata)
