"""`bgl list` and `bgl info`: which metrics exist and what they are."""
from __future__ import annotations

import argparse

from biggraphite_like.cli.common import add_format_option, open_accessor, wants_json, write_json
from biggraphite_like.cli.streams import Streams
from biggraphite_like.errors import MetricNotFound


def cmd_list(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    found = accessor.glob_directories(args.glob) if args.directories else accessor.glob_metrics(args.glob)
    if wants_json(args):
        write_json(io.out, {"glob": args.glob, "kind": "directories" if args.directories else "metrics",
                            "names": found})
        return 0
    for name in found:
        io.out.write(name + "\n")
    return 0


def cmd_info(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    metric = accessor.get_metric(args.name)
    if metric is None:
        raise MetricNotFound(f"metric {args.name!r} does not exist")
    info = metric.as_dict()
    info["stages"] = [
        {"precision": s.precision, "points": s.points, "duration": s.duration} for s in metric.retention.stages
    ]
    write_json(io.out, info)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="list metrics (or directories) matching a Graphite glob, sorted")
    p.add_argument("--directories", action="store_true", help="list directories instead of metrics")
    add_format_option(p)
    p.add_argument("glob", metavar="GLOB")
    p.set_defaults(handler=cmd_list)

    p = sub.add_parser("info", help="show a metric's metadata as JSON (NAME is exact, never a glob)")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=cmd_info)
