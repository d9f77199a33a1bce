"""The receiver as a command: `python -m biggraphite_like.receiver [options]` (how `bgl run`
starts it) and `bgl receive [options]` take the same options (options.add_arguments, and
--store) and run the same way here, without the CLI package. The store comes from --store,
else $BGL_STORE (`bgl run` passes it there, so a password never shows in `ps`), else the
default store (stores.registry.store_url)."""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence, TextIO

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import BglError
from biggraphite_like.exit_status import error_report
from biggraphite_like.maintenance import metrics_file
from biggraphite_like.receiver import options as receiver_options
from biggraphite_like.stores.registry import STORE_URL_HELP, store_url

PROG = "python -m biggraphite_like.receiver"
DESCRIPTION = "receive carbon's plaintext, pickle and UDP streams into the store (and answer graphite-web's CarbonLink)"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The receiver's own parser: `bgl receive`'s options, --store among them."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    receiver_options.add_arguments(parser)
    parser.add_argument("--store", metavar="URL", help=STORE_URL_HELP)
    return parser


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Open the store (its schema created if missing) and serve until SIGTERM or SIGINT,
    logging to err at --log-level."""
    from biggraphite_like.receiver.service import serve

    options = receiver_options.from_args(args)
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("biggraphite_like")
    logger.addHandler(handler)
    logger.setLevel(args.log_level.upper())
    accessor = Accessor.from_url(store_url(getattr(args, "store", None)))
    try:
        accessor.syncdb()
        return serve(accessor, options, out)
    finally:
        logger.removeHandler(handler)
        accessor.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        metrics_file.check_writable(args.metrics_file)
        return run(args, sys.stdout, sys.stderr)
    except BglError as exc:
        message, status = error_report(exc, args.store)
        sys.stderr.write(f"bgl receive: error: {message}\n")
        return status
