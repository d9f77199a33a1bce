"""Values in statements of the CQL test server: literals, bind markers, functions.

At compile time a term becomes a small tuple: ``("c", bytes|None)`` for a
constant, ``("b", index, type)`` for a bind marker, ``("f", name, type)`` for
``now()``-like functions, ``("l", [terms])`` for an ``IN (...)`` list and
``("i", index, list type, element type)`` for ``IN ?``. Each bind marker's name
and type is recorded in ``specs`` (the prepared statement's bind metadata).
"""
from __future__ import annotations

import struct
import time
import uuid
from typing import Any

from . import cql
from .errors import InvalidRequest
from .results import UNSET
from .types import CQLType


def compile_term(term: Any, ctype: CQLType, name: str, specs: list) -> tuple:
    if isinstance(term, cql.Bind):
        specs[term.index] = (term.name or name, ctype)
        return ("b", term.index, ctype, name)
    if isinstance(term, cql.Literal):
        lit = term.lit
        if lit[0] == "null":
            return ("c", None)
        return ("c", ctype.serialize(ctype.coerce(lit, name)))
    if isinstance(term, cql.FuncTerm):
        fn = term.name
        wants = {"now": ("timeuuid", "uuid"), "currenttimeuuid": ("timeuuid", "uuid"), "uuid": ("uuid",),
                 "currenttimestamp": ("timestamp",), "totimestamp": ("timestamp",),
                 "tounixtimestamp": ("bigint",)}[fn]
        if ctype.name not in wants:
            raise InvalidRequest(f"Type error: {fn}() cannot be passed as argument of type {ctype.cql()} for {name}")
        return ("f", fn, ctype)
    raise InvalidRequest(f"Invalid value for {name}")


def compile_in(value: Any, ctype: CQLType, name: str, specs: list) -> tuple:
    """An IN value: a list of terms or one ``IN ?`` marker bound to a list."""
    if isinstance(value, cql.Bind):
        ltype = CQLType("list", (ctype,))
        specs[value.index] = (value.name or f"in({name})", ltype)
        return ("i", value.index, ltype, ctype, name)
    return ("l", [compile_term(v, ctype, name, specs) for v in value])


def resolve(t: tuple, values: list) -> Any:
    """bytes, None (null) or UNSET for a compiled single-value term."""
    kind = t[0]
    if kind == "c":
        return t[1]
    if kind == "b":
        v = values[t[1]]
        if v is None or v is UNSET:
            return v
        ctype = t[2]
        if ctype.is_collection:
            return ctype.normalize(v)
        return v
    if kind == "f":
        fn = t[1]
        if fn in ("now", "currenttimeuuid"):
            return uuid.uuid1().bytes
        if fn == "uuid":
            return uuid.uuid4().bytes
        if fn == "tounixtimestamp":
            return struct.pack(">q", int(time.time() * 1000))
        return struct.pack(">q", int(time.time() * 1000))
    raise InvalidRequest("Invalid term")


def resolve_many(t: tuple, values: list) -> list:
    """The list of bytes for an IN value (or a single-element list for others)."""
    kind = t[0]
    if kind == "l":
        return [resolve(x, values) for x in t[1]]
    if kind == "i":
        v = values[t[1]]
        if v is UNSET:
            raise InvalidRequest(f"Invalid unset value for IN restriction on {t[4]}")
        if v is None:
            raise InvalidRequest(f"Invalid null value for IN restriction on {t[4]}")
        items = t[2].deserialize(v) or []
        return [None if x is None else t[3].serialize(x) for x in items]
    return [resolve(t, values)]


def checked_key_value(v: Any, column: str) -> Any:
    """v, a value restricting a key column: refused, as Cassandra does, when null or unset."""
    if v is UNSET:
        raise InvalidRequest(f"Invalid unset value for column {column}")
    if v is None:
        raise InvalidRequest(f"Invalid null value in condition for column {column}")
    return v


def key_values(t: tuple, values: list, column: str) -> list:
    """resolve_many for a key column's `=` or IN restriction (checked_key_value on each)."""
    return [checked_key_value(v, column) for v in resolve_many(t, values)]


def resolve_int(t: tuple | None, values: list, what: str) -> int | None:
    """An int-valued term (LIMIT, TTL): None when absent or unset."""
    if t is None:
        return None
    v = resolve(t, values)
    if v is UNSET:
        return None
    if v is None:
        raise InvalidRequest(f"Invalid null value of {what}")
    if len(v) == 4:
        return struct.unpack(">i", v)[0]
    if len(v) == 8:
        return struct.unpack(">q", v)[0]
    raise InvalidRequest(f"Invalid value of {what}")
