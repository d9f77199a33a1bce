"""CQL data types of the CQL test server (a test tool, never a production store).

A ``CQLType`` knows its CQL name, its native-protocol option code, the driver's
``cassandra.cqltypes`` class that (de)serializes its values, how a literal
constant of a query string coerces to it, and the key that orders its values the
way Cassandra orders them (clustering order, ranges).
"""
from __future__ import annotations

import calendar
import datetime
import ipaddress
import re
import struct
import uuid
from typing import Any, Callable

from cassandra import cqltypes as ct

from .errors import InvalidRequest

_SIMPLE: dict[str, tuple[int, Any]] = {
    "ascii": (0x01, ct.AsciiType),
    "bigint": (0x02, ct.LongType),
    "blob": (0x03, ct.BytesType),
    "boolean": (0x04, ct.BooleanType),
    "counter": (0x05, ct.CounterColumnType),
    "decimal": (0x06, ct.DecimalType),
    "double": (0x07, ct.DoubleType),
    "float": (0x08, ct.FloatType),
    "int": (0x09, ct.Int32Type),
    "timestamp": (0x0B, ct.DateType),
    "uuid": (0x0C, ct.UUIDType),
    "text": (0x0D, ct.UTF8Type),
    "varint": (0x0E, ct.IntegerType),
    "timeuuid": (0x0F, ct.TimeUUIDType),
    "inet": (0x10, ct.InetAddressType),
    "date": (0x11, ct.SimpleDateType),
    "time": (0x12, ct.TimeType),
    "smallint": (0x13, ct.ShortType),
    "tinyint": (0x14, ct.ByteType),
}
_ALIASES = {"varchar": "text"}
_COLLECTIONS = {"list": (0x20, ct.ListType, 1), "map": (0x21, ct.MapType, 2), "set": (0x22, ct.SetType, 1)}
_INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64, "counter": 64}
_TEXT = {"text", "ascii"}


class CQLType:
    """One CQL type: simple, collection (list/set/map) or tuple, possibly frozen."""

    __slots__ = ("name", "code", "driver", "params", "frozen", "_key")

    def __init__(self, name: str, params: tuple["CQLType", ...] = (), frozen: bool = False):
        self.name = name
        self.params = params
        self.frozen = frozen
        if name in _SIMPLE:
            self.code, self.driver = _SIMPLE[name]
        elif name in _COLLECTIONS:
            self.code, base, _ = _COLLECTIONS[name]
            self.driver = base.apply_parameters(tuple(p.driver for p in params))
        elif name == "tuple":
            self.code = 0x31
            self.driver = ct.TupleType.apply_parameters(tuple(p.driver for p in params))
        else:  # pragma: no cover - guarded by parse_type
            raise InvalidRequest(f"Unknown type {name}")
        self._key = _key_function(self)

    # -- names -------------------------------------------------------------
    def cql(self) -> str:
        if not self.params:
            return self.name
        inner = f"{self.name}<{', '.join(p.cql() for p in self.params)}>"
        return f"frozen<{inner}>" if self.frozen else inner

    __str__ = cql

    def __repr__(self) -> str:
        return f"CQLType({self.cql()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CQLType) and other.cql() == self.cql()

    def __hash__(self) -> int:
        return hash(self.cql())

    @property
    def is_collection(self) -> bool:
        return self.name in _COLLECTIONS

    @property
    def is_text(self) -> bool:
        return self.name in _TEXT

    # -- wire ----------------------------------------------------------------
    def option(self) -> bytes:
        """The [option] describing this type in result and bind metadata."""
        out = struct.pack(">H", self.code)
        if self.name == "tuple":
            out += struct.pack(">H", len(self.params))
        for p in self.params:
            out += p.option()
        return out

    def serialize(self, value: Any) -> bytes:
        if self.name == "set":
            value = sorted(value, key=self.params[0].key)
        elif self.name == "map":
            value = dict(sorted(value.items(), key=lambda kv: self.params[0].key(kv[0])))
        return self.driver.serialize(value, 4)

    def deserialize(self, raw: bytes | None) -> Any:
        if raw is None:
            return None
        return self.driver.from_binary(raw, 4)

    def normalize(self, raw: bytes) -> bytes:
        """Validate a bound value; collections are re-encoded in Cassandra's order."""
        try:
            value = self.driver.from_binary(raw, 4)
            if self.name in ("set", "map"):
                return self.serialize(value)
        except InvalidRequest:
            raise
        except Exception as exc:
            raise InvalidRequest(f"Invalid value for type {self.cql()}: {exc}") from None
        if value is None and raw:
            raise InvalidRequest(f"Invalid value for type {self.cql()}")
        return raw

    # -- ordering --------------------------------------------------------------
    def key(self, value: Any) -> Any:
        """The ordering key of a deserialized value."""
        return self._key(value)

    def key_of_bytes(self, raw: bytes) -> Any:
        return self._key(self.driver.from_binary(raw, 4))

    # -- literals --------------------------------------------------------------
    def coerce(self, lit: tuple, column: str) -> Any:
        """Python value for a literal constant ``(kind, value, text)`` of a query string."""
        kind, value, text = lit
        name = self.name
        if kind == "null":
            return None

        def bad() -> InvalidRequest:
            label = {"str": "STRING", "int": "INTEGER", "float": "FLOAT", "uuid": "UUID",
                     "bool": "BOOLEAN", "blob": "HEX", "map": "MAP", "set": "SET",
                     "list": "LIST", "tuple": "TUPLE"}.get(kind, kind.upper())
            return InvalidRequest(f'Invalid {label} constant ({text}) for "{column}" of type {self.cql()}')

        if name in _TEXT:
            if kind != "str":
                raise bad()
            if name == "ascii" and not value.isascii():
                raise InvalidRequest(f'Invalid ASCII character in string literal for "{column}"')
            return value
        if name in _INT_BITS or name == "varint":
            if kind != "int":
                raise bad()
            bits = _INT_BITS.get(name)
            if bits and not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
                raise InvalidRequest(f"Unable to make {name} from '{text}'")
            return value
        if name in ("double", "float", "decimal"):
            if kind not in ("int", "float"):
                raise bad()
            return float(value) if name != "decimal" else value
        if name == "boolean":
            if kind != "bool":
                raise bad()
            return value
        if name == "timestamp":
            if kind == "int":
                return value
            if kind == "str":
                return parse_timestamp_ms(value, column)
            raise bad()
        if name in ("uuid", "timeuuid"):
            if kind != "uuid":
                raise bad()
            if name == "timeuuid" and value.version != 1:
                raise InvalidRequest(f"Unsupported UUID for timeuuid column {column}: version {value.version}")
            return value
        if name == "blob":
            if kind != "blob":
                raise bad()
            return value
        if name == "inet":
            if kind != "str":
                raise bad()
            try:
                ipaddress.ip_address(value)
            except ValueError:
                raise InvalidRequest(f"Unable to make inet address from '{value}'") from None
            return value
        if name in ("date", "time"):
            if kind not in ("str", "int"):
                raise bad()
            return value
        if name == "map":
            if kind == "set" and not value:
                return {}
            if kind != "map":
                raise bad()
            kt, vt = self.params
            return {kt.coerce(k, column): vt.coerce(v, column) for k, v in value}
        if name == "set":
            if kind == "map" and not value:
                return set()
            if kind != "set":
                raise bad()
            return {self.params[0].coerce(v, column) for v in value}
        if name == "list":
            if kind != "list":
                raise bad()
            return [self.params[0].coerce(v, column) for v in value]
        if name == "tuple":
            if kind != "tuple" or len(value) != len(self.params):
                raise bad()
            return tuple(p.coerce(v, column) for p, v in zip(self.params, value))
        raise bad()


def parse_timestamp_ms(text: str, column: str = "") -> int:
    """Milliseconds since the epoch for a CQL timestamp string literal."""
    s = text.strip().replace("T", " ")
    s = re.sub(r"Z$", "+0000", s)
    m = re.match(r"^(\d{4}-\d{2}-\d{2})(?: (\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?))?\s*([+-]\d{2}:?\d{2})?$", s)
    if not m:
        raise InvalidRequest(f"Unable to parse a date/time from '{text}'")
    date_part, time_part, zone = m.groups()
    dt = datetime.datetime.fromisoformat(f"{date_part} {time_part or '00:00'}")
    seconds = calendar.timegm(dt.timetuple())
    if zone:
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        seconds -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return seconds * 1000 + dt.microsecond // 1000


def _key_function(t: CQLType) -> Callable[[Any], Any]:
    name = t.name
    if name == "uuid":
        return lambda u: (u.version or 0, u.time if u.version == 1 else 0, u.bytes)
    if name == "timeuuid":
        return lambda u: (u.time, u.bytes)
    if name == "inet":
        return lambda a: ipaddress.ip_address(a).packed
    if name in _SIMPLE:
        return lambda v: v
    return lambda v: t.driver.serialize(v, 4)


def _parse_tokens(tokens: list[str], pos: int) -> tuple[CQLType, int]:
    name = tokens[pos].lower()
    pos += 1
    name = _ALIASES.get(name, name)
    if name == "frozen":
        if tokens[pos] != "<":
            raise InvalidRequest("frozen<> needs a type argument")
        inner, pos = _parse_tokens(tokens, pos + 1)
        if tokens[pos] != ">":
            raise InvalidRequest("Unclosed frozen<> type")
        return CQLType(inner.name, inner.params, frozen=True), pos + 1
    if name in _SIMPLE:
        return CQLType(name), pos
    if name in _COLLECTIONS or name == "tuple":
        if pos >= len(tokens) or tokens[pos] != "<":
            raise InvalidRequest(f"Type {name} needs type arguments, e.g. {name}<text>")
        params = []
        pos += 1
        while True:
            p, pos = _parse_tokens(tokens, pos)
            params.append(p)
            if tokens[pos] == ",":
                pos += 1
                continue
            if tokens[pos] == ">":
                pos += 1
                break
            raise InvalidRequest(f"Unexpected '{tokens[pos]}' in type arguments")
        want = _COLLECTIONS.get(name, (0, 0, len(params)))[2]
        if len(params) != want:
            raise InvalidRequest(f"Type {name} takes {want} type argument(s), got {len(params)}")
        return CQLType(name, tuple(params), frozen=(name == "tuple")), pos
    raise InvalidRequest(f"Unknown type {name}")


def parse_type(text: str) -> CQLType:
    """Parse a CQL type such as ``bigint`` or ``map<text, text>``."""
    tokens = re.findall(r"[A-Za-z_][A-Za-z0-9_]*|[<>,]", text)
    if not tokens:
        raise InvalidRequest(f"Invalid type '{text}'")
    try:
        t, pos = _parse_tokens(tokens, 0)
    except IndexError:
        raise InvalidRequest(f"Incomplete type '{text}'") from None
    if pos != len(tokens):
        raise InvalidRequest(f"Invalid type '{text}'")
    return t


BIGINT = parse_type("bigint")
INT = parse_type("int")
BOOLEAN = parse_type("boolean")
TEXT = parse_type("text")


def new_uuid1() -> uuid.UUID:
    return uuid.uuid1()
