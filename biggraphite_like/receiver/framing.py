"""Cutting a TCP stream into the units the decoders take: whole lines (plaintext) or whole
frames (pickle), with their limits.

A line longer than `max_line` bytes (carbon's LineReceiver closes the connection there) is
refused and skipped up to its newline, and the rest of the connection is read. A pickle
frame announcing more than `max_frame` bytes raises FrameTooLong: once a length is not
trusted nothing says where the next frame starts (a hostile or corrupt 0xFFFFFFFF would
swallow the next 4 GB as "skipped"), so the connection is closed, as carbon's
Int32StringReceiver closes it, and its sender sees the failure.

`pending` is what a framing holds of an incomplete line or frame: at most `max_line`
bytes for a line, `max_frame` + 4 for a frame, plus one read (listeners.py bounds the
total over every connection).
"""
from __future__ import annotations

import struct

from biggraphite_like.ingest.lines import decode_lines
from biggraphite_like.ingest.pickles import decode_pickle
from biggraphite_like.ingest.points import ReceivedPoints, Refusals, concatenate

MAX_LINE = 65536  # bytes: a 64-component name of 255 characters each is ~16 KB
MAX_FRAME = 2**20  # bytes of one pickle message (carbon's MetricPickleReceiver.MAX_LENGTH)
_LENGTH = struct.Struct("!L")


class FrameTooLong(Exception):
    """A pickle frame announced more bytes than the limit: the stream cannot be resynchronised.
    `points` are those the same read decoded before it (they are good: store them)."""

    def __init__(self, reason: str, points: ReceivedPoints):
        super().__init__(reason)
        self.points = points


class LineFraming:
    """Plaintext: complete lines are decoded as they arrive; the last partial line waits."""

    def __init__(self, max_line: int = MAX_LINE):
        self.max_line = max_line
        self._partial = b""
        self._skipping = False  # inside a line longer than max_line

    @property
    def pending(self) -> int:
        return len(self._partial)

    def feed(self, data: bytes, refusals: Refusals) -> ReceivedPoints:
        if self._skipping:
            end = data.find(b"\n")
            if end < 0:
                return ReceivedPoints.empty()
            self._skipping = False
            data = data[end + 1:]
        data = self._partial + data if self._partial else data
        end = data.rfind(b"\n")
        if end < 0:
            complete, rest = b"", data
        else:
            complete, rest = data[:end + 1], data[end + 1:]
        if len(rest) > self.max_line:
            refusals.add(f"line longer than {self.max_line} bytes: skipped up to its end", rest[:80])
            rest, self._skipping = b"", True
        self._partial = rest
        return decode_lines(complete, refusals)

    def close(self, refusals: Refusals) -> ReceivedPoints:
        """At the end of the stream: a last line without newline is a line too."""
        rest, self._partial = self._partial, b""
        return decode_lines(rest, refusals) if rest and not self._skipping else ReceivedPoints.empty()


class PickleFraming:
    """Pickle: 4-byte big-endian length, then the pickled list."""

    def __init__(self, max_frame: int = MAX_FRAME):
        self.max_frame = max_frame
        self._buffer = bytearray()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes, refusals: Refusals) -> ReceivedPoints:
        """The points of the frames completed by data; FrameTooLong at a length over the limit."""
        self._buffer += data
        parts = []
        offset = 0
        buffer = self._buffer
        while len(buffer) - offset >= 4:
            (length,) = _LENGTH.unpack_from(buffer, offset)
            if length > self.max_frame:
                prefix = bytes(buffer[offset:offset + 4]).hex()
                self._buffer.clear()
                raise FrameTooLong(f"pickle message of {length} bytes is over the limit of {self.max_frame}"
                                   f" (length prefix {prefix}): the stream cannot be resynchronised",
                                   concatenate(parts))
            if len(buffer) - offset - 4 < length:
                break
            parts.append(decode_pickle(bytes(buffer[offset + 4:offset + 4 + length]), refusals))
            offset += 4 + length
        if offset:
            del self._buffer[:offset]
        return concatenate(parts)

    def close(self, refusals: Refusals) -> ReceivedPoints:
        if self._buffer:
            refusals.add(f"connection closed in the middle of a pickle message ({len(self._buffer)} bytes)", b"")
            self._buffer.clear()
        return ReceivedPoints.empty()
