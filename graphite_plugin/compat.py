"""Python 3.11 compatibility for graphite-web 1.1.10's `/functions` endpoints.

`graphite.functions.functionInfo` (behind `/functions` and `/functions/<name>`, which
Grafana calls to list Graphite functions) uses `inspect.getargspec` and
`inspect.formatargspec`, both removed in Python 3.11: every call answers 500.
`install()` adds the two functions to the `inspect` module when (and only when) they
are missing, computed from `inspect.getfullargspec`. Nothing else changes.
"""
from __future__ import annotations

import collections
import inspect
from typing import Any, Callable, Sequence

ArgSpec = collections.namedtuple("ArgSpec", "args varargs keywords defaults")


def getargspec(func: Callable[..., Any]) -> ArgSpec:
    """(args, varargs, keywords, defaults) of func, as Python < 3.11 returned them."""
    spec = inspect.getfullargspec(func)
    if spec.kwonlyargs or spec.annotations:
        raise ValueError(
            "Function has keyword-only parameters or annotations, use inspect.signature() API which can support them")
    return ArgSpec(spec.args, spec.varargs, spec.varkw, spec.defaults)


def formatargspec(
    args: Sequence[str],
    varargs: str | None = None,
    varkw: str | None = None,
    defaults: Sequence[Any] | None = None,
) -> str:
    """Text of a parameter list like `(a, b=1, *rest, **options)`: the positional part of
    Python < 3.11's formatargspec, which is all graphite-web passes."""
    defaults = tuple(defaults or ())
    first_default = len(args) - len(defaults)
    parts = []
    for index, name in enumerate(args):
        if index >= first_default:
            parts.append(f"{name}={defaults[index - first_default]!r}")
        else:
            parts.append(str(name))
    if varargs is not None:
        parts.append(f"*{varargs}")
    if varkw is not None:
        parts.append(f"**{varkw}")
    return "(" + ", ".join(parts) + ")"


def install() -> bool:
    """Provide inspect.getargspec/formatargspec if this Python lacks them; True if added."""
    added = False
    if not hasattr(inspect, "getargspec"):
        inspect.getargspec = getargspec  # type: ignore[attr-defined]
        added = True
    if not hasattr(inspect, "formatargspec"):
        inspect.formatargspec = formatargspec  # type: ignore[attr-defined]
        added = True
    return added
