"""`bgl receive`: the native carbon-protocol receiver (biggraphite_like.receiver; its options
and its run are the receiver's own, receiver/options.py and receiver/command.py)."""
from __future__ import annotations

import argparse

from biggraphite_like.cli.streams import Streams
from biggraphite_like.receiver import options as receiver_options
from biggraphite_like.receiver.command import DESCRIPTION


def cmd_receive(args: argparse.Namespace, io: Streams) -> int:
    from biggraphite_like.receiver.command import run

    return run(args, io.out, io.err)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("receive", help=DESCRIPTION)  # no description: its --help as before
    receiver_options.add_arguments(p)
    p.set_defaults(handler=cmd_receive)
