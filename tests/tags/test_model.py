"""Tagged series names and tag expressions against graphite-web's own code.

graphite's TaggedSeries (parse, path, validation) and its expression parser are imported
here only; each of many names and expressions must give the same answer (or be refused
by both, ours with the reason). The matcher is compared with LocalDatabaseTagDB's
semantics in tests/graphite/test_tagdb.py (it needs graphite's Django database).
"""
from __future__ import annotations

import itertools

import pytest

from biggraphite_like.errors import InvalidMetricName, InvalidTag, InvalidTagExpression
from biggraphite_like import names
from biggraphite_like.tags.expressions import TagQuery, parse_term
from biggraphite_like.tags.series import (
    TaggedSeries,
    canonical_path,
    canonical_paths,
    is_canonical,
    is_tagged,
    tags_of_path,
)
from tests.graphite_env import configure

configure()
from graphite.tags.base import BaseTagDB  # noqa: E402
from graphite.tags.utils import TaggedSeries as GraphiteTaggedSeries  # noqa: E402

NAMES = [
    "disk.used;host=web1;dc=us", "disk.used;dc=us;host=web1", "a;b=c", "a.b.c;z=1;a=2;m=3",
    "~a;b=c", "~~x.y;k=v", "name;name=other", "m;name=x;a=b", "m;a=b=c", "m;a==b", "m;tag.with.dots=v.a.l",
    "m;k=v;k=w", "m;a=~b", "m;a=b~", "m;a!=b", "m;^a=b", "m;a=", "m;=b", "m;", "m;;a=b", ";a=b", "~;a=b",
    "m;a", "m;a=b;", 'm{a="b",c="d"}', 'm{a="b"}', 'm{a="b\\"q"}', 'm{a="b",c=d}', '{a="b"}', 'm{a="b"}}',
    'm{a="b"{c="d"}', 'm{a="~b"}', 'm{a;x="b"}', "m;é=ü", "m;a=b c", "plain.name", "m;a=b;c=d;e=f;g=h",
    # already canonical or nearly (the parser's fast path must accept only the first two)
    "m;a.b=c;a=b", "m;a=b;a.b=c", "m;a=b;b=~c", "m;a=b;b!=c", "m;a=b;name=x", "m;a=b;a=b", "~m;a=b;c=d",
    "m;a=b;c=", "m;a=b=c;d=e", "m{x;a=b", "m;a=b;c^=d",
]


def graphite_parse(name):
    try:
        parsed = GraphiteTaggedSeries.parse(name)
        return ("ok", parsed.path, dict(parsed.tags))
    except Exception:
        return ("error",)


def ours_parse(name):
    try:
        parsed = TaggedSeries.parse(name)
        return ("ok", parsed.path, dict(parsed.tags))
    except InvalidTag:
        return ("error",)


@pytest.mark.parametrize("name", NAMES)
def test_parse_and_canonical_path_equal_graphite(name):
    assert ours_parse(name) == graphite_parse(name)


@pytest.mark.parametrize("name", NAMES)
def test_canonical_path_and_its_shortcut_equal_graphite(name):
    expected = graphite_parse(name)
    if expected[0] == "ok":
        assert canonical_path(name) == expected[1]
        assert canonical_paths(["a;b=c", name]) == ["a;b=c", expected[1]]  # the batch's inlined shortcut
        assert is_canonical(name) == (name == expected[1] and is_tagged(name))
    else:
        with pytest.raises(InvalidTag):
            canonical_path(name)
        with pytest.raises(InvalidTag):
            canonical_paths(["a;b=c", name])
        assert not is_canonical(name)


@pytest.mark.parametrize("name", [n for n in NAMES if graphite_parse(n)[0] == "ok"])
def test_tags_of_a_canonical_path_are_the_parsed_tags(name):
    path = TaggedSeries.parse(name).path
    assert tags_of_path(path) == dict(GraphiteTaggedSeries.parse(name).tags)


@pytest.mark.parametrize("name, reason", [
    ("m;=b", "segment '=b'"), ("m;a=", "value of tag 'a' may not be empty"), ("m;a!=b", "'!' is not allowed"),
    ("m;^a=b", "'^' is not allowed"), ("m;a=~b", "may not start with '~'"), ("~;a=b", "leading '~'"),
    ('m{a;x="b"}', "';' is not allowed"), ("m;a", "segment 'a'"),
])
def test_invalid_names_are_refused_with_the_reason(name, reason):
    with pytest.raises(InvalidTag, match=None) as info:
        TaggedSeries.parse(name)
    assert reason in str(info.value)


def test_metric_names_that_are_tagged_become_their_canonical_path():
    assert names.normalize("disk.used;host=web1;dc=us") == "disk.used;dc=us;host=web1"
    assert names.normalize("plain.name") == "plain.name"
    assert not is_tagged("plain.name") and is_tagged("a;b=c")
    with pytest.raises(InvalidMetricName, match="may not be empty"):
        names.normalize("disk.used;host=")


EXPRESSIONS = [
    "a=b", "a!=b", "a=~b", "a!=~b", "a=", "a!=", "a=~", "a!=~", "a=~.*", "a!=~.*", "a=~^b", "name=x.y",
    "a=b=c", "a==b", "a!==b", "a=~!b", "!a=b", "a;b=c", "=b", "a", "a!b=c", "a^=b", "a=~(b|c)", "a b=c",
]


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_expression_parsing_equals_graphite(text):
    try:
        expected = BaseTagDB.parse_tagspec(text)
    except ValueError:
        expected = None
    try:
        term = parse_term(text)
        got = (term.tag, term.operator, term.spec)
    except InvalidTagExpression:
        got = None
    assert got == expected


VALUES = ["", "b", "bc", "cb", "x.y", "xy", "b.c", "B", "~b", "b~", "ab", "ba"]
SPECS = ["", "b", "bc", "x.y", "^b", "^b|c", "b|c", "b.*", ".*", "c?", "(b)", "[bx]", "x\\.y", "^$", "b$", "^.b"]


def graphite_matches(operator, spec, value, requires_value):
    """LocalDatabaseTagDB's decision for one series value ('' when the tag is absent):
    REGEXP (re.search on the anchored spec) in SQL for value-requiring terms, its Python
    filter (re.match) for the others (graphite/tags/localdatabase.py)."""
    import re

    if operator in ("=~", "!=~") and not spec.startswith("^"):
        spec = "^(" + spec + ")"
    if not requires_value:
        return {"=": value == spec, "!=": value != spec, "=~": re.match(spec, value) is not None,
                "!=~": re.match(spec, value) is None}[operator]
    if value == "":
        return False  # the SQL join needs the tag
    return {"=": value == spec, "!=": value != spec, "=~": re.search(spec, value) is not None,
            "!=~": re.search(spec, value) is None}[operator]


def graphite_requires_value(operator, spec):
    import re

    anchored = spec if spec.startswith("^") else "^(" + spec + ")"
    return {"=": spec != "", "!=": spec == "", "=~": not re.match(anchored, ""),
            "!=~": bool(re.match(anchored, ""))}[operator]


@pytest.mark.parametrize("operator, spec", list(itertools.product(["=", "!=", "=~", "!=~"], SPECS)))
def test_term_semantics_equal_graphite_for_every_value(operator, spec):
    term = parse_term(f"a{operator}{spec}")
    requires = graphite_requires_value(operator, spec)
    assert term.requires_value == requires
    for value in VALUES:
        assert term.matches(value) == graphite_matches(operator, spec, value, requires), value


def test_a_query_needs_a_term_requiring_a_value():
    with pytest.raises(InvalidTagExpression, match="at least one expression must require a non-empty value"):
        TagQuery.parse(["a!=b", "c=~.*"])
    assert TagQuery.parse(["a!=b", "c=d"]).matches({"c": "d"})
    assert not TagQuery.parse(["a!=b", "c=d"]).matches({"c": "d", "a": "b"})


@pytest.mark.parametrize("regex, why", [
    ("(a+)+$", "repetition inside a repetition"), ("(a|aa)*c", "alternation inside a repetition"),
    ("(a*)*", "repetition inside a repetition"), ("a*b*c*d*", "more than 3 variable repetitions"),
    ("(a)\\2", "backreferences"), ("x" * 300, "at most 256"), ("(", "invalid regex"),
])
def test_hostile_or_broken_regexes_are_refused_with_the_reason(regex, why):
    with pytest.raises(InvalidTagExpression) as info:
        parse_term(f"a=~{regex}")
    assert why in str(info.value)


@pytest.mark.parametrize("spec, prefix", [
    ("abc.*", "abc"), ("abc", "abc"), ("x\\.y.*", "x.y"), ("^ab", "ab"), ("^ab|c", ""), ("(ab)c?d", "ab"),
    ("a|b", ""), ("[ab]c", ""), ("(?i:ab)", ""), ("ab*", "a"), ("ab?c", "a"), ("a{2}", ""),
])
def test_literal_prefix_of_regex_terms(spec, prefix):
    term = parse_term(f"t=~{spec}")
    assert term.literal_prefix == prefix
    # the prefix is sound: every value the regex matches starts with it
    for value in ["abc", "abcd", "x.y", "xzy", "ab", "abd", "c", "aa", "b", "bc", "ac", "ABc"]:
        if term.matches(value):
            assert value.startswith(prefix)


def test_canonical_form_equals_graphite_on_many_random_hostile_names():
    """The one-regex canonical check (and the normalisation behind it) against graphite's
    TaggedSeries.parse on 20,000 random names over the characters that matter."""
    import random

    rng = random.Random(17)
    alphabet = ["a", "b", "name", ";", "=", "~", "!", "^", "{", "}", '"', ",", ".", "é", "\\", "=~"]
    checked = canonical = 0
    for _ in range(20_000):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 14)))
        if rng.random() < 0.5:  # shaped like a series, so that many parse
            name = rng.choice(["m", "~m", "a.b", ""]) + "".join(
                ";" + rng.choice(["a", "b", "name", "c!", "d^", ""]) + "=" + rng.choice(["1", "~1", "", "x=y", "2"])
                for _ in range(rng.randrange(1, 4)))
        expected = graphite_parse(name)
        if expected[0] == "ok":
            assert canonical_path(name) == expected[1], name
            assert is_canonical(name) == (name == expected[1] and is_tagged(name)), name
            canonical += is_canonical(name)
        else:
            assert not is_canonical(name), name
            with pytest.raises(InvalidTag):
                canonical_path(name)
        checked += 1
    assert checked == 20_000 and canonical > 300  # the fast path was exercised


def test_the_planners_path_test_of_an_equality_term_is_the_terms_match():
    """The planner filters candidates of `tag=value` with a substring test on the canonical
    path: it must agree with the term on the tag's value, for tags and values that are
    prefixes, suffixes or parts of others, values holding '=', the last segment and `name`."""
    from biggraphite_like.tags.queries import path_test
    from biggraphite_like.tags.series import tag_of_path

    paths = [canonical_path(n) for n in ("m;a=1;b=2", "m;a=12;xa=1", "m;xa=1;b=a=1", "m;a=1=;b=2=", "a=1;b=a",
                                         "m;b=2;c=a=1", "m;aa=1;b=22", "a;a=a", "m;a=1;c=3;d=4")]
    specs = ["1", "12", "2", "a=1", "1=", "2=", "a", "22", "3", "4"]
    for tag, spec in itertools.product(["a", "b", "c", "d", "xa", "aa", "name"], specs):
        term = parse_term(f"{tag}={spec}")
        for path in paths:
            assert path_test(term)(path) == term.matches(tag_of_path(path, tag)), (term, path)
