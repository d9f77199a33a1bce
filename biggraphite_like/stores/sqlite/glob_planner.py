"""The SQLite store's glob planner: a glob becomes indexed lookups (parent, name prefix,
component equality) chosen by their estimated selectivity, or a walk of the directories,
then the glob engine filters the candidates."""
from __future__ import annotations

from typing import Iterator

from biggraphite_like.glob import ComponentPattern, GlobPattern
from biggraphite_like.stores.sqlite.name_strings import END_ID, id_of, ids_in, ids_in_range
from biggraphite_like.stores.sqlite.schema import _CHUNK, _MAX_WALK, _PROBE_LIMIT, COMPONENTS


def _prefix_bounds(prefix: str) -> tuple[str, str]:
    """[low, high) of the strings starting with prefix (prefix ends before its last char + 1)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


_MAX_DRIVER_VALUES = _CHUNK  # literal alternatives a component at a fixed position may look up in its index
_MAX_RESTRICTED_VALUES = 16  # ... once per depth, or as a filter beside another index; more are left to the glob engine
_MAX_FILTERS = 8  # restrictions applied in SQL (without an index) beside the driving one

Restriction = tuple[str, list]  # SQL with a `{column}` placeholder, its parameters


def _restriction(component: ComponentPattern, max_values: int) -> Restriction | None:
    """What an index can do with one component: equality with the ids of its literals (at
    most max_values of them), or with the ids of the strings in the range of its literal
    prefix; None when it cannot narrow anything."""
    if component.literals is not None:
        if len(component.literals) > max_values:
            return None
        values = sorted(component.literals)
        return ids_in("{column}", len(values)), values
    if component.prefix:
        return ids_in_range("{column}"), list(_prefix_bounds(component.prefix))
    return None


def _position(offset: int, depth: int | None) -> int | None:
    """The column of a restriction: offsets >= 0 count from the start, negative ones from the
    end of a name of `depth` components (unknown: None)."""
    if offset >= 0:
        return offset
    return None if depth is None else depth + offset


def _filters(restrictions: list[tuple[int, Restriction]], depth: int | None, skip: int | None,
             min_depth: int = 0) -> tuple[str, list]:
    """` AND ...` applying the restrictions (but `skip`) and the depth (else the minimum depth)
    without an index (`+column`)."""
    sql, params = [], []
    for index, (offset, (template, values)) in enumerate(restrictions):
        position = _position(offset, depth)
        if index == skip or position is None or len(sql) >= _MAX_FILTERS or len(values) > _MAX_RESTRICTED_VALUES:
            continue
        sql.append(template.format(column=f"+component_{position}"))
        params += values
    if depth is not None and depth < COMPONENTS:
        sql.append(f"+component_{depth} = ?")
        params.append(END_ID)
    elif depth is None and 1 < min_depth <= COMPONENTS:  # past a name's end: __END__, then NULL
        sql.append(f"+component_{min_depth - 1} != ?")
        params.append(END_ID)
    return "".join(f" AND {s}" for s in sql), params


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
        """The queries whose union holds every match (see README: glob planning).

        Components before the first globstar or optional component have fixed positions
        from the start, those after the last one from the end: for each possible depth
        of a match, a name's column at that position is known. Each such component with
        literals or a literal prefix drives one candidate (its index, once per possible
        depth), the others filter in SQL (`+column`, no index); the leading literal path
        gives a name range. The candidate reading the fewest rows wins.
        """
        depth = pattern.depth
        prefix = pattern.literal_prefix()
        # 1. all but the last component fixed: the children of one directory
        if depth is not None and len(prefix) == depth - 1:
            return [(f"SELECT name FROM {table} WHERE {id_of('parent')}", [".".join(prefix)])]
        components = pattern.components
        variable = [i for i, c in enumerate(components) if c.is_globstar or c.optional]
        lead = len(components) if not variable else variable[0]
        trail = 0 if not variable else len(components) - 1 - variable[-1]
        # no name is deeper than the component indexes reach (they are created with the first name
        # that needs them): deeper queries would scan the table for nothing
        deepest = self._deepest_name(table, COMPONENTS if depth is None else depth)
        if depth is not None and depth > deepest:
            return []
        depths = [depth] if depth is not None else list(range(max(pattern.min_depth, 1), deepest + 1))
        if not depths:
            return []
        # (offset from the start, or from the end when negative, the restriction)
        restrictions = [(i, r) for i, r in ((i, _restriction(components[i], _MAX_DRIVER_VALUES)) for i in range(lead))
                        if r]
        restrictions += [(j - trail, r) for j, r in ((j, _restriction(components[len(components) - trail + j],
                                                                      _MAX_RESTRICTED_VALUES)) for j in range(trail))
                         if r]
        # (the rows an index reads, to estimate the cost; the query, filtering them in SQL)
        candidates: list[tuple[tuple[str, list], tuple[str, list]]] = []
        # 2. a fixed leading path, and the literal head of the next component: a name range
        head = ".".join(prefix)
        if len(prefix) < lead and components[len(prefix)].prefix:
            head = f"{head}.{components[len(prefix)].prefix}" if head else components[len(prefix)].prefix
        elif head and len(prefix) < len(components):
            head += "."
        if head:
            probe = (f"SELECT name FROM {table} WHERE name >= ? AND name < ?", list(_prefix_bounds(head)))
            filters, params = _filters(restrictions, depth, skip=None, min_depth=pattern.min_depth)
            candidates.append((probe, (probe[0] + filters, probe[1] + params)))
        # 3. a fixed or prefixed component at a known position: from the start, one lookup;
        # from the end, one lookup per possible depth
        for driver, (offset, (template, values)) in enumerate(restrictions):
            probes, queries, probe_params, params = [], [], [], []
            for size in ([depth] if offset >= 0 else depths):
                select = f"SELECT name FROM {table} WHERE {template.format(column=f'component_{_position(offset, size)}')}"
                filters, filter_params = _filters(restrictions, size, skip=driver, min_depth=pattern.min_depth)
                probes.append(select)
                queries.append(select + filters)
                probe_params += values
                params += [*values, *filter_params]
            candidates.append(((" UNION ALL ".join(probes), probe_params), (" UNION ALL ".join(queries), params)))
        if candidates:
            return [self._most_selective(candidates)] if len(candidates) > 1 else [candidates[0][1]]
        # 4. nothing fixed: every name of that depth, or every name
        if depth is not None and depth < COMPONENTS:
            return [(f"SELECT name FROM {table} WHERE component_{depth} = ?", [END_ID])]
        return [(f"SELECT name FROM {table}", [])]

    def _most_selective(self, candidates: list[tuple[tuple[str, list], tuple[str, list]]]) -> tuple[str, list]:
        """The query of the candidate whose index reads the fewest rows, probing each up to a
        bound (the probe counts what the index reads, before any filter).

        When several reach the bound, they are probed again with a larger one: a leading
        prefix and a deeper fixed component often both match more than the first bound.
        """
        for limit in (_PROBE_LIMIT, _PROBE_LIMIT * 50):
            counted = []
            for (sql, params), query in candidates:
                count = self._conn.execute(f"SELECT count(*) FROM ({sql} LIMIT {limit})", params).fetchone()[0]
                if count == 0:
                    return query
                counted.append((count, len(counted), query))
            best_count = min(counted)[0]
            if best_count < limit:
                return min(counted)[2]
            candidates = [candidates[index] for count, index, _ in counted if count == limit]
        return candidates[-1][1]  # the deepest fixed component
