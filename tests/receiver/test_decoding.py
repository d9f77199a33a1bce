"""The receiver's decoders on their own: plaintext in bulk, pickle frames, the safe
unpickler, the stream framing with its limits."""
from __future__ import annotations

import os
import pickle
import struct

import numpy as np
import pytest

from biggraphite_like.receiver.framing import FrameTooLong, LineFraming, PickleFraming
from biggraphite_like.receiver.lines import decode_lines
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


def test_fields_per_line_found_as_line_by_line_splitting_finds_them():
    """The check of three fields a line (its fast path for carbon's usual spelling, its
    general one otherwise) against splitting each line, on reads made of good lines with
    random damage: a field missing or added, doubled or edge spaces, tabs, CR, blank lines,
    a last line without newline."""
    import random

    from biggraphite_like.receiver.lines import lines_without_three_fields

    rng = random.Random(21)
    fast = 0
    for _ in range(4000):
        lines = [b"m.%d %d %d" % (rng.randint(0, 9), rng.randint(0, 99), 1_700_000_000) for _ in range(rng.randint(1, 6))]
        for _ in range(rng.choice([0, 0, 1, 2])):
            k = rng.randrange(len(lines))
            lines[k] = rng.choice([
                lambda line: line.rsplit(b" ", 1)[0], lambda line: line + b" 7", lambda line: line.replace(b" ", b"  ", 1),
                lambda line: b" " + line, lambda line: line + b" ", lambda line: line.replace(b" ", b"\t", 1),
                lambda line: line + b"\r", lambda line: b"", lambda line: line.replace(b" ", b"", 1)])(lines[k])
        data = b"\n".join(lines) + rng.choice([b"\n", b""])
        expected = {i for i, line in enumerate(data.split(b"\n")) if line.split() and len(line.split()) != 3}
        assert (lines_without_three_fields(data) or set()) == expected, data
        fast += not expected and b"  " not in data and b"\t" not in data
    assert fast > 1000  # the usual spelling was tried, not only damage


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
