"""`bgl copy` and `bgl rename`: a metric or a subtree under another name (bgutil parity)."""
from __future__ import annotations

import argparse

from biggraphite_like.cli.common import add_format_option, finish_job, open_accessor, wants_json
from biggraphite_like.cli.streams import Streams
from biggraphite_like.maintenance.copy import copy


def cmd_copy(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    report = copy(accessor, args.source, args.destination, dry_run=args.dry_run,
                  remove_source=args.command == "rename", progress_stream=io.err)
    if not wants_json(args):
        for source, destination in report.pairs:
            io.out.write(f"{source} -> {destination}\n")
    finish_job(args, args.command, report.counters(), io.out,
               details={"pairs": [{"source": s, "destination": d} for s, d in report.pairs]})
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    for command, what in (("copy", "copy a metric or a subtree (metadata and points) to another name"),
                          ("rename", "move a metric or a subtree (metadata and points) to another name")):
        p = sub.add_parser(command, help=what, description=what + ". SRC and DST are exact names, never globs;"
                           " SRC.x becomes DST.x; an existing destination metric is refused.")
        p.add_argument("--dry-run", action="store_true", help="list SRC -> DST pairs, change nothing")
        add_format_option(p)
        p.add_argument("source", metavar="SRC")
        p.add_argument("destination", metavar="DST")
        p.set_defaults(handler=cmd_copy)
