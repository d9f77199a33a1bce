"""`bgl syncdb`: create the store's schema."""
from __future__ import annotations

import argparse

from biggraphite_like.cli.common import add_format_option, open_accessor, wants_json, write_json
from biggraphite_like.cli.streams import Streams
from biggraphite_like.urls import redact_url


def cmd_syncdb(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    statements = accessor.syncdb(dry_run=args.dry_run)
    if wants_json(args):
        write_json(io.out, {"command": "syncdb", "dry_run": args.dry_run, "store": accessor.store.url,
                            "statements": statements})
    elif args.dry_run:
        io.out.write("\n".join(statements) + "\n")
    else:
        io.out.write(f"schema ready in {redact_url(accessor.store.url)} ({len(statements)} statements)\n")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("syncdb", help="create the schema (idempotent)")
    p.add_argument("--dry-run", action="store_true", help="print the statements instead of running them")
    add_format_option(p)
    p.set_defaults(handler=cmd_syncdb)
