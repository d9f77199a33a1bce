"""Encoding windows into chunks, many windows at once.

encode_many encodes many windows at once (every metric's stage-0 window ends at 00:00
and 12:00 UTC, so a store seals them all in one flush): windows of one length and kind are
the rows of 2-D arrays, and every choice docs/format/chunks.md describes (unit, delta
orders, exponent, widths, planes, header) is made for all of them with a few numpy calls;
only deflating and the choice among the streams it gives (as they are, packed, a block a
part) run window by window. encode is encode_many of one window: one encoder, the same
bytes.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from biggraphite_like.chunks.decimals import decimal_parts
from biggraphite_like.chunks.deltas import pack_rows, steps
from biggraphite_like.chunks.format import (
    BASED,
    BASED_VERSIONS,
    HEADER,
    HEADER_ROW,
    MODE_DECIMAL,
    MODE_XOR,
    PLAIN_VERSIONS,
    Points,
)
from biggraphite_like.chunks.planes import bit_planes
from biggraphite_like.chunks.streams import finish
from biggraphite_like.errors import InvalidPoint

_BATCH_POINTS = 1 << 15  # points encode_many encodes together: numpy's calls spread over ~45 windows, arrays
# of 256 KiB (twice as large, temporaries of numpy's expressions cost page faults: several times slower)


def encode(points: Points) -> bytes:
    """The chunk of points (sorted by timestamp, unique timestamps)."""
    return encode_many([points])[0]


def encode_many(windows: Sequence[Points]) -> list[bytes]:
    """The chunk of each window, as encode gives it: windows of one length and kind (with
    counts or not) are encoded together as the rows of 2-D arrays, a few numpy calls a
    group of up to _BATCH_POINTS points (the windows of every metric seal at once); only
    deflating and the choice among the streams it gives run window by window: 148 us a
    window of 720 points against 319 one by one (bench/seal_bench.py)."""
    out: list[bytes] = [b""] * len(windows)
    groups: dict[tuple[int, bool], list[int]] = {}
    for index, points in enumerate(windows):
        groups.setdefault((len(points.timestamps), points.counts is not None), []).append(index)
    for (n, with_counts), indices in groups.items():
        rows = max(1, _BATCH_POINTS // max(n, 1))
        for start in range(0, len(indices), rows):
            part = [windows[i] for i in indices[start:start + rows]]
            ts = _stack([p.timestamps for p in part], np.int64, n)
            values = _stack([p.values for p in part], np.float64, n)
            counts = _stack([p.counts for p in part], np.int64, n) if with_counts else None
            for index, chunk in zip(indices[start:start + rows], _encode_rows(ts, values, counts)):
                out[index] = chunk
    return out


def _stack(arrays: list, dtype: type, n: int) -> np.ndarray:
    """The arrays (n items each) as the rows of one C-ordered (k, n) array of dtype."""
    return np.stack([np.asarray(a, dtype) for a in arrays]).reshape(len(arrays), n)


def _encode_rows(ts: np.ndarray, values: np.ndarray, counts: np.ndarray | None) -> list[bytes]:
    """The chunks of k windows of n points: timestamps and values (k, n), counts (k, n) or None."""
    k, n = ts.shape
    head = np.zeros(k, HEADER_ROW)
    head["n"] = n
    base = ts[:, 0] if n else np.zeros(k, np.int64)
    offsets = ts - base[:, None]
    unit = np.maximum(np.gcd.reduce(offsets[:, 1:], axis=1), 1) if n > 1 else np.ones(k, np.int64)
    if (unit >= 1 << 32).any():
        raise InvalidPoint(f"timestamps {int(unit.max())} s apart or more in one window: a chunk keeps their"
                           " common step in 32 bits; write windows of timestamps at most 2**32 - 1 s apart")
    head["base"], head["unit"] = base, unit
    # a full window is 0, 1, 2, ... units: kept as the distance from that, nothing at all
    order, _, _, z = pack_rows(steps(offsets, unit) - np.arange(n, dtype=np.int64), (0, 1))
    head["ts_order"], head["ts_width"], ts_planes = order, *bit_planes(z)
    parts: list[list] = [[b"".join(planes)] for planes in ts_planes]  # what the deflate stream may end a block after
    exponent, m, regular = decimal_parts(values)
    decimal = np.flatnonzero(exponent >= 0)
    based = np.zeros(k, bool)
    head["mode"] = np.where(exponent >= 0, MODE_DECIMAL, MODE_XOR)
    head["e"] = np.maximum(exponent, 0)
    if len(decimal):
        order, is_based, v_base, z = pack_rows(m, (0, 1, 2), based=True)
        based[decimal] = is_based
        head["v_order"][decimal] = order | np.where(is_based, BASED, 0)
        head["v_base"][decimal] = v_base
        head["v_width"][decimal], planes = bit_planes(z)
        for row, own in zip(decimal.tolist(), planes):
            parts[row] += own
        exceptions = n - regular.sum(axis=1)
        head["exceptions"][decimal] = exceptions
        for index in np.flatnonzero(exceptions).tolist():
            row, where = int(decimal[index]), np.flatnonzero(~regular[index])
            parts[row].append(where.astype("<u4").tobytes() + values[row, where].tobytes())
    xor = np.flatnonzero(exponent < 0)
    if len(xor):  # the raw bits XORed with the previous value's
        bits = values[xor].view(np.uint64)
        z = bits.copy()
        z[:, 1:] ^= bits[:, :-1]
        head["v_width"][xor], planes = bit_planes(z)
        for row, own in zip(xor.tolist(), planes):
            parts[row] += own
    if counts is not None:
        order, _, _, z = pack_rows(counts, (0, 1))
        head["c_order"] = order | 0x80  # counts present
        head["c_width"], planes = bit_planes(z)
        for row, own in zip(parts, planes):
            row += own
    headers, size = head.tobytes(), HEADER_ROW.itemsize
    out = []
    for row, (own, is_based) in enumerate(zip(parts, based.tolist())):
        own[0] = headers[row * size:(row + 1) * size if is_based else row * size + HEADER.size] + own[0]
        out.append(finish(own, n, BASED_VERSIONS if is_based else PLAIN_VERSIONS))
    return out
