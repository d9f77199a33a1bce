"""carbon's pickle protocol (carbon-relay and carbon-aggregator send it): frames of a
4-byte big-endian length and a pickled list of `(name, (timestamp, value))`.

pickle's own unpickler is never used on a frame: it builds whatever a frame describes
before anything can be checked (unpickler.py says what a hostile 200-byte frame can make
it do). A frame is decoded in one of two ways:

- `_canonical`: the layout carbon's senders write (protocols 2 to 5: a list, filled by
  APPENDS in batches, of `(name, (timestamp, value))` tuples, names as strings or memo
  references to earlier names, numbers as BININT/BININT1/BININT2/BINFLOAT) is read
  directly into names and numbers, one pass over the bytes, no tuple built; anything
  else in the frame and it gives up, having built nothing but those columns;
- otherwise `restricted_loads` (unpickler.py) builds the message under bounds on depth,
  element count and expansion, refusing the frame whole when it would exceed them, and each
  item is checked on its own: a malformed point is refused alone, with the reason.

Numbers are checked before any conversion: an integer too big for a float (a point of
`10**400`) is refused as that point, not converted. Every refusal is described with
`points.describe`, which never repr()s a hostile object whole. Nothing a frame holds can
make `decode_pickle` raise: an unexpected exception refuses the frame, with its type.
"""
from __future__ import annotations

import re
import struct

import numpy as np

from biggraphite_like.ingest.points import ReceivedPoints, Refusals, describe
from biggraphite_like.ingest.unpickler import PICKLE_SAFE, PickleRefused, restricted_loads

__all__ = ["PICKLE_SAFE", "PickleRefused", "decode_pickle", "safe_loads"]

MAX_FLOAT_BITS = 1024  # an int of more bits overflows a float
MAX_NUMBER_TEXT = 64  # characters of a number sent as a string (carbon accepts float("1.5"))

_U32 = struct.Struct("<I").unpack_from


def safe_loads(data: bytes) -> object:
    """Unpickle data with the bounded, restricted unpickler (carbon's SafeUnpickler's
    globals, and bounds on depth and expansion); PickleRefused says why not."""
    return restricted_loads(data)


def decode_pickle(frame: bytes, refusals: Refusals) -> ReceivedPoints:
    """The points of one pickle frame; an unsafe, malformed or oversized pickle is refused
    whole, a malformed point alone. Never raises for what the frame holds."""
    try:
        points = _canonical(frame)
        if points is not None:
            return points
        message = restricted_loads(frame)
        if not isinstance(message, (list, tuple)):
            refusals.add("a pickle message must be a list of (name, (timestamp, value))", message)
            return ReceivedPoints.empty()
        return _decode_item_by_item(message, refusals)
    except PickleRefused as exc:
        refusals.add(f"invalid pickle ({exc})", frame[:100])
    except Exception as exc:  # noqa: BLE001 - a frame must never take the receiver down
        refusals.add(f"invalid pickle ({type(exc).__name__} while decoding it)", frame[:100])
    return ReceivedPoints.empty()


def _canonical(data: bytes) -> ReceivedPoints | None:
    """The points of a frame in the layout carbon's senders write, or None for any other
    layout (then nothing was built but these columns). See the module doc."""
    points = _items_in_bulk(data)
    if points is not None:
        return points
    try:
        return _canonical_columns(data)
    except (IndexError, struct.error):  # truncated: the general path says where
        return None


_HEADER = re.compile(rb"\x80[\x02-\x05](?:\x95.{8})?\](q.|r.{4}|\x94)?", re.DOTALL)  # PROTO, FRAME, EMPTY_LIST, put


def _items_in_bulk(data: bytes) -> ReceivedPoints | None:
    """The frame's items read with numpy when every one is `(name, (timestamp, value))`
    with the name in full (BINUNICODE or SHORT_BINUNICODE, maybe memoized: a memo
    reference anywhere and this gives up), the numbers as _numbers reads them, in MARK ...
    APPENDS batches or APPEND, with no FRAME past the first: carbon-relay's frames
    (protocol 2) and small ones of protocol 4. The same columns as _canonical_columns,
    without its Python step an opcode (issue 32: 1.1-1.3 us a point): every position
    that could start an item (a name's opcode) gets where the next would start if it
    did, all at once; the items are the chain of those from the first, which must end
    exactly at the STOP (followed by a Python step an item only when a byte of a name or
    number looks like a name's opcode). Memo puts are checked as the loop checks them.
    None for anything else (the opcode loop then reads it)."""
    header = _HEADER.match(data)
    if header is None or len(data) < header.end() + 2 or data[-1] != 0x2E:  # STOP
        return None
    raw = np.frombuffer(data, np.uint8)
    padded = np.concatenate([raw, np.zeros(64, np.uint8)])  # an item's opcodes past the name: 37 bytes at most
    starts = np.flatnonzero((raw == 0x58) | (raw == 0x8C))
    starts = starts[starts >= header.end()]
    if not len(starts):
        return None
    long = padded[starts] == 0x58
    length = np.where(long, padded[starts + 1].astype(np.int64) | padded[starts + 2].astype(np.int64) << 8
                      | padded[starts + 3].astype(np.int64) << 16 | padded[starts + 4].astype(np.int64) << 24,
                      padded[starts + 1])
    name_at = starts + np.where(long, 5, 2)
    at = np.minimum(name_at + length, len(raw))  # past the name
    puts = np.empty((len(starts), 3), np.int64)  # where each item's memo puts are (or -1), checked as the loop does
    puts[:, 0] = np.where(_PUT_BYTES[padded[at]] > 0, at, -1)
    at = at + _PUT_BYTES[padded[at]]
    numbers = np.empty((len(starts), 2), np.int64)
    ok = np.ones(len(starts), bool)
    for column in range(2):
        numbers[:, column] = at
        size = _NUMBER_BYTES[padded[at]]
        ok &= size > 0
        at = at + size
    for column in (1, 2):  # TUPLE2, maybe memoized
        ok &= padded[at] == 0x86
        at = at + 1
        puts[:, column] = np.where(_PUT_BYTES[padded[at]] > 0, at, -1)
        at = at + _PUT_BYTES[padded[at]]
    end = padded[at]
    at = at + ((end == 0x65) | (end == 0x61))  # APPENDS, APPEND
    mark = padded[at] == 0x28
    after = at + mark  # where the next item starts
    stop = len(raw) - 1  # the STOP after the last item
    following = np.searchsorted(starts, after)  # the candidate where the next item would start, len(starts): the STOP
    found = np.minimum(following, len(starts) - 1)
    following = np.where(ok & ((starts[found] == after) | (after == stop)), following, -1)
    first = header.end() + (data[header.end()] == 0x28)
    if starts[0] != first:
        return None
    if (following == np.arange(1, len(starts) + 1)).all():  # no byte of a name or number looked like an item
        items = np.arange(len(starts))
    else:
        chain, step, index = [], following.tolist(), 0
        while 0 <= index < len(step):
            chain.append(index)
            index = step[index]
        if index != len(starts) or after[chain[-1]] != stop:
            return None
        items = np.array(chain, np.int64)
    marks = np.concatenate([[first > header.end()], mark[items[:-1]]])
    skeleton = np.stack([np.where(marks, 0x28, 0x20), np.full(len(items), 0x69), np.where(
        end[items] == 0x65, 0x65, np.where(end[items] == 0x61, 0x61, 0x20))], axis=1).astype(np.uint8)
    if after[items[-1]] != stop or mark[items[-1]] or _BATCHES.fullmatch(skeleton.tobytes().replace(b" ", b"")) is None:
        return None
    put_at = puts[items].reshape(-1)
    put_at = put_at[put_at >= 0]
    if header.group(1):
        put_at = np.concatenate([[header.start(1)], put_at])
    if not _puts_in_order(data, put_at):
        return None
    names = _names_at(data, name_at[items], length[items])
    if names is None:
        return None
    column = _numbers(data, numbers[items].reshape(-1))
    return ReceivedPoints(names, column[0::2].copy(), column[1::2].copy())


_BATCHES = re.compile(rb"(?:\(i+e|ia)*")  # the items' MARK / APPENDS / APPEND in order, each item an `i`


def _names_at(data: bytes, starts: np.ndarray, lengths: np.ndarray) -> list[str] | None:
    """The names data[starts[k]:starts[k] + lengths[k]] as str: their bytes gathered with
    newlines between them, decoded once; None when one is not UTF-8."""
    total = int(lengths.sum())
    out = np.full(total + len(starts), 0x0A, np.uint8)  # a newline before each name
    offsets = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # of each byte in its name
    out[np.repeat(np.cumsum(lengths + 1) - lengths, lengths) + offsets] = \
        np.frombuffer(data, np.uint8)[np.repeat(starts, lengths) + offsets]
    try:
        names = out.tobytes().decode("utf-8").split("\n")[1:]
    except UnicodeDecodeError:
        return None
    if len(names) != len(starts):  # a name holds a newline
        return _decode_names([data[s:s + n] for s, n in zip(starts.tolist(), lengths.tolist())])
    return names


def _canonical_columns(data: bytes) -> ReceivedPoints | None:  # noqa: C901 - one loop, kept flat for speed
    if len(data) < 4 or data[0] != 0x80 or not 2 <= data[1] <= 5:
        return None
    pos = 2
    if data[pos] == 0x95:  # FRAME (protocol 4)
        pos += 9
    if data[pos] != 0x5D:  # EMPTY_LIST
        return None
    pos += 1
    puts: list[int] = []  # positions of the memo puts, checked after the loop (_puts_in_order)
    named: dict[int, bytes] = {}  # position of a put -> the name it put in the memo
    raw_names: list[bytes] = []
    numbers: list[int] = []  # positions of each point's timestamp and value opcodes
    add_put, add_name, add_number = puts.append, raw_names.append, numbers.append
    number_size, put_size, u32 = _NUMBER_SIZE, _PUT_SIZE, _U32
    if put_size[data[pos]]:
        add_put(pos)
        pos += put_size[data[pos]]
    in_mark, pending, end = False, 0, len(data) - 1
    while True:
        op = data[pos]
        if op == 0x58:  # BINUNICODE: the usual name (protocols 2 and 3)
            if pending and not in_mark:
                return None
            start = pos + 5
            pos = start + u32(data, pos + 1)[0]
            name = data[start:pos]
        elif op == 0x8C:  # SHORT_BINUNICODE: the usual name (protocols 4 and 5)
            if pending and not in_mark:
                return None
            start = pos + 2
            pos = start + data[pos + 1]
            name = data[start:pos]
        elif op == 0x28:  # MARK
            if in_mark or pending:
                return None
            in_mark, pos = True, pos + 1
            continue
        elif op == 0x65:  # APPENDS
            if not in_mark:
                return None
            in_mark, pending, pos = False, 0, pos + 1
            continue
        elif op == 0x61:  # APPEND
            if in_mark or pending != 1:
                return None
            pending, pos = 0, pos + 1
            continue
        elif op == 0x95:  # FRAME, between items
            pos += 9
            continue
        elif op == 0x2E:  # STOP
            if in_mark or pending or pos != end:
                return None
            break
        elif pending and not in_mark:
            return None
        elif op == 0x55:  # SHORT_BINSTRING
            start = pos + 2
            pos = start + data[pos + 1]
            name = data[start:pos]
        elif op == 0x54:  # BINSTRING
            start = pos + 5
            pos = start + u32(data, pos + 1)[0]
            name = data[start:pos]
        elif op == 0x68 or op == 0x6A:  # BINGET, LONG_BINGET of an earlier name
            slot, pos = (data[pos + 1], pos + 2) if op == 0x68 else (u32(data, pos + 1)[0], pos + 5)
            name = named.get(puts[slot]) if slot < len(puts) else None  # slot k is the k-th put
            if name is None:
                return None
        else:
            return None
        if pos > end:
            return None
        size = put_size[data[pos]]
        if size:
            add_put(pos)
            named[pos] = name
            pos += size
        if data[pos] == 0x95:  # FRAME: pickle's framer may cut before any object
            pos += 9
        add_number(pos)
        size = number_size[data[pos]]
        pos += size
        if data[pos] == 0x95:
            pos += 9
        add_number(pos)
        size2 = number_size[data[pos]]
        pos += size2
        if not (size and size2):
            return None
        for _ in range(2):  # TUPLE2 of (timestamp, value), then of (name, that), each maybe memoized
            if data[pos] != 0x86:
                return None
            pos += 1
            size = put_size[data[pos]]
            if size:
                add_put(pos)
                pos += size
        add_name(name)
        pending += 1
    names = _decode_names(raw_names)
    if names is None or not _puts_in_order(data, puts):
        return None
    columns = _numbers(data, np.array(numbers, dtype=np.int64))
    return ReceivedPoints(names, columns[0::2].copy(), columns[1::2].copy())


_NUMBER_SIZE = [0] * 256  # opcode -> bytes of a BINFLOAT / BININT / BININT1 / BININT2 with its argument
_NUMBER_SIZE[0x47], _NUMBER_SIZE[0x4A], _NUMBER_SIZE[0x4B], _NUMBER_SIZE[0x4D] = 9, 5, 2, 3
_PUT_SIZE = [0] * 256  # opcode -> bytes of a BINPUT / LONG_BINPUT / MEMOIZE with its argument
_PUT_SIZE[0x71], _PUT_SIZE[0x72], _PUT_SIZE[0x94] = 2, 5, 1
_NUMBER_BYTES, _PUT_BYTES = np.array(_NUMBER_SIZE, np.int64), np.array(_PUT_SIZE, np.int64)


def _puts_in_order(data: bytes, puts: "list[int] | np.ndarray") -> bool:
    """Whether the k-th memo put of the frame puts into slot k, as pickle's writers number
    them (then slot k of a memo reference is the k-th put, as the loop read it)."""
    if not len(puts):
        return True
    raw = np.frombuffer(data, dtype=np.uint8)
    at = np.array(puts, dtype=np.int64)
    ops, order = raw[at], np.arange(len(at))
    short, long = ops == 0x71, ops == 0x72
    if short.any() and (raw[at[short] + 1] != order[short]).any():
        return False
    if long.any():
        slots = raw[(at[long] + 1)[:, None] + np.arange(4)].astype(np.int64) @ (256 ** np.arange(4))
        return bool((slots == order[long]).all())
    return True


def _numbers(data: bytes, positions: np.ndarray) -> np.ndarray:
    """The numbers whose opcodes (BINFLOAT, BININT, BININT1, BININT2) are at `positions`,
    as float64, read in bulk."""
    raw = np.frombuffer(data, dtype=np.uint8)
    ops = raw[positions]
    padded = np.concatenate([raw, np.zeros(9, np.uint8)])  # every number's 8 bytes exist
    window = padded[(positions + 1)[:, None] + np.arange(8)]  # the 8 bytes after each opcode
    out = np.empty(len(positions), dtype=np.float64)
    for op, dtype, size in ((0x47, ">f8", 8), (0x4A, "<i4", 4), (0x4B, "u1", 1), (0x4D, "<u2", 2)):
        sel = ops == op
        if sel.any():
            out[sel] = np.ascontiguousarray(window[sel, :size]).view(dtype).reshape(-1)
    return out


def _decode_names(raw: list[bytes]) -> list[str] | None:
    """The names as str (one decode for all); None when one is not UTF-8."""
    try:
        names = b"\n".join(raw).decode("utf-8").split("\n")
        return names if len(names) == len(raw) else [name.decode("utf-8") for name in raw]
    except UnicodeDecodeError:
        return None


def _decode_item_by_item(message: list | tuple, refusals: Refusals) -> ReceivedPoints:
    names, timestamps, values = [], [], []
    for item in message:
        if type(item) not in (tuple, list) or len(item) != 2 or type(item[1]) not in (tuple, list) \
                or len(item[1]) != 2:
            refusals.add("expected (name, (timestamp, value))", item)
            continue
        name, (timestamp, value) = item
        timestamp, why = as_float(timestamp, "timestamp")
        if why is None:
            value, why = as_float(value, "value")
        if why is not None:
            refusals.add(why, item)
            continue
        if isinstance(name, bytes):
            try:
                name = name.decode("utf-8")
            except UnicodeDecodeError:
                refusals.add("name is not UTF-8", item)
                continue
        if not isinstance(name, str):
            refusals.add(f"name is a {type(name).__name__}, not a string", item)
            continue
        names.append(name)
        timestamps.append(timestamp)
        values.append(value)
    return ReceivedPoints(names, np.array(timestamps, dtype=np.float64), np.array(values, dtype=np.float64))


def as_float(number: object, what: str) -> tuple[float, None] | tuple[None, str]:
    """(float, None), or (None, why) for what is no number or an int a float cannot hold;
    checked before converting. A string is converted as carbon converts it (float())."""
    kind = type(number)
    if kind is float:
        return number, None
    if kind is int or kind is bool:
        bits = number.bit_length()
        if bits >= MAX_FLOAT_BITS:
            return None, f"{what} is an integer of {bits} bits, out of a float's range"
        return float(number), None
    if kind in (str, bytes) and len(number) <= MAX_NUMBER_TEXT:
        try:
            return float(number), None
        except ValueError:
            return None, f"{what} {describe(number)} is not a number"
    return None, f"{what} is {describe(number)}, not a number"
