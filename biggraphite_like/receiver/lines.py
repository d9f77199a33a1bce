"""carbon's plaintext protocol, `name value timestamp\\n`, decoded in bulk.

A whole read (every complete line of it) is decoded with a few calls over the buffer, not
one Python-level loop over lines or tokens: numpy finds the lines with other than three
tokens at once (in carbon's usual spelling, one space between fields and one newline
between lines, by checking that spaces and newlines alternate two and one; otherwise by
finding where each whitespace-separated token starts and which line holds it);
`bytes.split()` cuts every token in one call; the value and timestamp columns are
converted by float() mapped over each in C (carbon's parse, and cheaper than numpy's
bytes-to-float cast); names are decoded from UTF-8 in one call. Lines that fail a check
(not three fields, a field that is not a number, a name that is not UTF-8) are refused
one by one with the reason, and the others of the read are kept: a bad line never costs
the good ones.
"""
from __future__ import annotations

import numpy as np

from biggraphite_like.ingest.points import ReceivedPoints, Refusals

# bytes.split()'s whitespace (Py_ISSPACE): space, \t, \n, \v, \f, \r
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[[9, 10, 11, 12, 13, 32]] = True
NEWLINE = 10


def decode_lines(data: bytes, refusals: Refusals) -> ReceivedPoints:
    """The points of complete plaintext lines (data may end without a newline: the last
    line counts as complete). Blank lines are ignored."""
    if not data:
        return ReceivedPoints.empty()
    bad_lines = lines_without_three_fields(data)
    if bad_lines is not None:
        return _decode_line_by_line(data, bad_lines, refusals)
    tokens = data.split()
    if not tokens:
        return ReceivedPoints.empty()
    try:
        values = _floats(tokens[1::3])
        timestamps = _floats(tokens[2::3])
        names = b"\n".join(tokens[0::3]).decode("utf-8").split("\n")
    except (ValueError, UnicodeDecodeError):
        return _decode_line_by_line(data, None, refusals)
    return ReceivedPoints(names, timestamps, values)


def _floats(tokens: list[bytes]) -> np.ndarray:
    """float() of each token, as carbon parses a field (ValueError as float() raises it):
    map() over the list costs less than numpy's bytes-to-float cast (~100 ns a token
    less), and accepts what float() accepts."""
    return np.fromiter(map(float, tokens), dtype=np.float64, count=len(tokens))


_OTHER_WHITESPACE = (b"\t", b"\r", b"\x0b", b"\x0c")  # not in carbon's usual spelling


def lines_without_three_fields(data: bytes) -> set[int] | None:
    """Indexes (in data.split(b'\\n')) of the non-blank lines that do not have exactly
    three fields, or None when every line is well formed."""
    array = np.frombuffer(data, dtype=np.uint8)
    if _two_spaces_a_line(data, array):
        return None
    space = _WHITESPACE[array]
    starts = np.flatnonzero(~space & np.concatenate(([True], space[:-1])))
    if not len(starts):
        return None
    newlines = np.flatnonzero(array == NEWLINE)
    per_line = np.bincount(np.searchsorted(newlines, starts), minlength=len(newlines) + 1)
    wrong = np.flatnonzero((per_line != 0) & (per_line != 3))
    return set(wrong.tolist()) if len(wrong) else None


def _two_spaces_a_line(data: bytes, array: np.ndarray) -> bool:
    """True when data is in carbon's usual spelling (fields parted by one space, lines by
    one newline, no other whitespace, no blank line, no space at a line's edges) and every
    line holds exactly two spaces, so three fields: spaces and newlines then alternate two
    and one, which a few comparisons of their positions check."""
    if data[:1] in (b" ", b"\n") or data[-1:] == b" " or any(c in data for c in _OTHER_WHITESPACE):
        return False
    space = array == 32
    newline = array == NEWLINE
    gap = space | newline
    if (gap[1:] & gap[:-1]).any():  # two in a row: a double space, a blank line, a space at an edge
        return False
    spaces = np.flatnonzero(space)
    newlines = np.flatnonzero(newline)
    lines = len(newlines) + (data[-1:] != b"\n")
    if len(spaces) != 2 * lines:
        return False
    # line k's second space before its newline, line k + 1's first space after it
    following = spaces[2::2]
    return bool((spaces[1::2][:len(newlines)] < newlines).all() and (following > newlines[:len(following)]).all())


def _decode_line_by_line(data: bytes, known_bad: set[int] | None, refusals: Refusals) -> ReceivedPoints:
    """The slow path, for a read holding at least one bad line: refuse each bad line with
    its reason, decode the others in bulk."""
    good: list[bytes] = []
    for index, line in enumerate(data.split(b"\n")):
        fields = line.split()
        if not fields:
            continue
        if (known_bad is not None and index in known_bad) or len(fields) != 3:
            refusals.add(f"expected 'name value timestamp', got {len(fields)} fields", line)
            continue
        try:
            fields[0].decode("utf-8")
        except UnicodeDecodeError as exc:
            refusals.add(f"byte {exc.start} of the name is not UTF-8", line)
            continue
        try:
            float(fields[1]), float(fields[2])
        except ValueError:
            refusals.add("value or timestamp is not a number", line)
            continue
        good.append(line)
    if not good:
        return ReceivedPoints.empty()
    tokens = b"\n".join(good).split()
    names = b"\n".join(tokens[0::3]).decode("utf-8").split("\n")
    return ReceivedPoints(names, _floats(tokens[2::3]), _floats(tokens[1::3]))  # float() accepted each field
