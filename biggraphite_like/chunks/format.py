"""The chunk format's constants: versions, headers, flags, and the decoded `Points`.

A chunk is one version byte, then a fixed header and the points' integers as byte planes
(timestamps, values in DECIMAL or XOR mode, exceptions, counts), deflated, as they are, or
packed. The six versions differ only in the header (with or without the values' base) and
in how the payload is stored. docs/format/chunks.md is the byte-by-byte description, with
what the encoder chooses and the versions' history.
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
MASK = struct.Struct("<I")  # the packed chunk's last bytes: bit i, part i stored after the deflated ones
HEADER = struct.Struct("<IqIBBBBBBBBI")  # n, base, unit, ts order/width, value mode/e/order/width, count order/width, exceptions
HEADER_BASED = struct.Struct("<IqIBBBBBBBBIq")  # the same, then the base of the values' integers
BASED = 0x40  # v_order bit: the values' integers are stored less the header's base, not zigzagged
LAYOUT = struct.Struct("<I12xBBBBBBBBI")  # the header but base and unit: what chunks decoded together share
MODE_DECIMAL, MODE_XOR = 0, 1
HEADER_ROW = np.dtype([("n", "<u4"), ("base", "<i8"), ("unit", "<u4"), ("ts_order", "u1"), ("ts_width", "u1"),
                        ("mode", "u1"), ("e", "u1"), ("v_order", "u1"), ("v_width", "u1"), ("c_order", "u1"),
                        ("c_width", "u1"), ("exceptions", "<u4"), ("v_base", "<i8")])  # HEADER_BASED, a row a window
PLAIN_VERSIONS = (VERSION, VERSION_RAW, VERSION_PACKED)  # (deflated, as they are, packed) with HEADER
BASED_VERSIONS = (VERSION_BASED, VERSION_BASED_RAW, VERSION_BASED_PACKED)  # the same with HEADER_BASED


@dataclasses.dataclass
class Points:
    """Points of one window, sorted by timestamp: counts is None for a raw stage."""

    timestamps: np.ndarray  # int64
    values: np.ndarray  # float64
    counts: np.ndarray | None = None  # int64

    def __len__(self) -> int:
        return len(self.timestamps)


# version -> (header size, packed, raw: no deflate)
KINDS = {version: (HEADER.size if version in PLAIN_VERSIONS else HEADER_BASED.size,
                    version in (VERSION_PACKED, VERSION_BASED_PACKED), version in (VERSION_RAW, VERSION_BASED_RAW))
          for version in VERSIONS}
