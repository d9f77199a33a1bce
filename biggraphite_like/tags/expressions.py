"""Tag expressions, graphite's language exactly: `tag=spec`, `tag!=spec`, `tag=~regex`,
`tag!=~regex`, ANDed (graphite-web's BaseTagDB.parse_tagspec and LocalDatabaseTagDB).

Semantics, as LocalDatabaseTagDB on SQLite gives them:
- a term is evaluated on the series' value of its tag, '' when the series lacks the tag:
  a spec that matches '' also matches series without the tag;
- a query needs at least one term that requires a non-empty value;
- a regex is anchored at the start: `spec` becomes `^(spec)`, a spec already starting with
  `^` is kept. Terms that require a value run the regex with `re.search` (graphite's SQL
  REGEXP), the others with `re.match` (its Python post-filter); this differs only for a
  spec such as `^a|b`, and we keep graphite's answer.

Hostile regexes: Python's `re` backtracks and has no timeout, so a regex is accepted only
in a safe subset (`check_regex`): at most MAX_REGEX_LENGTH characters, no backreference,
no repetition inside a repetition and no alternation inside a repetition (the shapes of
exponential backtracking, `(a+)+`, `(a|a)*`), at most MAX_VARIABLE_REPEATS variable
repetitions (the work per value is then polynomial: at most about n^(k+1) steps for a
value of n characters). The planner bounds how many values and series a query touches.
"""
from __future__ import annotations

import dataclasses
import functools
import re
import re._constants as _sre
import re._parser as _sre_parse
from typing import Mapping, Sequence

from biggraphite_like.errors import InvalidTagExpression

MAX_REGEX_LENGTH = 256
MAX_VARIABLE_REPEATS = 3
_TAGSPEC = re.compile(r"^([^;!=]+)(!?=~?)([^;]*)$")
_REPEATS = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", _sre.MAX_REPEAT))
_BACKREFERENCES = (_sre.GROUPREF, _sre.GROUPREF_EXISTS, _sre.GROUPREF_IGNORE)


@dataclasses.dataclass(frozen=True)
class TagTerm:
    """One expression: tag, operator ('=', '!=', '=~', '!=~') and spec."""

    tag: str
    operator: str
    spec: str

    @property
    def text(self) -> str:
        return f"{self.tag}{self.operator}{self.spec}"

    @functools.cached_property
    def regex(self) -> re.Pattern | None:
        """The anchored regex of `=~` / `!=~` terms (None for the others)."""
        if self.operator not in ("=~", "!=~"):
            return None
        return compile_regex(self.spec, f"expression {self.text!r}")

    @functools.cached_property
    def requires_value(self) -> bool:
        """Whether the term rejects the empty value (and so series without the tag)."""
        return not self.matches("", empty_test=True)

    def matches(self, value: str, empty_test: bool = False) -> bool:
        """Whether a series whose tag has `value` ('' when absent) satisfies the term."""
        operator = self.operator
        if operator == "=":
            return value == self.spec
        if operator == "!=":
            return value != self.spec
        regex = self.regex
        # graphite: REGEXP (search) in SQL for value-requiring terms, re.match in its filters
        found = regex.match(value) if empty_test or not self.requires_value else regex.search(value)
        return (found is not None) if operator == "=~" else (found is None)

    @functools.cached_property
    def literal_prefix(self) -> str:
        """For `=~`: a prefix every matching value starts with ('' when none is known)."""
        if self.operator != "=~":
            return ""
        return regex_literal_prefix(self.regex)


def parse_term(text: str) -> TagTerm:
    """Parse one expression; InvalidTagExpression when it is not `tag<op>spec`."""
    if not isinstance(text, str):
        raise InvalidTagExpression(f"tag expression must be a string, got {type(text).__name__}")
    match = _TAGSPEC.match(text)
    if match is None:
        raise InvalidTagExpression(
            f"invalid tag expression {text!r}: expected tag=value, tag!=value, tag=~regex or tag!=~regex"
            " (no ';' anywhere, no '!' or '=' in the tag)"
        )
    term = TagTerm(*match.groups())
    if term.regex is not None:
        _ = term.requires_value  # compile and check now, with the expression in the error
    return term


@dataclasses.dataclass(frozen=True)
class TagQuery:
    """ANDed terms, at least one requiring a value."""

    terms: tuple[TagTerm, ...]

    @classmethod
    def parse(cls, expressions: Sequence[str]) -> "TagQuery":
        if isinstance(expressions, str):
            expressions = [expressions]
        if not expressions:
            raise InvalidTagExpression("a tag query needs at least one expression")
        terms = tuple(parse_term(e) for e in expressions)
        if not any(t.requires_value for t in terms):
            raise InvalidTagExpression(
                f"tag query {list(expressions)!r}: at least one expression must require a non-empty value"
                " (every expression here also matches series without the tag)"
            )
        return cls(terms)

    def matches(self, tags: Mapping[str, str]) -> bool:
        """Whether a series with these tags satisfies every term."""
        return all(t.matches(tags.get(t.tag, "")) for t in self.terms)


def compile_regex(spec: str, what: str) -> re.Pattern:
    """graphite's anchoring of spec, compiled once it passed `check_regex`."""
    if len(spec) > MAX_REGEX_LENGTH:
        raise InvalidTagExpression(f"{what}: regex is {len(spec)} characters long; at most {MAX_REGEX_LENGTH} are allowed")
    pattern = spec if spec.startswith("^") else f"^({spec})"
    return _compiled(pattern, what)


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str, what: str) -> re.Pattern:
    try:
        parsed = _sre_parse.parse(pattern)
    except re.error as exc:
        raise InvalidTagExpression(f"{what}: invalid regex {pattern!r}: {exc}") from None
    check_regex(parsed, what)
    return re.compile(pattern)


def check_regex(parsed, what: str) -> None:
    """Refuse regexes outside the safe subset (see module docstring), saying why."""
    variable = 0

    def walk(items, in_repeat: bool) -> None:
        nonlocal variable
        for op, av in items:
            if op in _REPEATS:
                low, high, body = av
                if in_repeat:
                    raise InvalidTagExpression(f"{what}: a repetition inside a repetition is refused (it can backtrack without end)")
                if low != high:
                    variable += 1
                    if variable > MAX_VARIABLE_REPEATS:
                        raise InvalidTagExpression(
                            f"{what}: more than {MAX_VARIABLE_REPEATS} variable repetitions (*, +, ?, {{m,n}}) are refused")
                walk(body, True)
            elif op is _sre.BRANCH:
                if in_repeat:
                    raise InvalidTagExpression(f"{what}: an alternation inside a repetition is refused (it can backtrack without end)")
                for branch in av[1]:
                    walk(branch, in_repeat)
            elif op is _sre.SUBPATTERN:
                walk(av[3], in_repeat)
            elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
                walk(av[1], in_repeat)
            elif op is getattr(_sre, "ATOMIC_GROUP", None):
                walk(av, in_repeat)
            elif op in _BACKREFERENCES:
                raise InvalidTagExpression(f"{what}: backreferences are refused")

    walk(parsed.data, False)


def regex_literal_prefix(regex: re.Pattern) -> str:
    """The literal text every match of an anchored regex starts with ('' if unknown)."""
    parsed = _sre_parse.parse(regex.pattern)
    if parsed.state.flags & (re.IGNORECASE | re.MULTILINE | re.VERBOSE):
        return ""
    items = list(parsed.data)
    if not items or items[0] != (_sre.AT, _sre.AT_BEGINNING):
        return ""
    prefix: list[str] = []

    def collect(sequence) -> bool:
        """Append leading literals; True if the whole sequence was literal."""
        for op, av in sequence:
            if op is _sre.LITERAL:
                prefix.append(chr(av))
            elif op is _sre.SUBPATTERN and not (av[1] & (re.IGNORECASE | re.MULTILINE)):
                if not collect(av[3]):
                    return False
            else:
                return False
        return True

    collect(items[1:])
    return "".join(prefix)
