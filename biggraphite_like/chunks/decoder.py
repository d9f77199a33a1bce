"""Decoding chunks: many at once, grouped by layout (chunks of one layout decode together)."""
from __future__ import annotations

import zlib
from typing import Callable, Iterator, Sequence

import deflate
import numpy as np

from biggraphite_like.chunks.format import (
    BASED,
    HEADER,
    HEADER_BASED,
    KINDS,
    LAYOUT,
    MASK,
    MODE_DECIMAL,
    MODE_XOR,
    VERSION,
    VERSION_RAW,
    VERSIONS,
    Points,
)
from biggraphite_like.chunks.planes import ITEMSIZE, unplanes, unzigzag
from biggraphite_like.chunks.streams import locator
from biggraphite_like.errors import CorruptChunk

_INFLATE_BOUND = 1 << 16  # bytes libdeflate may inflate a chunk to (at least; 16 times its size if more)
_LIBDEFLATE_FROM = 768  # chunk bytes from which libdeflate inflates faster than zlib (see _layouts)


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
    what it keeps alive meanwhile is what Python's garbage collector keeps scanning.

    A deflated chunk of fewer than _LIBDEFLATE_FROM bytes is inflated by zlib: libdeflate
    sets up a decompressor a call (about 3 us), which zlib's smaller setup beats below
    about a kilobyte (a young window's open chunk of 60 points, 140 bytes: 1.4 us against
    3.8); libdeflate inflates larger ones about a fifth faster."""
    groups: dict[tuple, tuple[list[int], list]] = {}
    inflate, bound, error, small = deflate.deflate_decompress, _INFLATE_BOUND, deflate.DeflateError, _LIBDEFLATE_FROM
    zlib_inflate, zlib_error = zlib.decompress, zlib.error
    kinds, layout, mask = KINDS, LAYOUT.unpack_from, MASK.unpack_from
    for index, chunk in enumerate(blobs):
        kind = kinds.get(chunk[0]) if chunk else None
        if kind is None:
            _version_error(chunk)
        header_size, packed, raw = kind
        if raw:
            data = memoryview(chunk)[1:]
        elif len(chunk) < small:
            try:
                data = zlib_inflate(memoryview(chunk)[1:], -15)
            except zlib_error:
                data = _inflate_zlib(chunk)  # says how it is damaged
        else:
            try:  # libdeflate inflates a whole buffer about a fifth faster than zlib
                data = inflate(memoryview(chunk)[1:], max(bound, 16 * len(chunk)))
            except error:  # larger than the bound (zlib needs none), or damaged (zlib says how)
                data = _inflate_zlib(chunk)
        size = len(data)
        if size < header_size + packed * MASK.size:
            raise CorruptChunk(f"a chunk of format {chunk[0]} shorter than its header: the row is damaged")
        key = (size, layout(data), header_size, mask(data, size - MASK.size)[0] if packed else None)
        group = groups.get(key)
        if group is None:
            group = groups[key] = ([], [])
        group[0].append(index)
        group[1].append(data)
    return {(size,) + layout + (header_size, mask): group for (size, layout, header_size, mask), group in groups.items()}


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


def _decode_planes(shape: tuple, payloads: list, ts: np.ndarray, values: np.ndarray,
                   counts: np.ndarray | None, origin: tuple[int, int] | None = None) -> None:
    size, n, ts_order, ts_width, mode, e, v_order, v_width, c_order, c_width, n_exceptions, header_size, mask = shape
    k = len(payloads)
    data = np.frombuffer(b"".join(payloads), np.uint8).reshape(k, size)
    at = None
    if mask is not None:
        size -= MASK.size
        at = locator(header_size, n, [n * ts_width] + [n] * v_width * (n > 0) + [12 * n_exceptions] * (n_exceptions > 0)
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
    if mode == MODE_DECIMAL:
        v_base = None
        if v_order & BASED:
            if header_size != HEADER_BASED.size:
                raise CorruptChunk(f"a chunk of format {VERSION} or {VERSION_RAW} with values less a base:"
                                   " the row is damaged")
            v_base = np.ascontiguousarray(data[:, HEADER.size:HEADER_BASED.size]).view("<i8").astype(np.int64)
        m, offset = _unpack_ints(data, offset, n, v_order & ~BASED, v_width, v_base, at=at)
        np.divide(m, 10.0**e, out=values)
    elif mode == MODE_XOR:
        bits = values.view(np.uint64)
        _, offset = unplanes(data, offset, n, v_width, out=bits, at=at)
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


def _unpack_ints(data: np.ndarray, offset: int, n: int, order: int, width: int, base: np.ndarray | None = None,
                 out: np.ndarray | None = None, at: Callable[[int], int] | None = None) -> tuple[np.ndarray, int]:
    """int64 (k, n) from the planes of `order`-times delta-encoded integers: zigzagged, or
    stored less `base` (k, 1) when given (unsigned: zero-extended from the plane width);
    into `out` when given. The first sum widens to int64 as it adds (no copy of its own)."""
    k = len(data)
    z, offset = unplanes(data, offset, n, width, ITEMSIZE[width], at=at)
    x = unzigzag(z) if base is None else z
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
    z, offset = unplanes(data, offset, n, width, ITEMSIZE[width], at=at)
    out[...] = unzigzag(z)
    if order == 1:
        out += 1
        out[:, :1] += start - 1
        np.cumsum(out, axis=1, out=out)
    else:
        out += np.arange(n, dtype=np.int64)
        out += start
    return offset
