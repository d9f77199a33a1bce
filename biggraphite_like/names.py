"""Metric names: normalisation and validation, shared by metrics and directories.

A name is dot-separated components. As whisper's file mapping does, consecutive dots
collapse and edge dots are stripped (`.a..b.` is `a.b`). A name has 1 to 64 components;
whitespace and control characters are rejected because carbon's plaintext protocol and
graphite's URLs cannot carry them unambiguously. `__END__` is reserved: the metadata
tables use it to mark the end of a name. A tagged series name (`name;tag=value`, see
biggraphite_like.tags.series) becomes its canonical path, tags sorted.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Iterable

from biggraphite_like.errors import InvalidMetricName, InvalidTag
from biggraphite_like.tags.series import canonical_path, is_tagged

MAX_COMPONENTS = 64
MAX_COMPONENT_LENGTH = 255  # whisper's limit: a component is a file or directory name
END_MARKER = "__END__"
SEPARATOR = "."

_DOTS_RE = re.compile(r"\.{2,}")
_ASCII_BAD_RE = re.compile(r"[\x00-\x20\x7f]")


def _bad_character(name: str) -> str | None:
    """Return the first whitespace or control character of name, or None."""
    match = _ASCII_BAD_RE.search(name)
    if match:
        return match.group(0)
    if not name.isascii():
        for ch in name:
            if ch.isspace() or unicodedata.category(ch)[0] == "C":
                return ch
    return None


def normalize(name: str) -> str:
    """Return the canonical form of a metric name, or raise InvalidMetricName."""
    if not isinstance(name, str):
        raise InvalidMetricName(f"metric name must be a string, got {type(name).__name__}")
    bad = _bad_character(name)
    if bad is not None:
        raise InvalidMetricName(
            f"metric name {name!r} contains {'whitespace' if bad.isspace() else 'a control character'}"
            f" {bad!r} at position {name.index(bad)}: names may not contain whitespace or control characters"
        )
    if is_tagged(name):  # a Graphite tagged series: its canonical path (tags sorted), as carbon names it
        try:
            name = canonical_path(name)
        except InvalidTag as exc:
            raise InvalidMetricName(f"tagged series {name!r}: {exc}") from None
    canonical = name
    if ".." in name or name.startswith(SEPARATOR) or name.endswith(SEPARATOR):
        canonical = _DOTS_RE.sub(SEPARATOR, name).strip(SEPARATOR)
    if not canonical:
        raise InvalidMetricName(f"metric name {name!r} is empty once dots are collapsed")
    components = canonical.split(SEPARATOR)
    if len(components) > MAX_COMPONENTS:
        raise InvalidMetricName(
            f"metric name {canonical[:80]!r}... has {len(components)} components; at most {MAX_COMPONENTS} are allowed"
        )
    if len(canonical) > MAX_COMPONENT_LENGTH:  # a shorter name has no longer component (fast path)
        for component in components:
            if len(component) > MAX_COMPONENT_LENGTH:
                raise InvalidMetricName(
                    f"metric name component {component[:40]!r}... is {len(component)} characters long;"
                    f" at most {MAX_COMPONENT_LENGTH} are allowed"
                )
    if END_MARKER in canonical and END_MARKER in components:
        raise InvalidMetricName(f"metric name {canonical!r} uses the reserved component {END_MARKER!r}")
    return canonical


def all_canonical(names: list[str]) -> bool:
    """True when normalize() returns every one of the names unchanged: ASCII names of 1 to
    2 x MAX_COMPONENTS characters (so at most MAX_COMPONENTS components, none too long)
    without a bad character, an empty component, a tag marker or the end marker, checked
    on the names joined by dots with a few C calls for the lot (a receiver's new names,
    ~1 us a name less than normalize() each). False says only: ask normalize()."""
    if not names:
        return True
    joined = SEPARATOR.join(names)
    return (joined.isascii() and 1 <= min(map(len, names)) and max(map(len, names)) <= 2 * MAX_COMPONENTS
            and _ASCII_BAD_RE.search(joined) is None and ".." not in joined and joined[0] != SEPARATOR
            and joined[-1] != SEPARATOR and ";" not in joined and '"}' not in joined and END_MARKER not in joined)


def components(name: str) -> list[str]:
    """The components of an already normalised name."""
    return name.split(SEPARATOR)


def parent(name: str) -> str:
    """The parent directory of a normalised name ('' for a top-level name)."""
    head, _, _ = name.rpartition(SEPARATOR)
    return head


def all_ancestors(names: Iterable[str]) -> set[str]:
    """Every proper ancestor directory of normalised names, each parent path walked once
    (names share their parents: a batch of 10,000 names has about a thousand)."""
    found: set[str] = set()
    for name in set(map(parent, names)):
        while name and name not in found:
            found.add(name)
            name = parent(name)
    return found


def ancestors(name: str) -> list[str]:
    """Every proper ancestor directory of a normalised name, shortest first (`a`, `a.b`)."""
    parts = name.split(SEPARATOR)
    return [SEPARATOR.join(parts[:i]) for i in range(1, len(parts))]
