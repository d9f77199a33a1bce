"""The SQLite store's glob planner: a walk of the name tree (name_tree), as StandardFinder
walks directories, with the inverted index of components for `**` and optional components;
the glob engine then filters the candidates (every match is among them). A find's json
intervals come with the metric rows walked (glob_node_spans).

- Fixed-depth patterns: each component but the last expands the directories matched so far,
  level by level: a literal is one (parent, component) index lookup a directory, a literal
  prefix (`host00*`) looks up the interned strings of that range (when they are few), any
  other wildcard lists the children and matches them. The last component does the same
  in `metrics` (or `directories`). Every component matched on the way, the names found
  are the matches: sorted, not filtered again.
- A pattern with `**` or an optional component: the fixed components before the first of
  them are walked as above; then the fixed components after the last of them (the trail)
  may start from the inverted index (`metrics.leaf`, `directories.component`): the trailing
  literal with the fewest rows, when they are few (each counted up to the fewest so far;
  a directory literal's count and walk kept for the other table); else the subtree under
  the walked directories is listed, when it is small; else the inverted index anyway; else
  every name. Under one plain `**` followed by at most one component (`a.b*.**`,
  `a.**.c`), the subtree's children (matching that component) are the matches: sorted,
  not filtered (on 1,000,000 names, `tree.dc3.host004*.**`'s glob_nodes: 500 -> 340 us).
"""
from __future__ import annotations

import functools
import itertools
import json
from typing import Iterator, Sequence

from biggraphite_like.errors import BglError
from biggraphite_like.glob import GLOBSTAR, ComponentPattern, GlobPattern
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.stores.sqlite.connection import through_shared_reader
from biggraphite_like.stores.sqlite.name_tree import ROOT, join

_PROBE_LIMIT = 1000  # rows of the inverted index read to decide whether a trailing literal starts the walk
_MAX_SUBTREE = 20_000  # directories listed under `**` before the inverted index takes over
_MAX_RANGE_IDS = 1000  # interned strings of a literal prefix looked up one by one (else: list the children)
_MAX_PROBES = 50_000  # (parent, component) lookups of one step (else: list the children)
_PAGE = 20_000  # keys per json_each() list, rows per page of a full scan
# the literal strings of a component are looked up one at a time (the parents' keys as plain
# integers: half the time of (parent, string) pairs) when there is one, or up to _PER_STRING
# under _PAGE_MIN directories or more; else one parent at a time (the strings' ids as plain
# integers) under up to _PER_STRING directories; else in pairs (one query)
_PER_STRING = 4
_PAGE_MIN = 1000
_SPAN_GROUP = 100  # metric_spans looks names up per last component when they have this many a component

RELEASE_NAMES = 50_000  # a glob answering this many names gives back the file pages its walk mapped
RELEASE_ROWS = _PAGE  # a walk statement reading this many rows (a page of a scan) gives back its pages
_CARRIED = ", t.metadata, t.updated_on"  # a metric row's columns a find's json intervals need, last
_EXACT = "exact "  # + table: a key of `walked` saying the table's candidates are the matches

Nodes = dict[int, str]  # directory key -> path


def _column(table: str) -> str:
    return "leaf" if table == "metrics" else "component"


def _prefix_bounds(prefix: str) -> tuple[str, str]:
    """[low, high) of the strings starting with prefix."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


@functools.lru_cache(maxsize=1024)  # a store holds a handful of distinct metadatas
def _duration(retention: str | None, aggregator: str | None, xfilesfactor: float | None) -> int | None:
    """Seconds a metric's retention covers, None when its metadata cannot be read (as
    stored_metric reads it)."""
    if retention is None or aggregator is None or xfilesfactor is None:
        return None
    try:
        return MetricMetadata.create(retention, aggregator, xfilesfactor).retention.duration
    except (BglError, ValueError, TypeError):
        return None


def _variable(component: ComponentPattern) -> bool:
    return component.is_globstar or component.optional


def _walked_exactly(pattern: GlobPattern) -> bool:
    """Whether the walk's candidates are the matches: a fixed-depth pattern (not only
    literals) is walked component by component, each matched by its ComponentPattern
    (one row a parent and component: no name twice)."""
    return not pattern.matches_nothing and not any(map(_variable, pattern.components)) \
        and any(c.literals is None for c in pattern.components)


def _matches(pattern: GlobPattern, candidates: Iterator[str], max_results: int, walked: dict | None = None,
             table: str = "") -> list[str]:
    """The sorted matches among the candidates (the glob engine's filter, or only sorted
    when the walk matched them already: a fixed-depth pattern, or `_candidates` said so in
    `walked` for `table`); TooManyResults past max_results."""
    if not _walked_exactly(pattern):
        first = next(candidates, None)  # the walk runs up to its first candidate: it knows its way
        if first is None:
            return []
        candidates = itertools.chain((first,), candidates)
        if walked is None or not walked.get(_EXACT + table):
            return pattern.filter(candidates, max_results)
    names = list(itertools.islice(candidates, max_results + 1))
    if len(names) > max_results:
        pattern.filter(names, max_results)  # raises TooManyResults as the engine words it
    names.sort()
    return names


def _globstar_around_one(pattern: GlobPattern, trail: tuple[ComponentPattern, ...]) -> bool:
    """Whether the pattern is fixed components, one plain `**`, then at most one component
    (`a.b*.**`, `a.**.c*`): every child (matching that component) of the directories the
    fixed components match, or of a directory under them, is a match, once."""
    return len(trail) <= 1 and sum(map(_variable, pattern.components)) == 1 \
        and pattern.components[len(pattern.components) - len(trail) - 1].alternatives == (GLOBSTAR,)


class GlobMixin:
    """The store's `_glob`, behind Store's glob_metrics and glob_directories."""

    _duration_map: dict[int, int | None] = {}  # metadata id -> duration (_read_durations), replaced whole

    @through_shared_reader
    def glob_nodes(self, pattern: GlobPattern, max_results: int) -> tuple[list[str], list[str]]:
        """Store.glob_nodes: the directories walked (and the subtree listed) for the metrics
        are those of the directories' glob: done once for both."""
        self._check_schema()
        with self._errors(f"glob {pattern.pattern!r}"):
            self._check_directories()
            walked: dict = {}
            answer = (_matches(pattern, self._candidates("metrics", pattern, walked), max_results, walked, "metrics"),
                      _matches(pattern, self._candidates("directories", pattern, walked), max_results, walked,
                               "directories"))
        self._after_walk(answer[0], answer[1])
        return answer

    def _after_walk(self, metrics: Sequence[str], directories: Sequence[str]) -> None:
        """A walk of RELEASE_NAMES names or more read much of the name tree through the
        shared reader's mmap: its pages leave the RSS (release_mapped_pages) before the
        caller builds the answer's text, so the two do not add up in the process's peak.
        Smaller walks keep theirs mapped, once per process (shared_reads), for the next."""
        if len(metrics) + len(directories) >= RELEASE_NAMES:
            self.release_mapped_pages()

    def _after_rows(self, found: list[tuple]) -> None:
        """The same after one statement of a walk that read RELEASE_ROWS rows or more (a
        full page of the inverted index's rows of a trailing literal, or of a full scan):
        their pages, and those earlier finds left mapped, leave before their names are
        built, so a walk of 100,000 rows never holds the whole table's pages with them."""
        if len(found) >= RELEASE_ROWS:
            self.release_mapped_pages()

    @through_shared_reader
    def glob_node_spans(self, pattern: GlobPattern, max_results: int
                        ) -> tuple[list[str], list[str], dict[str, tuple[int, int]] | None]:
        """Store.glob_node_spans: the metrics' rows walked carry their metadata id and last
        write, so their spans need no second lookup (names the walk did not read, as an
        exact pattern's: metric_spans' lookup)."""
        self._check_schema()
        with self._errors(f"glob {pattern.pattern!r}"):
            self._check_directories()
            walked: dict = {}
            rows: dict[str, tuple] = {}
            metrics = _matches(pattern, self._candidates("metrics", pattern, walked, rows), max_results, walked, "metrics")
            directories = _matches(pattern, self._candidates("directories", pattern, walked), max_results, walked,
                                   "directories")
            spans, unread = {}, []
            durations, reread = self._duration_map, False
            for name in metrics:
                row = rows.get(name)
                if row is None:  # not read by the walk (an exact pattern's names)
                    unread.append(name)
                    continue
                if row[-2] not in durations and not reread:
                    durations, reread = self._read_durations(), True
                duration = durations.get(row[-2])
                if duration is None:  # unreadable: metric_spans' way (get_metrics logs it)
                    unread.append(name)
                else:
                    spans[name] = (duration, row[-1] or 0)
        if unread:
            spans.update(self.metric_spans(unread))
        self._after_walk(metrics, directories)
        return metrics, directories, spans

    def _read_durations(self) -> dict[int, int | None]:
        """Seconds each metadata row's retention covers (None: unreadable), kept: rows are
        never changed nor deleted, so the map is read again only for an id it lacks."""
        durations = {id_: _duration(retention, aggregator, xfilesfactor) for id_, retention, aggregator, xfilesfactor
                     in self._conn.execute("SELECT id, retention, aggregator, xfilesfactor FROM metadatas")}
        self._duration_map = durations
        return durations

    @through_shared_reader
    def _glob(self, table: str, pattern: GlobPattern, max_results: int) -> list[str]:
        self._check_schema()
        with self._errors(f"glob {pattern.pattern!r}"):
            self._check_directories()
            walked: dict = {}
            return _matches(pattern, self._candidates(table, pattern, walked), max_results, walked, table)

    @through_shared_reader
    def metric_spans(self, names: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Store.metric_spans from the rows alone (no Metric, no key kept: a find's leaves are
        read once); a row whose retention cannot be read goes through get_metrics, which
        logs and leaves it out."""
        self._check_schema()
        with self._errors("read metrics"):
            self._check_directories()
            rows = self._span_rows(list(dict.fromkeys(names)))
        spans, unreadable = {}, []
        for name, (retention, aggregator, xfilesfactor, updated_on) in rows.items():
            duration = _duration(retention, aggregator, xfilesfactor)
            if duration is None:
                unreadable.append(name)
            else:
                spans[name] = (duration, updated_on or 0)
        if unreadable:
            spans.update(super().metric_spans(unreadable))
        return spans

    def _span_rows(self, names: list[str]) -> dict[str, tuple]:
        """(retention, aggregator, xfilesfactor, updated_on) of the names that are metrics.
        Names sharing a few last components (`a.*.cpu1`: one) are looked up per component,
        their parents' keys as plain integers (half the time of (parent, leaf) pairs);
        others as get_metrics looks them up."""
        parts = [name.rpartition(".") for name in names]
        last = {part[2] for part in parts}
        if len(last) * _SPAN_GROUP > len(names):
            return {name: (*row[1:4], row[5]) for name, row in self._metric_rows(names).items()}
        conn = self._conn
        parents = self._tree.keys(conn, self._strings, {part[0] for part in parts})
        ids = self._strings.lookup(conn, last)
        by_leaf: dict[int, dict[int, str]] = {}
        for name, (parent, _, leaf) in zip(names, parts):
            if parent in parents and leaf in ids:
                by_leaf.setdefault(ids[leaf], {})[parents[parent]] = name
        metadatas = {row[0]: row[1:] for row in conn.execute("SELECT id, retention, aggregator, xfilesfactor FROM metadatas")}
        found: dict[str, tuple] = {}
        for leaf, under in by_leaf.items():
            keys = list(under)
            for start in range(0, len(keys), _PAGE):
                for parent, metadata, updated_on in conn.execute(
                        "SELECT m.parent, m.metadata, m.updated_on FROM json_each(?) AS j CROSS JOIN metrics AS m"
                        " ON m.parent = j.value AND m.leaf = ?", (json.dumps(keys[start:start + _PAGE]), leaf)):
                    # a metadata row newer than the read above: unreadable here, read again by get_metrics
                    found[under[parent]] = (*metadatas.get(metadata, (None, None, None)), updated_on)
        return found

    def _candidates(self, table: str, pattern: GlobPattern, walked: dict | None = None,
                    rows: dict[str, tuple] | None = None) -> Iterator[str]:
        """Names that may match (a superset of the matches). `walked` keeps the directories
        walked and the subtree listed, for another table's candidates of the same pattern;
        `rows` (metrics) gets each candidate's row read by the walk, ending with its metadata
        id and last write (not an exact pattern's)."""
        walked = {} if walked is None else walked
        if pattern.matches_nothing:
            return
        exact = pattern.exact_names()
        if exact is not None:
            found = self._metric_rows(exact) if table == "metrics" else self._directory_keys(exact)
            yield from found
            return
        components = pattern.components
        variable = [i for i, c in enumerate(components) if _variable(c)]
        head = len(components) - 1 if not variable else variable[0]
        if "walk" not in walked:
            walked["walk"] = self._walk(components[:head])
        nodes = walked["walk"]
        if not variable:
            yield from self._children(table, nodes, components[-1], rows)
            return
        if not nodes:
            return
        trail = components[variable[-1] + 1:]
        start = self._inverted_start(table, trail, walked)
        if start is None or start[1] >= _PROBE_LIMIT:
            if "subtree" not in walked:
                walked["subtree"] = self._subtree(nodes)
            subtree = walked["subtree"]
            if subtree is not None:
                last = components[-1]
                walked[_EXACT + table] = _globstar_around_one(pattern, trail)
                yield from self._children(table, subtree, None if _variable(last) else last, rows)
                return
        if start is not None:
            yield from self._from_inverted(table, trail, start[0], start[2], walked, rows)
            return
        yield from self._every_name(table, rows)

    # -- steps of the walk ------------------------------------------------------------
    def _walk(self, components: tuple[ComponentPattern, ...]) -> Nodes:
        """The directories (hidden ones too) matching the fixed components, from the root;
        the leading single literals are one path, its key from the cache of the name tree."""
        head = 0
        while head < len(components) and components[head].literals is not None and len(components[head].literals) == 1:
            head += 1
        nodes: Nodes = {ROOT: ""}
        if head:
            path = ".".join(next(iter(c.literals)) for c in components[:head])
            keys = self._tree.keys(self._conn, self._strings, [path])
            if path not in keys:
                return {}
            nodes = {keys[path]: path}
        for component in components[head:]:
            nodes = dict(self._child_rows("directories", nodes, component, visible=False))
            if not nodes:
                break
        return nodes

    def _literal_ids(self, literals: frozenset[str]) -> dict[str, int]:
        """Ids of the interned ones among a component's literals (read from the cache of ids
        by each literal: the cache may hold a million strings, and other threads add to it)."""
        known = self._strings.lookup(self._conn, literals)
        return {string: id_ for string in literals if (id_ := known.get(string)) is not None}

    def _children(self, table: str, nodes: Nodes, component: ComponentPattern | None,
                  rows: dict[str, tuple] | None = None) -> Iterator[str]:
        """Names of the children (in table) of nodes matching component (None: every child)."""
        return (path for _, path in self._child_rows(table, nodes, component, rows=rows))

    def _child_rows(self, table: str, nodes: Nodes, component: ComponentPattern | None,
                    visible: bool = True, rows: dict[str, tuple] | None = None) -> Iterator[tuple[int, str]]:
        """(key, name) of the children of nodes in table matching component; `rows`
        (metrics) gets each one's row, ending with its metadata id and last write."""
        if not nodes:
            return
        conn, column = self._conn, _column(table)
        shown = " AND NOT t.hidden" if table == "directories" and visible else ""
        carried = _CARRIED if rows is not None else ""
        ids: dict[str, int] | None = None
        if component is not None and component.literals is not None:
            ids = self._literal_ids(component.literals)
        elif component is not None and component.prefix:
            found = conn.execute(f"SELECT value, id FROM name_strings WHERE value >= ? AND value < ? LIMIT {_MAX_RANGE_IDS}",
                                 _prefix_bounds(component.prefix)).fetchall()
            if len(found) < _MAX_RANGE_IDS:
                ids = {s: i for s, i in found if component.matches(s)}
        if ids is not None and len(ids) * len(nodes) <= _MAX_PROBES and (
                len(ids) == 1 or len(nodes) <= _PER_STRING or (len(ids) <= _PER_STRING and len(nodes) >= _PAGE_MIN)):
            # a string at a time with the parents' keys as plain integers, or (few parents) a
            # parent at a time with the strings' ids: half the time of (parent, string) pairs
            by_string = len(ids) == 1 or len(nodes) > _PER_STRING
            by_id = {id_: string for string, id_ in ids.items()}
            fixed = [(id_, string) for string, id_ in ids.items()] if by_string else list(nodes.items())
            listed = list(nodes) if by_string else list(by_id)
            on = f"t.parent = j.value AND t.{column} = ?" if by_string else f"t.parent = ? AND t.{column} = j.value"
            for value, text in fixed:
                for start in range(0, len(listed), _PAGE):
                    found = conn.execute(
                        f"SELECT j.value, t.key{carried} FROM json_each(?) AS j CROSS JOIN {table} AS t ON {on}{shown}",
                        (json.dumps(listed[start:start + _PAGE]), value)).fetchall()
                    for row in found:
                        name = join(nodes[row[0]], text) if by_string else join(text, by_id[row[0]])
                        if rows is not None:
                            rows[name] = row
                        yield row[1], name
            return
        if ids is not None and len(ids) * len(nodes) <= _MAX_PROBES:
            pairs = [(key, string, id_) for key in nodes for string, id_ in ids.items()]
            for start in range(0, len(pairs), _PAGE):
                chunk = pairs[start:start + _PAGE]
                found = conn.execute(
                    f"SELECT j.key, t.key{carried} FROM json_each(?) AS j CROSS JOIN {table} AS t"
                    f" ON t.parent = j.value ->> 0 AND t.{column} = j.value ->> 1{shown}",
                    (json.dumps([[key, id_] for key, _, id_ in chunk]),)).fetchall()
                for row in found:
                    parent, string, _ = chunk[row[0]]
                    name = join(nodes[parent], string)
                    if rows is not None:
                        rows[name] = row
                    yield row[1], name
            return
        keys = list(nodes)
        matches = None if component is None or component.alternatives == ("*",) else component.matches
        for start in range(0, len(keys), _PAGE):
            found = conn.execute(
                f"SELECT t.key, t.parent, s.value{carried} FROM json_each(?) AS j CROSS JOIN {table} AS t"
                f" ON t.parent = j.value JOIN name_strings AS s ON s.id = t.{column} WHERE true{shown}",
                (json.dumps(keys[start:start + _PAGE]),)).fetchall()
            for row in found:
                if matches is None or matches(row[2]):
                    name = join(nodes[row[1]], row[2])
                    if rows is not None:
                        rows[name] = row
                    yield row[0], name

    def _subtree(self, nodes: Nodes) -> Nodes | None:
        """nodes and every directory under them (hidden ones too); None past _MAX_SUBTREE."""
        found = dict(nodes)
        level = nodes
        while level:
            if self._children_over(level, _MAX_SUBTREE - len(found)):
                return None  # counted in the index, not listed: a big subtree costs no rows
            level = dict(self._child_rows("directories", level, None, visible=False))
            found.update(level)
            if len(found) > _MAX_SUBTREE:
                return None
        return found

    def _children_over(self, nodes: Nodes, limit: int) -> bool:
        """Whether the directories under nodes (one level) are more than limit."""
        keys, counted = list(nodes), 0
        for start in range(0, len(keys), _PAGE):
            counted += self._conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM json_each(?) AS j CROSS JOIN directories AS t"
                f" ON t.parent = j.value LIMIT {max(limit - counted, 0) + 1})",
                (json.dumps(keys[start:start + _PAGE]),)).fetchone()[0]
            if counted > limit:
                return True
        return False

    def _inverted_start(self, table: str, trail: tuple[ComponentPattern, ...], walked: dict
                        ) -> tuple[int, int, dict[str, int]] | None:
        """(position in trail, rows, string ids) of the trailing literal component with the
        fewest rows in the inverted index (counted up to _PROBE_LIMIT, or up to the fewest
        counted so far: a literal of 100,000 rows after one of 10 reads 10 index entries,
        not a thousand); None without one. A directory component's count is kept in
        `walked` for the other table's glob of the same pattern."""
        best = None
        for position, component in enumerate(trail):
            if component.literals is None:
                continue
            target = table if position == len(trail) - 1 else "directories"
            limit = _PROBE_LIMIT if best is None else best[1]
            kept = walked.get(("probe", target, position))
            if kept is not None and (kept[0] < kept[1] or kept[1] >= limit):  # counted exactly, or past this limit
                rows, ids = min(kept[0], limit), kept[2]
            else:
                ids = self._literal_ids(component.literals)
                rows = self._conn.execute(
                    f"SELECT count(*) FROM (SELECT 1 FROM {target} WHERE {_column(target)} IN"
                    f" (SELECT value FROM json_each(?)) LIMIT {limit})", (json.dumps(list(ids.values())),)).fetchone()[0]
                walked[("probe", target, position)] = (rows, limit, ids)
            if best is None or rows < best[1]:
                best = (position, rows, ids)
        return best

    def _from_inverted(self, table: str, trail: tuple[ComponentPattern, ...], position: int,
                       ids: dict[str, int], walked: dict, rows: dict[str, tuple] | None = None) -> Iterator[str]:
        """Candidates from the rows of the inverted index holding trail[position]'s literals,
        then the rest of the trail walked down from them (`rows`: as _child_rows); the
        directories reached before the last component are kept in `walked` for the other
        table's glob."""
        last = position == len(trail) - 1
        target = table if last else "directories"
        if last:
            for found in self._inverted_rows(target, ids, " AND NOT t.hidden" if target == "directories" else "",
                                             _CARRIED if rows is not None else ""):
                yield from self._named(found, rows)
            return
        nodes = walked.get(("inverted", position))
        if nodes is None:
            found = [row for page in self._inverted_rows(target, ids, "", "") for row in page]
            paths = self._tree.paths(self._conn, {row[1] for row in found})
            nodes = {key: join(paths[parent], string) for key, parent, string in found if parent in paths}
            for component in trail[position + 1:-1]:
                nodes = dict(self._child_rows("directories", nodes, component, visible=False))
            walked[("inverted", position)] = nodes
        yield from self._children(table, nodes, trail[-1], rows)

    def _inverted_rows(self, target: str, ids: dict[str, int], shown: str, carried: str) -> Iterator[list[tuple]]:
        """(key, parent key, string, ...) rows of target holding one of the string ids, from
        the inverted index a page of _PAGE rows at a time (an id's rows in key order): each
        page's mapped file pages leave before the next is read (_after_rows), so a literal
        of 100,000 rows does not hold the whole table's pages at once."""
        column = _column(target)
        for id_ in ids.values():
            after = 0
            while True:
                found = self._conn.execute(
                    f"SELECT t.key, t.parent, s.value{carried} FROM {target} AS t JOIN name_strings AS s"
                    f" ON s.id = t.{column} WHERE t.{column} = ? AND t.key > ?{shown} ORDER BY t.key LIMIT {_PAGE}",
                    (id_, after)).fetchall()
                self._after_rows(found)
                if found:
                    yield found
                if len(found) < _PAGE:
                    break
                after = found[-1][0]

    def _every_name(self, table: str, rows: dict[str, tuple] | None = None) -> Iterator[str]:
        """Every name of table, a page at a time (a pattern nothing narrows; `rows`: as _child_rows)."""
        shown = " AND NOT t.hidden" if table == "directories" else ""
        carried = _CARRIED if rows is not None else ""
        after = 0
        while True:
            found = self._conn.execute(
                f"SELECT t.key, t.parent, s.value{carried} FROM {table} AS t JOIN name_strings AS s"
                f" ON s.id = t.{_column(table)} WHERE t.key > ?{shown} ORDER BY t.key LIMIT {_PAGE}", (after,)).fetchall()
            if not found:
                return
            self._after_rows(found)
            yield from self._named(found, rows)
            after = found[-1][0]

    def _named(self, found: list[tuple], rows: dict[str, tuple] | None) -> Iterator[str]:
        """Names of (key, parent key, last component, ...) rows (`rows`: as _child_rows)."""
        paths = self._tree.paths(self._conn, {row[1] for row in found})
        for row in found:
            if row[1] in paths:
                name = join(paths[row[1]], row[2])
                if rows is not None:
                    rows[name] = row
                yield name
