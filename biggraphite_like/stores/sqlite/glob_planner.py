"""The SQLite store's glob planner: a glob becomes indexed lookups (parent, name prefix,
component equality) chosen by their estimated selectivity, or a walk of the directories,
then the glob engine filters the candidates."""
from __future__ import annotations

from typing import Iterator

from biggraphite_like.glob import GlobPattern
from biggraphite_like.stores.sqlite.name_strings import END_ID, id_of, ids_in, ids_in_range
from biggraphite_like.stores.sqlite.schema import _CHUNK, _MAX_WALK, _PROBE_LIMIT, COMPONENTS


def _prefix_bounds(prefix: str) -> tuple[str, str]:
    """[low, high) of the strings starting with prefix (prefix ends before its last char + 1)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)



class GlobMixin:
    """glob_metrics and glob_directories."""

    def glob_metrics(self, pattern: GlobPattern, max_results: int) -> list[str]:
        return self._glob("metrics", pattern, max_results)

    def glob_directories(self, pattern: GlobPattern, max_results: int) -> list[str]:
        return self._glob("directories", pattern, max_results)

    def _glob(self, table: str, pattern: GlobPattern, max_results: int) -> list[str]:
        self._check_schema()
        with self._errors(f"glob {pattern.pattern!r}"):
            return pattern.filter(self._candidates(table, pattern), max_results)

    def _candidates(self, table: str, pattern: GlobPattern) -> Iterator[str]:
        """Names that may match, from indexed queries only where the pattern allows it."""
        conn = self._conn
        exact = pattern.exact_names()
        if exact is not None:
            for start in range(0, len(exact), _CHUNK):
                chunk = exact[start:start + _CHUNK]
                yield from (r[0] for r in conn.execute(
                    f"SELECT name FROM {table} WHERE name IN ({', '.join(['?'] * len(chunk))})", chunk))
            return
        parents = self._walk_directories(pattern)
        if parents is not None:
            last = pattern.components[-1].literals
            keys = [f"{p}.{leaf}" for p in parents for leaf in sorted(last)] if last else parents
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start:start + _CHUNK]
                condition = f"name IN ({', '.join(['?'] * len(chunk))})" if last else ids_in("parent", len(chunk))
                yield from (r[0] for r in conn.execute(f"SELECT name FROM {table} WHERE {condition}", chunk))
            return
        for sql, params in self._plan(table, pattern):
            yield from (r[0] for r in conn.execute(sql, params))

    def _walk_directories(self, pattern: GlobPattern) -> list[str] | None:
        """The directories whose children may match, walked level by level; None if unsuitable.

        As StandardFinder walks the file system: literal components extend the path without
        a query, a wildcard component lists the children of the current directories (parent
        index; a name range when it starts with literal text) and keeps those that match.
        Only for patterns of fixed depth; gives up (None) past _MAX_WALK directories at one
        level, where the component indexes do better.
        """
        if pattern.depth is None or pattern.depth < 2 or len(pattern.literal_prefix()) >= pattern.depth - 1:
            return None  # globstar/optional components, or a single parent lookup does it
        parents = [""]
        for component in pattern.components[:-1]:
            if component.literals is not None:
                parents = [f"{p}.{literal}" if p else literal for p in parents for literal in sorted(component.literals)]
            else:
                children: list[str] = []
                for name in self._children(parents, component.prefix):
                    if component.matches(name.rpartition(".")[2]):
                        children.append(name)
                        if len(children) > _MAX_WALK:
                            return None
                parents = children
            if len(parents) > _MAX_WALK:
                return None
            if not parents:
                return []
        return parents

    def _children(self, parents: list[str], prefix: str) -> Iterator[str]:
        """The child directories of the parents; with a literal prefix (`host00*`), only those
        starting with it, as a range of the name index per parent instead of every child."""
        conn = self._conn
        if prefix:
            for parent in parents:
                low, high = _prefix_bounds(f"{parent}.{prefix}" if parent else prefix)
                yield from (r[0] for r in conn.execute(
                    f"SELECT name FROM directories WHERE name >= ? AND name < ? AND +{id_of('parent')}",
                    (low, high, parent)))
            return
        for start in range(0, len(parents), _CHUNK):
            chunk = parents[start:start + _CHUNK]
            yield from (r[0] for r in conn.execute(
                f"SELECT name FROM directories WHERE {ids_in('parent', len(chunk))}", chunk))

    def _plan(self, table: str, pattern: GlobPattern) -> list[tuple[str, list]]:
        """The queries whose union holds every match (see README: glob planning)."""
        depth = pattern.depth
        prefix = pattern.literal_prefix()
        depth_sql, depth_params = "", []
        if depth is not None and depth < COMPONENTS:
            depth_sql, depth_params = f" AND +component_{depth} = ?", [END_ID]
        # 1. all but the last component fixed: the children of one directory
        if depth is not None and len(prefix) == depth - 1:
            return [(f"SELECT name FROM {table} WHERE {id_of('parent')}", [".".join(prefix)])]
        candidates: list[tuple[str, list]] = []
        # 2. a fixed leading path: a range of the name index
        if prefix:
            low, high = _prefix_bounds(".".join(prefix) + ".")
            candidates.append((f"SELECT name FROM {table} WHERE name >= ? AND name < ?{depth_sql}",
                               [low, high, *depth_params]))
        # 3. a fixed or prefixed component at a known position (before any globstar)
        for position, component in enumerate(pattern.components):
            if component.is_globstar or component.optional:
                break  # later components have no fixed position
            column = f"component_{position}"
            if component.literals is not None:
                values = sorted(component.literals)
                candidates.append((
                    f"SELECT name FROM {table} WHERE {ids_in(column, len(values))}{depth_sql}",
                    [*values, *depth_params]))
            elif component.prefix:
                low, high = _prefix_bounds(component.prefix)
                candidates.append((f"SELECT name FROM {table} WHERE {ids_in_range(column)}{depth_sql}",
                                   [low, high, *depth_params]))
        if candidates:
            return [self._most_selective(candidates)] if len(candidates) > 1 else candidates
        # 4. a fixed last component after a globstar: one lookup per possible depth
        last = pattern.components[-1]
        if pattern.has_globstar and not last.is_globstar and last.literals is not None:
            values = sorted(last.literals)
            queries = []
            for size in range(max(pattern.min_depth, 1), COMPONENTS + 1):
                end_sql = f" AND +component_{size} = ?" if size < COMPONENTS else ""
                queries.append((
                    f"SELECT name FROM {table} WHERE {ids_in(f'component_{size - 1}', len(values))}{end_sql}",
                    [*values, *([END_ID] if size < COMPONENTS else [])]))
            return queries
        # 5. nothing fixed: every name of that depth, or every name
        if depth is not None and depth < COMPONENTS:
            return [(f"SELECT name FROM {table} WHERE component_{depth} = ?", [END_ID])]
        return [(f"SELECT name FROM {table}", [])]

    def _most_selective(self, candidates: list[tuple[str, list]]) -> tuple[str, list]:
        """The candidate query reading the fewest rows, probing each up to a bound.

        When several reach the bound, they are probed again with a larger one: a leading
        prefix and a deeper fixed component often both match more than the first bound.
        """
        for limit in (_PROBE_LIMIT, _PROBE_LIMIT * 50):
            counted = []
            for sql, params in candidates:
                count = self._conn.execute(f"SELECT count(*) FROM ({sql} LIMIT {limit})", params).fetchone()[0]
                if count == 0:
                    return sql, params
                counted.append((count, len(counted), (sql, params)))
            best_count = min(counted)[0]
            if best_count < limit:
                return min(counted)[2]
            candidates = [query for count, _, query in counted if count == limit]
        return candidates[-1]  # the deepest fixed component

