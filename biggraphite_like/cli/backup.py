"""`bgl backup` and `bgl restore`: an SQLite store copied while it runs, and put back."""
from __future__ import annotations

import argparse

from biggraphite_like.cli.common import add_format_option, finish_job, open_accessor, wants_json
from biggraphite_like.cli.streams import Streams
from biggraphite_like.maintenance.backup import backup, restore


def cmd_backup(args: argparse.Namespace, io: Streams) -> int:
    report = backup(open_accessor(args).store, args.destination, progress_stream=io.err)
    if not wants_json(args):
        io.out.write(f"{report.destination}: a copy of {report.source}, PRAGMA integrity_check {report.integrity}\n")
    finish_job(args, "backup", report.counters(), io.out,
               details={"source": report.source, "destination": report.destination, "integrity": report.integrity})
    return 0


def cmd_restore(args: argparse.Namespace, io: Streams) -> int:
    report = restore(open_accessor(args).store, args.source, force=args.force, progress_stream=io.err)
    if not wants_json(args):
        io.out.write(f"{report.destination}: restored from {report.source} (PRAGMA integrity_check {report.integrity})\n")
        if report.replaced:
            io.out.write(f"the store that was there is kept as {report.replaced}\n")
    finish_job(args, "restore", report.counters(), io.out,
               details={"source": report.source, "destination": report.destination, "integrity": report.integrity,
                        "replaced": report.replaced})
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "backup", help="copy the SQLite store to a new file while it runs (consistent, checked)",
        description="Copy the SQLite store's current state to DEST with SQLite's online backup API, while"
        " writers go on; DEST is checked with PRAGMA integrity_check before it gets its name. Progress on stderr."
        " Cassandra: nodetool snapshot on every node, see docs/operations.md.")
    add_format_option(p)
    p.add_argument("destination", metavar="DEST", help="the backup file to create (never overwritten)")
    p.set_defaults(handler=cmd_backup)

    p = sub.add_parser(
        "restore", help="replace the SQLite store by a backup (nothing may have the store open)",
        description="Check SRC (PRAGMA integrity_check), copy it to the store's path and turn WAL mode on."
        " Refused while a process has the store open; an existing store is replaced only with --force and"
        " kept as STORE.replaced-<time>.")
    p.add_argument("--force", action="store_true", help="replace the store that exists (it is kept aside)")
    add_format_option(p)
    p.add_argument("source", metavar="SRC", help="a file made by `bgl backup`")
    p.set_defaults(handler=cmd_restore)
