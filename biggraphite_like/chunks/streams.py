"""The byte stream a chunk's parts become (as they are, deflated a block a part, or
packed: the parts deflate cannot shrink stored after one deflate block), and where a
packed chunk keeps each part."""
from __future__ import annotations

import bisect
import itertools
import struct
import zlib
from typing import Callable

from biggraphite_like.chunks.format import MASK
from biggraphite_like.errors import CorruptChunk

_RAW_SLACK = 1.05
_PACKED_SLACK = 1.01  # a packed chunk is kept when at most this much larger than the per-part blocks
_STORED_SHARE = 0.9  # a part is stored when deflate keeps this much of it or more
_LEVEL = 6
_BLOCKS_FROM = 64  # points from which each plane gets a deflate block of its own


def finish(parts: list[bytes], n: int, versions: tuple[int, int, int]) -> bytes:
    """The chunk of a window's parts (header and timestamps, value planes, exceptions,
    count planes): as they are, packed or deflated, whichever is kept (see
    docs/format/chunks.md); versions: (deflated, as they are, packed) of the window's header."""
    payload = b"".join(parts)
    deflated, sizes = _deflate(parts, n)
    if len(payload) <= len(deflated) * _RAW_SLACK:  # planes alone are as small: skip inflating on reads
        return bytes((versions[1],)) + payload
    if sizes is not None:
        fewer_blocks = _pack_parts(parts, sizes)
        if len(fewer_blocks) <= len(deflated) * _PACKED_SLACK:  # a block costs a Huffman table on each read
            return bytes((versions[2],)) + fewer_blocks
    return bytes((versions[0],)) + deflated


def _pack_parts(parts: list[bytes], sizes: list[int]) -> bytes:
    """The packed stream of parts (versions 5 and 6): the parts that deflated smaller
    (sizes: what each became in a block of its own) in one deflate block, then as stored
    blocks the parts deflate cannot shrink (as they are) and the mask naming them. Reading
    then builds one Huffman table a chunk, not one a part."""
    stored = [i > 0 and size >= _STORED_SHARE * len(part) for i, (part, size) in enumerate(zip(parts, sizes))]
    mask = MASK.pack(sum(1 << i for i, moved in enumerate(stored) if moved))
    tail = b"".join(part for part, moved in zip(parts, stored) if moved) + mask
    blocks = zlib.compressobj(_LEVEL, zlib.DEFLATED, -15, 8, zlib.Z_RLE)
    head = blocks.compress(b"".join(part for part, moved in zip(parts, stored) if not moved))
    if len(tail) == MASK.size:
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


def locator(header_size: int, n: int, lengths: list[int], mask: int) -> Callable[[int], int]:
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
