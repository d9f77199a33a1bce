"""graphite's TagDB operations over a store's TagIndex, with the query planner.

Planner: among the terms that require a value, `=` terms are one count lookup each, `=~`
terms with a literal prefix are a range over that tag's values, other value-requiring
terms (`=~` without prefix, `!=` with an empty spec, `!=~`) read every value of their tag.
The cheapest class present drives (`=`, then prefix, then the rest); within it, the term
whose matching values cover the fewest series; sizing stops at a term matching at most
SMALL_DRIVER series (the index sizes `=` terms: index.sized_postings, which also reads a
small driver's paths; SQLite sizes them all in one statement). Its postings give the
candidates: an `=` driver's covering more are
intersected with the other sized `=` terms' postings (index.postings_of_all); the terms
the postings did not answer then filter them on the tags of their path (a few candidates
cost less to filter than another posting list costs to read). A query with an `=` term
never reads the values of another tag, and no query scans every series.

Work is bounded: a driving term may cover at most `max_series` series (setting
BG_MAX_TAG_SERIES, error TooManyResults) and a tag's values read for one term at most
`max_values` (BG_MAX_TAG_VALUES).
"""
from __future__ import annotations

import re
import time
from typing import Callable, Iterable, Sequence

from biggraphite_like.errors import InvalidTag, TooManyResults
from biggraphite_like.tags.expressions import TagQuery, TagTerm, compile_regex, regex_literal_prefix
from biggraphite_like.tags.index import TagIndex
from biggraphite_like.tags.series import (NAME_TAG, TaggedSeries, canonical_path, canonical_paths, tag_of_path,
                                          tags_of_path)

DEFAULT_MAX_TAG_SERIES = 1_000_000
DEFAULT_MAX_TAG_VALUES = 1_000_000
DEFAULT_AUTOCOMPLETE_LIMIT = 100  # graphite's TAGDB_AUTOCOMPLETE_LIMIT
_PAGE = 1000
SMALL_DRIVER = 32  # a driving term matching at most this many series is not intersected: its paths are filtered


class TagQueries:
    """Tagged series of one store: graphite's TagDB contract, planned queries."""

    def __init__(self, index: TagIndex, max_series: int = DEFAULT_MAX_TAG_SERIES,
                 max_values: int = DEFAULT_MAX_TAG_VALUES):
        self.index = index
        self.max_series = max_series
        self.max_values = max_values

    # -- writes ------------------------------------------------------------------------
    def tag_series(self, names: Sequence[str], now: int | None = None) -> list[str]:
        """Index series names (any tagged form); their canonical paths, in order. InvalidTag
        for a bad name: nothing of the call is indexed then (use tag_valid for batches)."""
        paths = canonical_paths(names)
        self._add(paths, now)
        return paths

    def tag_valid(self, names: Iterable[str], now: int | None = None) -> tuple[list[str], dict[str, str]]:
        """Index the valid names of a batch: (canonical paths, {refused name: reason})."""
        names = names if isinstance(names, list) else list(names)
        refused: dict[str, str] = {}
        try:  # every name valid, the rule: one pass over the batch
            paths = canonical_paths(names)
        except InvalidTag:
            paths = []
            for name in names:
                try:
                    paths.append(canonical_path(name))
                except InvalidTag as exc:
                    refused[name] = str(exc)
        self._add(paths, now)
        return paths, refused

    def _add(self, paths: Sequence[str], now: int | None) -> None:
        if paths:
            self.index.add_series(paths, int(time.time()) if now is None else int(now))

    def del_series(self, names: Sequence[str]) -> int:
        """Remove series (any tagged form) and their postings; how many existed."""
        return self.index.remove_series(sorted({TaggedSeries.parse(n).path for n in names}))

    # -- reads -------------------------------------------------------------------------
    def get_series(self, name: str) -> TaggedSeries | None:
        """The indexed series of that name (any tagged form), or None."""
        parsed = TaggedSeries.parse(name)
        if parsed.path not in self.index.series_times([parsed.path]):
            return None
        return TaggedSeries(parsed.tags["name"], tags_of_path(parsed.path))

    def find_series(self, expressions: Sequence[str]) -> list[str]:
        """Sorted canonical paths of the series matching every expression."""
        return self._find(TagQuery.parse(expressions))

    def _find(self, query: TagQuery) -> list[str]:
        term, values, also, paths = self._plan(query)
        answered: tuple[TagTerm, ...] = (term,)  # the postings of the values the driving term matches
        if paths is None:
            if not values:
                return []
            if also:  # several = terms: intersect their postings, the rarest driving
                paths = self.index.postings_of_all([(term.tag, term.spec), *((t.tag, t.spec) for t in also)])
                if self.index.intersects:
                    answered = (term, *also)
            else:
                paths = self.index.postings(term.tag, values)
        tests = [path_test(t) for t in query.terms if t not in answered]
        if not tests:
            return sorted(set(paths))
        if len(tests) == 1:
            return sorted(filter(tests[0], set(paths)))
        return sorted(p for p in set(paths) if all(test(p) for test in tests))

    def _plan(self, query: TagQuery) -> tuple[TagTerm, list[str], list[TagTerm], list[str] | None]:
        """The driving term, its matching values, the other sized = terms by increasing
        count whose postings the driver's are intersected with (when it is an = term
        covering more than SMALL_DRIVER series) and, when the index read them while
        sizing, the driver's paths (see module docstring)."""
        drivers = [t for t in query.terms if t.requires_value]
        equal = [t for t in drivers if t.operator == "="]
        if equal:
            return self._plan_equal(query, equal)
        candidates = [t for t in drivers if t.operator == "=~" and t.literal_prefix] or drivers
        best: tuple[int, TagTerm, list[str]] | None = None
        for term in candidates:
            matched = [(v, c) for v, c in self._values(term.tag, term.literal_prefix, term.text) if term.matches(v)]
            count, values = sum(c for _, c in matched), [v for v, _ in matched]
            if best is None or count < best[0]:
                best = (count, term, values)
            if count <= min(SMALL_DRIVER, self.max_series):  # few enough to filter on their paths: size no other
                break
        assert best is not None
        count, term, values = best
        self._check_size(query, term, count)
        return term, values, [], None

    def _plan_equal(self, query: TagQuery, equal: list[TagTerm]) -> tuple[TagTerm, list[str], list[TagTerm],
                                                                          list[str] | None]:
        """_plan when = terms drive: the index sizes them (index.sized_postings), with the
        driver's paths when it covers at most SMALL_DRIVER series."""
        sized = self.index.sized_postings([(t.tag, t.spec) for t in equal], min(SMALL_DRIVER, self.max_series))
        term, count = equal[sized.driver], sized.counts[sized.driver] or 0
        self._check_size(query, term, count)
        if sized.paths is not None or not count:
            return term, [term.spec] if count else [], [], sized.paths
        others = sorted(((c, k) for k, c in enumerate(sized.counts) if c is not None and k != sized.driver))
        return term, [term.spec], [equal[k] for _, k in others], None

    def _check_size(self, query: TagQuery, term: TagTerm, count: int) -> None:
        if count > self.max_series:
            raise TooManyResults(
                f"tag query {[t.text for t in query.terms]!r}: its most selective term {term.text!r} matches"
                f" {count} series, more than the limit {self.max_series} (setting BG_MAX_TAG_SERIES):"
                " add a more selective expression"
            )

    def _values(self, tag: str, prefix: str, what: str, page_size: int = _PAGE) -> Iterable[tuple[str, int]]:
        """Every (value, count) of tag starting with prefix, at most max_values."""
        after, seen = None, 0
        while True:
            page = self.index.values(tag, prefix, after, page_size)
            seen += len(page)
            if seen > self.max_values:
                raise TooManyResults(
                    f"tag expression {what!r} reads more than {self.max_values} values of tag {tag!r}"
                    " (setting BG_MAX_TAG_VALUES): give the regex a literal prefix or add an = expression"
                )
            yield from page
            if len(page) < page_size:
                return
            after = page[-1][0]

    def list_tags(self, tag_filter: str | None = None, limit: int | None = None) -> list[str]:
        """Sorted tags (graphite's list_tags), filtered by a regex as graphite's SQL does."""
        regex, prefix = _filter(tag_filter, "tag filter")
        result: list[str] = []
        after = None
        while True:
            page = self.index.tags(prefix, after, _PAGE)
            for tag in page:
                if regex is None or regex.search(tag):
                    result.append(tag)
                    if limit and len(result) >= limit:
                        return result
            if len(page) < _PAGE:
                return result
            after = page[-1]

    def list_values(self, tag: str, value_filter: str | None = None, limit: int | None = None) -> list[tuple[str, int]]:
        """Sorted (value, count) of a tag (graphite's list_values), filtered by a regex."""
        regex, prefix = _filter(value_filter, "value filter")
        result: list[tuple[str, int]] = []
        page_size = min(limit, _PAGE) if limit and regex is None else _PAGE  # a plain autocomplete: one read
        for value, count in self._values(tag, prefix, f"{tag} values", page_size):
            if regex is None or regex.search(value):
                result.append((value, count))
                if limit and len(result) >= limit:
                    break
        return result

    def auto_complete_tags(self, expressions: Sequence[str], prefix: str | None = None,
                           limit: int = DEFAULT_AUTOCOMPLETE_LIMIT) -> list[str]:
        """Tags of the series matching expressions (all tags without), as graphite's base TagDB."""
        limit = int(limit)
        if not expressions and limit > 0:  # graphite filters with ^(prefix): one range read
            return self.index.tags(prefix or "", None, limit)
        if not expressions:  # no limit (graphite's 0)
            return self.list_tags("^(" + re.escape(prefix) + ")" if prefix else None, limit)
        query = TagQuery.parse(expressions)
        searched = {t.tag for t in query.terms}
        found: set[str] = set()
        for path in self._find(query):
            found.update(t for t in tags_of_path(path) if t not in searched and (not prefix or t.startswith(prefix)))
        return sorted(found)[:limit]

    def auto_complete_values(self, expressions: Sequence[str], tag: str, prefix: str | None = None,
                             limit: int = DEFAULT_AUTOCOMPLETE_LIMIT) -> list[str]:
        """Values of tag among the series matching expressions (all values without)."""
        limit = int(limit)
        if not expressions and limit > 0:
            return [v for v, _ in self.index.values(tag, prefix or "", None, limit)]
        if not expressions:
            return [v for v, _ in self.list_values(tag, "^(" + re.escape(prefix) + ")" if prefix else None, limit)]
        found: set[str] = set()
        for path in self.find_series(list(expressions) + [tag + "!="]):
            value = tag_of_path(path, tag)
            if not prefix or value.startswith(prefix):
                found.add(value)
        return sorted(found)[:limit]


def path_test(term: TagTerm) -> Callable[[str], bool]:
    """Whether a canonical path satisfies term: for `tag=value` (a value, a tag other than
    the name) whether the path holds the segment `;tag=value` (values hold no ';', tags no
    '='), else term.matches on the tag's value in the path."""
    if term.operator == "=" and term.spec and term.tag != NAME_TAG:
        inner, last = f";{term.tag}={term.spec};", f";{term.tag}={term.spec}"
        return lambda path: inner in path or path.endswith(last)
    tag, matches = term.tag, term.matches
    return lambda path: matches(tag_of_path(path, tag))


def _filter(pattern: str | None, what: str) -> tuple[re.Pattern | None, str]:
    """A tag or value filter as graphite's SQL applies it (anchored, REGEXP = search) and
    the literal prefix that bounds the range read."""
    if not pattern:
        return None, ""
    regex = compile_regex(pattern, what)
    return regex, regex_literal_prefix(regex)


__all__ = ["TagQueries", "DEFAULT_MAX_TAG_SERIES", "DEFAULT_MAX_TAG_VALUES", "path_test"]
