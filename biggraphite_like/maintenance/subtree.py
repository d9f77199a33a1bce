"""Exact names and the subtree beneath them, for jobs that must not expand globs.

Metric names may hold glob characters (`g.a*b`, `g.a{b,c}`, `g.a[x]b`): carbon and
`bgl write` store them as they are. A job given such a name exactly (`bgl delete
--exact`, `copy`, `rename`) must act on that name only. The glob engine has no escape
(StandardFinder removes backslashes), so the subtree is found with a pattern in which
every special character is `?` (it matches a superset, one character for one) and the
candidates are then kept only when they really are the name or start with `name.`.
"""
from __future__ import annotations

import dataclasses
import re

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor

MAX_NAMES = 10_000_000  # names a job may gather (far above the glob limit of interactive reads)
_SPECIAL_RE = re.compile(r"[*?\[\]{}\\]")


def literal_pattern(name: str) -> str:
    """A glob matching name and possibly other names of the same length and shape."""
    return _SPECIAL_RE.sub("?", name)


@dataclasses.dataclass
class Subtree:
    """What lies at an exact name: the metric of that name (if any), the metrics and
    directories beneath it, and whether the name itself is a directory."""

    root: str
    is_metric: bool = False
    is_directory: bool = False
    metrics_beneath: list[str] = dataclasses.field(default_factory=list)
    directories_beneath: list[str] = dataclasses.field(default_factory=list)

    @property
    def metrics(self) -> list[str]:
        """The root (when a metric) and every metric beneath, sorted."""
        return sorted(([self.root] if self.is_metric else []) + self.metrics_beneath)


def subtree(accessor: Accessor, name: str, recursive: bool = True) -> Subtree:
    """The metric named exactly `name` and, with recursive, everything beneath it."""
    root = names_mod.normalize(name)
    store = accessor.store
    found = Subtree(root, is_metric=accessor.get_metric(root) is not None,
                    is_directory=bool(store.existing_directories([root])))
    if recursive and found.is_directory:
        beneath = accessor.glob(literal_pattern(root) + ".**")
        prefix = root + names_mod.SEPARATOR
        found.metrics_beneath = [n for n in store.glob_metrics(beneath, MAX_NAMES) if n.startswith(prefix)]
        found.directories_beneath = [n for n in store.glob_directories(beneath, MAX_NAMES) if n.startswith(prefix)]
    return found
