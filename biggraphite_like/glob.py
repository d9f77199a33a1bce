"""Glob patterns over dotted metric names, with graphite-web StandardFinder semantics.

One engine shared by every store: stores plan indexed queries from the pattern's
structure (`literal_prefix`, `ComponentPattern.literals` / `prefix`, `depth`,
`min_depth`, `exact_names`), then filter candidates with `matches` / `filter`.

Semantics (graphite-web 1.1 `StandardFinder._find_paths` + `expand_braces`):

* Backslashes are removed first (`a\\*` is the glob `a*`, as StandardFinder's
  `pattern.replace('\\\\', '')`). The text is then split on `.`. Leading and inner
  empty components (`.a`, `a..b`, `a.{}.b`) are dropped, as metric names are normalised
  (StandardFinder gives the same result). A trailing empty component (`a.`, `a.{}`,
  `a.{,}`) matches nothing: StandardFinder finds only the bogus name `a.` there, which
  no metric can have. An empty pattern is invalid.
* Each component is brace-expanded like graphite's `expand_braces`: `{a,b}`
  alternatives, nested groups (`{a,{b,c}d}` is `a`, `bd`, `cd`), empty alternatives
  (`a{,b}` is `a`, `ab`). Braces that do not pair up stay literal characters (`{a`,
  `a}`), commas outside a group are literal. Expansion is bounded: more than
  `max_expansion` alternatives in total over all components raises `GlobTooComplex`.
* Each alternative of a component is one of:
  - the globstar `**` (the whole alternative, nothing else): in the middle of a pattern
    it matches zero or more components (`x.**.z` matches `x.z`, `x.a.b.z`), as the last
    component one or more (`a.**` is every descendant of `a`, not `a` itself);
  - an fnmatch pattern when it contains `*`, `?` or `[`: `*`, `?`, `[abc]`, `[a-z]`,
    `[!a]`, an unclosed `[` being literal; case-sensitive; compiled once with
    `fnmatch.translate`, whose atomic groups (Python >= 3.11) rule out catastrophic
    backtracking;
  - the empty string (a component such as `{,b}`): the component may match zero name
    components, as in StandardFinder where `join(dir, '')` is the directory itself;
    in the last component it matches nothing (`a.{,b}` is `a.b` only, not `a`), since
    StandardFinder then answers the bogus `a.`;
  - otherwise a literal, compared by string equality.
  A component matches a name component when any alternative does.
* A name matches when its components can be aligned with the pattern's (dynamic
  programming over positions, never exponential). Metrics and directories are matched
  alike; results are sorted and unique, and bounded by `max_results` (`TooManyResults`).

Limits: a pattern is at most `MAX_PATTERN_LENGTH` characters and `MAX_COMPONENTS`
non-empty components (a `**` counts as one); braces nest at most `MAX_BRACE_DEPTH` deep.
"""
from __future__ import annotations

import fnmatch
import functools
import itertools
import os.path
import re
from typing import Callable, Iterable, Sequence

from biggraphite_like.errors import GlobTooComplex, InvalidGlob, TooManyResults

DEFAULT_MAX_EXPANSION = 10_000
DEFAULT_MAX_RESULTS = 100_000
MAX_PATTERN_LENGTH = 4096
MAX_COMPONENTS = 64
MAX_BRACE_DEPTH = 64
GLOBSTAR = "**"
SEPARATOR = "."

_WILDCARD_CHARS = ("*", "?", "[")
_GLOB_CHARS = ("*", "?", "[", "{")
_WILDCARD_RE = re.compile(r"[*?\[]")
# Concatenations allowed while expanding, per allowed alternative: only patterns whose
# brace products mostly collide (e.g. `{,a}{,aa}{,aaaa}...`) can exhaust it.
_WORK_PER_ALTERNATIVE = 16
FILTER_CHUNK = 1000  # names a regex filters at once (matches past max_results: at most this many more held)
REGEX_MIN_NAMES = 64  # names a filter of a plain `**` between literals compiles its regex for (fewer: by components)


def is_glob(pattern: str) -> bool:
    """True when pattern contains `*`, `?`, `[` or `{`, i.e. is not a plain name
    (graphite's `is_pattern`)."""
    return any(ch in pattern for ch in _GLOB_CHARS)


def _has_wildcard(alternative: str) -> bool:
    """True when an expanded alternative is an fnmatch pattern (StandardFinder's test)."""
    return any(ch in alternative for ch in _WILDCARD_CHARS)


def _shorten(text: str, width: int = 120) -> str:
    """text for an error message, cut to width characters."""
    return text if len(text) <= width else text[: width - 3] + "..."


class _BraceExpander:
    """Expands the braces of the components of one pattern, sharing one budget.

    Braces pair up like parentheses (a `}` closes the nearest open `{`; unpaired ones are
    literal): the set this gives equals graphite's `expand_braces`, which rewrites the
    leftmost innermost `{...}` group until none is left. Sets are built bottom-up and
    deduplicated, and expansion stops as soon as a set exceeds the budget, so an
    exponential pattern costs at most about `max_expansion` string operations.
    """

    def __init__(self, pattern: str, max_expansion: int) -> None:
        self.pattern = pattern
        self.max_expansion = max_expansion
        self.used = 0  # alternatives of the components expanded so far
        self.work_left = max(max_expansion, 1) * _WORK_PER_ALTERNATIVE

    def expand(self, component: str) -> set[str]:
        """The set of alternatives of one component; counts them against the budget."""
        if "{" not in component:
            result = {component}
        else:
            self._text = component
            self._pairs = self._pair_braces(component)
            self._limit = self.max_expansion - self.used
            result = self._sequence(0, len(component), 0)
        self.used += len(result)
        if self.used > self.max_expansion:
            self._too_many()
        return result

    def _too_many(self) -> None:
        raise GlobTooComplex(
            f"pattern {_shorten(self.pattern)!r} expands to more than {self.max_expansion}"
            f" alternatives (limit max_glob_expansion={self.max_expansion})"
        )

    @staticmethod
    def _pair_braces(text: str) -> dict[int, int]:
        """Map the index of each paired `{` to the index of its `}`."""
        pairs: dict[int, int] = {}
        stack: list[int] = []
        for index, char in enumerate(text):
            if char == "{":
                stack.append(index)
            elif char == "}" and stack:
                pairs[stack.pop()] = index
        return pairs

    def _sequence(self, start: int, end: int, depth: int) -> set[str]:
        """Alternatives of text[start:end]: literal runs and paired groups, concatenated."""
        results = {""}
        literal: list[str] = []
        index = start
        text, pairs = self._text, self._pairs
        while index < end:
            close = pairs.get(index)
            if close is None:
                literal.append(text[index])
                index += 1
                continue
            group = self._group(index + 1, close, depth + 1)
            head = "".join(literal)
            literal = []
            results = self._product(results, head, group)
            index = close + 1
        tail = "".join(literal)
        return {r + tail for r in results} if tail else results

    def _group(self, start: int, end: int, depth: int) -> set[str]:
        """Alternatives of the inside of a `{...}` group: the union of its comma-separated
        parts (commas inside nested groups belong to those groups)."""
        if depth > MAX_BRACE_DEPTH:
            raise GlobTooComplex(
                f"pattern {_shorten(self.pattern)!r} nests braces more than {MAX_BRACE_DEPTH}"
                f" deep (limit {MAX_BRACE_DEPTH})"
            )
        text, pairs = self._text, self._pairs
        union: set[str] = set()
        part_start = index = start
        while True:
            if index == end or text[index] == ",":
                union |= self._sequence(part_start, index, depth)
                if len(union) > self._limit:
                    self._too_many()
                if index == end:
                    return union
                part_start = index + 1
                index += 1
            elif index in pairs:
                index = pairs[index] + 1
            else:
                index += 1

    def _product(self, results: set[str], head: str, group: set[str]) -> set[str]:
        """{r + head + g}, aborting as soon as it grows past the limit."""
        self.work_left -= len(results) * len(group)
        if self.work_left < 0:
            raise GlobTooComplex(
                f"pattern {_shorten(self.pattern)!r} is too complex to expand: its brace"
                f" groups combine into more than {self.max_expansion * _WORK_PER_ALTERNATIVE}"
                f" strings (limit max_glob_expansion={self.max_expansion})"
            )
        product: set[str] = set()
        limit = self._limit
        for left in results:
            left += head
            for right in group:
                product.add(left + right)
            if len(product) > limit:
                self._too_many()
        return product


def _literal_head(alternative: str) -> str:
    """The part of an alternative before its first wildcard character."""
    found = _WILDCARD_RE.search(alternative)
    return alternative if found is None else alternative[: found.start()]


class ComponentPattern:
    """One dot-separated component of a pattern, after brace expansion.

    Attributes (read-only):
      alternatives: sorted, deduplicated expanded alternatives.
      is_globstar: True when `**` is among the alternatives.
      optional: True when the empty string is among them (`{,b}`): the component may
        then match zero name components.
      literals: the exact strings the component can match when every alternative is a
        plain literal (no wildcard, no globstar, not optional), else None. Stores use it
        for `component = ?` / `IN (...)` lookups.
      prefix: longest literal prefix common to every alternative that every matching
        component starts with ('' when none, or with a globstar or empty alternative),
        e.g. 'cpu' for `cpu{0,1}*`. Stores use it for `LIKE 'prefix%'`.
    """

    __slots__ = (
        "alternatives", "is_globstar", "optional", "literals", "prefix",
        "has_single", "_literal_set", "_regex_match", "matcher",
    )

    def __init__(self, alternatives: Iterable[str]) -> None:
        alts = tuple(sorted(set(alternatives)))
        if not alts:
            raise InvalidGlob("a glob component needs at least one alternative")
        self.alternatives: tuple[str, ...] = alts
        self.is_globstar: bool = GLOBSTAR in alts
        self.optional: bool = "" in alts
        singles = [a for a in alts if a and a != GLOBSTAR]
        wildcards = [a for a in singles if _has_wildcard(a)]
        literal_set = frozenset(a for a in singles if not _has_wildcard(a))
        self._literal_set = literal_set
        plain = not wildcards and not self.is_globstar and not self.optional
        self.literals: frozenset[str] | None = literal_set if plain else None
        #: True when some alternative matches exactly one name component.
        self.has_single: bool = bool(singles)
        if self.is_globstar or self.optional:
            self.prefix: str = ""
        else:
            self.prefix = os.path.commonprefix([_literal_head(a) for a in singles])
        if len(wildcards) == 1 and wildcards[0].endswith("*") and not _has_wildcard(wildcards[0][:-1]):
            # `host00*`: a prefix test, no regex compiled (patterns asked once each mostly differ here)
            self._regex_match: Callable[[str], object] | None = _prefix_match(wildcards[0][:-1])
        elif wildcards:
            # One regex for all wildcard alternatives; each translation ends in \Z.
            regex = re.compile("|".join(fnmatch.translate(w) for w in wildcards))
            self._regex_match = regex.match
        else:
            self._regex_match = None
        #: the fastest callable equivalent to `matches`.
        self.matcher: Callable[[str], bool] = (
            literal_set.__contains__ if self._regex_match is None else self.matches
        )

    def matches(self, component: str) -> bool:
        """True when one name component matches a non-globstar, non-empty alternative
        (the globstar and the empty alternative are handled by GlobPattern)."""
        if component in self._literal_set:
            return True
        match = self._regex_match
        return match is not None and match(component) is not None

    def __repr__(self) -> str:
        return f"ComponentPattern({'|'.join(self.alternatives)!r})"


def _prefix_match(prefix: str) -> Callable[[str], object]:
    """What fnmatch's regex of `prefix*` answers (a match or None) for one component."""
    def match(component: str) -> object:
        return True if component.startswith(prefix) else None
    return match


@functools.lru_cache(maxsize=4096)
def _component(alternatives: frozenset[str]) -> ComponentPattern:
    """The ComponentPattern of these alternatives, shared (it is never changed): patterns
    asked one after another mostly repeat their components (`tree`, `dc3`, `*`, `cpu1`)."""
    return ComponentPattern(alternatives)


class GlobPattern:
    """A compiled glob over dotted names (see the module docstring for the semantics).

    Attributes (read-only):
      pattern: the original text.
      components: the ComponentPattern of each non-empty component.
      has_globstar: True when some component contains `**`.
      depth: the number of components of every match when it is fixed (no globstar, no
        optional component), else None.
      min_depth: the smallest number of components a match can have.
    """

    def __init__(self, pattern: str, max_expansion: int = DEFAULT_MAX_EXPANSION) -> None:
        if not isinstance(pattern, str):
            raise InvalidGlob(f"glob pattern must be a string, got {type(pattern).__name__}")
        if len(pattern) > MAX_PATTERN_LENGTH:
            raise InvalidGlob(
                f"glob pattern {_shorten(pattern)!r} is {len(pattern)} characters long"
                f" (limit {MAX_PATTERN_LENGTH})"
            )
        self.pattern = pattern
        self.max_expansion = max_expansion
        parts = [part for part in pattern.replace("\\", "").split(SEPARATOR) if part]
        if not parts:
            raise InvalidGlob(f"glob pattern {pattern!r} is empty")
        if len(parts) > MAX_COMPONENTS:
            raise InvalidGlob(
                f"glob pattern {_shorten(pattern)!r} has {len(parts)} components"
                f" (limit {MAX_COMPONENTS})"
            )
        expander = _BraceExpander(pattern, max_expansion)
        components = []
        alternatives: set[str] = set()
        for part in parts:
            alternatives = expander.expand(part)
            if alternatives == {""}:  # `{}` or `{,}`: an empty component, dropped
                continue
            components.append(_component(frozenset(alternatives)))
        if not components:
            raise InvalidGlob(f"glob pattern {pattern!r} is empty once braces are expanded")
        #: True when the pattern can match no name whatever is stored (a trailing empty
        #: component, see the module docstring); stores need not be asked.
        self.matches_nothing: bool = pattern.replace("\\", "").endswith(SEPARATOR) or alternatives == {""}
        if components[-1].optional:  # a trailing empty alternative matches nothing
            components[-1] = ComponentPattern(a for a in components[-1].alternatives if a)
        self.components: tuple[ComponentPattern, ...] = tuple(components)
        self.has_globstar: bool = any(c.is_globstar for c in components)
        last = len(components) - 1
        # A globstar matches zero components except in last position (one or more).
        self._zero_width = tuple(
            c.optional or (c.is_globstar and i != last) for i, c in enumerate(components)
        )
        fixed = not any(c.is_globstar or c.optional for c in components)
        self.depth: int | None = len(components) if fixed else None
        self.min_depth: int = sum(not zero for zero in self._zero_width)
        self._matchers = tuple(c.matcher for c in components)
        self._around_globstar = self._compute_around_globstar()
        self._regex: Callable[[str], object] | None = None  # _around_regex, once compiled
        self._literal_prefix = self._compute_literal_prefix()
        self._head = SEPARATOR.join(self._literal_prefix)

    def _compute_around_globstar(self) -> tuple[tuple, tuple, int] | None:
        """(matchers before, matchers after, fewest name components) when the pattern's one
        variable component is a plain `**` (`a.**.b`, `a.**`): a name then matches when its
        first and last components match those around it, with enough components between
        (zero or more in the middle, one or more last), no alignment to search. Else None."""
        variable = [i for i, c in enumerate(self.components) if c.is_globstar or c.optional]
        if len(variable) != 1 or self.components[variable[0]].alternatives != (GLOBSTAR,):
            return None
        index = variable[0]
        return self._matchers[:index], self._matchers[index + 1:], self.min_depth

    def _regex_applies(self) -> bool:
        """Whether the pattern is a plain `**` between components that are all literals."""
        return self._around_globstar is not None and all(
            c.literals is not None for c in self.components if not c.is_globstar)

    @property
    def _around_regex(self) -> Callable[[str], object] | None:
        """For a plain `**` between components that are all literals (`a.**.b`,
        `{a,b}.x.**`): one regex over the whole name saying what _match_around_globstar
        says (names are valid: no empty component), without splitting it. Else None.
        Compiled when first asked for (filter: only for REGEX_MIN_NAMES names or more: a
        pattern asked once mostly differs from the last, and its compile would cost more
        than matching a few names component by component)."""
        if self._regex is None and self._regex_applies():
            self._regex = self._compute_around_regex()
        return self._regex

    def _compute_around_regex(self) -> Callable[[str], object]:
        index = next(i for i, c in enumerate(self.components) if c.is_globstar)

        def joined(components: Sequence[ComponentPattern]) -> str:
            return r"\.".join("(?:" + "|".join(map(re.escape, sorted(c.literals))) + ")" for c in components)

        before, after = joined(self.components[:index]), joined(self.components[index + 1:])
        if index == len(self.components) - 1:  # last: one or more components
            body = before + r"(?:\.[^.]+)+" if before else r"[^.]+(?:\.[^.]+)*"
        else:  # zero or more components between
            body = (before + r"\." if before else "") + r"(?:[^.]+\.)*" + after
        return re.compile(body + r"\Z").match

    def _compute_literal_prefix(self) -> tuple[str, ...]:
        prefix = []
        for component in self.components:
            if component.literals is None or len(component.literals) != 1:
                break
            prefix.extend(component.literals)
        return tuple(prefix)

    def literal_prefix(self) -> tuple[str, ...]:
        """The leading components that are each one literal (a store's fixed key prefix)."""
        return self._literal_prefix

    def matches(self, name: str) -> bool:
        """True when the dotted name (already valid and normalised) matches."""
        if self._regex is not None and not self.matches_nothing:
            return self._regex(name) is not None
        return self.matches_components(name.split(SEPARATOR))

    def matches_components(self, components: Sequence[str]) -> bool:
        """True when the name made of these components matches."""
        if self.matches_nothing:
            return False
        if self.depth is not None:
            if len(components) != self.depth:
                return False
            for matcher, component in zip(self._matchers, components):
                if not matcher(component):
                    return False
            return True
        if self._around_globstar is not None:
            return self._match_around_globstar(components)
        return self._match_variable(components)

    def _match_around_globstar(self, parts: Sequence[str]) -> bool:
        before, after, fewest = self._around_globstar
        if len(parts) < fewest:
            return False
        for matcher, component in zip(before, parts):
            if not matcher(component):
                return False
        if after:
            for matcher, component in zip(after, parts[len(parts) - len(after):]):
                if not matcher(component):
                    return False
        return True

    def _match_variable(self, parts: Sequence[str]) -> bool:
        """Dynamic programming over positions for globstar / optional components.

        `reach` is a bitset: bit j set when the pattern components seen so far can match
        exactly the first j name components. O(pattern components x name components).
        """
        count = len(parts)
        if count < self.min_depth:
            return False
        all_positions = (1 << (count + 1)) - 1
        reach = 1
        for index, component in enumerate(self.components):
            new = reach if self._zero_width[index] else 0
            if component.has_single:
                matcher = self._matchers[index]
                for position in range(count):
                    if reach >> position & 1 and matcher(parts[position]):
                        new |= 1 << (position + 1)
            if component.is_globstar:
                # one or more components from the earliest reachable position on
                lowest = (reach & -reach).bit_length() - 1
                new |= all_positions & ~((1 << (lowest + 1)) - 1)
            reach = new
            if not reach:
                return False
        return bool(reach >> count & 1)

    def filter(self, names: Iterable[str], max_results: int = DEFAULT_MAX_RESULTS) -> list[str]:
        """The sorted unique names that match; raises TooManyResults as soon as more
        than max_results distinct names match (a regex filter: within FILTER_CHUNK names)."""
        found: set[str] = set()
        by_regex = False
        if self._regex_applies() and not self.matches_nothing:
            names = iter(names)
            first = list(itertools.islice(names, REGEX_MIN_NAMES))
            by_regex = len(first) == REGEX_MIN_NAMES  # else a few names, matched without compiling the regex
            names = itertools.chain(first, names) if by_regex else first
        if by_regex:
            # one regex a name, run by C loops FILTER_CHUNK names at a time
            while chunk := list(itertools.islice(names, FILTER_CHUNK)):
                found.update(filter(self._around_regex, chunk))
                if len(found) > max_results:
                    self._too_many(max_results)
            return sorted(found)
        head = self._head
        matches = self.matches
        for name in names:
            if head and not name.startswith(head):
                continue
            if name in found or not matches(name):
                continue
            found.add(name)
            if len(found) > max_results:
                self._too_many(max_results)
        return sorted(found)

    def _too_many(self, max_results: int) -> None:
        raise TooManyResults(
            f"glob {_shorten(self.pattern)!r} matches more than {max_results} names"
            f" (limit max_results={max_results}); narrow the pattern"
        )

    def exact_names(self, limit: int = 1000) -> list[str] | None:
        """The sorted full names the pattern can match, when it has no wildcard and no
        globstar (only literals and empty alternatives) and at most `limit` of them; else
        None. Stores look these up by primary key instead of scanning."""
        if self.matches_nothing:
            return []
        if self.has_globstar:
            return None
        choices: list[list[str | None]] = []
        total = 1
        for component in self.components:
            if component._regex_match is not None:
                return None
            options: list[str | None] = sorted(component._literal_set)
            if component.optional:
                options.append(None)  # the component matches zero name components
            total *= len(options)
            if total > limit:
                return None
            choices.append(options)
        names = set()
        for combination in itertools.product(*choices):
            name = SEPARATOR.join(part for part in combination if part is not None)
            if name:
                names.add(name)
        return sorted(names)

    def __repr__(self) -> str:
        return f"GlobPattern({self.pattern!r})"

    def __str__(self) -> str:
        return self.pattern
