"""Integers as byte planes (byte k of every integer, then byte k + 1, ...), zigzagged
when signed: how a chunk keeps its timestamps, values and counts, both ways."""
from __future__ import annotations

from typing import Callable

import numpy as np

ITEMSIZE = [1, 1, 2, 4, 4, 8, 8, 8, 8]  # the smallest integer size of each plane width 0..8
_WIDTH_FLOORS = np.array([1 << 8 * b for b in range(8)], np.uint64)  # an integer needs byte b from 1 << 8b


def zigzag(x: np.ndarray, work: np.ndarray | None = None) -> np.ndarray:
    """x zigzagged (uint64); work: an int64 array of x's shape for the sign mask."""
    z = x << 1
    z ^= np.right_shift(x, 63, out=work)
    return z.view(np.uint64)


def unzigzag(z: np.ndarray) -> np.ndarray:
    """The signed integers of zigzagged unsigned z, in z's width (int8 for uint8, ...)."""
    signed = np.dtype(f"i{z.dtype.itemsize}")
    return (z >> 1).view(signed) ^ -(z & 1).view(signed)


def bit_planes(z: np.ndarray) -> tuple[np.ndarray, list[list[bytes]]]:
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


def unplanes(data: np.ndarray, offset: int, n: int, width: int, itemsize: int = 8,
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
