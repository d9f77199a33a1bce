"""Native protocol v4 frames for the CQL test server (test tool only).

A frame is a 9-byte header (version, flags, stream id, opcode, body length)
and a body. This module decodes request bodies (QUERY, EXECUTE, BATCH, ...)
and encodes response bodies (READY, SUPPORTED, RESULT, ERROR).
"""
from __future__ import annotations

import struct
from typing import Any

from .errors import ProtocolError
from .results import (UNSET, Options, Prepared, Rows, SchemaChange, SetKeyspace, Void)

HEADER = struct.Struct(">BBhBi")
VERSION = 4
RESPONSE_VERSION = 0x80 | VERSION

# opcodes
ERROR, STARTUP, READY, AUTHENTICATE = 0x00, 0x01, 0x02, 0x03
OPTIONS, SUPPORTED, QUERY, RESULT, PREPARE, EXECUTE = 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A
REGISTER, EVENT, BATCH, AUTH_CHALLENGE, AUTH_RESPONSE, AUTH_SUCCESS = 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10
OPCODE_NAMES = {STARTUP: "STARTUP", OPTIONS: "OPTIONS", QUERY: "QUERY", PREPARE: "PREPARE",
                EXECUTE: "EXECUTE", REGISTER: "REGISTER", BATCH: "BATCH", AUTH_RESPONSE: "AUTH_RESPONSE"}

_I = struct.Struct(">i")
_H = struct.Struct(">H")
_Q = struct.Struct(">q")


class Reader:
    """Sequential reader over a request body."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes):
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise ProtocolError("Not enough bytes to read the request body")
        b = self.buf[self.pos:end]
        self.pos = end
        return b

    def byte(self) -> int:
        return self._take(1)[0]

    def short(self) -> int:
        return _H.unpack(self._take(2))[0]

    def int(self) -> int:
        return _I.unpack(self._take(4))[0]

    def long(self) -> int:
        return _Q.unpack(self._take(8))[0]

    def string(self) -> str:
        return self._take(self.short()).decode("utf-8")

    def long_string(self) -> str:
        return self._take(self.int()).decode("utf-8")

    def short_bytes(self) -> bytes:
        return self._take(self.short())

    def bytes_(self) -> bytes | None:
        n = self.int()
        if n < 0:
            return None
        return self._take(n)

    def value(self) -> Any:
        n = self.int()
        if n == -1:
            return None
        if n == -2:
            return UNSET
        if n < 0:
            raise ProtocolError(f"Invalid value length {n}")
        return self._take(n)

    def string_map(self) -> dict[str, str]:
        return {self.string(): self.string() for _ in range(self.short())}

    def string_list(self) -> list[str]:
        return [self.string() for _ in range(self.short())]

    def bytes_map(self) -> dict:
        return {self.string(): self.bytes_() for _ in range(self.short())}


def read_query_parameters(r: Reader) -> tuple[list, Options]:
    """<consistency><flags>[values][page_size][paging_state][serial][timestamp]"""
    opts = Options()
    opts.consistency = r.short()
    flags = r.byte()
    values: list = []
    if flags & 0x01:
        n = r.short()
        if flags & 0x40:
            names = []
            for _ in range(n):
                names.append(r.string().lower())
                values.append(r.value())
            opts.names = names
        else:
            values = [r.value() for _ in range(n)]
    opts.skip_metadata = bool(flags & 0x02)
    if flags & 0x04:
        opts.page_size = r.int()
    if flags & 0x08:
        opts.paging_state = r.bytes_()
    if flags & 0x10:
        opts.serial_consistency = r.short()
    if flags & 0x20:
        opts.timestamp = r.long()
    return values, opts


def read_batch(r: Reader) -> tuple[int, list, Options]:
    """<type><n><query_1>...<query_n><consistency><flags>[<serial_consistency>][<timestamp>]"""
    kind = r.byte()
    items = []
    for _ in range(r.short()):
        is_prepared = r.byte()
        if is_prepared == 0:
            what: Any = r.long_string()
        elif is_prepared == 1:
            what = r.short_bytes()
        else:
            raise ProtocolError(f"Invalid query kind in BATCH messages. Must be 0 or 1 but got {is_prepared}")
        items.append((what, [r.value() for _ in range(r.short())]))
    opts = Options()
    opts.consistency = r.short()
    flags = r.byte()
    if flags & 0x40:
        raise ProtocolError("Named values in BATCH are not supported (CASSANDRA-10246)")
    if flags & 0x10:
        opts.serial_consistency = r.short()
    if flags & 0x20:
        opts.timestamp = r.long()
    return kind, items, opts


# -- encoding -------------------------------------------------------------------------
def string(s: str) -> bytes:
    b = s.encode("utf-8")
    return _H.pack(len(b)) + b


def string_multimap(m: dict[str, list[str]]) -> bytes:
    out = [_H.pack(len(m))]
    for k, vs in m.items():
        out.append(string(k))
        out.append(_H.pack(len(vs)))
        out.extend(string(v) for v in vs)
    return b"".join(out)


def frame(stream: int, opcode: int, body: bytes, version: int = RESPONSE_VERSION) -> bytes:
    return HEADER.pack(version, 0, stream, opcode, len(body)) + body


def _col_specs(columns: list) -> list[bytes]:
    return [string(name) + ctype.option() for name, ctype in columns]


def _rows_metadata(keyspace: str, table: str, columns: list, paging_state: bytes | None, no_metadata: bool) -> bytes:
    flags = 0
    parts = []
    if paging_state is not None:
        flags |= 0x0002
        parts.append(_I.pack(len(paging_state)) + paging_state)
    if no_metadata:
        flags |= 0x0004
    else:
        flags |= 0x0001
        parts.append(string(keyspace) + string(table))
        parts.extend(_col_specs(columns))
    return _I.pack(flags) + _I.pack(len(columns)) + b"".join(parts)


def encode_result(result: Any, skip_metadata: bool = False) -> bytes:
    if isinstance(result, Void):
        return _I.pack(1)
    if isinstance(result, Rows):
        out = [_I.pack(2), _rows_metadata(result.keyspace, result.table, result.columns, result.paging_state,
                                          skip_metadata), _I.pack(len(result.rows))]
        neg = _I.pack(-1)
        pack = _I.pack
        for row in result.rows:
            for v in row:
                if v is None:
                    out.append(neg)
                else:
                    out.append(pack(len(v)))
                    out.append(v)
        return b"".join(out)
    if isinstance(result, SetKeyspace):
        return _I.pack(3) + string(result.keyspace)
    if isinstance(result, Prepared):
        binds = result.binds
        meta = [_I.pack(0x0001), _I.pack(len(binds)), _I.pack(len(result.pk_indexes))]
        meta.extend(_H.pack(i) for i in result.pk_indexes)
        meta.append(string(result.keyspace) + string(result.table))
        meta.extend(_col_specs(binds))
        if result.result_columns is None:
            res_meta = _I.pack(0x0004) + _I.pack(0)
        else:
            res_meta = _rows_metadata(result.keyspace, result.table, result.result_columns, None, False)
        return _I.pack(4) + _H.pack(len(result.query_id)) + result.query_id + b"".join(meta) + res_meta
    if isinstance(result, SchemaChange):
        body = _I.pack(5) + string(result.change) + string(result.target) + string(result.keyspace)
        if result.target != "KEYSPACE":
            body += string(result.name or "")
        return body
    raise TypeError(f"Cannot encode result {result!r}")
