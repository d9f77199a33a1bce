"""The three streams a `bgl` subcommand reads and writes (tests pass their own)."""
from __future__ import annotations

import dataclasses
from typing import TextIO


@dataclasses.dataclass
class Streams:
    stdin: TextIO
    out: TextIO
    err: TextIO
