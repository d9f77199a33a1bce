"""Differential tests: GlobPattern against graphite-web's StandardFinder on whisper trees.

For each pattern, our leaves are `GlobPattern(p).filter(metric names)` and our branches
`GlobPattern(p).filter(directory names)` (every proper ancestor of a metric); they must
equal the leaf and branch paths StandardFinder finds in a whisper tree of the same names.

Patterns deliberately left out, where StandardFinder is not a usable reference:
* a last component mixing `**` with other alternatives (`x.{**,y}`): StandardFinder
  rewrites its remaining patterns to `["*"]` while looping over the alternatives, so the
  result depends on Python's set iteration order;
* empty components (`a..b`, leading dots): we drop them as names are normalised
  (StandardFinder gives the same result, but they are not part of the differential set);
* backslashes in front of `*?[{`: StandardFinder globs without the backslash but then
  reports the pattern text itself as the node's path (`find_escaped_pattern_fields`);
* `;` (tagged-series syntax) and `/` (a path separator on disk).
"""
from __future__ import annotations

import pathlib
import random


import pytest

from biggraphite_like.glob import GlobPattern
from tests.graphite_env import directories_of, make_whisper_tree, standard_find

FIXED_NAMES = [
    # a metric that is also a directory
    "a.b", "a.b.c", "a.b.c.d", "a.b.cd", "a.bc", "a.bb.c",
    # deep names and shared prefixes
    "a.x.y.z.w.v", "a.x.y.z.w.c", "a.x.y.c", "a.x.c", "a.c",
    "ab.c", "abc.c", "abd.c.d",
    # special characters, digits, upper case
    "host-1.cpu_0.user", "host-2.cpu_1.system", "Host-1.cpu_0.user", "HOST.cpu:0.idle",
    "srv_01.disk-sda.io:read", "srv_10.disk-sdb.io:write", "9.8.7", "x1.y2.z3", "X.Y.Z",
    "x.z", "x.a.z", "x.a.b.z", "x.zz", "x.a.zz", "x.z.z",
    "q", "q.q", "q.q.q", "q.q.q.q",
    # brackets and braces that are part of names
    "w.a[b", "w.a{b", "w.a}b", "w.a,b",
]

FIXED_PATTERNS = [
    # literals
    "a", "a.b", "a.b.c", "a.b.c.d", "X.Y.Z", "x.Y.Z", "host-1.cpu_0.user", "nothing.here",
    "w.a[b", "w.a{b", "w.a}b", "w.a,b", "q.q.q",
    # *
    "*", "*.*", "*.*.*", "a.*", "a.*.*", "*.c", "a*.c", "*b*", "a.b*", "a.*c", "*.*:*",
    "host-*.*.*", "**.*", "srv_*.*.io:*", "w.a*", "w.*b",
    # ?
    "?", "a.?", "a.??", "?.?.?", "host-?.cpu_?.user", "x?.y?.z?",
    # classes, ranges, negation
    "a.[bx]", "a.[b-c]*", "[a-z]*.c", "[A-Z]*.*.*", "[!a]*", "a.[!b]*", "[0-9].*.*",
    "srv_[0-9][0-9].*.*", "host-[12].cpu_[!1].*", "w.a[[]b", "w.a[]]b", "[]a].*",
    "w.a[", "[", "a.[!]", "w.a[!",
    # braces, nested, empty alternatives, mixed with wildcards
    "a.{b,c}", "a.{b,c}.{c,d}", "{a,x}.{b,z}", "a.{b{,c},x}", "a.b{,c}", "a.b{,c,d}.*",
    "{a,ab,abc}.c", "{a*,x}.*", "{host,Host}-1.*.*", "a.{b,{c,x{,.y}}}", "{{a}}.b",
    "{a,q}.{q,b}.{q,c}", "a.{b}", "w.a{,[b]}", "w.a{b", "w.a}b", "{a,b", "a.{,b}.c",
    "{,x}.z", "q.{,q}.q", "a.{x,}.c", "a.{,b,bb}.c",
    # an empty alternative in the last component, trailing empty components (issue 15 item 10)
    "a.{,b}", "q.{,q}", "a.{,b,bb}", "a.{b,}", "a.{b,{,c}}", "{,q}", "q.{,}", "q.{}", "q.",
    "a.b.", "q.**.{,q}", "q.{,**}", "x.{,a}.{,z}", "{a,x}.{,b*}",
    # globstar first / middle / last / multiple / mixed (not last)
    "**", "**.c", "**.z", "**.d", "a.**", "x.**", "a.b.**", "a.**.c", "x.**.z",
    "a.**.c.**", "**.b.**", "**.x.**.z", "a.**.**.c", "**.**", "q.**.q", "**.q.**",
    "x.{**,a}.z", "{**,a}.b", "a.{**,x}.*.c", "{a,x}.**.{c,z}", "a.{b,**}.{c,d}",
    "a.x.**.w.*", "**.*.*", "*.**.*", "a.b.c.d.**", "nothing.**",
    # combinations
    "{a,x}.[bx]*.*", "*.{cpu,disk}*.*", "a.?*.{c,d}", "[a-z].**.[c-z]",
    "**.{c,z}", "{q,x}.**.*", "*.x.**",
]


def random_names(rng: random.Random, count: int) -> list[str]:
    """Names of depth 1..6 over small alphabets, so wildcards hit often."""
    components = ["a", "b", "c", "ab", "ba", "abc", "a1", "b2", "A", "B",
                  "x-y", "x_y", "m:n", "10", "1"]
    names = set()
    while len(names) < count:
        depth = rng.randint(1, 6)
        names.add(".".join(rng.choice(components) for _ in range(depth)))
    return sorted(names)


def random_component(rng: random.Random, component: str, others: list[str]) -> str:
    """A pattern component derived from a name component."""
    choice = rng.randrange(12)
    if choice == 0:
        return "*"
    if choice == 1:
        return component[: rng.randint(0, len(component))] + "*"
    if choice == 2:
        return "*" + component[rng.randint(0, len(component)) :]
    if choice == 3:
        index = rng.randrange(len(component))
        return component[:index] + "?" + component[index + 1 :]
    if choice == 4:
        index = rng.randrange(len(component))
        other = rng.choice("abcAB1-")
        form = rng.choice(["[%s%s]", "[!%s%s]", "[%s-%s]"])
        bracket = form % tuple(sorted([component[index], other]))
        return component[:index] + bracket + component[index + 1 :]
    if choice == 5:
        return "{%s,%s}" % (component, rng.choice(others))
    if choice == 6:
        return "{%s,%s*}" % (rng.choice(others), component[:1])
    if choice == 7:
        return component[:1] + "{,%s}" % component[1:] if len(component) > 1 else component
    if choice == 8:
        return "{%s,{%s,%s}}" % (rng.choice(others), rng.choice(others), component)
    return component


def random_pattern(rng: random.Random, names: list[str], others: list[str]) -> str:
    parts = rng.choice(names).split(".")
    pattern = [random_component(rng, part, others) for part in parts]
    if rng.random() < 0.3:  # replace a run of components with a globstar
        start = rng.randrange(len(pattern))
        end = rng.randint(start, len(pattern))
        pattern[start:end] = ["**"]
    elif rng.random() < 0.1:  # a middle {**,x}
        index = rng.randrange(len(pattern))
        if index < len(pattern) - 1:
            pattern[index] = "{**,%s}" % parts[index]
    elif rng.random() < 0.15:  # an empty alternative in the last component: matches nothing there
        pattern[-1] = "{,%s}" % pattern[-1]
    return ".".join(pattern)


def check(root: pathlib.Path, metrics: list[str], directories: list[str], pattern: str) -> None:
    """Ours equal StandardFinder's, less the bogus branches it names after a trailing empty
    component or alternative (`a.` for `a.{,b}`, `` for `{,a}`): no metric has such a name."""
    expected_leaves, expected_branches = standard_find(root, pattern)
    expected_branches = [b for b in expected_branches if b and not b.endswith(".")]
    glob = GlobPattern(pattern)
    ours = (glob.filter(metrics), glob.filter(directories))
    assert ours == (expected_leaves, expected_branches), pattern


@pytest.fixture(scope="module")
def fixed_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("fixed_tree")
    make_whisper_tree(root, FIXED_NAMES)
    return root, sorted(FIXED_NAMES), directories_of(FIXED_NAMES)


@pytest.fixture(scope="module")
def random_tree(tmp_path_factory):
    names = random_names(random.Random(1234), 300)
    root = tmp_path_factory.mktemp("random_tree")
    make_whisper_tree(root, names)
    return root, names, directories_of(names)


def test_tree_helpers(fixed_tree):
    root, metrics, directories = fixed_tree
    assert (root / "a" / "b.wsp").is_file() and (root / "a" / "b").is_dir()
    assert "a.b" in metrics and "a.b" in directories and "a" not in metrics
    leaves, branches = standard_find(root, "a.b")
    assert (leaves, branches) == (["a.b"], ["a.b"])


@pytest.mark.parametrize("pattern", FIXED_PATTERNS)
def test_fixed_patterns_on_fixed_tree(fixed_tree, pattern):
    check(*fixed_tree, pattern)


def test_fixed_patterns_find_something(fixed_tree):
    root, metrics, directories = fixed_tree
    empty = [p for p in FIXED_PATTERNS if not GlobPattern(p).filter(metrics + directories)]
    # patterns meant to match nothing (a brace group cannot span a dot; `[b]` is 'b')
    assert set(empty) <= {"nothing.here", "nothing.**", "x.Y.Z", "[", "w.a[", "w.a[!",
                          "a.[!]", "{a,b", "w.a[[]b", "w.a[]]b", "[]a].*", "a.b.c.d.**",
                          "a.{b,{c,x{,.y}}}", "w.a{,[b]}", "q.{,}", "q.{}", "q.", "a.b."}
    assert len(empty) < len(FIXED_PATTERNS) // 5


def test_fixed_patterns_on_random_tree(random_tree):
    for pattern in FIXED_PATTERNS:
        check(*random_tree, pattern)


def test_random_patterns_on_random_tree(random_tree):
    root, metrics, directories = random_tree
    rng = random.Random(99)
    others = sorted({part for name in metrics for part in name.split(".")})
    hits = 0
    for _ in range(250):
        pattern = random_pattern(rng, metrics, others)
        check(root, metrics, directories, pattern)
        hits += bool(GlobPattern(pattern).filter(metrics))
    assert hits > 200  # patterns come from names, so nearly all of them match something


def test_random_patterns_on_fixed_tree(fixed_tree):
    root, metrics, directories = fixed_tree
    rng = random.Random(7)
    parts = {part for name in metrics for part in name.split(".")}
    others = sorted(parts - {"a[b", "a{b", "a}b", "a,b"})
    plain = [name for name in metrics if not name.startswith("w.")]
    for _ in range(150):
        check(root, metrics, directories, random_pattern(rng, plain, others))
