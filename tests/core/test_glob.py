"""Unit tests of biggraphite_like.glob: every rule of the module docstring."""
from __future__ import annotations

import random
import threading
import time


import pytest

from biggraphite_like import glob as glob_module
from biggraphite_like.errors import GlobTooComplex, InvalidGlob, TooManyResults
from biggraphite_like.glob import (
    DEFAULT_MAX_EXPANSION,
    DEFAULT_MAX_RESULTS,
    GLOBSTAR,
    MAX_COMPONENTS,
    MAX_PATTERN_LENGTH,
    ComponentPattern,
    GlobPattern,
    is_glob,
)

NAMES = [
    "a", "a.b", "a.b.c", "a.b.c.d", "a.bb.c", "a.x.c", "a.x.y.c", "a.c",
    "b.b.c", "x.z", "x.a.z", "x.a.b.z", "x.zz", "cpu0", "cpu1", "cpu10", "cpux",
    "A.b", "host-1.cpu_0:user", "Host-1.cpu_0:user",
]


def match(pattern: str, names=NAMES) -> list[str]:
    return GlobPattern(pattern).filter(names)


def alternatives(component: str) -> tuple[str, ...]:
    """The brace expansion of a component (not last: there an empty alternative is dropped)."""
    return GlobPattern(component + ".x").components[0].alternatives


# --- constants and helpers -------------------------------------------------------------

def test_constants():
    assert DEFAULT_MAX_EXPANSION == 10_000
    assert DEFAULT_MAX_RESULTS == 100_000
    assert GLOBSTAR == "**"
    assert MAX_PATTERN_LENGTH == 4096
    assert MAX_COMPONENTS == 64


@pytest.mark.parametrize("text,expected", [
    ("a.b.c", False), ("a-b_c:d", False), ("a.*", True), ("a?", True), ("[ab]", True),
    ("{a,b}", True), ("a}", False), ("a]", False),
])
def test_is_glob(text, expected):
    assert is_glob(text) is expected


# --- fnmatch wildcards -----------------------------------------------------------------

def test_star():
    assert match("a.*") == ["a.b", "a.c"]
    assert match("a.*", ["a.b", "a.bb", "a.c", "a.b.c", "a"]) == ["a.b", "a.bb", "a.c"]
    assert match("*.b") == ["A.b", "a.b"]
    assert match("cpu*") == ["cpu0", "cpu1", "cpu10", "cpux"]


def test_star_does_not_cross_dots():
    assert match("a*") == ["a"]
    assert match("a.*.c") == ["a.b.c", "a.bb.c", "a.x.c"]


def test_question_mark():
    assert match("cpu?") == ["cpu0", "cpu1", "cpux"]
    assert match("a.?.c") == ["a.b.c", "a.x.c"]


def test_character_class_and_range():
    assert match("cpu[01]") == ["cpu0", "cpu1"]
    assert match("cpu[0-9]") == ["cpu0", "cpu1"]
    assert match("cpu[a-z]") == ["cpux"]
    assert match("cpu[0-9]*") == ["cpu0", "cpu1", "cpu10"]


def test_negated_class():
    assert match("cpu[!0]") == ["cpu1", "cpux"]
    assert match("cpu[!0-9]") == ["cpux"]


def test_unclosed_bracket_is_literal():
    names = ["a[", "a[b", "ab", "a"]
    assert match("a[", names) == ["a["]
    assert match("a[b", names) == ["a[b"]
    assert match("a[*", names) == ["a[", "a[b"]


def test_case_sensitive():
    assert match("a.b") == ["a.b"]
    assert match("A.*") == ["A.b"]
    assert match("[A-Z]*.b") == ["A.b"]
    assert match("host*.*") == ["host-1.cpu_0:user"]
    assert match("?ost-1.cpu_0:user") == ["Host-1.cpu_0:user", "host-1.cpu_0:user"]


def test_special_characters_are_literal():
    assert match("host-1.cpu_0:user") == ["host-1.cpu_0:user"]
    assert match("*.*:user") == ["Host-1.cpu_0:user", "host-1.cpu_0:user"]
    assert match("a,b", ["a,b", "a", "b"]) == ["a,b"]


def test_pathological_wildcards_do_not_backtrack():
    pattern = GlobPattern("*a*a*a*a*a*a*a*a*a*b")
    results = []
    worker = threading.Thread(target=lambda: results.append(pattern.matches("a" * 5000)))
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "matching took more than 10 s: catastrophic backtracking"
    assert results == [False]
    assert pattern.matches("a" * 20 + "b")


# --- braces ----------------------------------------------------------------------------

def test_braces_simple():
    assert alternatives("{b,a}") == ("a", "b")
    assert match("a.{b,c}") == ["a.b", "a.c"]
    assert match("{a,x}.*.z") == ["x.a.z"]


def test_braces_nested():
    assert alternatives("{a,{b,c}d}") == ("a", "bd", "cd")
    assert alternatives("{x{a,b}c}") == ("xac", "xbc")


def test_braces_empty_alternatives():
    assert alternatives("a{,b}") == ("a", "ab")
    assert match("cpu{,1}") == ["cpu1"]
    assert match("cpu1{,0}") == ["cpu1", "cpu10"]


def test_braces_deduplicated():
    assert alternatives("{a,a,{a,b}}") == ("a", "b")


def test_braces_with_wildcards():
    assert match("cpu{0,1}*") == ["cpu0", "cpu1", "cpu10"]
    assert match("a.{b*,x}.c") == ["a.b.c", "a.bb.c", "a.x.c"]
    assert match("{cpu[!0],x}") == ["cpu1", "cpux"]


def test_unbalanced_braces_are_literal():
    assert alternatives("{a") == ("{a",)
    assert alternatives("a}") == ("a}",)
    assert alternatives("{a,{b}") == ("{a,b",)
    assert alternatives("{a,b}c}") == ("ac}", "bc}")
    assert alternatives("}{a}{") == ("}a{",)
    assert match("{a", ["{a", "a"]) == ["{a"]


def test_braces_do_not_span_dots():
    # split on '.' first: '{a' and 'b}' are unbalanced, so literal
    assert [c.alternatives for c in GlobPattern("{a.b}").components] == [("{a",), ("b}",)]


def test_braces_match_graphite_expand_braces_random():
    graphite_finders = pytest.importorskip("graphite.finders")
    rng = random.Random(20240601)
    for _ in range(2000):
        text = "".join(rng.choice("ab{},{}") for _ in range(rng.randint(1, 12)))
        if "." in text:
            continue
        expected = set(graphite_finders.expand_braces(text))
        if expected == {""}:
            with pytest.raises(InvalidGlob):
                GlobPattern(text)
            continue
        components = GlobPattern(text + ".x").components
        assert len(components) == 2, text
        assert set(components[0].alternatives) == expected, text


# --- globstar --------------------------------------------------------------------------

def test_globstar_middle_matches_zero_or_more():
    assert match("x.**.z") == ["x.a.b.z", "x.a.z", "x.z"]
    assert match("a.**.c") == ["a.b.c", "a.bb.c", "a.c", "a.x.c", "a.x.y.c"]


def test_globstar_first():
    assert match("**.z") == ["x.a.b.z", "x.a.z", "x.z"]
    assert match("**.c", ["c", "a.c", "a.b.c", "ac"]) == ["a.b.c", "a.c", "c"]


def test_globstar_last_matches_one_or_more():
    assert match("x.**") == ["x.a.b.z", "x.a.z", "x.z", "x.zz"]
    assert "a" not in match("a.**")
    assert match("a.b.**") == ["a.b.c", "a.b.c.d"]


def test_globstar_alone_matches_everything():
    assert match("**") == sorted(NAMES)


def test_globstar_multiple():
    assert match("a.**.**.c") == ["a.b.c", "a.bb.c", "a.c", "a.x.c", "a.x.y.c"]
    assert match("x.**.z.**", ["x.z", "x.z.a", "x.q.z.a.b", "x.a"]) == ["x.q.z.a.b", "x.z.a"]
    assert match("**.b.**") == ["a.b.c", "a.b.c.d", "b.b.c", "x.a.b.z"]


def test_globstar_only_as_whole_alternative():
    # '**' inside a longer alternative is plain fnmatch (same as '*')
    assert match("a**") == ["a"]
    assert match("a.b**", ["a.b", "a.bb", "a.b.c"]) == ["a.b", "a.bb"]
    assert match("x.***") == ["x.z", "x.zz"]
    assert match("x.{**}") == ["x.a.b.z", "x.a.z", "x.z", "x.zz"]


def test_globstar_mixed_with_other_alternatives():
    names = ["x.z", "x.y.z", "x.y.w.z", "x.q", "x.q.r"]
    # middle {**,y}: zero or more components, or 'y'
    assert match("x.{**,y}.z", names) == ["x.y.w.z", "x.y.z", "x.z"]
    # last {**,q}: one or more components, or 'q'
    assert match("x.{**,q}", names) == ["x.q", "x.q.r", "x.y.w.z", "x.y.z", "x.z"]
    comp = GlobPattern("x.{**,q}").components[1]
    assert comp.is_globstar and comp.matches("q") and not comp.matches("y")


def test_globstar_matching_is_polynomial():
    pattern = GlobPattern(".".join(["**", "a"] * 20 + ["b"]))
    name = ".".join(["a"] * 63 + ["c"])
    start = time.monotonic()
    assert not pattern.matches(name)
    assert pattern.matches(".".join(["a"] * 63 + ["b"]))
    assert time.monotonic() - start < 10


# --- empty components and backslashes -------------------------------------------------

def test_empty_components_are_dropped():
    assert match("a..b") == ["a.b"]
    assert match(".a.b") == ["a.b"]
    assert len(GlobPattern("..a...b").components) == 2
    assert len(GlobPattern("a.{}.b").components) == 2


@pytest.mark.parametrize("pattern", ["a.b.", "a.b.{}", "a.b.{,}", "a.b..", "a.b\\."])
def test_a_trailing_empty_component_matches_nothing(pattern):
    """StandardFinder finds only the bogus `a.b.` (issue 15 item 10)."""
    glob = GlobPattern(pattern)
    assert glob.matches_nothing and match(pattern) == [] and glob.exact_names() == []


def test_an_empty_alternative_in_the_last_component_matches_nothing():
    """`a.{,b}` is `a.` (nothing, as in StandardFinder) or `a.b`: never `a` (issue 15 item 10)."""
    names = ["a", "a.b", "a.bb", "a.c", "a.b.c"]
    assert match("a.{,b}", names) == ["a.b"]
    assert match("a.{b,{,c}}", names) == ["a.b", "a.c"]
    assert match("a.{,**}", names) == ["a.b", "a.b.c", "a.bb", "a.c"]
    assert match("{,a}", names) == ["a"]
    assert GlobPattern("a.{,b}").exact_names() == ["a.b"]
    assert (GlobPattern("a.{,b}").depth, GlobPattern("a.{,b}").components[1].literals) == (2, {"b"})
    assert not GlobPattern("a.{,b}").matches_nothing


def test_whole_empty_alternative_matches_zero_components():
    names = ["a.c", "a.b.c", "a.x.c", "a.b.b.c"]
    assert match("a.{,b}.c", names) == ["a.b.c", "a.c"]
    comp = GlobPattern("a.{,b}.c").components[1]
    assert comp.optional and comp.literals is None and comp.prefix == ""


@pytest.mark.parametrize("pattern", ["", ".", "...", "{}", "{,}.{}"])
def test_empty_pattern_is_invalid(pattern):
    with pytest.raises(InvalidGlob):
        GlobPattern(pattern)


def test_backslashes_are_stripped():
    assert GlobPattern("a\\.b").pattern == "a\\.b"
    assert match("a\\.b") == ["a.b"]
    assert match("cpu\\*") == ["cpu0", "cpu1", "cpu10", "cpux"]
    assert match("a\\\\b", ["ab", "a\\b"]) == ["ab"]


def test_non_string_pattern_is_invalid():
    with pytest.raises(InvalidGlob):
        GlobPattern(None)  # type: ignore[arg-type]


# --- limits ----------------------------------------------------------------------------

def test_expansion_limit_single_component_is_fast():
    start = time.monotonic()
    with pytest.raises(GlobTooComplex) as info:
        GlobPattern("{a,b}" * 20)
    assert time.monotonic() - start < 5
    assert "max_glob_expansion=10000" in str(info.value)
    assert "more than 10000 alternatives" in str(info.value)


def test_expansion_limit_counts_all_components():
    # 8 components of 2 alternatives = 16 in total
    pattern = ".".join(["{a,b}"] * 8)
    assert len(GlobPattern(pattern, max_expansion=16).components) == 8
    with pytest.raises(GlobTooComplex) as info:
        GlobPattern(pattern, max_expansion=15)
    assert "max_glob_expansion=15" in str(info.value)


def test_expansion_limit_boundary():
    assert len(alternatives("{a,b}" * 13)) == 8192
    GlobPattern("{a,b}" * 13 + "{,c}", max_expansion=16384)
    with pytest.raises(GlobTooComplex):
        GlobPattern("{a,b}" * 13 + "{,c}", max_expansion=16383)


def test_expansion_with_massive_duplicates_is_bounded():
    # 2**40 identical expansions: must neither hang nor fail
    start = time.monotonic()
    assert alternatives("{,}" * 40 + "a") == ("a",)
    assert alternatives("{,a}" * 50) == tuple("a" * i for i in range(51))
    # 201 distinct alternatives, but ~40000 colliding concatenations: the work budget
    # (16 x max_expansion) stops it
    with pytest.raises(GlobTooComplex) as info:
        GlobPattern("{,a}" * 200, max_expansion=1000)
    assert "max_glob_expansion=1000" in str(info.value)
    assert time.monotonic() - start < 5


def test_brace_nesting_limit():
    GlobPattern("{" * 60 + "a" + "}" * 60)
    with pytest.raises(GlobTooComplex) as info:
        GlobPattern("{" * 100 + "a" + "}" * 100)
    assert "64" in str(info.value)


def test_pattern_length_limit():
    GlobPattern("a" * MAX_PATTERN_LENGTH)
    with pytest.raises(InvalidGlob) as info:
        GlobPattern("a" * (MAX_PATTERN_LENGTH + 1))
    assert "4096" in str(info.value)


def test_component_count_limit():
    assert GlobPattern(".".join(["a"] * 64)).depth == 64
    assert GlobPattern(".".join(["**"] * 64)).min_depth == 1
    assert GlobPattern(".".join(["a"] * 64) + "..").depth == 64
    with pytest.raises(InvalidGlob) as info:
        GlobPattern(".".join(["a"] * 65))
    assert "64" in str(info.value)


def test_results_limit_of_a_regex_filter():
    """`a.**` is filtered by one regex, a chunk of names at a time: the limit is exact, and
    names are not read more than a chunk past it."""
    names = [f"a.m{i}.x" for i in range(50)]
    assert GlobPattern("a.**")._around_regex is not None
    assert len(GlobPattern("a.**").filter(names, max_results=50)) == 50
    with pytest.raises(TooManyResults, match="more than 49 names"):
        GlobPattern("a.**").filter(names, max_results=49)

    def many():
        yield from (f"a.m{i}" for i in range(glob_module.FILTER_CHUNK))
        raise AssertionError("filter consumed names a chunk past the limit")
    with pytest.raises(TooManyResults):
        GlobPattern("a.**").filter(many(), max_results=10)


def test_results_limit():
    names = [f"a.m{i}" for i in range(50)]
    assert len(GlobPattern("a.*").filter(names, max_results=50)) == 50
    with pytest.raises(TooManyResults) as info:
        GlobPattern("a.*").filter(names, max_results=49)
    message = str(info.value)
    assert "max_results=49" in message and "more than 49 names" in message and "a.*" in message


def test_results_limit_counts_distinct_names():
    assert GlobPattern("a.*").filter(["a.b"] * 10, max_results=1) == ["a.b"]


def test_results_limit_stops_early():
    def names():
        yield from ("a.m%d" % i for i in range(11))
        raise AssertionError("filter consumed names after the limit was exceeded")
    with pytest.raises(TooManyResults):
        GlobPattern("a.*").filter(names(), max_results=10)


def test_filter_sorted_unique():
    assert GlobPattern("*").filter(["b", "a", "c", "a"]) == ["a", "b", "c"]


# --- structure used by the stores -----------------------------------------------------

def test_component_literals():
    assert GlobPattern("{b,a}").components[0].literals == frozenset({"a", "b"})
    assert GlobPattern("a").components[0].literals == frozenset({"a"})
    assert GlobPattern("{a,b*}").components[0].literals is None
    assert GlobPattern("a.**").components[1].literals is None
    assert GlobPattern("{a,[b]}").components[0].literals is None


def test_component_prefix():
    assert GlobPattern("cpu{0,1}*").components[0].prefix == "cpu"
    assert GlobPattern("cpu*").components[0].prefix == "cpu"
    assert GlobPattern("ab?d").components[0].prefix == "ab"
    assert GlobPattern("{abc,abd}").components[0].prefix == "ab"
    assert GlobPattern("{abc,x}").components[0].prefix == ""
    assert GlobPattern("*").components[0].prefix == ""
    assert GlobPattern("{ab,**}").components[0].prefix == ""
    assert GlobPattern("[a]b").components[0].prefix == ""
    assert GlobPattern("literal").components[0].prefix == "literal"


def test_component_is_globstar_and_matches():
    comp = GlobPattern("{ab*,c,**}").components[0]
    assert comp.is_globstar
    assert comp.alternatives == ("**", "ab*", "c")
    assert comp.matches("abx") and comp.matches("c") and not comp.matches("x")
    assert not GlobPattern("a*").components[0].is_globstar


def test_component_pattern_direct():
    comp = ComponentPattern(["x", "y[0-9]"])
    assert comp.matches("x") and comp.matches("y7") and not comp.matches("yy")
    assert comp.literals is None and comp.prefix == ""


def test_depth_and_min_depth():
    assert (GlobPattern("a.b.c").depth, GlobPattern("a.b.c").min_depth) == (3, 3)
    assert (GlobPattern("a.*.{c,d}").depth, GlobPattern("a.*.{c,d}").min_depth) == (3, 3)
    assert (GlobPattern("a.**.c").depth, GlobPattern("a.**.c").min_depth) == (None, 2)
    assert (GlobPattern("a.**").depth, GlobPattern("a.**").min_depth) == (None, 2)
    assert GlobPattern("**").min_depth == 1
    assert GlobPattern("**.**").min_depth == 1
    assert GlobPattern("a.{**,b}.c").min_depth == 2
    assert (GlobPattern("a.{,b}.c").depth, GlobPattern("a.{,b}.c").min_depth) == (None, 2)
    assert GlobPattern("a.**.c").has_globstar and not GlobPattern("a.*.c").has_globstar


def test_literal_prefix():
    assert GlobPattern("a.b.c").literal_prefix() == ("a", "b", "c")
    assert GlobPattern("a.b.*.d").literal_prefix() == ("a", "b")
    assert GlobPattern("a.{b,c}.d").literal_prefix() == ("a",)
    assert GlobPattern("a.{b}.d").literal_prefix() == ("a", "b", "d")
    assert GlobPattern("*.b").literal_prefix() == ()
    assert GlobPattern("a.**.b").literal_prefix() == ("a",)


def test_exact_names():
    assert GlobPattern("a.{b,c}.{d,e}").exact_names() == ["a.b.d", "a.b.e", "a.c.d", "a.c.e"]
    assert GlobPattern("a.b").exact_names() == ["a.b"]
    assert GlobPattern("a.{,b}.c").exact_names() == ["a.b.c", "a.c"]
    assert GlobPattern("a.*").exact_names() is None
    assert GlobPattern("a.**").exact_names() is None
    assert GlobPattern("a.{b,c*}").exact_names() is None
    assert GlobPattern("{a,b}.{c,d}.{e,f}").exact_names(limit=8) is not None
    assert GlobPattern("{a,b}.{c,d}.{e,f}").exact_names(limit=7) is None


def test_matches_and_matches_components_agree():
    pattern = GlobPattern("a.{b,x}.**")
    for name in NAMES:
        assert pattern.matches(name) == pattern.matches_components(name.split("."))
    assert pattern.matches("a.x.y.c") and not pattern.matches("a.b")


def test_repr_and_str():
    pattern = GlobPattern("a.*")
    assert str(pattern) == "a.*"
    assert repr(pattern) == "GlobPattern('a.*')"
    assert "a" in repr(pattern.components[0])


def test_module_documents_semantics():
    doc = glob_module.__doc__ or ""
    for word in ("StandardFinder", "**", "fnmatch", "expand_braces", "max_expansion"):
        assert word in doc


def test_a_plain_globstar_matches_as_the_alignment_search_does():
    """Patterns whose one variable component is a plain `**` are matched by their ends
    (GlobPattern._match_around_globstar), or by one regex when the others are literals; on
    random names and patterns that gives what the general alignment search gives."""
    rng = random.Random(36)
    components = ["a", "b", "ab", "x"]
    names = {".".join(rng.choice(components) for _ in range(rng.randint(1, 6))) for _ in range(3000)}
    pieces = ["a", "b", "*", "a*", "?", "[ab]", "{a,x}", "x"]
    checked = regexes = 0
    for _ in range(400):
        parts = [rng.choice(pieces) for _ in range(rng.randint(0, 4))]
        parts.insert(rng.randint(0, len(parts)), GLOBSTAR)
        pattern = GlobPattern(".".join(parts))
        assert pattern._around_globstar is not None
        for name in names:
            assert pattern.matches(name) == pattern._match_variable(name.split(".")), (pattern, name)
        assert pattern.filter(names) == sorted(n for n in names if pattern._match_variable(n.split("."))), pattern
        regexes += pattern._around_regex is not None
        checked += 1
    assert checked == 400 and 50 < regexes < 400, regexes
    assert GlobPattern("a.{**,b}.c")._around_globstar is None and GlobPattern("a.**.b.**")._around_globstar is None


def test_a_globstar_regex_is_compiled_only_for_many_names():
    """A plain `**` between literals filters a few names component by component (a pattern
    asked once would pay its regex's compile for them), REGEX_MIN_NAMES or more by its
    regex: the same answers either way."""
    few = ["a.x.b", "a.b", "a.x.c", "b.a.b", "a.x.y.b"]
    pattern = GlobPattern("a.**.b")
    assert pattern.filter(few) == ["a.b", "a.x.b", "a.x.y.b"] and pattern._regex is None
    assert pattern.matches("a.q.b") and not pattern.matches("a.q") and pattern._regex is None
    many = [f"a.x{i}.{'b' if i % 2 else 'c'}" for i in range(glob_module.REGEX_MIN_NAMES)] + few
    assert pattern.filter(many) == sorted(n for n in many if pattern._match_variable(n.split(".")))
    assert pattern._regex is not None and pattern.matches("a.q.b") and not pattern.matches("a.q")
