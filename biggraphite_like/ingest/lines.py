"""carbon's plaintext protocol, `name value timestamp\\n`, decoded a whole read at a time.

The decoding is compiled (`_plaintext.c`, built by `pip install -e .`; its only
implementation): one pass over the read, a line at a time, with the rules of splitting
the read on newlines and each line with bytes.split(), the name decoded as UTF-8 and the
value and timestamp parsed as float() parses them (CPython's own parser). Lines that fail
a check (not three fields, a name that is not UTF-8, a field that is not a number) are
refused one by one with the reason, and the others of the read are kept: a bad line
never costs the good ones. Blank lines are ignored.
"""
from __future__ import annotations

import numpy as np

from biggraphite_like.ingest.points import ReceivedPoints, Refusals
from biggraphite_like.ingest import _plaintext


def decode_lines(data: bytes, refusals: Refusals) -> ReceivedPoints:
    """The points of complete plaintext lines (data may end without a newline: the last
    line counts as complete)."""
    if not data:
        return ReceivedPoints.empty()
    names, timestamps, values, refused, samples = _plaintext.decode(bytes(data))
    for reason, line in samples:
        refusals.add(reason, line)
    refusals.count += refused - len(samples)
    count = len(names)
    return ReceivedPoints(names, np.frombuffer(timestamps, dtype=np.float64, count=count),
                          np.frombuffer(values, dtype=np.float64, count=count))
