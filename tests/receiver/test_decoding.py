"""The receiver's decoders on their own: plaintext in bulk, pickle frames, the safe
unpickler, the stream framing with its limits."""
from __future__ import annotations

import os
import pickle
import struct

import numpy as np
import pytest

from biggraphite_like.receiver.framing import FrameTooLong, LineFraming, PickleFraming
from biggraphite_like.ingest.lines import decode_lines
from biggraphite_like.ingest.pickles import decode_pickle, safe_loads
from biggraphite_like.ingest.points import ReceivedPoints, Refusals


def test_lines_in_bulk_keep_order_and_exact_values():
    data = b"".join(b"m.%d %r %d\n" % (i, i * 0.1, 1_700_000_000 + i) for i in range(1000))
    refusals = Refusals()
    points = decode_lines(data, refusals)
    assert refusals.count == 0
    assert points.names == [f"m.{i}" for i in range(1000)]
    assert points.values.tolist() == [i * 0.1 for i in range(1000)]
    assert points.timestamps.tolist() == [1_700_000_000 + i for i in range(1000)]


def _reference(data: bytes) -> tuple[list[str], list[float], list[float], list[str]]:
    """What the decoder must give, line by line in plain Python: the read split on b"\\n",
    each line by bytes.split(), the name decoded as UTF-8, value and timestamp by float()."""
    names, timestamps, values, reasons = [], [], [], []
    for line in data.split(b"\n"):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3:
            reasons.append(f"expected 'name value timestamp', got {len(fields)} fields")
            continue
        try:
            name = fields[0].decode("utf-8")
        except UnicodeDecodeError as exc:
            reasons.append(f"byte {exc.start} of the name is not UTF-8")
            continue
        try:
            value, timestamp = float(fields[1]), float(fields[2])
        except ValueError:
            reasons.append("value or timestamp is not a number")
            continue
        names.append(name)
        values.append(value)
        timestamps.append(timestamp)
    return names, timestamps, values, reasons


_NUMBERS = [b"0", b"-0", b"+0", b"007", b"1.5", b"-2.25", b".5", b"5.", b"-.5", b"+.5", b".", b"-", b"+", b"",
            b"123456789012345", b"1234567890123456", b"12345678901234567890", b"0.1", b"0.30000000000000004",
            b"3.141592653589793", b"1.7976931348623157e308", b"1e309", b"-1e309", b"4.9e-324", b"1e-400",
            b"1e5", b"1E5", b"1e+5", b"1e-5", b"1e", b"1e+", b"e5", b"1_000", b"1__0", b"_1", b"1_", b"1_0.5_5",
            b"inf", b"-inf", b"Infinity", b"+iNF", b"nan", b"-NaN", b"nana", b"0x10", b"1.2.3", b"1..2", b"--1",
            b"\xd9\xa1", b"1\x002", b"\x00", b"1700000000", b"1700000000.5", b"1.00000000000000000001",
            b"99999999999999999", b"0.000000000000001", b"0.0000000000000001", b"12,5"]
_NAMES = [b"a.b.c", b"x", b"caf\xc3\xa9.d", b"bad.\xff\xfe", b"half\xc3", b"\xed\xa0\x80surrogate", b"n\x00ul",
          b"nb\xc2\xa0sp", b"nel\xc2\x85x", b"\x1cfs", b"tab"]
_SPACES = [b" ", b"  ", b"\t", b"\x0b", b"\x0c", b" \r"]


def test_decoder_equals_splitting_and_float_line_by_line():
    """The compiled decoder against the plain Python rules on random reads: every kind of
    number float() takes or refuses, names valid and not UTF-8 (and with bytes that are
    whitespace only for str), all of bytes.split()'s whitespace, blank lines, fields
    missing or added, with and without a last newline. Values are compared bit for bit."""
    import random

    rng = random.Random(32)
    for _ in range(3000):
        lines = []
        for _ in range(rng.randint(0, 8)):
            fields = [rng.choice(_NAMES), rng.choice(_NUMBERS), rng.choice(_NUMBERS)]
            if rng.random() < 0.1:
                del fields[rng.randrange(3)]
            if rng.random() < 0.1:
                fields.append(rng.choice(_NUMBERS) or b"7")
            gaps = [rng.choice(_SPACES) if rng.random() < 0.3 else b" " for _ in fields]
            line = b"".join(gap + field for gap, field in zip(gaps, fields))[1:]
            lines.append(rng.choice([line, line, line, b" " + line + b"\r", b""]))
        data = b"\n".join(lines) + rng.choice([b"\n", b""])
        names, timestamps, values, reasons = _reference(data)
        refusals = Refusals()
        points = decode_lines(data, refusals)
        assert points.names == names, data
        assert points.timestamps.tobytes() == np.array(timestamps, dtype=np.float64).tobytes(), data
        assert points.values.tobytes() == np.array(values, dtype=np.float64).tobytes(), data
        assert refusals.count == len(reasons), data
        assert [reason for reason, _ in refusals.samples] == reasons[:5], data


def test_usual_numbers_parse_as_float_does():
    """The decoder's exact path for digits with an optional point (up to 15 digits) against
    float(), bit for bit, on random numbers of every length and position of the point."""
    import random

    rng = random.Random(15)
    fields = []
    for _ in range(20000):
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 17)))
        point = rng.randint(0, len(digits))
        text = rng.choice(["", "-", "+"]) + (digits[:point] + "." + digits[point:] if rng.random() < 0.8 else digits)
        fields.append(text.encode())
    data = b"".join(b"m %s %s\n" % (field, field) for field in fields)
    points = decode_lines(data, Refusals())
    expected = np.array([float(field) for field in fields], dtype=np.float64)
    assert points.values.tobytes() == expected.tobytes()
    assert points.timestamps.tobytes() == expected.tobytes()


@pytest.mark.parametrize("bad, reason", [
    (b"only two\n", "got 2 fields"),
    (b"a b c d\n", "got 4 fields"),
    (b"x.y notanumber 17\n", "not a number"),
    (b"bad.\xff\xfe 1 17\n", "not UTF-8"),
])
def test_a_bad_line_costs_only_itself(bad, reason):
    good = [b"g.%d 1.5 %d\n" % (i, 1000 + i) for i in range(100)]
    refusals = Refusals()
    points = decode_lines(b"".join(good[:50]) + bad + b"".join(good[50:]), refusals)
    assert refusals.count == 1 and reason in refusals.samples[0][0]
    assert points.names == [f"g.{i}" for i in range(100)]


def test_nan_and_inf_are_refused_by_the_check():
    refusals = Refusals()
    points = decode_lines(b"a nan 10\nb 1 inf\nc inf 10\nd 2 20\ne 3 -1\nf 4 nan\n", refusals).checked(refusals, now=99)
    assert points.names == ["d", "e"] and points.timestamps.tolist() == [20, 99]  # -1 is "now", as in carbon
    assert refusals.count == 4


def test_line_framing_skips_an_overlong_line_and_keeps_a_last_line_without_newline():
    framing = LineFraming(max_line=1000)
    refusals = Refusals()
    parts = [framing.feed(b"a 1 10\nhuge", refusals), framing.feed(b"x" * 5000, refusals),
             framing.feed(b"y" * 100 + b" 1 1\nb 2 ", refusals), framing.feed(b"20\nc 3 30", refusals),
             framing.close(refusals)]
    names = [n for p in parts for n in p.names]
    assert names == ["a", "b", "c"] and refusals.count == 1


def _frame(message, protocol: int = 2) -> bytes:
    payload = pickle.dumps(message, protocol=protocol)
    return struct.pack("!L", len(payload)) + payload


def test_pickle_frames_split_anywhere():
    data = _frame([("p.a", (100, 1.5)), ("p.b", (200.0, 2))]) + _frame([(b"p.c", (300, 3))], protocol=4)  # bytes: BINBYTES
    framing = PickleFraming()
    refusals = Refusals()
    parts = [framing.feed(data[i:i + 7], refusals) for i in range(0, len(data), 7)]
    names = [n for p in parts for n in p.names]
    assert names == ["p.a", "p.b", "p.c"] and refusals.count == 0
    values = np.concatenate([p.values for p in parts])
    assert values.tolist() == [1.5, 2.0, 3.0]


class Exploit:
    def __reduce__(self):
        return (os.system, ("touch /tmp/bgl-receiver-pwned",))


def test_unsafe_pickle_refused_before_it_runs_and_the_stream_goes_on():
    framing = PickleFraming()
    refusals = Refusals()
    points = framing.feed(_frame([("a", (1, 1))]) + _frame(Exploit()) + _frame([("b", (2, 2))]), refusals)
    assert points.names == ["a", "b"]
    assert refusals.count == 1 and "unsafe" in refusals.samples[0][0]
    assert not os.path.exists("/tmp/bgl-receiver-pwned")
    with pytest.raises(pickle.UnpicklingError):
        safe_loads(pickle.dumps(Exploit()))


def test_malformed_pickle_items_refused_one_by_one():
    refusals = Refusals()
    points = decode_pickle(pickle.dumps([("a", (1, 2)), ("b", "x"), (3, (1, 1)), ("c", (5, 6))]), refusals)
    assert points.names == ["a", "c"] and refusals.count == 2


def test_oversized_pickle_frame_cannot_be_resynchronised():
    """A length over the limit raises FrameTooLong with the points of the frames before it
    (the listener stores them and closes the connection)."""
    framing = PickleFraming(max_frame=100)
    refusals = Refusals()
    with pytest.raises(FrameTooLong, match="1000 bytes is over the limit of 100") as raised:
        framing.feed(_frame([("a", (1, 1))]) + struct.pack("!L", 1000) + b"z" * 500 + _frame([("b", (2, 2))]), refusals)
    assert raised.value.points.names == ["a"] and refusals.count == 0 and framing.pending == 0


def test_points_checked_refuses_out_of_range_timestamps():
    refusals = Refusals()
    points = ReceivedPoints(["a", "b", "c"], np.array([0.0, 2.0**32, 5.0]), np.array([1.0, 1.0, 1.0])).checked(refusals)
    assert points.names == ["c"] and refusals.count == 2
