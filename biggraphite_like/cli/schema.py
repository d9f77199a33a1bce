"""`bgl syncdb`: create the store's schema (and, with --vacuum, rewrite an SQLite file)."""
from __future__ import annotations

import argparse
import os
from typing import TextIO

from biggraphite_like.accessor import Accessor
from biggraphite_like.cli.common import add_format_option, open_accessor, wants_json, write_json
from biggraphite_like.cli.streams import Streams
from biggraphite_like.urls import redact_url


def cmd_syncdb(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    statements = accessor.syncdb(dry_run=args.dry_run)
    vacuumed = _vacuum(accessor, io.err) if args.vacuum and not args.dry_run else None
    notes = [] if args.dry_run or args.vacuum else accessor.store.upgrade_notes()
    if wants_json(args):
        document = {"command": "syncdb", "dry_run": args.dry_run, "store": accessor.store.url,
                    "statements": statements, "notes": notes}
        if vacuumed is not None:
            document["vacuum"] = vacuumed
        write_json(io.out, document)
        return 0
    if args.dry_run:
        io.out.write("\n".join(statements) + "\n")
        return 0
    io.out.write(f"schema ready in {redact_url(accessor.store.url)} ({len(statements)} statements)\n")
    if vacuumed is not None:
        io.out.write("vacuum: " + ", ".join(f"{key} {value}" for key, value in vacuumed.items()) + "\n")
    for note in notes:
        io.out.write(f"note: {note}\n")
    return 0


def _vacuum(accessor: Accessor, err: TextIO) -> dict:
    """The store's vacuum, with a line on stderr when it starts and one when it ends: it is
    one SQLite statement (no step to count) that copies the whole file and may take minutes."""
    path = getattr(accessor.store, "path", None)  # an SQLite file (other stores: nothing to rewrite)
    if path and os.path.exists(path):
        err.write(f"bgl syncdb --vacuum: rewriting {path} ({_mib(os.path.getsize(path))} MiB, and its WAL);"
                  " writers wait until it ends...\n")
        err.flush()
    vacuumed = accessor.vacuum()
    if isinstance(vacuumed.get("file_bytes_after"), int):
        err.write(f"bgl syncdb --vacuum: done in {vacuumed['seconds']:.1f}s,"
                  f" {_mib(vacuumed['file_bytes_before'])} MiB -> {_mib(vacuumed['file_bytes_after'])} MiB\n")
    return vacuumed


def _mib(count: int) -> str:
    return f"{count / (1 << 20):.1f}"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("syncdb", help="create the schema (idempotent)")
    p.add_argument("--dry-run", action="store_true", help="print the statements instead of running them")
    p.add_argument("--vacuum", action="store_true",
                   help="then rewrite an SQLite file (VACUUM) so that it gives back its free pages, and switch a"
                   " file made before incremental vacuum to it (copies the whole file; writers wait)")
    add_format_option(p)
    p.set_defaults(handler=cmd_syncdb)
