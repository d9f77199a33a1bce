"""Glob patterns to CQL restrictions on the metadata tables (the planner of the Cassandra store).

A plan is a union of parts, each bounded:
- `Lookup`: exact names (no wildcard) -> one primary-key read each;
- `Queries`: index queries, each a conjunction of restrictions on `parent` or
  `component_N` (`= ?`, or with SASI `LIKE 'prefix%'`), `component_D = '__END__'` fixing
  the depth; brace alternatives become a bounded set of such queries (MAX_QUERIES);
  with SAI (no LIKE) prefixes are left to the client;
- `Walk`: a fixed-depth pattern with nothing an index can use (`*.*`, `*b*.*a*`): the
  store lists children by `parent = ?` level by level, as StandardFinder walks
  directories, and falls back to the depth query past a bound;
- `Scan`: nothing usable at all (`**`, `**.a*.**`): one scan with a LIMIT.
`exact` says every row a part returns matches: the store then reads at most
max_results + 1 rows; otherwise it allows more candidates (see globs.py). The glob
engine (`GlobPattern.filter`) decides in every case: plans only narrow the candidates.
Top-level names are found with `component_1 = '__END__'`, never `parent = ''` (secondary
indexes do not index empty values).

Most selective question first (measured on a real Cassandra 5.0 node, docs/cassandra.md):
a query costs the node about as much per row it reads as per row it returns, and with
SASI every restriction's posting list is intersected, so a restriction that matches
nearly everything (the first component, `__END__` at a depth) costs more than it saves.
So with SASI:
- a subtree (`svc.dc2.host00[1-3]?.cpu.*`, `svc.dc3.host0042.**`) is asked as
  `parent LIKE 'svc.dc2.host001%'`: the literal components and the next one's literal
  prefixes (a leading character class expanded, MAX_PREFIXES at most) in one restriction;
- `component_0 = ?` and `component_D = '__END__'` are left to the client when another
  restriction remains.
SAI intersects its two most selective restrictions itself and filters the others on
the node, so its conjunctions are sent whole. Per-depth queries (`**` followed by fixed
components) carry their depth, so the store skips the depths deeper than any directory.
"""
from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Sequence, Union

from biggraphite_like import names as names_mod
from biggraphite_like.glob import GLOBSTAR, ComponentPattern, GlobPattern

COMPONENTS = names_mod.MAX_COMPONENTS
END = names_mod.END_MARKER
MAX_QUERIES = 64  # brace alternatives turned into queries, per part
MAX_TRAILING_ALTERNATIVES = 4  # alternatives per depth when the fixed components are at the end
MAX_VARIANTS = 16  # fixed-depth variants of a pattern with optional components
MAX_LOOKUPS = 1000  # exact names looked up by key
_WILDCARD = re.compile(r"[*?\[]")
MAX_PREFIXES = 16  # literal prefixes of one component, its leading character class expanded
# subtree queries a character class may expand into: measured on a real node, 12 narrow queries
# (480 rows) took 54 ms and 2 broader ones (800 rows) 33 ms: past a few, a query costs more
# than the rows a narrower prefix saves
MAX_PREFIX_QUERIES = 4


@dataclasses.dataclass(frozen=True)
class Restriction:
    column: str
    operator: str  # "=" or "LIKE"
    value: str


Conjunction = tuple[Restriction, ...]


@dataclasses.dataclass(frozen=True)
class Lookup:
    names: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Queries:
    queries: tuple[Conjunction, ...]
    exact: bool
    depths: tuple[int, ...] | None = None  # the depth of names each query can return (per-depth queries)


@dataclasses.dataclass(frozen=True)
class Walk:
    components: tuple[ComponentPattern, ...]


@dataclasses.dataclass(frozen=True)
class Scan:
    exact: bool


Part = Union[Lookup, Queries, Walk, Scan]


@dataclasses.dataclass(frozen=True)
class _Spec:
    """What the index can do with one component at a known position."""

    values: tuple[str, ...] | None  # literal alternatives: equality
    like: str | None  # LIKE 'prefix%' (SASI)
    covered: bool  # the restriction (or its absence, for `*`) decides the component exactly


def component_spec(component: ComponentPattern, like: bool) -> _Spec:
    if component.literals is not None:
        return _Spec(tuple(sorted(component.literals)), None, True)
    prefix = component.prefix
    if like and prefix and "%" not in prefix:
        return _Spec(None, prefix + "%", component.alternatives == (prefix + "*",))
    return _Spec(None, None, component.alternatives == ("*",))


def depth_restriction(depth: int) -> Conjunction:
    """`component_<depth> = '__END__'`: names of exactly `depth` components (none needed at 64)."""
    return (Restriction(f"component_{depth}", "=", END),) if depth < COMPONENTS else ()


def plan(pattern: GlobPattern, like: bool) -> list[Part]:
    """The parts whose union holds every name matching pattern (like: SASI LIKE is available)."""
    exact = pattern.exact_names(limit=MAX_LOOKUPS)
    if exact is not None:
        return [Lookup(tuple(exact))]
    if not pattern.has_globstar:
        variants = _variants(pattern.components)
        if variants is not None:
            return [part for variant in variants for part in _plan_fixed(variant, like)]
    return [_plan_variable(pattern, like)]


def _variants(components: Sequence[ComponentPattern]) -> list[tuple[ComponentPattern, ...]] | None:
    """Fixed-depth patterns equivalent to one with optional components (`{,a}.b`), or None if too many."""
    choices: list[list[ComponentPattern | None]] = []
    count = 1
    for component in components:
        if component.optional:
            present = [a for a in component.alternatives if a]
            choices.append([None, ComponentPattern(present)])
            count *= 2
            if count > MAX_VARIANTS:
                return None
        else:
            choices.append([component])
    variants = []
    for combination in itertools.product(*choices):
        kept = tuple(c for c in combination if c is not None)
        if kept:
            variants.append(kept)
    return variants


def _plan_fixed(components: tuple[ComponentPattern, ...], like: bool) -> list[Part]:
    depth = len(components)
    specs = [component_spec(c, like) for c in components]
    if all(s.values is not None for s in specs) and _product(s.values for s in specs) <= MAX_LOOKUPS:
        return [Lookup(tuple(".".join(p) for p in itertools.product(*(s.values for s in specs))))]
    # all but the last component fixed: the children of a few directories
    heads = specs[:-1]
    if depth >= 2 and all(s.values is not None for s in heads) and _product(s.values for s in heads) <= MAX_QUERIES:
        last = specs[-1]
        tail = (Restriction(f"component_{depth - 1}", "LIKE", last.like),) if last.like else ()
        queries = tuple((Restriction("parent", "=", ".".join(p)),) + tail
                        for p in itertools.product(*(s.values for s in heads)))
        return [Queries(queries, last.covered and last.values is None)]
    if like:
        subtree = _subtree(components, specs)
        if subtree is not None:
            return [subtree]
    queries, covered = _conjunctions(list(enumerate(specs)), MAX_QUERIES)
    if not queries:
        return [Walk(components)]
    depth_only = depth_restriction(depth)
    pruned = [_selective(q + depth_only, like) for q in queries]
    return [Queries(tuple(q for q, _ in pruned), covered and not any(dropped for _, dropped in pruned))]


def like_prefixes(component: ComponentPattern) -> tuple[str, ...] | None:
    """Literal prefixes, one of which every match of the component starts with: each
    alternative's literal head, extended by each character of a leading `[...]` class
    (`host00[1-3]?` -> host001, host002, host003). None when one alternative has no
    useful prefix, or there would be more than MAX_PREFIXES."""
    if component.is_globstar or component.optional:
        return None
    prefixes: set[str] = set()
    for alternative in component.alternatives:
        head = _WILDCARD.split(alternative, 1)[0]
        prefixes.update(head + c for c in _class_characters(alternative[len(head):]) or ("",))
    if "" in prefixes or len(prefixes) > MAX_PREFIXES or any("%" in p for p in prefixes):
        return None
    # a prefix another one extends asks nothing more: keep the shortest
    return tuple(sorted(p for p in prefixes if not any(p != q and p.startswith(q) for q in prefixes)))


def _class_characters(rest: str) -> tuple[str, ...] | None:
    """The characters a leading `[...]` class of `rest` matches, if plain (letters, digits, ranges)."""
    if not rest.startswith("[") or "]" not in rest[2:]:
        return None
    body = rest[1:rest.index("]", 2)]
    if body[0] in "!^" or body[-1] == "-" or not all(c.isascii() and (c.isalnum() or c in "-_") for c in body):
        return None
    chars: set[str] = set()
    index = 0
    while index < len(body):
        if index + 2 < len(body) and body[index + 1] == "-":
            first, last = body[index], body[index + 2]
            if first > last:
                return None
            chars.update(chr(code) for code in range(ord(first), ord(last) + 1))
            index += 3
        else:
            chars.add(body[index])
            index += 1
        if len(chars) > MAX_PREFIXES:
            return None
    return tuple(sorted(chars))


def _parent_prefixes(components: Sequence[ComponentPattern], last: int) -> list[str] | None:
    """`a.b.host00`-like prefixes every matching name's parent starts with: the literal
    components before `last` (at least one: a prefix of one component is too broad to be
    selective) and the prefixes of `last`; None if not so, or too many."""
    heads = [component_spec(c, True).values for c in components[:last]]
    if last < 1 or any(values is None for values in heads) or _product(heads) > MAX_QUERIES:
        return None
    tails = like_prefixes(components[last])
    if tails is None or len(tails) > 1 and _product(heads) * len(tails) > MAX_PREFIX_QUERIES:
        prefix = components[last].prefix
        if not prefix or "%" in prefix:
            return None
        tails = (prefix,)
    prefixes = [".".join(p + (t,)) for p in itertools.product(*heads) for t in tails]
    return prefixes if len(prefixes) <= MAX_QUERIES else None


def _subtree(components: tuple[ComponentPattern, ...], specs: list[_Spec]) -> Queries | None:
    """SASI: the names under the directories the leading components fix, as `parent LIKE` and
    the single literals deeper, when a component before the last has a literal prefix."""
    first = next((i for i, s in enumerate(specs) if s.values is None), len(specs))
    prefixes = _parent_prefixes(components, first) if first < len(components) - 1 else None
    if prefixes is None:
        return None
    deeper = tuple(Restriction(f"component_{i}", "=", s.values[0]) for i, s in enumerate(specs)
                   if i > first and s.values is not None and len(s.values) == 1)
    return Queries(tuple((Restriction("parent", "LIKE", p + "%"),) + deeper for p in prefixes), False)


def _selective(conjunction: Conjunction, like: bool) -> tuple[Conjunction, bool]:
    """With SASI, the conjunction without `component_0 = ?` and `__END__` restrictions when
    another remains (they match nearly every name: see the module's docstring); and whether
    any was dropped."""
    if not like:
        return conjunction, False
    kept = tuple(r for r in conjunction if not (r.column == "component_0" and r.operator == "=") and r.value != END)
    if not kept:
        return conjunction, False
    return kept, len(kept) < len(conjunction)


def _conjunctions(positioned: list[tuple[int, _Spec]], budget: int) -> tuple[list[Conjunction], bool]:
    """Restrictions of the components at known positions, as at most `budget` conjunctions.

    Literal alternatives multiply the queries: the largest sets are dropped (left to the
    client) until the product fits. Returns ([] if nothing is restricted, covered).
    """
    literal = sorted((p for p, s in positioned if s.values is not None), key=lambda p: len(dict(positioned)[p].values))
    specs = dict(positioned)
    kept: list[int] = []
    product = 1
    for position in literal:
        size = len(specs[position].values)
        if product * size <= budget:
            kept.append(position)
            product *= size
    covered = all(s.covered and (s.values is None or p in kept) for p, s in positioned)
    fixed = [tuple(Restriction(f"component_{p}", "=", v) for v in specs[p].values) for p in sorted(kept)]
    likes = tuple(Restriction(f"component_{p}", "LIKE", s.like) for p, s in positioned if s.like)
    if not fixed and not likes:
        return [], covered
    return [tuple(combo) + likes for combo in itertools.product(*fixed)], covered


def _plan_variable(pattern: GlobPattern, like: bool) -> Part:
    components = pattern.components
    variable = [i for i, c in enumerate(components) if c.is_globstar or c.optional]
    first, last = variable[0], variable[-1]
    lead = [(i, component_spec(c, like)) for i, c in enumerate(components[:first])]
    trail = [component_spec(c, like) for c in components[last + 1:]]
    if any(s.values is not None or s.like for s in trail):
        # the components after the last globstar sit at known positions once the depth is
        # known: one query per possible depth, with the leading components' restrictions too
        # (`tree.**.host0042.cpu9` reads the few names ending so, not every `tree.*`)
        per_depth, depths = [], []
        for depth in range(max(pattern.min_depth, 1), COMPONENTS + 1):
            start = depth - len(trail)
            positioned = lead + [(start + j, s) for j, s in enumerate(trail)]
            conjunctions, _ = _conjunctions(positioned, MAX_TRAILING_ALTERNATIVES)
            per_depth.extend(_selective(q + depth_restriction(depth), like)[0] for q in conjunctions)
            depths.extend(depth for _ in conjunctions)
        if per_depth:
            return Queries(tuple(per_depth), False, tuple(depths))
    if like and first > 0 and pattern.min_depth > first:
        # every match lies under the directories the leading components name
        prefixes = _parent_prefixes(components, first - 1)
        if prefixes is not None:
            return Queries(tuple((Restriction("parent", "LIKE", p + "%"),) for p in prefixes), False)
    queries, _ = _conjunctions(lead, MAX_QUERIES)
    if queries:
        return Queries(tuple(_selective(q, like)[0] for q in queries), False)
    everything = len(components) == 1 and components[0].alternatives == (GLOBSTAR,)
    return Scan(everything)


def _product(groups) -> int:
    result = 1
    for group in groups:
        result *= len(group)
    return result
