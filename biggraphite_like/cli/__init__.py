"""`bgl`: the operator's command line. One module a group of subcommands, each with a
`register(subparsers)` that adds its parsers and sets their `handler(args, streams)`.

Global options (`--store`) are accepted before or after the subcommand: every
subcommand's parser gets them too, with a suppressed default so that one given before
the subcommand is not overwritten by the subcommand's absent one.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import sys
from typing import Sequence, TextIO

from biggraphite_like.cli import backup, maintenance, metrics, points, receive, rename, run, schema, tags, usage
from biggraphite_like.cli.common import parse_time, resolve_format
from biggraphite_like.cli.streams import Streams
from biggraphite_like.errors import BglError
from biggraphite_like.exit_status import EXIT_BUSY, EXIT_ERROR, EXIT_OK, EXIT_USAGE, error_report
from biggraphite_like.maintenance import metrics_file
from biggraphite_like.stores.registry import STORE_URL_HELP

__all__ = ["build_parser", "main", "main_entry", "parse_time", "EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_BUSY"]

# In the order `bgl --help` lists them.
COMMAND_MODULES = (schema, points, metrics, maintenance, rename, usage, backup, tags, receive, run)

EPILOG = f"""\
global options (--store, and --format where the subcommand has it) may be given before or
after the subcommand.
--format json (where a subcommand has it) prints one JSON document on stdout.

exit status:
  {EXIT_OK}  success
  {EXIT_ERROR}  the operation failed or refused something: bad name, point, glob or time, store error,
     metric not found (read, info, set-metadata: nothing matches), points rejected by `write`, files
     that failed in `import-whisper`, a large delete without --yes, a store in use (restore, set-metadata)
  {EXIT_USAGE}  usage error (unknown option, missing or superfluous argument, option out of range,
     set-metadata with nothing to change) or a missing optional package
     (e.g. cassandra-driver: pip install 'biggraphite_like[cassandra]')
  {EXIT_BUSY}  `bgl run`: another `bgl run` holds the data directory (its pid and ports are printed)
"""


def package_version() -> str:
    try:
        return importlib.metadata.version("biggraphite_like")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a bare checkout
        return "unknown"


def add_global_options(parser: argparse.ArgumentParser, top_level: bool) -> None:
    """--store on the top-level parser (default None) or a subcommand's (default suppressed)."""
    default = None if top_level else argparse.SUPPRESS
    parser.add_argument("--store", default=default, metavar="URL", help=STORE_URL_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bgl", description="Operate a biggraphite_like store.", epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"bgl (biggraphite_like) {package_version()}")
    add_global_options(parser, top_level=True)
    parser.add_argument("--format", dest="global_format", metavar="FORMAT",
                        help="the subcommand's --format (text, json or csv, where it applies)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    _add_global_options_below(sub)
    return parser


def _add_global_options_below(sub: argparse._SubParsersAction) -> None:
    """Every subcommand, nested ones too (`bgl tags find`), takes the global options."""
    for subparser in sub.choices.values():
        add_global_options(subparser, top_level=False)
        for action in subparser._actions:
            if isinstance(action, argparse._SubParsersAction):
                _add_global_options_below(action)


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
    io = Streams(stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr)
    parser = build_parser()
    args = parser.parse_args(_attach_time_values(sys.argv[1:] if argv is None else list(argv)))
    problem = resolve_format(args)
    if problem:
        parser.error(problem)  # exits with the usage status, 2
    try:
        metrics_file.check_writable(getattr(args, "metrics_file", None))
        return args.handler(args, io)
    except BglError as exc:
        message, status = error_report(exc, getattr(args, "store", None))
        io.err.write(f"bgl {args.command}: error: {message}\n")
        return status
    except BrokenPipeError:
        return EXIT_OK


def main_entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
