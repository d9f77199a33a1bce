"""The Cassandra glob planner, without a server: every plan is sound, bounded, and uses the index.

Plans are evaluated here over a list of names exactly as the CQL restrictions select rows
(equality, `LIKE 'p%'`, `parent`, `component_N`, `__END__`), so soundness (the union of
the parts holds every match; `exact` parts hold only matches) is checked on many
patterns without a server. The conformance suite checks the same end to end.
"""
from __future__ import annotations

import random

import pytest

from biggraphite_like import names as names_mod
from biggraphite_like.glob import GlobPattern
from biggraphite_like.stores.cassandra import glob_planner as planner

from tests.stores.glob_cases import PATTERNS, random_tree


def _column(name: str, column: str) -> str | None:
    if column == "name":
        return name
    if column == "parent":
        return names_mod.parent(name)
    parts = name.split(".")
    index = int(column.split("_")[1])
    if index < len(parts):
        return parts[index]
    return names_mod.END_MARKER if index == len(parts) else None


def _selects(name: str, conjunction: planner.Conjunction) -> bool:
    for r in conjunction:
        value = _column(name, r.column)
        if value is None:
            return False
        if r.operator == "=" and value != r.value:
            return False
        if r.operator == "LIKE" and not value.startswith(r.value[:-1]):
            return False
    return True


def _walk(names: list[str], directories: list[str], components) -> set[str]:
    parents: list[str] | None = None
    for component in components[:-1]:
        pool = [d for d in directories if (names_mod.parent(d) in parents if parents is not None else "." not in d)]
        parents = [d for d in pool if component.matches(d.rpartition(".")[2])]
    return {n for n in names if (names_mod.parent(n) in parents if parents is not None else "." not in n)}


def _evaluate(part, names, directories) -> tuple[set[str], bool]:
    if isinstance(part, planner.Lookup):
        return set(part.names) & set(names), True
    if isinstance(part, planner.Queries):
        return {n for n in names for q in part.queries if _selects(n, q)}, part.exact
    if isinstance(part, planner.Walk):
        return _walk(names, directories, part.components), False
    return set(names), part.exact


def _patterns(seed: int, names: list[str]) -> list[str]:
    rng = random.Random(seed)
    patterns = list(PATTERNS) + ["*", "*.*", "a*", "ab*.b*.*", "*.a*", "**.c*", "**.{a,b}", "{a,b}*.**.c1",
                                 "a.*.*.ab", "[ab]*.ab", "%a*.*", "a%*", "**.x-y.**", "{,*}.ab"]
    for name in rng.sample(names, 60):
        parts = name.split(".")
        for _ in range(rng.randint(1, 2)):
            position = rng.randrange(len(parts))
            parts[position] = rng.choice(["*", parts[position][:1] + "*", "{" + parts[position] + ",ab}", "**",
                                          "{," + parts[position] + "}", parts[position][:-1] + "?"])
        patterns.append(".".join(parts))
    return patterns


@pytest.mark.parametrize("like", [True, False], ids=["sasi", "sai"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_plans_are_sound(seed, like):
    metric_names = random_tree(seed, 300)
    directories = sorted({d for n in metric_names for d in names_mod.ancestors(n)})
    for pattern in _patterns(seed, metric_names):
        glob = GlobPattern(pattern)
        parts = planner.plan(glob, like)
        for names in (metric_names, directories):
            expected = set(glob.filter(names))
            union: set[str] = set()
            for part in parts:
                selected, exact = _evaluate(part, names, directories)
                union |= selected
                if exact:
                    assert selected <= expected, (pattern, part)
            assert expected <= union, (pattern, parts, expected - union)


@pytest.mark.parametrize("pattern", PATTERNS + ["**.c*", "a.{" + ",".join(f"x{i}" for i in range(200)) + "}.*"])
def test_plans_are_bounded(pattern):
    for like in (True, False):
        parts = planner.plan(GlobPattern(pattern), like)
        queries = sum(len(p.queries) if isinstance(p, planner.Queries) else 1 for p in parts)
        assert queries <= planner.MAX_QUERIES * planner.MAX_TRAILING_ALTERNATIVES


def test_fixed_components_become_index_restrictions():
    # SASI: the subtree the leading components name, as one `parent LIKE`, and the literals deeper
    plan = planner.plan(GlobPattern("svc.host*.cpu"), like=True)
    assert plan == [planner.Queries(((
        planner.Restriction("parent", "LIKE", "svc.host%"), planner.Restriction("component_2", "=", "cpu")),),
        exact=False)]
    # with nothing to name a subtree, the components; not the first one nor `__END__`, which
    # match nearly every name (the client checks them)
    plan = planner.plan(GlobPattern("*.host*.cpu"), like=True)
    assert plan == [planner.Queries(((
        planner.Restriction("component_2", "=", "cpu"), planner.Restriction("component_1", "LIKE", "host%")),),
        exact=False)]
    # SAI: no LIKE, the prefix is left to the client
    sai = planner.plan(GlobPattern("svc.host*.cpu"), like=False)
    assert sai == [planner.Queries(((
        planner.Restriction("component_0", "=", "svc"), planner.Restriction("component_2", "=", "cpu"),
        planner.Restriction("component_3", "=", "__END__")),), exact=False)]


def test_children_of_fixed_directories_are_parent_lookups():
    plan = planner.plan(GlobPattern("{a,b}.c.*"), like=True)
    assert plan == [planner.Queries(((planner.Restriction("parent", "=", "a.c"),),
                                     (planner.Restriction("parent", "=", "b.c"),)), exact=True)]
    assert planner.plan(GlobPattern("a.b.c"), like=True) == [planner.Lookup(("a.b.c",))]


def test_brace_alternatives_are_a_bounded_set_of_queries():
    many = "{" + ",".join(f"x{i}" for i in range(100)) + "}"
    plan = planner.plan(GlobPattern(f"*.{many}.{{a,b}}.*"), like=True)
    (part,) = plan
    assert len(part.queries) == 2 and not part.exact  # the 100 alternatives are left to the client
    assert all(q[0] .column == "component_2" for q in part.queries)


def test_nothing_fixed_walks_or_scans_bounded():
    assert isinstance(planner.plan(GlobPattern("*.*"), like=True)[0], planner.Walk)
    assert planner.plan(GlobPattern("**"), like=True) == [planner.Scan(True)]
    assert planner.plan(GlobPattern("**.a*.**"), like=False) == [planner.Scan(False)]
    trailing = planner.plan(GlobPattern("**.cpu"), like=True)[0]
    assert len(trailing.queries) == 64 and not trailing.exact


@pytest.mark.parametrize("like", [True, False], ids=["sasi", "sai"])
def test_globstar_between_fixed_components_restricts_both_ends_per_depth(like):
    """`tree.**.host0042.cpu9` reads the names ending so at each depth, never every `tree.*`."""
    (part,) = planner.plan(GlobPattern("tree.**.host0042.cpu9"), like=like)
    assert len(part.queries) == 64 - 3 + 1  # depths 3..64
    assert part.depths == tuple(range(3, 65))  # the store skips the depths no directory reaches
    for depth, query in zip(range(3, 65), part.queries):
        restrictions = {(r.column, r.value) for r in query}
        assert (f"component_{depth - 2}", "host0042") in restrictions
        assert (f"component_{depth - 1}", "cpu9") in restrictions
        if not like:  # SASI leaves the first component and the depth to the client
            assert ("component_0", "tree") in restrictions
            if depth < 64:
                assert (f"component_{depth}", "__END__") in restrictions
    names = [f"tree.dc{d}.host{h:04d}.cpu{c}" for d in range(3) for h in range(40, 45) for c in (8, 9)]
    names += ["tree.host0042.cpu9", "other.host0042.cpu9"]
    selected = {n for n in names for q in part.queries if _selects(n, q)}
    expected = {"tree.dc0.host0042.cpu9", "tree.dc1.host0042.cpu9", "tree.dc2.host0042.cpu9", "tree.host0042.cpu9"}
    assert selected == (expected if not like else expected | {"other.host0042.cpu9"})


def test_subtrees_are_asked_as_parent_prefixes_with_sasi():
    """The most selective question in a tree: the directories under a fixed prefix, a leading
    character class expanded into prefixes (seed 003's finds asked every component instead)."""
    (part,) = planner.plan(GlobPattern("svc.dc2.host00[1-3]?.cpu.*"), like=True)
    assert part.queries == tuple((planner.Restriction("parent", "LIKE", f"svc.dc2.host00{i}%"),
                                  planner.Restriction("component_3", "=", "cpu")) for i in (1, 2, 3))
    # more prefixes than a few queries are worth: the common prefix
    (part,) = planner.plan(GlobPattern("svc.dc{1,2}.host00[0-5]?.cpu.*"), like=True)
    assert part.queries == tuple((planner.Restriction("parent", "LIKE", f"svc.dc{d}.host00%"),
                                  planner.Restriction("component_3", "=", "cpu")) for d in (1, 2))
    (part,) = planner.plan(GlobPattern("svc.dc3.host0042.**"), like=True)
    assert part.queries == ((planner.Restriction("parent", "LIKE", "svc.dc3.host0042%"),),)
    # one fixed component is too broad a subtree: the components are asked
    (part,) = planner.plan(GlobPattern("svc.{,dc3}.**"), like=True)
    assert all(r.column != "parent" for q in part.queries for r in q)


@pytest.mark.parametrize("component, prefixes", [
    ("host00[1-3]?", ("host001", "host002", "host003")), ("{cpu,mem}*", ("cpu", "mem")),
    ("a[bc]*", ("ab", "ac")), ("ab{c,cd}*", ("abc",)), ("a[!b]*", ("a",)), ("a[b-a]", ("a",)),
    ("[a-z]x", None), ("*x", None), ("x[a-c-]", ("x",)), ("50%*", None), ("x[", ("x",))])
def test_like_prefixes(component, prefixes):
    from biggraphite_like.glob import ComponentPattern

    expanded = [component] if "{" not in component else list(GlobPattern(component).components[0].alternatives)
    assert planner.like_prefixes(ComponentPattern(expanded)) == prefixes
