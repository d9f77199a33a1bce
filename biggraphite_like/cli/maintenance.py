"""`bgl clean`, `seal`, `delete`, `repair` and `import-whisper`: the jobs that change what is stored."""
from __future__ import annotations

import argparse

from biggraphite_like.cli.common import (add_format_option, add_metrics_file_option, add_shard_options, finish_job,
                                        open_accessor, wants_json)
from biggraphite_like.cli.streams import Streams
from biggraphite_like.exit_status import EXIT_ERROR
from biggraphite_like.maintenance.clean import HELP as CLEAN_HELP
from biggraphite_like.maintenance.clean import clean
from biggraphite_like.maintenance.delete import delete
from biggraphite_like.maintenance.import_whisper import import_whisper
from biggraphite_like.maintenance.repair import repair
from biggraphite_like.maintenance.seal import GRACE
from biggraphite_like.maintenance.seal import HELP as SEAL_HELP
from biggraphite_like.maintenance.seal import seal
from biggraphite_like.retention import parse_duration



def cmd_clean(args: argparse.Namespace, io: Streams) -> int:
    max_age = parse_duration(args.max_age, "max age") if args.max_age is not None else None
    accessor = open_accessor(args)
    report = clean(accessor, max_age=max_age, shard=args.shard, nshards=args.nshards, dry_run=args.dry_run,
                   progress_stream=io.err)
    finish_job(args, "clean", report.counters(), io.out, CLEAN_HELP)
    return 0


def cmd_seal(args: argparse.Namespace, io: Streams) -> int:
    grace = parse_duration(args.grace, "grace") if args.grace is not None else GRACE
    accessor = open_accessor(args)
    report = seal(accessor, grace=grace, settle=args.settle, shard=args.shard, nshards=args.nshards,
                  progress_stream=io.err)
    finish_job(args, "seal", report.counters(), io.out, SEAL_HELP)
    return 0


CONFIRM_ABOVE = 100  # a delete of more metrics than this (or of `**`) asks for --yes


def cmd_delete(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    if not args.dry_run and not args.yes:
        planned = delete(accessor, args.glob, recursive=args.recursive, dry_run=True, exact=args.exact)
        if (len(planned.metrics) > CONFIRM_ABOVE or args.glob.strip() == "**") and not _confirmed(planned, args, io):
            return EXIT_ERROR
    report = delete(accessor, args.glob, recursive=args.recursive, dry_run=args.dry_run, exact=args.exact,
                    progress_stream=io.err)
    if not wants_json(args):
        for name in report.metrics:
            io.out.write(name + "\n")
    matched = report.matched_directories
    if matched and not args.recursive:
        done = "would be" if args.dry_run else "were"
        io.err.write(
            f"bgl delete: {args.glob!r} matches {len(matched)} director{'y' if len(matched) == 1 else 'ies'}"
            f" (e.g. {matched[0]}): {'only metrics ' + done + ' deleted' if report.metrics else 'no metric ' + done + ' deleted'};"
            " use --recursive to delete everything beneath them\n")
    elif not report.metrics and not matched:
        io.err.write(f"bgl delete: nothing is named {args.glob!r}\n" if args.exact
                     else f"bgl delete: nothing matches {args.glob!r}\n")
    counters = report.counters()
    if args.dry_run:  # what cleanup would find and concurrent writers would do is not known before
        counters = {k: v for k, v in counters.items() if k not in ("directories_removed", "directories_restored")}
    finish_job(args, "delete", counters, io.out if wants_json(args) else io.err,
               details={"metrics": report.metrics, "directories_matched": report.matched_directories})
    return 0


def _confirmed(planned, args: argparse.Namespace, io: Streams) -> bool:
    """Ask on a terminal; elsewhere say that --yes is needed."""
    what = (f"{len(planned.metrics)} metric(s) (e.g. {', '.join(planned.metrics[:3])})" if planned.metrics
            else "no metric yet")
    if io.stdin.isatty():
        io.err.write(f"bgl delete: {args.glob!r} would delete {what}. Delete them? [y/N] ")
        io.err.flush()
        answer = io.stdin.readline().strip().lower()
        if answer in ("y", "yes"):
            return True
        io.err.write("bgl delete: nothing was deleted\n")
        return False
    io.err.write(f"bgl delete: error: {args.glob!r} would delete {what}: give --yes to confirm (more than"
                 f" {CONFIRM_ABOVE} metrics, or **); --dry-run lists them. Nothing was deleted\n")
    return False


def cmd_repair(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    report = repair(accessor, shard=args.shard, nshards=args.nshards, dry_run=args.dry_run, progress_stream=io.err)
    if not wants_json(args):
        for kind, names in report.examples.items():
            io.out.write(f"{kind}: {', '.join(names)}{' ...' if len(names) >= 20 else ''}\n")
    finish_job(args, "repair", report.counters(), io.out, details={"examples": report.examples})
    return 0


def cmd_import_whisper(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    if accessor.store.url.startswith("sqlite:") and not args.dry_run:
        accessor.syncdb()  # the embedded store sets itself up on first use
    report = import_whisper(accessor, args.directory, prefix=args.prefix, jobs=args.jobs, dry_run=args.dry_run,
                            progress_stream=io.err, err=io.err)
    finish_job(args, "import-whisper", report.counters(), io.out, details={"errors": report.errors})
    return 1 if report.files_failed else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("clean", help="remove stale metrics, empty directories and expired points")
    p.add_argument("--max-age", metavar="DURATION",
                   help="remove metrics not written for this long, like 30d (default: their whole retention)")
    p.add_argument("--dry-run", action="store_true", help="count what would be removed, change nothing")
    add_shard_options(p)
    add_metrics_file_option(p)
    add_format_option(p)
    p.set_defaults(handler=cmd_clean)

    p = sub.add_parser("seal", help="encode past windows of points into compressed chunks (Cassandra)")
    p.add_argument("--grace", metavar="DURATION",
                   help=f"seal windows that ended at least this long ago, like 2h (default: {GRACE}s)")
    p.add_argument("--settle", type=float, metavar="SECONDS",
                   help="wait after announcing a new horizon, before deleting rows (default: the store's timeout)")
    add_shard_options(p)
    add_metrics_file_option(p)
    add_format_option(p)
    p.set_defaults(handler=cmd_seal)

    p = sub.add_parser("delete", help="delete metrics matching a glob, their points, and directories left empty")
    p.add_argument("--recursive", action="store_true", help="also delete everything beneath matching directories")
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted, change nothing")
    p.add_argument("--yes", action="store_true", help=f"delete without asking (asked, on a terminal, for more than"
                   f" {CONFIRM_ABOVE} metrics or for **; refused elsewhere without --yes)")
    p.add_argument("--exact", action="store_true",
                   help="GLOB is an exact name, not expanded (for names holding *, ?, [ ], { })")
    add_metrics_file_option(p)
    add_format_option(p)
    p.add_argument("glob", metavar="GLOB")
    p.set_defaults(handler=cmd_delete)

    p = sub.add_parser("repair", help="re-create missing directories, remove invalid metadata rows")
    p.add_argument("--dry-run", action="store_true", help="report what would change, change nothing")
    add_shard_options(p)
    add_metrics_file_option(p)
    add_format_option(p)
    p.set_defaults(handler=cmd_repair)

    p = sub.add_parser("import-whisper", help="import a tree of whisper files")
    p.add_argument("--prefix", metavar="P", help="prepend P. to every metric name")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="parallel processes (default 1)")
    p.add_argument("--dry-run", action="store_true", help="read and check the files, write nothing")
    add_metrics_file_option(p)
    add_format_option(p)
    p.add_argument("directory", metavar="DIR")
    p.set_defaults(handler=cmd_import_whisper)
