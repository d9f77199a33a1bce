"""The chunk codec: one window of one metric's stage as compact, lossless bytes.

Stores keep chunks as opaque bytes; this package alone knows their format (as Prometheus'
tsdb keeps `chunkenc` apart from its index and storage). A chunk holds n points sorted by
timestamp: timestamps, float64 values and, for aggregated stages, counts. Decoding gives
back every value bit for bit (NaN payloads, -0.0 and infinities included).

Modules: format (versions, headers; the bytes are described in docs/format/chunks.md),
encoder and decoder (many windows at once), and the parts they share or choose: planes
(integers as byte planes), deltas (each window's delta order), decimals (the DECIMAL
mode's exponent), streams (as they are, deflated or packed).
"""
from biggraphite_like.chunks.decoder import decode, decode_groups, decode_many
from biggraphite_like.chunks.encoder import encode, encode_many
from biggraphite_like.chunks.format import (
    VERSION,
    VERSION_BASED,
    VERSION_BASED_PACKED,
    VERSION_BASED_RAW,
    VERSION_PACKED,
    VERSION_RAW,
    VERSIONS,
    Points,
)

__all__ = ["Points", "VERSION", "VERSION_BASED", "VERSION_BASED_PACKED", "VERSION_BASED_RAW", "VERSION_PACKED",
           "VERSION_RAW", "VERSIONS", "decode", "decode_groups", "decode_many", "encode", "encode_many"]
