"""The Cassandra store's glob execution: the plans of glob_planner run as CQL requests,
walks of directories level by level, depth scans."""
from __future__ import annotations

from typing import Any, Sequence

from biggraphite_like.errors import TooManyResults
from biggraphite_like.glob import GlobPattern
from biggraphite_like.stores.cassandra import glob_planner as planner

CANDIDATE_FACTOR = 10  # candidates a glob may read per allowed result when the index cannot decide alone
WALK_LIMIT = 256  # directories one level of a glob walk may list before the depth query takes over
DEPTH_PROBES = (8, 16, 32)  # depths whose directories are looked for before per-depth queries go deeper


class GlobMixin:
    """The store's `_glob`, behind Store's glob_metrics and glob_directories."""

    def _glob(self, table: str, pattern: GlobPattern, max_results: int) -> list[str]:
        with self._conn.runner.operation():  # a walk's levels share the timeout
            return self._glob_in_time(table, pattern, max_results)

    def _glob_in_time(self, table: str, pattern: GlobPattern, max_results: int) -> list[str]:
        kind = self._check_schema()
        if self.options.max_results is not None:
            max_results = min(max_results, self.options.max_results)
        candidates: list[str] = []
        requests: list[tuple[Any, Any]] = []
        limits: list[int | None] = []  # row limit of each request whose reaching means "too many"
        parts = self._within_depth(planner.plan(pattern, like=kind == "sasi"))
        for part in parts:
            if isinstance(part, planner.Walk):
                candidates += self._walk(table, part.components, max_results)
                continue
            for request, limit in self._part_requests(table, part, max_results):
                requests.append(request)
                limits.append(limit)
        results = self._run(requests, f"glob {pattern.pattern!r} on {table}")
        for rows, limit in zip(results, limits):
            if limit is not None and len(rows) >= limit:
                raise TooManyResults(
                    f"glob {pattern.pattern[:120]!r} reads more than {limit - 1} candidate names (limit"
                    f" max_results={max_results} x {CANDIDATE_FACTOR}); narrow the pattern")
            candidates += (r[0] for r in rows if r[1] is not None)
        return pattern.filter(candidates, max_results)

    def _within_depth(self, parts: list[planner.Part]) -> list[planner.Part]:
        """Per-depth queries (`**` then fixed components: up to 64 depths) only for the depths
        names can have: no directory of depth k means no name deeper than k, so one round
        trip of DEPTH_PROBES `component_k = '__END__' LIMIT 1` reads saves the rest."""
        deepest = max((max(p.depths) for p in parts if isinstance(p, planner.Queries) and p.depths), default=0)
        probes = [k for k in DEPTH_PROBES if k < deepest]
        if not probes:
            return parts
        found = self._run([self._select("directories", planner.depth_restriction(k), 1) for k in probes],
                          f"look for directories of depth {probes}")
        bound = next((k for k, rows in zip(probes, found) if not rows), None)
        if bound is None:
            return parts
        kept: list[planner.Part] = []
        for part in parts:
            if isinstance(part, planner.Queries) and part.depths:
                pairs = [(q, d) for q, d in zip(part.queries, part.depths) if d <= bound]
                part = planner.Queries(tuple(q for q, _ in pairs), part.exact, tuple(d for _, d in pairs))
            kept.append(part)
        return kept

    def _select(self, table: str, conjunction: planner.Conjunction, limit: int | None):
        where = " AND ".join(f"{r.column} {r.operator} ?" for r in conjunction)
        query = f"SELECT name, component_0 FROM {self.metadata_keyspace}.{table}"
        if where:
            query += f" WHERE {where}"
        if limit is not None:
            query += f" LIMIT {limit}"
        if len(conjunction) > 1 or (conjunction and conjunction[0].column != "name"):
            query += " ALLOW FILTERING"
        return self._prepare(query, "metadata_read"), [r.value for r in conjunction]

    def _part_requests(self, table: str, part: planner.Part, max_results: int):
        """((statement, parameters), limit-that-means-too-many or None) of one plan part."""
        exact_limit = max_results + 1
        loose_limit = max_results * CANDIDATE_FACTOR + 1
        if isinstance(part, planner.Lookup):
            for name in part.names:
                yield self._select(table, (planner.Restriction("name", "=", name),), None), None
        elif isinstance(part, planner.Queries):
            for conjunction in part.queries:
                limit = exact_limit if part.exact else loose_limit
                yield self._select(table, conjunction, limit), None if part.exact else limit
        else:  # Scan
            limit = exact_limit if part.exact else loose_limit
            yield self._select(table, (), limit), None if part.exact else limit

    def _walk(self, table: str, components: Sequence, max_results: int) -> list[str]:
        """Names under directories walked level by level by `parent = ?` (see glob_planner)."""
        depth = len(components)
        limit = max_results * CANDIDATE_FACTOR + 1

        def children(target: str, parents: list[str], component) -> list[str] | None:
            if not parents:  # the top level
                requests = [self._select(target, planner.depth_restriction(1), limit)]
            else:
                requests = [self._select(target, (planner.Restriction("parent", "=", p),), limit) for p in parents]
            results = self._run(requests, f"list {table} under {len(parents)} directories")
            if any(len(rows) >= limit for rows in results):
                return None
            found = [r[0] for rows in results for r in rows if r[1] is not None]
            if component is None:
                return found
            return [n for n in found if component.matches(n.rpartition(".")[2])]

        parents: list[str] = []
        for level in range(depth - 1):
            listed = children("directories", parents, components[level])
            if listed is None or len(listed) > WALK_LIMIT:
                return self._depth_scan(table, depth, limit)
            if not listed:
                return []
            parents = listed
        found = children(table, parents, None)
        return found if found is not None else self._depth_scan(table, depth, limit)

    def _depth_scan(self, table: str, depth: int, limit: int) -> list[str]:
        rows = self._run([self._select(table, planner.depth_restriction(depth), limit)], f"list {table} of depth {depth}")[0]
        if len(rows) >= limit:
            raise TooManyResults(f"a glob of depth {depth} without fixed components reads more than {limit - 1}"
                                 f" candidate names (limit max_results x {CANDIDATE_FACTOR}); narrow the pattern")
        return [r[0] for r in rows if r[1] is not None]

