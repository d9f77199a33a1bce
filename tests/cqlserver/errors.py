"""Errors the CQL test server answers with, each carrying its native-protocol code.

Test tool only. Codes follow section 9 of the native protocol v4 specification;
messages follow Cassandra's wording where the project relies on them.
"""
from __future__ import annotations

import struct


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">H", len(b)) + b


class CQLError(Exception):
    """An error returned to the client as an ERROR frame."""

    code = 0x0000

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def extra(self) -> bytes:
        return b""

    def body(self) -> bytes:
        return struct.pack(">i", self.code) + _string(self.message) + self.extra()


class ServerError(CQLError):
    code = 0x0000


class ProtocolError(CQLError):
    code = 0x000A


class CQLSyntaxError(CQLError):
    code = 0x2000


class InvalidRequest(CQLError):
    code = 0x2200


class ConfigurationError(CQLError):
    code = 0x2300


class AlreadyExists(CQLError):
    code = 0x2400

    def __init__(self, message: str, keyspace: str, table: str = ""):
        super().__init__(message)
        self.keyspace = keyspace
        self.table = table

    def extra(self) -> bytes:
        return _string(self.keyspace) + _string(self.table)


class Unprepared(CQLError):
    code = 0x2500

    def __init__(self, message: str, query_id: bytes):
        super().__init__(message)
        self.query_id = query_id

    def extra(self) -> bytes:
        return struct.pack(">H", len(self.query_id)) + self.query_id


REQUIRES_ALLOW_FILTERING = (
    "Cannot execute this query as it might involve data filtering and thus may have "
    "unpredictable performance. If you want to execute this query despite the performance "
    "unpredictability, use ALLOW FILTERING"
)
