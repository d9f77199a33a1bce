"""The chunk codec: one window of one metric's stage as compact, lossless bytes.

Stores keep chunks as opaque bytes; this module alone knows their format (as Prometheus'
tsdb keeps `chunkenc` apart from its index and storage). A chunk holds n points sorted by
timestamp: timestamps, float64 values and, for aggregated stages, counts. Decoding gives
back every value bit for bit (NaN payloads, -0.0 and infinities included).

Format: one version byte, then a fixed header followed by byte planes (byte k of every
integer, then byte k + 1, ...), as a raw-deflate stream (version 1) or as they are when
deflate would save under 5 % (version 2: reads then skip inflating). Versions 3 and 4 are
1 and 2 with one more header field, the base of the values' integers (below). The deflate
stream may end a block after each plane, so that each plane gets its own Huffman codes
(the planes of a number differ: a random low byte, a skewed high one); inflating does not
care where blocks end, so this is no format of its own. Versions 5 and 6 (headers of 1 and
3) are packed: a Huffman table is built for each deflate block on every read, about 3 us,
so the parts a block of their own would make little smaller (deflate keeps 90 % or more:
the noise of low planes, the half-random byte under a float's exponent; decoding their
literals costs reads about as much as the table, for under a tenth of their bytes) are
moved after the others, which share one block; the moved parts
follow as stored blocks, then a 4-byte mask (bit i: part i moved; parts in the order
below: timestamps with the header, value planes, exceptions, count planes). A chunk is
packed when that costs at most 1 % more than a block a part:
- timestamps: base (the first timestamp) and offsets from it in `unit`s (their common
  step, the precision for aligned points), minus the point's index (a full window is all
  zeros: no bytes at all), delta-encoded 0 or 1 times;
- values, whichever mode is smaller for the chunk:
  DECIMAL - value = m / 10**e for one exponent e and integers m (what metrics with a few
  decimals are), m delta-encoded 0, 1 or 2 times, then zigzagged or, when never negative
  (random values, counter increments), less their minimum, the header's base, unsigned
  (versions 3, 4 and 6, v_order bit 0x40: a zigzag would cost them one bit each); values that do not
  round-trip exactly (NaN, -0.0, inf, odd ones) are kept as exceptions (index, raw bits);
  XOR - the raw bits XORed with the previous value's (Gorilla's idea, as byte planes);
- counts (aggregated stages): integers, delta-encoded 0 or 1 times.

Encoding: encode_many encodes many windows at once (every metric's stage-0 window ends at
00:00 and 12:00 UTC, so a store seals them all in one flush): windows of one length and
kind are the rows of 2-D arrays, and every choice above (unit, delta orders, exponent,
widths, planes, header) is made for all of them with a few numpy calls; only deflating
and the choice among the streams it gives (as they are, packed, a block a part) run
window by window. encode is encode_many of one window: one encoder, the same bytes.
"""
from __future__ import annotations

import bisect
import dataclasses
import itertools
import struct
import zlib
from typing import Callable, Iterator, Sequence

import deflate
import numpy as np

from biggraphite_like.errors import CorruptChunk, InvalidPoint

VERSION = 1  # header and planes deflated
VERSION_RAW = 2  # header and planes as they are (deflate would not make them much smaller)
VERSION_BASED = 3  # as 1, with the header of version 3 (the values' integers less a base)
VERSION_BASED_RAW = 4  # as 2, with the header of version 3
VERSION_PACKED = 5  # as 1, the parts deflate cannot shrink stored after the others (one block), then a mask
VERSION_BASED_PACKED = 6  # as 5, with the header of version 3
VERSIONS = (VERSION, VERSION_RAW, VERSION_BASED, VERSION_BASED_RAW, VERSION_PACKED, VERSION_BASED_PACKED)
_PLAIN_HEADER = (VERSION, VERSION_RAW, VERSION_PACKED)  # versions with _HEADER (the others: _HEADER_BASED)
_RAW_SLACK = 1.05
_PACKED_SLACK = 1.01  # a packed chunk is kept when at most this much larger than the per-part blocks
_STORED_SHARE = 0.9  # a part is stored when deflate keeps this much of it or more
_MASK = struct.Struct("<I")  # the packed chunk's last bytes: bit i, part i stored after the deflated ones
_HEADER = struct.Struct("<IqIBBBBBBBBI")  # n, base, unit, ts order/width, value mode/e/order/width, count order/width, exceptions
_HEADER_BASED = struct.Struct("<IqIBBBBBBBBIq")  # the same, then the base of the values' integers
_BASED = 0x40  # v_order bit: the values' integers are stored less the header's base, not zigzagged
_LAYOUT = struct.Struct("<I12xBBBBBBBBI")  # the header but base and unit: what chunks decoded together share
_MODE_DECIMAL, _MODE_XOR = 0, 1
_MAX_EXPONENT = 15
_MAX_EXACT = 2.0**53  # |m| below this: m is an exact float64
_EXCEPTION_SHARE = 8  # DECIMAL is kept while fewer than 1 value in this many is an exception
_LEVEL = 6
_INFLATE_BOUND = 1 << 16  # bytes libdeflate may inflate a chunk to (at least; 16 times its size if more)
_ITEMSIZE = [1, 1, 2, 4, 4, 8, 8, 8, 8]  # the smallest integer size of each plane width 0..8
_BLOCKS_FROM = 64  # points from which each plane gets a deflate block of its own
_BATCH_POINTS = 1 << 15  # points encode_many encodes together: numpy's calls spread over ~45 windows, arrays
# of 256 KiB (twice as large, temporaries of numpy's expressions cost page faults: several times slower)
_WIDTH_FLOORS = np.array([1 << 8 * b for b in range(8)], np.uint64)  # an integer needs byte b from 1 << 8b
_HEADER_ROW = np.dtype([("n", "<u4"), ("base", "<i8"), ("unit", "<u4"), ("ts_order", "u1"), ("ts_width", "u1"),
                        ("mode", "u1"), ("e", "u1"), ("v_order", "u1"), ("v_width", "u1"), ("c_order", "u1"),
                        ("c_width", "u1"), ("exceptions", "<u4"), ("v_base", "<i8")])  # _HEADER_BASED, a row a window
_SCALES = np.array([10.0**e for e in range(_MAX_EXPONENT + 1)])[:, None, None]  # 10**e of every exponent
_LOG2 = np.log2(np.arange(1, (1 << 16) + 1, dtype=np.float64))  # log2(z + 1) of z < 1 << 16
_PLAIN_VERSIONS = (VERSION, VERSION_RAW, VERSION_PACKED)  # (deflated, as they are, packed) with _HEADER
_BASED_VERSIONS = (VERSION_BASED, VERSION_BASED_RAW, VERSION_BASED_PACKED)  # the same with _HEADER_BASED


@dataclasses.dataclass
class Points:
    """Points of one window, sorted by timestamp: counts is None for a raw stage."""

    timestamps: np.ndarray  # int64
    values: np.ndarray  # float64
    counts: np.ndarray | None = None  # int64

    def __len__(self) -> int:
        return len(self.timestamps)


def _zigzag(x: np.ndarray, work: np.ndarray | None = None) -> np.ndarray:
    """x zigzagged (uint64); work: an int64 array of x's shape for the sign mask."""
    z = x << 1
    z ^= np.right_shift(x, 63, out=work)
    return z.view(np.uint64)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    """The signed integers of zigzagged unsigned z, in z's width (int8 for uint8, ...)."""
    signed = np.dtype(f"i{z.dtype.itemsize}")
    return (z >> 1).view(signed) ^ -(z & 1).view(signed)


def _unplanes(data: np.ndarray, offset: int, n: int, width: int, itemsize: int = 8,
              out: np.ndarray | None = None, at: Callable[[int], int] | None = None) -> tuple[np.ndarray, int]:
    """Unsigned integers (k, n) of `itemsize` bytes (at least width) from the byte planes
    at offset of each row of data (k, payload bytes): the smallest itemsize that holds
    `width` bytes saves most of the work on narrow planes. `out`: a (k, n) array of that
    itemsize to fill (values' own bytes: no copy after). `at`: where each plane's logical
    offset is in data (packed chunks), None: where it says."""
    k = len(data)
    dtype = np.dtype(f"u{itemsize}")
    starts = [offset + plane * n for plane in range(width)]
    planes = [data[:, start:start + n] for start in (starts if at is None else map(at, starts))]
    if any(p.shape[1] != n for p in planes):
        raise ValueError(f"a plane shorter than {n} bytes")
    if width == itemsize == 1 and out is None:
        return planes[0], offset + n
    if out is None:
        out = np.empty((k, n), dtype)
    out = out.view(dtype)
    bytes_ = out.view(np.uint8).reshape(k, n, itemsize)
    if width < itemsize:
        bytes_[:, :, width:] = 0
    for plane in range(width):  # plane by plane: contiguous reads, twice as fast as one transposed copy
        bytes_[:, :, plane] = planes[plane]
    return out, offset + n * width


def _unpack_ints(data: np.ndarray, offset: int, n: int, order: int, width: int, base: np.ndarray | None = None,
                 out: np.ndarray | None = None, at: Callable[[int], int] | None = None) -> tuple[np.ndarray, int]:
    """int64 (k, n) from the planes of `order`-times delta-encoded integers: zigzagged, or
    stored less `base` (k, 1) when given (unsigned: zero-extended from the plane width);
    into `out` when given. The first sum widens to int64 as it adds (no copy of its own)."""
    k = len(data)
    z, offset = _unplanes(data, offset, n, width, _ITEMSIZE[width], at=at)
    x = _unzigzag(z) if base is None else z
    if out is None:
        out = np.empty((k, n), np.int64)
    if order:
        np.cumsum(x, axis=1, dtype=np.int64, out=out)
        for _ in range(order - 1):
            np.cumsum(out, axis=1, out=out)
    else:
        out[...] = x
    if base is not None:  # the base of the order-th deltas: the sums of a constant are a polynomial
        if order == 0:
            out += base
        else:
            ramp = np.arange(1, n + 1, dtype=np.int64)
            if order == 2:
                ramp = np.cumsum(ramp)
            out += base * ramp
    return out, offset


def _unpack_times(data: np.ndarray, offset: int, n: int, order: int, width: int, out: np.ndarray,
                  start: np.ndarray | int, at: Callable[[int], int] | None = None) -> int:
    """out (k, n) = start (k, 1) + each point's index plus its stored deviation from it (the
    timestamps' planes: deviations delta-encoded `order` times, zigzagged), in units; the
    offset after the planes. Of order 1, the sums of the deltas plus one are the index
    plus the deviation: start joins the first column, one cumulative sum gives the rest."""
    if order not in (0, 1):
        raise CorruptChunk(f"a chunk with timestamps delta-encoded {order} times: the row is damaged")
    if not width:  # every slot of the span: 0, 1, 2, ... units
        np.add(np.arange(n, dtype=np.int64), start, out=out)
        return offset
    z, offset = _unplanes(data, offset, n, width, _ITEMSIZE[width], at=at)
    out[...] = _unzigzag(z)
    if order == 1:
        out += 1
        out[:, :1] += start - 1
        np.cumsum(out, axis=1, out=out)
    else:
        out += np.arange(n, dtype=np.int64)
        out += start
    return offset


def _exact(values: np.ndarray, e: int | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(m, ok): rint(values * 10**e), and where m / 10**e gives the value back bit for bit
    (e an array: the scales 10**e themselves, broadcast against values)."""
    scale = 10.0**e if isinstance(e, int) else e
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.multiply(values, scale)
        np.rint(m, out=m)
        back = np.abs(m)
        ok = back < _MAX_EXACT
        np.divide(m, scale, out=back)  # in place: every fresh array of a batch costs page faults
        ok &= back.view(np.uint64) == values.view(np.uint64)
        return m, ok


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
    head = np.zeros(k, _HEADER_ROW)
    head["n"] = n
    base = ts[:, 0] if n else np.zeros(k, np.int64)
    offsets = ts - base[:, None]
    unit = np.maximum(np.gcd.reduce(offsets[:, 1:], axis=1), 1) if n > 1 else np.ones(k, np.int64)
    if (unit >= 1 << 32).any():
        raise InvalidPoint(f"timestamps {int(unit.max())} s apart or more in one window: a chunk keeps their"
                           " common step in 32 bits; write windows of timestamps at most 2**32 - 1 s apart")
    head["base"], head["unit"] = base, unit
    # a full window is 0, 1, 2, ... units: kept as the distance from that, nothing at all
    order, _, _, z = _pack_rows(_steps(offsets, unit) - np.arange(n, dtype=np.int64), (0, 1))
    head["ts_order"], head["ts_width"], ts_planes = order, *_planes(z)
    parts: list[list] = [[b"".join(planes)] for planes in ts_planes]  # what the deflate stream may end a block after
    exponent, m, regular = _decimals(values)
    decimal = np.flatnonzero(exponent >= 0)
    based = np.zeros(k, bool)
    head["mode"] = np.where(exponent >= 0, _MODE_DECIMAL, _MODE_XOR)
    head["e"] = np.maximum(exponent, 0)
    if len(decimal):
        order, is_based, v_base, z = _pack_rows(m, (0, 1, 2), based=True)
        based[decimal] = is_based
        head["v_order"][decimal] = order | np.where(is_based, _BASED, 0)
        head["v_base"][decimal] = v_base
        head["v_width"][decimal], planes = _planes(z)
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
        head["v_width"][xor], planes = _planes(z)
        for row, own in zip(xor.tolist(), planes):
            parts[row] += own
    if counts is not None:
        order, _, _, z = _pack_rows(counts, (0, 1))
        head["c_order"] = order | 0x80  # counts present
        head["c_width"], planes = _planes(z)
        for row, own in zip(parts, planes):
            row += own
    headers, size = head.tobytes(), _HEADER_ROW.itemsize
    out = []
    for row, (own, is_based) in enumerate(zip(parts, based.tolist())):
        own[0] = headers[row * size:(row + 1) * size if is_based else row * size + _HEADER.size] + own[0]
        out.append(_finish(own, n, _BASED_VERSIONS if is_based else _PLAIN_VERSIONS))
    return out


def _steps(offsets: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """offsets (k, n) // unit (k,): each row's offsets are multiples of its unit, so below
    2**53 a float division is exact, and several times faster than numpy's integer one."""
    if offsets.size and offsets.max() < _MAX_EXACT and offsets.min() >= 0:
        return (offsets / unit[:, None].astype(np.float64)).astype(np.int64)
    return offsets // unit[:, None]


def _finish(parts: list[bytes], n: int, versions: tuple[int, int, int]) -> bytes:
    """The chunk of a window's parts (header and timestamps, value planes, exceptions,
    count planes): as they are, packed or deflated, whichever is kept (see the module
    docstring); versions: (deflated, as they are, packed) of the window's header."""
    payload = b"".join(parts)
    deflated, sizes = _deflate(parts, n)
    if len(payload) <= len(deflated) * _RAW_SLACK:  # planes alone are as small: skip inflating on reads
        return bytes((versions[1],)) + payload
    if sizes is not None:
        fewer_blocks = _pack_parts(parts, sizes)
        if len(fewer_blocks) <= len(deflated) * _PACKED_SLACK:  # a block costs a Huffman table on each read
            return bytes((versions[2],)) + fewer_blocks
    return bytes((versions[0],)) + deflated


def _delta(x: np.ndarray) -> np.ndarray:
    """x[:, i] - x[:, i - 1], x[:, 0] first (np.diff with a 0 prepended, without its overhead)."""
    out = x.copy()
    out[:, 1:] -= x[:, :-1]
    return out


def _pack_rows(x: np.ndarray, orders: tuple[int, ...], based: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, based, base, z) of each row of int64 x (k, n): among the delta orders in
    `orders`, the one of the fewest significant bits in all (a cheap estimate of what the
    planes deflate to; an outlier, as the first delta of a counter, costs its own bits
    only), ties to the smaller sum, then to the lower order; z (k, n), the row's deltas of
    that order zigzagged, or when `based` and they are never negative, less their
    minimum (base; based True). A row all zero (a full window's timestamps) tries no
    other order: nothing beats it."""
    k, n = x.shape
    rows = np.arange(k)
    best: list = []  # order, based, base, z, bits: each row's best so far
    work = np.empty((k, n), np.int64)  # reused (every fresh array of a batch costs page faults)
    deltas = x
    for order in range(max(orders) + 1):
        if order:
            deltas = _delta(deltas)
        if order not in orders:
            continue
        low = deltas.min(axis=1) if n else np.zeros(len(rows), np.int64)
        is_based = low >= 0 if based else np.zeros(len(rows), bool)
        spare = work[:len(rows)]
        if is_based.all():
            z = (deltas - low[:, None]).view(np.uint64)
        else:
            z = _zigzag(deltas, spare)
            if is_based.any():
                z[is_based] = (deltas[is_based] - low[is_based, None]).view(np.uint64)
        new = (np.full(len(rows), order), is_based, low, z, _bits(z, spare.view(np.float64)))
        if not best:
            best = list(new)
        else:
            held = best[4][rows]
            better = new[4] < held
            tie = np.flatnonzero(new[4] == held)
            if len(tie):  # the sums only where they decide
                better[tie] = z[tie].sum(axis=1, dtype=np.float64) < best[3][rows[tie]].sum(axis=1, dtype=np.float64)
            if better.all() and len(rows) == k:
                best = list(new)
            elif better.any():
                for kept, value in zip(best, new):
                    kept[rows[better]] = value[better]
        alive = best[4][rows] > 0
        if not alive.all():
            rows, deltas = rows[alive], deltas[alive]
            if not len(rows):
                break
    order, is_based, base, z, _ = best
    return order, is_based, np.where(is_based, base, 0), z


def _bits(z: np.ndarray, work: np.ndarray) -> np.ndarray:
    """The sum of log2(z + 1) over each row of uint64 z (k, n), log2 looked up in a table
    for z below its size (a lookup costs an eighth of a log2): the same float64 each.
    work: a float64 array of z's shape for the terms."""
    top = len(_LOG2) - 1
    if not z.size or z.max() <= top:
        return np.take(_LOG2, z.view(np.int64), out=work, mode="clip").sum(axis=1)
    each = np.take(_LOG2, np.minimum(z, top).view(np.int64), out=work, mode="clip")
    large = z > top
    each[large] = np.log2(z[large].astype(np.float64) + 1.0)
    return each.sum(axis=1)


def _planes(z: np.ndarray) -> tuple[np.ndarray, list[list[bytes]]]:
    """(width, planes) of each row of uint64 z (k, n): the fewest low bytes that hold its
    values (0: all zero), and byte b of each of its values for b < width, a bytes object
    a plane."""
    k, n = z.shape
    width = np.searchsorted(_WIDTH_FLOORS, z.max(axis=1), side="right") if n else np.zeros(k, np.int64)
    planes: list[list[bytes]] = [[] for _ in range(k)]
    for w in sorted(set(width.tolist()) - {0}):  # a set: np.unique costs more on the few widths there are
        rows = np.flatnonzero(width == w)
        # the rows' bytes b < w, plane after plane: (rows, w, n), each plane one n-byte item
        cut = np.ascontiguousarray(z[rows].view(np.uint8).reshape(len(rows), n, 8)[:, :, :w].transpose(0, 2, 1))
        items = cut.reshape(-1, n).view(f"V{n}").reshape(-1).tolist()
        for index, row in enumerate(rows.tolist()):
            planes[row] = items[index * w:(index + 1) * w]
    return width, planes


def _decimals(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(e, m, regular) of k windows' values (k, n): e, the smallest exponent for which
    all values of a row but a few are m / 10**e exactly (-1: none does; NaN, inf and -0.0
    are always exceptions and do not count against the few); for the rows of an
    exponent, in order, m (int64, an exception repeats the value before it, or the first
    regular one: it costs no delta) and where its values are not exceptions (bool)."""
    k, n = values.shape
    special = ~np.isfinite(values) | ((values == 0) & np.signbit(values))
    n_special = special.sum(axis=1)
    regular = n - n_special
    limit = regular // _EXCEPTION_SHARE
    # a cheap first look at each exponent for rows of over 64 regular values, all exponents at once:
    # skip[e, row], more than one in eight of a sample of ~32 of its regular values is no m / 10**e
    skip = np.zeros((_MAX_EXPONENT + 1, k), bool)
    for count in sorted({c for c in regular.tolist() if c > 64}):
        rows = np.flatnonzero(regular == count)
        stride = max(1, count // 32)
        if count == n:
            sample = values[rows, ::stride]
        else:  # the regular values' positions in order (a stable sort puts them first), every stride-th
            where = np.argsort(special[rows], axis=1, kind="stable")[:, :count:stride]
            sample = np.take_along_axis(values[rows], where, axis=1)
        misses = (~_exact(sample[None], _SCALES)[1]).sum(axis=2)
        skip[:, rows] = misses > sample.shape[1] // _EXCEPTION_SHARE
    exponent = np.full(k, -1, np.int64)
    m_all, ok_all = np.zeros((k, n)), np.zeros((k, n), bool)
    odd = bool(n_special.any())
    for e in range(_MAX_EXPONENT + 1):
        pending = exponent < 0
        rows = np.flatnonzero(pending & ~skip[e])
        if not len(rows):
            if not pending.any():
                break
            continue
        whole = len(rows) == k
        m, ok = _exact(values if whole else values[rows], e)
        if odd:
            ok &= ~special[rows]
        accept = n - ok.sum(axis=1) - n_special[rows] <= limit[rows]
        if whole and accept.all():  # every window at once (no copy)
            exponent[:], m_all, ok_all = e, m, ok
            break
        rows = rows[accept]
        exponent[rows], m_all[rows], ok_all[rows] = e, m[accept], ok[accept]
    decimal = exponent >= 0
    m, ok = (m_all, ok_all) if decimal.all() else (m_all[decimal], ok_all[decimal])
    if not ok.all():  # exceptions repeat their neighbour: the value before, or the first regular one
        at = np.where(ok, np.arange(n), -1)
        np.maximum.accumulate(at, axis=1, out=at)
        at = np.where(at >= 0, at, np.argmax(ok, axis=1)[:, None])
        m = np.take_along_axis(m, at, axis=1)
        m[~ok.any(axis=1)] = 0
    return exponent, m.astype(np.int64), ok


def _pack_parts(parts: list[bytes], sizes: list[int]) -> bytes:
    """The packed stream of parts (versions 5 and 6): the parts that deflated smaller
    (sizes: what each became in a block of its own) in one deflate block, then as stored
    blocks the parts deflate cannot shrink (as they are) and the mask naming them. Reading
    then builds one Huffman table a chunk, not one a part."""
    stored = [i > 0 and size >= _STORED_SHARE * len(part) for i, (part, size) in enumerate(zip(parts, sizes))]
    mask = _MASK.pack(sum(1 << i for i, moved in enumerate(stored) if moved))
    tail = b"".join(part for part, moved in zip(parts, stored) if moved) + mask
    blocks = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15, 8, zlib.Z_RLE)
    head = blocks.compress(b"".join(part for part, moved in zip(parts, stored) if not moved))
    if len(tail) == _MASK.size:
        return head + blocks.compress(tail) + blocks.flush()
    out = [head, blocks.flush(zlib.Z_SYNC_FLUSH)]  # byte-aligned: stored blocks follow
    for start in range(0, len(tail), 0xFFFF):
        piece = tail[start:start + 0xFFFF]
        final = start + 0xFFFF >= len(tail)
        out.append(struct.pack("<BHH", int(final), len(piece), len(piece) ^ 0xFFFF) + piece)
    return b"".join(out)


def _deflate(parts: list[bytes], n: int) -> tuple[bytes, list[int] | None]:
    """(stream, sizes): the raw-deflate stream of the concatenated parts: of n >=
    _BLOCKS_FROM points, one block per part, each with its own Huffman codes, looking for
    runs only (Z_RLE: in a plane, longer matches are chance ones that cost more than the
    bytes they stand for), and the bytes each part's block took (about: a block may end
    mid-byte); shorter ones in one run (sizes None), as a block costs a few bytes they
    would not win back."""
    if n < _BLOCKS_FROM or len(parts) < 2:
        whole = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15)
        return whole.compress(b"".join(parts)) + whole.flush(), None
    blocks = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15, 8, zlib.Z_RLE)
    out = [blocks.compress(parts[0])]
    sizes = []
    for part in parts[1:]:
        out.append(blocks.flush(zlib.Z_BLOCK))
        sizes.append(len(out[-1]) + len(out[-2]))
        out.append(blocks.compress(part))
    out.append(blocks.flush())
    sizes.append(len(out[-1]) + len(out[-2]))
    return b"".join(out), sizes


def decode(chunk: bytes) -> Points:
    """The points of a chunk; CorruptChunk if the bytes are not one."""
    _, ts, values, counts = decode_many([chunk])
    return Points(ts, values, counts)


def decode_many(blobs: Sequence[bytes], labels: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(label, timestamps, values, counts) of the points of many chunks, flat: a point's
    label is its chunk's index in blobs, or labels[that index] when labels are given (so a
    caller needs no per-point lookup of its own). The points of a chunk keep their order,
    chunks come grouped by layout (see decode_groups). counts is None when no chunk has
    counts. CorruptChunk if a blob is not a chunk."""
    layouts = _layouts(blobs)
    total = sum(shape[1] * len(group[0]) for shape, group in layouts.items())
    label_of = np.arange(len(blobs), dtype=np.int64) if labels is None else np.asarray(labels, np.int64)
    out_label = np.empty(total, np.int64)
    out_ts = np.empty(total, np.int64)
    out_values = np.empty(total, np.float64)
    out_counts = np.zeros(total, np.int64) if any(shape[8] & 0x80 for shape in layouts) else None
    point = 0
    for shape, (indices, payloads) in layouts.items():
        n, k = shape[1], len(indices)
        span = slice(point, point + k * n)
        _decode_alike(shape, payloads, out_ts[span].reshape(k, n), out_values[span].reshape(k, n),
                      None if out_counts is None else out_counts[span].reshape(k, n))
        out_label[span] = np.repeat(label_of[indices], n)
        point += k * n
    return out_label, out_ts, out_values, out_counts


def decode_groups(blobs: Sequence[bytes], origin: tuple[int, int] | None = None
                  ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]]:
    """The points of many chunks, one layout at a time: (indices in blobs of k chunks,
    timestamps (k, n), values (k, n), counts (k, n) or None), n the chunks' point count.
    Chunks of one shape (the full windows of similar series are) decode together with a
    few numpy calls; a caller that places each group before asking for the next keeps
    its arrays small (no copy of every point at once). With origin (first, step), a grid
    of columns `step` apart from `first`: each point's column (timestamp - first) // step
    instead of its timestamp (with whole-step units, as a stage's chunks have, no division
    at all). CorruptChunk if a blob is not a chunk."""
    layouts = _layouts(blobs)
    while layouts:  # each group's payloads freed once decoded: the next group's arrays reuse their memory
        shape, (indices, payloads) = layouts.popitem()
        k, n = len(indices), shape[1]
        ts, values = np.empty((k, n), np.int64), np.empty((k, n), np.float64)
        counts = np.empty((k, n), np.int64) if shape[8] & 0x80 else None
        _decode_alike(shape, payloads, ts, values, counts, origin)
        del payloads
        yield np.array(indices, np.int64), ts, values, counts


def _layouts(blobs: Sequence[bytes]) -> dict[tuple, tuple[list[int], list]]:
    """([index], [payload]) of the chunks of each layout: payload size and header but base
    and unit. No object a chunk but its payload: a fetch decodes thousands of chunks, and
    what it keeps alive meanwhile is what Python's garbage collector keeps scanning."""
    groups: dict[tuple, tuple[list[int], list]] = {}
    inflate, bound, error = deflate.deflate_decompress, _INFLATE_BOUND, deflate.DeflateError
    kinds, layout, mask = _KINDS, _LAYOUT.unpack_from, _MASK.unpack_from
    for index, chunk in enumerate(blobs):
        kind = kinds.get(chunk[0]) if chunk else None
        if kind is None:
            _version_error(chunk)
        header_size, packed, raw = kind
        if raw:
            data = memoryview(chunk)[1:]
        else:
            try:  # libdeflate inflates a whole buffer about a fifth faster than zlib
                data = inflate(memoryview(chunk)[1:], max(bound, 16 * len(chunk)))
            except error:  # larger than the bound (zlib needs none), or damaged (zlib says how)
                data = _inflate_zlib(chunk)
        size = len(data)
        if size < header_size + packed * _MASK.size:
            raise CorruptChunk(f"a chunk of format {chunk[0]} shorter than its header: the row is damaged")
        key = (size, layout(data), header_size, mask(data, size - _MASK.size)[0] if packed else None)
        group = groups.get(key)
        if group is None:
            group = groups[key] = ([], [])
        group[0].append(index)
        group[1].append(data)
    return {(size,) + layout + (header_size, mask): group for (size, layout, header_size, mask), group in groups.items()}


# version -> (header size, packed, raw: no deflate)
_KINDS = {version: (_HEADER.size if version in _PLAIN_HEADER else _HEADER_BASED.size,
                    version in (VERSION_PACKED, VERSION_BASED_PACKED), version in (VERSION_RAW, VERSION_BASED_RAW))
          for version in VERSIONS}


def _version_error(chunk: bytes) -> None:
    raise CorruptChunk(f"a chunk of format {chunk[0] if chunk else 'none'} (this code reads formats"
                       f" {', '.join(map(str, VERSIONS))}): the store was written by another version of"
                       " biggraphite_like")


def _inflate_zlib(chunk: bytes) -> bytes:
    try:
        return zlib.decompress(memoryview(chunk)[1:], -15)
    except zlib.error as exc:
        raise CorruptChunk(f"a chunk cannot be decoded ({exc}): the row is damaged") from exc


def _decode_alike(shape: tuple, payloads: list, ts: np.ndarray, values: np.ndarray,
                  counts: np.ndarray | None, origin: tuple[int, int] | None = None) -> None:
    """Decode chunks of one layout (same sizes, modes and widths) into ts, values and
    counts (k rows of n points; counts None: not wanted; origin (first, step): ts gets
    grid columns (timestamp - first) // step). CorruptChunk if they are damaged."""
    try:
        _decode_planes(shape, payloads, ts, values, counts, origin)
    except ValueError as exc:  # planes shorter than the header says
        raise CorruptChunk(f"a chunk cannot be decoded ({exc}): the row is damaged") from exc


def _locator(header_size: int, n: int, lengths: list[int], mask: int) -> Callable[[int], int]:
    """Where a logical offset of a packed chunk's payload is: its parts (lengths, in the
    order encode makes them: timestamps, value planes, exceptions, count planes) come
    after the header, those of the mask's bits after the others."""
    if mask & 1 or mask >> len(lengths):
        raise CorruptChunk(f"a packed chunk's mask {mask:#x} names parts it does not have: the row is damaged")
    logical = list(itertools.accumulate(lengths[:-1], initial=header_size))
    moved = [bool(mask >> i & 1) for i in range(len(lengths))]
    physical, position = [0] * len(lengths), header_size
    for stored in (False, True):
        for i, length in enumerate(lengths):
            if moved[i] == stored:
                physical[i], position = position, position + length

    def at(offset: int) -> int:
        part = bisect.bisect_right(logical, offset) - 1
        return physical[part] + offset - logical[part]

    return at


def _decode_planes(shape: tuple, payloads: list, ts: np.ndarray, values: np.ndarray,
                   counts: np.ndarray | None, origin: tuple[int, int] | None = None) -> None:
    size, n, ts_order, ts_width, mode, e, v_order, v_width, c_order, c_width, n_exceptions, header_size, mask = shape
    k = len(payloads)
    data = np.frombuffer(b"".join(payloads), np.uint8).reshape(k, size)
    at = None
    if mask is not None:
        size -= _MASK.size
        at = _locator(header_size, n, [n * ts_width] + [n] * v_width * (n > 0) + [12 * n_exceptions] * (n_exceptions > 0)
                      + [n] * (c_width * (n > 0) if c_order & 0x80 else 0), mask)
    base = np.ascontiguousarray(data[:, 4:12]).view("<i8").astype(np.int64)
    unit = np.ascontiguousarray(data[:, 12:16]).view("<u4").astype(np.int64)
    through_timestamps = None
    if origin is not None:
        first, step = origin
        if not (unit % step).any():
            # grid columns: (base + j * unit - first) // step is (base - first) // step + j * (unit // step)
            unit //= step
            base = (base - first) // step
        else:  # units that are not whole steps (a store's own precision): through timestamps
            through_timestamps = step
            base -= first
    if (unit == 1).all() and through_timestamps is None:
        offset = _unpack_times(data, header_size, n, ts_order, ts_width, ts, base, at)
    else:
        offset = _unpack_times(data, header_size, n, ts_order, ts_width, ts, 0, at)
        ts *= unit
        ts += base
        if through_timestamps is not None:
            ts //= through_timestamps
    if mode == _MODE_DECIMAL:
        v_base = None
        if v_order & _BASED:
            if header_size != _HEADER_BASED.size:
                raise CorruptChunk(f"a chunk of format {VERSION} or {VERSION_RAW} with values less a base:"
                                   " the row is damaged")
            v_base = np.ascontiguousarray(data[:, _HEADER.size:_HEADER_BASED.size]).view("<i8").astype(np.int64)
        m, offset = _unpack_ints(data, offset, n, v_order & ~_BASED, v_width, v_base, at=at)
        np.divide(m, 10.0**e, out=values)
    elif mode == _MODE_XOR:
        bits = values.view(np.uint64)
        _, offset = _unplanes(data, offset, n, v_width, out=bits, at=at)
        np.bitwise_xor.accumulate(bits, axis=1, out=bits)
    else:
        raise CorruptChunk(f"a chunk with value mode {mode}: not one this code writes")
    if n_exceptions:
        start = offset if at is None else at(offset)
        where = np.ascontiguousarray(data[:, start:start + 4 * n_exceptions]).view("<u4").astype(np.int64)
        raw = np.ascontiguousarray(data[:, start + 4 * n_exceptions:start + 12 * n_exceptions]).view("<f8")
        if (where >= n).any():
            raise CorruptChunk(f"a chunk of {n} points names exception {int(where.max())}: the row is damaged")
        values[np.arange(k)[:, None], where] = raw
        offset += 12 * n_exceptions
    if c_order & 0x80:
        decoded, offset = _unpack_ints(data, offset, n, c_order & 0x7F, c_width, at=at)
        if counts is not None:
            counts[...] = decoded
    if offset != size:
        raise CorruptChunk(f"a chunk of {n} points has {size - offset} bytes too many or too few: the row is damaged")
