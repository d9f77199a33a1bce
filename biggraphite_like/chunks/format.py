"""The chunk format: versions, headers and what a chunk's bytes are.

One version byte, then a fixed header followed by byte planes (byte k of every
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
"""
from __future__ import annotations

import dataclasses
import struct

import numpy as np

VERSION = 1  # header and planes deflated
VERSION_RAW = 2  # header and planes as they are (deflate would not make them much smaller)
VERSION_BASED = 3  # as 1, with the header of version 3 (the values' integers less a base)
VERSION_BASED_RAW = 4  # as 2, with the header of version 3
VERSION_PACKED = 5  # as 1, the parts deflate cannot shrink stored after the others (one block), then a mask
VERSION_BASED_PACKED = 6  # as 5, with the header of version 3
VERSIONS = (VERSION, VERSION_RAW, VERSION_BASED, VERSION_BASED_RAW, VERSION_PACKED, VERSION_BASED_PACKED)
_PLAIN_HEADER = (VERSION, VERSION_RAW, VERSION_PACKED)  # versions with _HEADER (the others: _HEADER_BASED)
_MASK = struct.Struct("<I")  # the packed chunk's last bytes: bit i, part i stored after the deflated ones
_HEADER = struct.Struct("<IqIBBBBBBBBI")  # n, base, unit, ts order/width, value mode/e/order/width, count order/width, exceptions
_HEADER_BASED = struct.Struct("<IqIBBBBBBBBIq")  # the same, then the base of the values' integers
_BASED = 0x40  # v_order bit: the values' integers are stored less the header's base, not zigzagged
_LAYOUT = struct.Struct("<I12xBBBBBBBBI")  # the header but base and unit: what chunks decoded together share
_MODE_DECIMAL, _MODE_XOR = 0, 1
_HEADER_ROW = np.dtype([("n", "<u4"), ("base", "<i8"), ("unit", "<u4"), ("ts_order", "u1"), ("ts_width", "u1"),
                        ("mode", "u1"), ("e", "u1"), ("v_order", "u1"), ("v_width", "u1"), ("c_order", "u1"),
                        ("c_width", "u1"), ("exceptions", "<u4"), ("v_base", "<i8")])  # _HEADER_BASED, a row a window
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


# version -> (header size, packed, raw: no deflate)
_KINDS = {version: (_HEADER.size if version in _PLAIN_HEADER else _HEADER_BASED.size,
                    version in (VERSION_PACKED, VERSION_BASED_PACKED), version in (VERSION_RAW, VERSION_BASED_RAW))
          for version in VERSIONS}
