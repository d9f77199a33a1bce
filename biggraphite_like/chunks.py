"""The chunk codec: one window of one metric's stage as compact, lossless bytes.

Stores keep chunks as opaque bytes; this module alone knows their format (as Prometheus'
tsdb keeps `chunkenc` apart from its index and storage). A chunk holds n points sorted by
timestamp: timestamps, float64 values and, for aggregated stages, counts. Decoding gives
back every value bit for bit (NaN payloads, -0.0 and infinities included).

Format: one version byte, then a fixed header followed by byte planes (byte k of every
integer, then byte k + 1, ...), as a raw-deflate stream (version 1) or as they are when
deflate would save under 5 % (version 2: reads then skip inflating):
- timestamps: base (the first timestamp) and offsets from it in `unit`s (their common
  step, the precision for aligned points), minus the point's index (a full window is all
  zeros: no bytes at all), delta-encoded 0 or 1 times;
- values, whichever mode is smaller for the chunk:
  DECIMAL - value = m / 10**e for one exponent e and integers m (what metrics with a few
  decimals are), m delta-encoded 0, 1 or 2 times, zigzagged; values that do not
  round-trip exactly (NaN, -0.0, inf, odd ones) are kept as exceptions (index, raw bits);
  XOR - the raw bits XORed with the previous value's (Gorilla's idea, as byte planes);
- counts (aggregated stages): integers, delta-encoded 0 or 1 times.
"""
from __future__ import annotations

import dataclasses
import struct
import zlib
from typing import Iterator, Sequence

import deflate
import numpy as np

from biggraphite_like.errors import CorruptChunk

VERSION = 1  # header and planes deflated
VERSION_RAW = 2  # header and planes as they are (deflate would not make them much smaller)
_RAW_SLACK = 1.05
_HEADER = struct.Struct("<IqIBBBBBBBBI")  # n, base, unit, ts order/width, value mode/e/order/width, count order/width, exceptions
_LAYOUT = struct.Struct("<I12xBBBBBBBBI")  # the header but base and unit: what chunks decoded together share
_MODE_DECIMAL, _MODE_XOR = 0, 1
_MAX_EXPONENT = 15
_MAX_EXACT = 2.0**53  # |m| below this: m is an exact float64
_EXCEPTION_SHARE = 8  # DECIMAL is kept while fewer than 1 value in this many is an exception
_LEVEL = 6
_INFLATE_BOUND = 1 << 16  # bytes libdeflate may inflate a chunk to (at least; 16 times its size if more)
_ITEMSIZE = [1, 1, 2, 4, 4, 8, 8, 8, 8]  # the smallest integer size of each plane width 0..8


@dataclasses.dataclass
class Points:
    """Points of one window, sorted by timestamp: counts is None for a raw stage."""

    timestamps: np.ndarray  # int64
    values: np.ndarray  # float64
    counts: np.ndarray | None = None  # int64

    def __len__(self) -> int:
        return len(self.timestamps)


def _zigzag(x: np.ndarray) -> np.ndarray:
    return ((x << 1) ^ (x >> 63)).view(np.uint64)


def _unzigzag(z: np.ndarray) -> np.ndarray:
    """The signed integers of zigzagged unsigned z, in z's width (int8 for uint8, ...)."""
    signed = np.dtype(f"i{z.dtype.itemsize}")
    return (z >> 1).view(signed) ^ -(z & 1).view(signed)


def _planes(z: np.ndarray) -> tuple[int, bytes]:
    """(width, bytes): the low `width` bytes of each uint64, plane by plane (width 0: all zero)."""
    top = int(z.max()) if len(z) else 0
    width = (top.bit_length() + 7) // 8
    if not width:
        return 0, b""
    return width, np.ascontiguousarray(z.view(np.uint8).reshape(-1, 8)[:, :width].T).tobytes()


def _unplanes(data: np.ndarray, offset: int, n: int, width: int, itemsize: int = 8) -> tuple[np.ndarray, int]:
    """Unsigned integers (k, n) of `itemsize` bytes (at least width) from the byte planes
    at offset of each row of data (k, payload bytes): the smallest itemsize that holds
    `width` bytes saves most of the work on narrow planes."""
    k = len(data)
    dtype = np.dtype(f"u{itemsize}")
    planes = data[:, offset:offset + n * width].reshape(k, width, n)
    if width == itemsize == 1:
        return planes[:, 0], offset + n
    out = np.empty((k, n, itemsize), np.uint8) if width == itemsize else np.zeros((k, n, itemsize), np.uint8)
    for plane in range(width):  # plane by plane: contiguous reads, twice as fast as one transposed copy
        out[:, :, plane] = planes[:, plane]
    return out.view(dtype).reshape(k, n), offset + n * width


def _deltas(x: np.ndarray, order: int) -> np.ndarray:
    for _ in range(order):
        x = np.diff(x, prepend=np.int64(0))
    return x


def _pack_ints(x: np.ndarray, orders: tuple[int, ...]) -> tuple[int, int, bytes]:
    """(order, width, planes) of int64 x: the delta order among `orders` giving the fewest
    bytes, ties broken by the smaller sum (what deflate compresses best)."""
    best = None
    for order in orders:
        z = _zigzag(_deltas(x, order))
        width, data = _planes(z)
        key = (width, float(z.sum(dtype=np.float64)))
        if best is None or key < best[0]:
            best = (key, order, width, data)
    return best[1], best[2], best[3]


def _unpack_ints(data: np.ndarray, offset: int, n: int, order: int, width: int) -> tuple[np.ndarray, int]:
    """int64 (k, n) from the zigzagged planes of `order`-times delta-encoded integers."""
    z, offset = _unplanes(data, offset, n, width, _ITEMSIZE[width])
    x = _unzigzag(z).astype(np.int64)
    for _ in range(order):
        np.cumsum(x, axis=1, out=x)
    return x, offset


def _exact(values: np.ndarray, e: int) -> tuple[np.ndarray, np.ndarray]:
    """(m, ok): rint(values * 10**e), and where m / 10**e gives the value back bit for bit."""
    scale = 10.0**e
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.rint(values * scale)
        return m, (np.abs(m) < _MAX_EXACT) & ((m / scale).view(np.uint64) == values.view(np.uint64))


def _decimal(values: np.ndarray) -> tuple[int, np.ndarray, np.ndarray] | None:
    """(e, m, exceptions): the smallest exponent e for which all values but a few are
    m / 10**e exactly; None when no exponent does. NaN, inf and -0.0 are always exceptions
    and do not count against the few."""
    special = ~np.isfinite(values) | ((values == 0) & np.signbit(values))
    regular = values[~special]
    limit = len(regular) // _EXCEPTION_SHARE
    sample = regular[:: max(1, len(regular) // 32)]  # a cheap first look at each exponent
    for e in range(_MAX_EXPONENT + 1):
        if len(regular) > 64 and np.count_nonzero(~_exact(sample, e)[1]) > len(sample) // _EXCEPTION_SHARE:
            continue
        m, ok = _exact(values, e)
        ok &= ~special
        bad = np.flatnonzero(~ok)
        if len(bad) - (len(values) - len(regular)) <= limit:
            m[bad] = 0
            if len(bad) and len(bad) < len(m):  # an exception costs no delta: it repeats its neighbour
                good = np.flatnonzero(ok)
                m[bad] = m[good[np.clip(np.searchsorted(good, bad) - 1, 0, None)]]
            return e, m.astype(np.int64), bad
    return None


def encode(points: Points) -> bytes:
    """The chunk of points (sorted by timestamp, unique timestamps)."""
    ts = np.asarray(points.timestamps, np.int64)
    values = np.ascontiguousarray(points.values, np.float64)
    n = len(ts)
    base = int(ts[0]) if n else 0
    offsets = ts - base
    unit = 1
    if n > 1:
        unit = int(np.gcd.reduce(offsets[1:]))
    unit = max(unit, 1)
    # a full window is 0, 1, 2, ... units: kept as the distance from that, nothing at all
    ts_order, ts_width, ts_data = _pack_ints(offsets // unit - np.arange(n, dtype=np.int64), (0, 1))
    parts = [ts_data]
    decimal = _decimal(values) if n else (0, np.zeros(0, np.int64), np.zeros(0, np.int64))
    exceptions = np.zeros(0, np.int64)
    if decimal is not None:
        mode, (e, m, exceptions) = _MODE_DECIMAL, decimal
        v_order, v_width, v_data = _pack_ints(m, (0, 1, 2))
    else:
        mode, e, v_order = _MODE_XOR, 0, 0
        bits = values.view(np.uint64)
        xor = bits.copy()
        xor[1:] ^= bits[:-1]
        v_width, v_data = _planes(xor)
    parts.append(v_data)
    if len(exceptions):
        parts.append(exceptions.astype("<u4").tobytes() + values[exceptions].tobytes())
    c_order = c_width = 0
    if points.counts is not None:
        c_order, c_width, c_data = _pack_ints(np.asarray(points.counts, np.int64), (0, 1))
        c_order |= 0x80  # counts present
        parts.append(c_data)
    header = _HEADER.pack(n, base, unit, ts_order, ts_width, mode, e, v_order, v_width, c_order, c_width,
                          len(exceptions))
    payload = header + b"".join(parts)
    deflate = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15)
    packed = deflate.compress(payload) + deflate.flush()
    if len(payload) <= len(packed) * _RAW_SLACK:  # planes alone are as small: skip inflating on reads
        return bytes([VERSION_RAW]) + payload
    return bytes([VERSION]) + packed


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


def decode_groups(blobs: Sequence[bytes]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]]:
    """The points of many chunks, one layout at a time: (indices in blobs of k chunks,
    timestamps (k, n), values (k, n), counts (k, n) or None), n the chunks' point count.
    Chunks of one shape (the full windows of similar series are) decode together with a
    few numpy calls; a caller that places each group before asking for the next keeps
    its arrays small (no copy of every point at once). CorruptChunk if a blob is not a chunk."""
    for shape, (indices, payloads) in _layouts(blobs).items():
        k, n = len(indices), shape[1]
        ts, values = np.empty((k, n), np.int64), np.empty((k, n), np.float64)
        counts = np.empty((k, n), np.int64) if shape[8] & 0x80 else None
        _decode_alike(shape, payloads, ts, values, counts)
        yield np.array(indices, np.int64), ts, values, counts


def _layouts(blobs: Sequence[bytes]) -> dict[tuple, tuple[list[int], list]]:
    """([index], [payload]) of the chunks of each layout: payload size and header but base
    and unit. No object a chunk but its payload: a fetch decodes thousands of chunks, and
    what it keeps alive meanwhile is what Python's garbage collector keeps scanning."""
    layouts: dict[tuple, tuple[list[int], list]] = {}
    for index, chunk in enumerate(blobs):
        data = _payload(chunk)
        try:
            shape = (len(data),) + _LAYOUT.unpack_from(data)
        except struct.error as exc:
            raise CorruptChunk(f"a chunk cannot be decoded ({exc}): the row is damaged") from exc
        group = layouts.get(shape)
        if group is None:
            group = layouts[shape] = ([], [])
        group[0].append(index)
        group[1].append(data)
    return layouts


def _payload(chunk: bytes) -> bytes | memoryview:
    """The header and planes of a chunk (inflated for VERSION)."""
    if not chunk or chunk[0] not in (VERSION, VERSION_RAW):
        raise CorruptChunk(f"a chunk of format {chunk[0] if chunk else 'none'} (this code reads formats"
                           f" {VERSION} and {VERSION_RAW}): the store was written by another version of"
                           " biggraphite_like")
    if chunk[0] == VERSION_RAW:
        return memoryview(chunk)[1:]
    packed = memoryview(chunk)[1:]
    try:  # libdeflate inflates a whole buffer about a fifth faster than zlib
        return deflate.deflate_decompress(packed, max(_INFLATE_BOUND, 16 * len(packed)))
    except deflate.DeflateError:
        pass  # larger than the bound (zlib needs none), or damaged (zlib says how)
    try:
        return zlib.decompress(packed, -15)
    except zlib.error as exc:
        raise CorruptChunk(f"a chunk cannot be decoded ({exc}): the row is damaged") from exc


def _decode_alike(shape: tuple, payloads: list, ts: np.ndarray, values: np.ndarray,
                  counts: np.ndarray | None) -> None:
    """Decode chunks of one layout (same sizes, modes and widths) into ts, values and
    counts (k rows of n points; counts None: not wanted). CorruptChunk if they are damaged."""
    try:
        _decode_planes(shape, payloads, ts, values, counts)
    except ValueError as exc:  # planes shorter than the header says
        raise CorruptChunk(f"a chunk cannot be decoded ({exc}): the row is damaged") from exc


def _decode_planes(shape: tuple, payloads: list, ts: np.ndarray, values: np.ndarray,
                   counts: np.ndarray | None) -> None:
    size, n, ts_order, ts_width, mode, e, v_order, v_width, c_order, c_width, n_exceptions = shape
    k = len(payloads)
    data = np.frombuffer(b"".join(payloads), np.uint8).reshape(k, size)
    base = np.ascontiguousarray(data[:, 4:12]).view("<i8").astype(np.int64)
    unit = np.ascontiguousarray(data[:, 12:16]).view("<u4").astype(np.int64)
    offset = _HEADER.size
    offsets, offset = _unpack_ints(data, offset, n, ts_order, ts_width)
    np.add(offsets, np.arange(n, dtype=np.int64), out=ts)
    ts *= unit
    ts += base
    if mode == _MODE_DECIMAL:
        m, offset = _unpack_ints(data, offset, n, v_order, v_width)
        np.divide(m, 10.0**e, out=values)
    elif mode == _MODE_XOR:
        xor, offset = _unplanes(data, offset, n, v_width)
        np.bitwise_xor.accumulate(xor, axis=1, out=values.view(np.uint64))
    else:
        raise CorruptChunk(f"a chunk with value mode {mode}: not one this code writes")
    if n_exceptions:
        where = np.ascontiguousarray(data[:, offset:offset + 4 * n_exceptions]).view("<u4").astype(np.int64)
        raw = np.ascontiguousarray(data[:, offset + 4 * n_exceptions:offset + 12 * n_exceptions]).view("<f8")
        if (where >= n).any():
            raise CorruptChunk(f"a chunk of {n} points names exception {int(where.max())}: the row is damaged")
        values[np.arange(k)[:, None], where] = raw
        offset += 12 * n_exceptions
    if c_order & 0x80:
        decoded, offset = _unpack_ints(data, offset, n, c_order & 0x7F, c_width)
        if counts is not None:
            counts[...] = decoded
    if offset != size:
        raise CorruptChunk(f"a chunk of {n} points has {size - offset} bytes too many or too few: the row is damaged")
