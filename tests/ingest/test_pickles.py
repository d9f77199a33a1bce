"""carbon's pickle frames read in bulk (pickles._items_in_bulk) against the opcode loop
(pickles._canonical_columns) and pickle itself: whenever the bulk reader gives columns,
they are the loop's and what pickle.loads makes of the frame; it gives up (None) on
anything else, and carbon-relay's own layout is read in bulk."""
from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from biggraphite_like.ingest import pickles

_NAMES = ["a.b", "servers.X1.cpu", "caf\u00e9.\u00cc\u00cc", "nl.in\nname", "", "x" * 300, "\u8c58.\u5858"]


def _frame(rng: random.Random, protocol: int, items: int, repeat: bool, big: bool = False) -> tuple[bytes, list]:
    message = []
    for i in range(items):
        name = rng.choice(_NAMES) + f".{i}"
        if repeat and message and rng.random() < 0.3:
            name = message[-1][0]  # the same str object: a memo reference (BINGET)
        stamp = rng.choice([1_700_000_000 + i, 1_700_000_000.5 + i, rng.randrange(0, 300), rng.randrange(0, 70000)])
        value = rng.choice([float(i % 97), rng.uniform(-1e300, 1e300), rng.randrange(-2**31, 2**31), 88.0])
        if big and rng.random() < 0.1:
            value = 2**40  # LONG1: not a number either reader takes
        message.append((name, (stamp, value)))
    return pickle.dumps(message, protocol=protocol), message


def _same(columns, message) -> None:
    assert columns.names == [name for name, _ in message]
    np.testing.assert_array_equal(columns.timestamps, [float(t) for _, (t, _) in message])
    np.testing.assert_array_equal(columns.values, [float(v) for _, (_, v) in message])


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_frames_read_in_bulk_are_read_as_the_loop_and_pickle_read_them(protocol):
    rng = random.Random(protocol)
    in_bulk = 0
    for round_ in range(300):
        items = rng.choice([1, 2, 3, 999, 1000, 1001, 2500]) if round_ % 10 == 0 else rng.randrange(1, 40)
        frame, message = _frame(rng, protocol, items, repeat=round_ % 3 == 0, big=round_ % 7 == 0)
        bulk = pickles._items_in_bulk(frame)
        loop = pickles._canonical_columns(frame)
        if bulk is None:
            continue
        in_bulk += 1
        _same(bulk, message)
        _same(loop, message)
    assert in_bulk > 100  # fresh names, and no FRAME inside (protocol 4 and 5 frames under 64 KiB)


def test_carbon_relays_frames_are_read_in_bulk():
    """bench/receiver_profile.py's frames: carbon-relay's layout (protocol 2, 500 points a
    message, an int timestamp and a float value, distinct names), values whose bytes hold
    the name opcodes (96.0 and 896.0: 0x58, 0x8C), which the bulk reader must step over."""
    names = [f"bench.host{i // 1000:04d}.service{i % 1000:03d}.value" for i in range(2000)]
    for start in range(0, 2000, 500):
        message = [(n, (1_790_000_000, [96.0, 896.0, float(i % 97)][i % 3]))
                   for i, n in enumerate(names[start:start + 500])]
        frame = pickle.dumps(message, protocol=2)
        assert frame.count(b"\x58") + frame.count(b"\x8c") > 1.5 * len(message)  # not only the names' opcodes
        bulk = pickles._items_in_bulk(frame)
        assert bulk is not None
        _same(bulk, message)


def test_damaged_frames_are_read_as_the_loop_reads_them_or_left_to_it():
    """Random bytes changed, cut or added: the bulk reader's columns, when it gives any, are
    the loop's; the loop reads what it gives up on (then the general path)."""
    rng = random.Random(32)
    agreed = 0
    for _ in range(3000):
        frame, _ = _frame(rng, rng.choice([2, 4]), rng.randrange(1, 12), repeat=False)
        data = bytearray(frame)
        for _ in range(rng.randrange(1, 4)):
            what, at = rng.random(), rng.randrange(len(data))
            if what < 0.6:
                data[at] = rng.choice([0x58, 0x8C, 0x28, 0x65, 0x61, 0x86, 0x71, 0x94, 0x4B, 0x47, rng.randrange(256)])
            elif what < 0.8:
                del data[at:at + rng.randrange(1, 4)]
            else:
                data[at:at] = bytes([rng.randrange(256)])
        data = bytes(data)
        bulk = pickles._items_in_bulk(data)
        if bulk is None:
            continue
        try:
            loop = pickles._canonical_columns(data)
        except (IndexError, ValueError):
            loop = None
        assert loop is not None, data
        assert bulk.names == loop.names, data
        np.testing.assert_array_equal(bulk.timestamps, loop.timestamps)
        np.testing.assert_array_equal(bulk.values, loop.values)
        agreed += 1
    assert agreed > 100
