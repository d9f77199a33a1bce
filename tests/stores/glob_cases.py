"""Names and glob patterns every store is checked with (the conformance suite, and beside each store)."""
from __future__ import annotations

import random

from biggraphite_like import names


PATTERNS = [
    "*", "a", "a.*", "a.b.*", "a.b.c", "*.b", "*.*.ab", "a.*.c1", "a.b*", "[ab].*", "[!a]*.*",
    "c?.*", "{a,b}.{ab,ba}.*", "{a,b{a,}}.*", "a.{,b}.c1", "**", "a.**", "**.c1", "a.**.c2",
    "**.a.**", "*.**.Z_z", "cpu[0-1].*", "x-y.m:1", "m:1.*.*", "*.*.*.*.*.*", "ab.**.ba.*",
    "{cpu0,cpu1}.**", "*b*.*a*", "a.b.c1.x-y.Z_z.m:1", "{,ab}.ba.*", "{,a}.b.*", "{,a}.{,b}.c1",
    # fixed components on both sides of a globstar, a literal head running into a prefix
    "a.**.b.c1", "{a,b}.**.c1", "a.**.b*.c1", "a*.**.{ab,ba}.*", "ab.b*.**", "a.{,b}.**.Z_z",
]


def random_tree(seed: int, count: int) -> list[str]:
    """count distinct random names of 1 to 6 components, from seed."""
    rng = random.Random(seed)
    alphabet = ["a", "b", "ab", "ba", "c1", "c2", "x-y", "Z_z", "cpu0", "cpu1", "m:1"]
    result = set()
    while len(result) < count:
        result.add(".".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))))
    return sorted(result)


def expected_directories(metric_names) -> list[str]:
    """Every directory the metrics imply."""
    return sorted({d for n in metric_names for d in names.ancestors(n)})
