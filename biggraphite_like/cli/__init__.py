"""`bgl`: the operator's command line. One module a group of subcommands, each with a
`register(subparsers)` that adds its parsers and sets their `handler(args, streams)`."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence, TextIO

from biggraphite_like import settings
from biggraphite_like.cli import maintenance, metrics, points, run, schema, tags, usage
from biggraphite_like.cli.common import check_metrics_file, parse_time
from biggraphite_like.cli.streams import Streams
from biggraphite_like.errors import BglError

__all__ = ["build_parser", "main", "main_entry", "parse_time"]

# In the order `bgl --help` lists them.
COMMAND_MODULES = (schema, points, metrics, maintenance, usage, tags, run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bgl", description="Operate a biggraphite_like store.")
    parser.add_argument(
        "--store",
        help=f"store URL (default: ${settings.STORE_ENV}, else sqlite://<data dir>/{settings.DB_FILE_NAME};"
        f" data dir: ${settings.DATA_DIR_ENV} or ~/.local/share/biggraphite_like)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
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
    io = Streams(stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr)
    args = build_parser().parse_args(_attach_time_values(sys.argv[1:] if argv is None else list(argv)))
    try:
        check_metrics_file(args)
        return args.handler(args, io)
    except BglError as exc:
        io.err.write(f"bgl {args.command}: error: {exc}\n")
        return 1
    except BrokenPipeError:
        return 0


def main_entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
