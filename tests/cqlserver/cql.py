"""Parser for the CQL subset the CQL test server understands (test tool only).

``parse(text)`` turns one statement into a small syntax tree (classes below).
Bind markers (``?`` and ``:name``) are numbered in order of appearance; the
engine gives each one a name and a type once the table is known.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from .errors import CQLSyntaxError
from .types import CQLType, parse_type

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+|--[^\n]*|//[^\n]*|/\*.*?\*/)
   |(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})
   |(?P<blob>0[xX][0-9a-fA-F]*)
   |(?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
   |(?P<int>\d+)
   |(?P<str>'(?:[^']|'')*')
   |(?P<dollar>\$\$.*?\$\$)
   |(?P<qid>"(?:[^"]|"")*")
   |(?P<id>[A-Za-z_][A-Za-z0-9_]*)
   |(?P<named>:[A-Za-z_][A-Za-z0-9_]*)
   |(?P<op><=|>=|!=|[-+*/(),;.=<>{}\[\]:?%])
    """,
    re.X | re.S,
)


@dataclass
class Tok:
    kind: str  # id, qid, str, int, float, uuid, blob, op, named, eof
    value: Any
    text: str
    pos: int


# ---------------------------------------------------------------- syntax tree
@dataclass
class Literal:
    lit: tuple  # (kind, value, text); collections hold nested lit tuples


@dataclass
class Bind:
    index: int
    name: str | None = None


@dataclass
class FuncTerm:
    name: str
    args: list


@dataclass
class Relation:
    target: tuple  # ("col", name) | ("token", [names]) | ("multi", [names])
    op: str  # = < <= > >= != IN LIKE CONTAINS CONTAINS_KEY
    value: Any  # term, list of terms (IN (...)), or Bind (IN ?)


@dataclass
class Selector:
    kind: str  # col, count, token, ttl, writetime, star
    arg: Any = None
    alias: str | None = None


@dataclass
class Use:
    keyspace: str


@dataclass
class CreateKeyspace:
    name: str
    if_not_exists: bool
    options: dict


@dataclass
class DropKeyspace:
    name: str
    if_exists: bool


@dataclass
class CreateTable:
    keyspace: str | None
    name: str
    if_not_exists: bool
    columns: list  # [(name, CQLType, is_static)]
    partition_key: list
    clustering: list
    options: dict
    clustering_order: list  # [(name, "ASC"|"DESC")]
    inline_pk_count: int = 0
    pk_clause_count: int = 0


@dataclass
class AlterTable:
    keyspace: str | None
    name: str
    add: list
    drop: list
    options: dict


@dataclass
class DropTable:
    keyspace: str | None
    name: str
    if_exists: bool


@dataclass
class Truncate:
    keyspace: str | None
    name: str


@dataclass
class CreateIndex:
    keyspace: str | None
    table: str
    name: str | None
    if_not_exists: bool
    custom: bool
    column: str | None
    target_kind: str  # values, keys, entries, full, simple
    using: str | None
    options: dict


@dataclass
class DropIndex:
    keyspace: str | None
    name: str
    if_exists: bool


@dataclass
class Insert:
    keyspace: str | None
    table: str
    columns: list
    values: list
    if_not_exists: bool = False
    ttl: Any = None
    timestamp: Any = None


@dataclass
class Update:
    keyspace: str | None
    table: str
    assignments: list  # [(column, term)]
    where: list
    if_exists: bool = False
    conditions: list = field(default_factory=list)
    ttl: Any = None
    timestamp: Any = None


@dataclass
class Delete:
    keyspace: str | None
    table: str
    columns: list
    where: list
    if_exists: bool = False
    conditions: list = field(default_factory=list)
    timestamp: Any = None


@dataclass
class Select:
    keyspace: str | None
    table: str
    selectors: list
    where: list
    distinct: bool = False
    order_by: list = field(default_factory=list)  # [(column, "ASC"|"DESC")]
    limit: Any = None
    per_partition_limit: Any = None
    allow_filtering: bool = False
    json: bool = False


@dataclass
class Batch:
    kind: str  # LOGGED, UNLOGGED, COUNTER
    statements: list
    timestamp: Any = None


MODIFICATIONS = (Insert, Update, Delete)


class Parser:
    """Recursive-descent parser over the token list of one statement."""

    def __init__(self, text: str):
        self.text = text
        self.toks = self._lex(text)
        self.i = 0
        self.markers = 0
        self.marker_names: list[str | None] = []

    # -- lexing --------------------------------------------------------------
    def _lex(self, text: str) -> list[Tok]:
        toks: list[Tok] = []
        pos = 0
        n = len(text)
        while pos < n:
            m = _TOKEN_RE.match(text, pos)
            if not m:
                line, col = self._linecol(pos)
                raise CQLSyntaxError(f"line {line}:{col} token recognition error at: '{text[pos]}'")
            kind = m.lastgroup
            raw = m.group()
            if kind != "ws":
                if kind == "str":
                    value: Any = raw[1:-1].replace("''", "'")
                elif kind == "dollar":
                    kind, value = "str", raw[2:-2]
                elif kind == "qid":
                    value = raw[1:-1].replace('""', '"')
                elif kind == "id":
                    value = raw.lower()
                elif kind == "int":
                    value = int(raw)
                elif kind == "float":
                    value = float(raw)
                elif kind == "uuid":
                    value = uuid.UUID(raw)
                elif kind == "blob":
                    try:
                        value = bytes.fromhex(raw[2:])
                    except ValueError:
                        raise CQLSyntaxError(f"Invalid hexadecimal blob literal {raw}") from None
                elif kind == "named":
                    value = raw[1:].lower()
                else:
                    value = raw
                toks.append(Tok(kind, value, raw, pos))
            pos = m.end()
        toks.append(Tok("eof", None, "<EOF>", n))
        return toks

    def _linecol(self, pos: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1)
        return line, col

    # -- helpers --------------------------------------------------------------
    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def error(self, expecting: str) -> CQLSyntaxError:
        t = self.tok
        line, col = self._linecol(t.pos)
        return CQLSyntaxError(f"line {line}:{col} mismatched input '{t.text}' expecting {expecting} ({self.text.strip()[:120]})")

    def at_kw(self, *words: str) -> bool:
        t = self.tok
        return t.kind == "id" and t.value in words

    def accept_kw(self, *words: str) -> bool:
        for k, w in enumerate(words):
            t = self.toks[min(self.i + k, len(self.toks) - 1)]
            if not (t.kind == "id" and t.value == w):
                return False
        self.i += len(words)
        return True

    def expect_kw(self, *words: str) -> None:
        if not self.accept_kw(*words):
            raise self.error(" ".join(w.upper() for w in words))

    def at_op(self, op: str) -> bool:
        return self.tok.kind == "op" and self.tok.value == op

    def accept_op(self, op: str) -> bool:
        if self.at_op(op):
            self.i += 1
            return True
        return False

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            raise self.error(f"'{op}'")

    def ident(self) -> str:
        t = self.tok
        if t.kind in ("id", "qid"):
            self.i += 1
            return t.value
        raise self.error("identifier")

    def qualified(self) -> tuple[str | None, str]:
        first = self.ident()
        if self.accept_op("."):
            return first, self.ident()
        return None, first

    # -- entry -------------------------------------------------------------------
    def parse(self) -> Any:
        stmt = self.statement()
        self.accept_op(";")
        if self.tok.kind != "eof":
            raise self.error("<EOF>")
        return stmt

    def statement(self) -> Any:
        t = self.tok
        if t.kind != "id":
            raise self.error("a statement")
        w = t.value
        if w == "select":
            return self.select()
        if w == "insert":
            return self.insert()
        if w == "update":
            return self.update()
        if w == "delete":
            return self.delete()
        if w == "begin":
            return self.batch()
        if w == "use":
            self.i += 1
            return Use(self.ident())
        if w == "create":
            return self.create()
        if w == "drop":
            return self.drop()
        if w == "alter":
            return self.alter()
        if w == "truncate":
            self.i += 1
            self.accept_kw("table")
            ks, name = self.qualified()
            return Truncate(ks, name)
        raise self.error("a statement")

    # -- terms -------------------------------------------------------------------
    def bind(self) -> Bind | None:
        t = self.tok
        if t.kind == "op" and t.value == "?":
            self.i += 1
            b = Bind(self.markers)
            self.markers += 1
            self.marker_names.append(None)
            return b
        if t.kind == "named":
            self.i += 1
            b = Bind(self.markers, t.value)
            self.markers += 1
            self.marker_names.append(t.value)
            return b
        return None

    def term(self) -> Any:
        b = self.bind()
        if b is not None:
            return b
        t = self.tok
        if t.kind == "id" and self.toks[self.i + 1].kind == "op" and self.toks[self.i + 1].value == "(":
            name = t.value
            if name in ("now", "uuid", "currenttimestamp", "totimestamp", "tounixtimestamp", "currenttimeuuid"):
                self.i += 2
                args = []
                if not self.at_op(")"):
                    args.append(self.term())
                    while self.accept_op(","):
                        args.append(self.term())
                self.expect_op(")")
                return FuncTerm(name, args)
        return Literal(self.constant())

    def constant(self) -> tuple:
        t = self.tok
        neg = False
        if t.kind == "op" and t.value == "-":
            neg = True
            self.i += 1
            t = self.tok
        if t.kind in ("int", "float"):
            self.i += 1
            v = -t.value if neg else t.value
            return (t.kind, v, ("-" if neg else "") + t.text)
        if t.kind == "id" and t.value in ("nan", "infinity"):
            self.i += 1
            v = float("nan") if t.value == "nan" else float("inf")
            return ("float", -v if neg else v, ("-" if neg else "") + t.text)
        if neg:
            raise self.error("a number")
        if t.kind in ("str", "uuid", "blob"):
            self.i += 1
            return (t.kind, t.value, t.text)
        if t.kind == "id" and t.value in ("true", "false"):
            self.i += 1
            return ("bool", t.value == "true", t.text)
        if t.kind == "id" and t.value == "null":
            self.i += 1
            return ("null", None, "null")
        if self.at_op("{"):
            start = self.tok.pos
            self.i += 1
            if self.accept_op("}"):
                return ("map", [], "{}")
            first = self.constant()
            if self.accept_op(":"):
                pairs = [(first, self.constant())]
                while self.accept_op(","):
                    k = self.constant()
                    self.expect_op(":")
                    pairs.append((k, self.constant()))
                self.expect_op("}")
                return ("map", pairs, self.text[start:self.toks[self.i - 1].pos + 1])
            items = [first]
            while self.accept_op(","):
                items.append(self.constant())
            self.expect_op("}")
            return ("set", items, self.text[start:self.toks[self.i - 1].pos + 1])
        if self.at_op("["):
            start = self.tok.pos
            self.i += 1
            items = []
            if not self.at_op("]"):
                items.append(self.constant())
                while self.accept_op(","):
                    items.append(self.constant())
            self.expect_op("]")
            return ("list", items, self.text[start:self.toks[self.i - 1].pos + 1])
        if self.at_op("("):
            start = self.tok.pos
            self.i += 1
            items = [self.constant()]
            while self.accept_op(","):
                items.append(self.constant())
            self.expect_op(")")
            return ("tuple", items, self.text[start:self.toks[self.i - 1].pos + 1])
        raise self.error("a constant")

    def using(self, allow_ttl: bool = True) -> tuple[Any, Any]:
        ttl = ts = None
        if self.accept_kw("using"):
            while True:
                if self.accept_kw("ttl"):
                    if not allow_ttl:
                        raise CQLSyntaxError("TTL attribute is not allowed for deletes")
                    ttl = self.term()
                elif self.accept_kw("timestamp"):
                    ts = self.term()
                else:
                    raise self.error("TTL or TIMESTAMP")
                if not self.accept_kw("and"):
                    break
        return ttl, ts

    # -- WHERE -----------------------------------------------------------------
    def where(self) -> list[Relation]:
        rels = [self.relation()]
        while self.accept_kw("and"):
            rels.append(self.relation())
        return rels

    def relation(self) -> Relation:
        if self.at_kw("token") and self.toks[self.i + 1].kind == "op" and self.toks[self.i + 1].value == "(":
            self.i += 2
            cols = [self.ident()]
            while self.accept_op(","):
                cols.append(self.ident())
            self.expect_op(")")
            op = self.operator()
            return Relation(("token", cols), op, self.term())
        if self.at_op("("):
            self.i += 1
            cols = [self.ident()]
            while self.accept_op(","):
                cols.append(self.ident())
            self.expect_op(")")
            op = self.operator()
            if op == "IN":
                b = self.bind()
                if b is not None:
                    return Relation(("multi", cols), op, b)
                self.expect_op("(")
                vals = []
                if not self.at_op(")"):
                    vals.append(self.tuple_term())
                    while self.accept_op(","):
                        vals.append(self.tuple_term())
                self.expect_op(")")
                return Relation(("multi", cols), op, vals)
            return Relation(("multi", cols), op, self.tuple_term())
        col = self.ident()
        op = self.operator()
        if op == "IN":
            b = self.bind()
            if b is not None:
                return Relation(("col", col), op, b)
            self.expect_op("(")
            vals = []
            if not self.at_op(")"):
                vals.append(self.term())
                while self.accept_op(","):
                    vals.append(self.term())
            self.expect_op(")")
            return Relation(("col", col), op, vals)
        return Relation(("col", col), op, self.term())

    def tuple_term(self) -> Any:
        b = self.bind()
        if b is not None:
            return b
        self.expect_op("(")
        items = [self.term()]
        while self.accept_op(","):
            items.append(self.term())
        self.expect_op(")")
        return items

    def operator(self) -> str:
        t = self.tok
        if t.kind == "op" and t.value in ("=", "<", "<=", ">", ">=", "!="):
            self.i += 1
            return t.value
        if self.accept_kw("in"):
            return "IN"
        if self.accept_kw("like"):
            return "LIKE"
        if self.accept_kw("contains"):
            if self.accept_kw("key"):
                return "CONTAINS_KEY"
            return "CONTAINS"
        raise self.error("an operator")

    def conditions(self) -> tuple[bool, bool, list]:
        """IF EXISTS / IF NOT EXISTS / IF col op term AND ..."""
        if not self.accept_kw("if"):
            return False, False, []
        if self.accept_kw("not", "exists"):
            return False, True, []
        if self.accept_kw("exists"):
            return True, False, []
        conds = [self.relation()]
        while self.accept_kw("and"):
            conds.append(self.relation())
        return False, False, conds

    # -- DML -----------------------------------------------------------------
    def select(self) -> Select:
        self.expect_kw("select")
        json = self.accept_kw("json")
        distinct = self.accept_kw("distinct")
        selectors = []
        if self.accept_op("*"):
            selectors.append(Selector("star"))
        else:
            selectors.append(self.selector())
            while self.accept_op(","):
                selectors.append(self.selector())
        self.expect_kw("from")
        ks, table = self.qualified()
        stmt = Select(ks, table, selectors, [], distinct=distinct, json=json)
        if self.accept_kw("where"):
            stmt.where = self.where()
        if self.accept_kw("group", "by"):
            raise CQLSyntaxError("GROUP BY is not supported by the CQL test server")
        if self.accept_kw("order", "by"):
            while True:
                col = self.ident()
                direction = "ASC"
                if self.accept_kw("desc"):
                    direction = "DESC"
                else:
                    self.accept_kw("asc")
                stmt.order_by.append((col, direction))
                if not self.accept_op(","):
                    break
        if self.accept_kw("per", "partition", "limit"):
            stmt.per_partition_limit = self.limit_term()
        if self.accept_kw("limit"):
            stmt.limit = self.limit_term()
        if self.accept_kw("allow", "filtering"):
            stmt.allow_filtering = True
        return stmt

    def limit_term(self) -> Any:
        b = self.bind()
        if b is not None:
            return b
        t = self.tok
        if t.kind != "int":
            raise self.error("an integer")
        self.i += 1
        return Literal(("int", t.value, t.text))

    def selector(self) -> Selector:
        t = self.tok
        nxt = self.toks[self.i + 1]
        if t.kind == "id" and nxt.kind == "op" and nxt.value == "(":
            fn = t.value
            self.i += 2
            if fn == "count":
                if self.accept_op("*"):
                    pass
                elif self.tok.kind == "int" and self.tok.value == 1:
                    self.i += 1
                else:
                    raise CQLSyntaxError("Only COUNT(*) and COUNT(1) are supported by the CQL test server")
                self.expect_op(")")
                return Selector("count", None, self.alias())
            if fn in ("ttl", "writetime", "token"):
                args = [self.ident()]
                while self.accept_op(","):
                    args.append(self.ident())
                self.expect_op(")")
                if fn != "token" and len(args) != 1:
                    raise CQLSyntaxError(f"{fn}() takes exactly one column")
                return Selector(fn, args if fn == "token" else args[0], self.alias())
            if fn in ("max", "min", "sum", "avg"):
                col = self.ident()
                self.expect_op(")")
                return Selector(fn, col, self.alias())
            raise CQLSyntaxError(f"Unknown function '{fn}' (the CQL test server knows count, token, ttl, writetime, max, min, sum, avg)")
        return Selector("col", self.ident(), self.alias())

    def alias(self) -> str | None:
        if self.accept_kw("as"):
            return self.ident()
        return None

    def insert(self) -> Insert:
        self.expect_kw("insert")
        self.expect_kw("into")
        ks, table = self.qualified()
        if self.at_kw("json"):
            raise CQLSyntaxError("INSERT JSON is not supported by the CQL test server")
        self.expect_op("(")
        cols = [self.ident()]
        while self.accept_op(","):
            cols.append(self.ident())
        self.expect_op(")")
        self.expect_kw("values")
        self.expect_op("(")
        vals = [self.term()]
        while self.accept_op(","):
            vals.append(self.term())
        self.expect_op(")")
        stmt = Insert(ks, table, cols, vals)
        if self.accept_kw("if", "not", "exists"):
            stmt.if_not_exists = True
        stmt.ttl, stmt.timestamp = self.using()
        if not stmt.if_not_exists and self.accept_kw("if", "not", "exists"):
            stmt.if_not_exists = True
        return stmt

    def update(self) -> Update:
        self.expect_kw("update")
        ks, table = self.qualified()
        ttl, ts = self.using()
        self.expect_kw("set")
        assigns = [self.assignment()]
        while self.accept_op(","):
            assigns.append(self.assignment())
        self.expect_kw("where")
        where = self.where()
        if_exists, if_not_exists, conds = self.conditions()
        if if_not_exists:
            raise CQLSyntaxError("UPDATE does not accept IF NOT EXISTS; use INSERT ... IF NOT EXISTS")
        return Update(ks, table, assigns, where, if_exists, conds, ttl, ts)

    def assignment(self) -> tuple:
        col = self.ident()
        if self.accept_op("["):
            key = self.term()
            self.expect_op("]")
            self.expect_op("=")
            return (col, ("element", key, self.term()))
        self.expect_op("=")
        if self.tok.kind in ("id", "qid") and self.tok.value == col and self.toks[self.i + 1].kind == "op" \
                and self.toks[self.i + 1].value in ("+", "-"):
            self.i += 1
            op = self.tok.value
            self.i += 1
            return (col, ("add" if op == "+" else "remove", self.term()))
        return (col, self.term())

    def delete(self) -> Delete:
        self.expect_kw("delete")
        cols = []
        if not self.at_kw("from"):
            cols.append(self.ident())
            while self.accept_op(","):
                cols.append(self.ident())
        self.expect_kw("from")
        ks, table = self.qualified()
        _, ts = self.using(allow_ttl=False)
        self.expect_kw("where")
        where = self.where()
        if_exists, if_not_exists, conds = self.conditions()
        if if_not_exists:
            raise CQLSyntaxError("DELETE does not accept IF NOT EXISTS")
        return Delete(ks, table, cols, where, if_exists, conds, ts)

    def batch(self) -> Batch:
        self.expect_kw("begin")
        kind = "LOGGED"
        if self.accept_kw("unlogged"):
            kind = "UNLOGGED"
        elif self.accept_kw("counter"):
            kind = "COUNTER"
        else:
            self.accept_kw("logged")
        self.expect_kw("batch")
        ttl, ts = self.using()
        if ttl is not None:
            raise CQLSyntaxError("Global TTL on the BATCH statement is not supported.")
        stmts = []
        while not self.at_kw("apply"):
            if self.tok.kind == "eof":
                raise self.error("APPLY BATCH")
            if not self.at_kw("insert", "update", "delete"):
                raise self.error("INSERT, UPDATE or DELETE")
            stmts.append(self.statement())
            self.accept_op(";")
        self.expect_kw("apply", "batch")
        return Batch(kind, stmts, ts)

    # -- DDL -----------------------------------------------------------------
    def if_not_exists(self) -> bool:
        return self.accept_kw("if", "not", "exists")

    def if_exists(self) -> bool:
        return self.accept_kw("if", "exists")

    def create(self) -> Any:
        self.expect_kw("create")
        if self.accept_kw("keyspace") or self.accept_kw("schema"):
            ine = self.if_not_exists()
            name = self.ident()
            self.expect_kw("with")
            return CreateKeyspace(name, ine, self.properties())
        if self.accept_kw("table") or self.accept_kw("columnfamily"):
            return self.create_table()
        custom = self.accept_kw("custom")
        if self.accept_kw("index"):
            return self.create_index(custom)
        raise self.error("KEYSPACE, TABLE or INDEX")

    def properties(self) -> dict:
        props: dict = {}
        while True:
            name = self.ident()
            self.expect_op("=")
            props[name] = self.constant()
            if not self.accept_kw("and"):
                return props

    def type_text(self) -> CQLType:
        parts = [self.ident()]
        depth = 0
        if self.at_op("<"):
            while True:
                t = self.tok
                if t.kind == "op" and t.value in ("<", ">", ","):
                    depth += {"<": 1, ">": -1, ",": 0}[t.value]
                    parts.append(t.value)
                    self.i += 1
                    if depth == 0:
                        break
                elif t.kind in ("id", "qid"):
                    parts.append(t.value)
                    self.i += 1
                else:
                    raise self.error("a type")
        return parse_type(" ".join(parts))

    def create_table(self) -> CreateTable:
        ine = self.if_not_exists()
        ks, name = self.qualified()
        self.expect_op("(")
        stmt = CreateTable(ks, name, ine, [], [], [], {}, [])
        while True:
            if self.accept_kw("primary", "key"):
                stmt.pk_clause_count += 1
                self.expect_op("(")
                if self.accept_op("("):
                    stmt.partition_key = [self.ident()]
                    while self.accept_op(","):
                        stmt.partition_key.append(self.ident())
                    self.expect_op(")")
                else:
                    stmt.partition_key = [self.ident()]
                stmt.clustering = []
                while self.accept_op(","):
                    stmt.clustering.append(self.ident())
                self.expect_op(")")
            else:
                col = self.ident()
                ctype = self.type_text()
                static = self.accept_kw("static")
                stmt.columns.append((col, ctype, static))
                if self.accept_kw("primary", "key"):
                    stmt.inline_pk_count += 1
                    stmt.partition_key = [col]
                    stmt.clustering = []
            if not self.accept_op(","):
                break
            if self.at_op(")"):
                break
        self.expect_op(")")
        if self.accept_kw("with"):
            while True:
                if self.accept_kw("clustering", "order", "by"):
                    self.expect_op("(")
                    while True:
                        col = self.ident()
                        if self.accept_kw("desc"):
                            stmt.clustering_order.append((col, "DESC"))
                        else:
                            self.expect_kw("asc")
                            stmt.clustering_order.append((col, "ASC"))
                        if not self.accept_op(","):
                            break
                    self.expect_op(")")
                elif self.accept_kw("compact", "storage"):
                    raise CQLSyntaxError("COMPACT STORAGE tables are not supported (removed in Cassandra 4.0)")
                else:
                    pname = self.ident()
                    self.expect_op("=")
                    stmt.options[pname] = self.constant()
                if not self.accept_kw("and"):
                    break
        return stmt

    def create_index(self, custom: bool) -> CreateIndex:
        ine = self.if_not_exists()
        name = None
        if not self.at_kw("on"):
            name = self.ident()
        self.expect_kw("on")
        ks, table = self.qualified()
        self.expect_op("(")
        kind = "simple"
        column = None
        if self.at_kw("keys", "values", "entries", "full") and self.toks[self.i + 1].kind == "op" \
                and self.toks[self.i + 1].value == "(":
            kind = self.tok.value
            self.i += 2
            column = self.ident()
            self.expect_op(")")
        elif not self.at_op(")"):
            column = self.ident()
        self.expect_op(")")
        using = None
        options: dict = {}
        if self.accept_kw("using"):
            t = self.tok
            if t.kind != "str":
                raise self.error("a quoted index class")
            self.i += 1
            using = t.value
            if self.accept_kw("with"):
                self.expect_kw("options")
                self.expect_op("=")
                lit = self.constant()
                if lit[0] not in ("map",):
                    raise CQLSyntaxError("WITH OPTIONS needs a map, e.g. {'mode': 'PREFIX'}")
                options = {k[1]: v[1] for k, v in lit[1]}
        return CreateIndex(ks, table, name, ine, custom, column, kind, using, options)

    def drop(self) -> Any:
        self.expect_kw("drop")
        if self.accept_kw("keyspace") or self.accept_kw("schema"):
            ie = self.if_exists()
            return DropKeyspace(self.ident(), ie)
        if self.accept_kw("table") or self.accept_kw("columnfamily"):
            ie = self.if_exists()
            ks, name = self.qualified()
            return DropTable(ks, name, ie)
        if self.accept_kw("index"):
            ie = self.if_exists()
            ks, name = self.qualified()
            return DropIndex(ks, name, ie)
        raise self.error("KEYSPACE, TABLE or INDEX")

    def alter(self) -> AlterTable:
        self.expect_kw("alter")
        self.expect_kw("table")
        ks, name = self.qualified()
        stmt = AlterTable(ks, name, [], [], {})
        if self.accept_kw("add"):
            paren = self.accept_op("(")
            while True:
                col = self.ident()
                stmt.add.append((col, self.type_text(), self.accept_kw("static")))
                if not self.accept_op(","):
                    break
            if paren:
                self.expect_op(")")
        elif self.accept_kw("drop"):
            stmt.drop.append(self.ident())
        elif self.accept_kw("with"):
            stmt.options = self.properties()
        else:
            raise self.error("ADD, DROP or WITH")
        return stmt


def parse(text: str) -> tuple[Any, int, list]:
    """Parse one statement; returns (tree, number of bind markers, marker names)."""
    p = Parser(text)
    stmt = p.parse()
    return stmt, p.markers, p.marker_names
