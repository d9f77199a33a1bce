"""What a render's targets may make graphite-web build, checked before anything is read.

The finder's read limits (BG_MAX_RENDER_SERIES, BG_MAX_RENDER_POINTS) bound what a fetch
reads. Two things they did not see: graphite hands each target its own copy of every
series its patterns match (200 targets `**` on 3,000 metrics are 600,000 series, for 3,000
names read), and functions build series of their own size (`summarize(x, '1s')` over a
year is 31.5 million buckets per series, `sinFunction(name, 1, 0.001)` a thousand points
a second, without reading anything). This module reads the targets with graphite's
grammar:

* `path_expressions(target)`: the patterns a target fetches, each as often as it appears
  (the finder counts a render's series over targets, before de-duplication);
* `function_points(target, start, end)`: the largest number of points per series the
  target's bucketing or generating functions (FUNCTION_STEPS) produce over the range;
  `StepRefused` for a zero or negative interval;
* `series_copies(target)`: how many times timeStack fetches the target's series again.

RenderBudgetMiddleware (graphite_plugin.middleware) refuses, with 400 naming the setting,
`maxDataPoints` below 1, an image over BG_MAX_RENDER_PIXELS, and a target whose functions
produce more than BG_MAX_RENDER_POINTS points per series; the finder refuses a render whose
series, counted per target, times their points per series, exceed the limits.
"""
from __future__ import annotations

import functools
from datetime import datetime
from typing import Iterator

from graphite_plugin.errors import RenderTooLarge

# function -> (positional index of its interval or step, keyword name, whether a string
# interval like '1min' (else a number of seconds)); the index counts the series argument,
# which a piped call (`x|summarize('1s')`) leaves out
FUNCTION_STEPS = {
    "summarize": (1, "intervalString", True),
    "smartSummarize": (1, "intervalString", True),
    "hitcount": (1, "intervalString", True),
    "sinFunction": (2, "step", False),
    "sin": (2, "step", False),
    "randomWalkFunction": (1, "step", False),
    "randomWalk": (1, "step", False),
}
GENERATORS = frozenset({"sinFunction", "sin", "randomWalkFunction", "randomWalk"})  # take no series


class StepRefused(RenderTooLarge):
    """An interval or step that is not a positive duration (answers 400)."""


def _expressions(tokens) -> Iterator:
    """Every call (with whether it was piped) and path expression token under `tokens`."""
    if tokens.expression:
        expression = tokens.expression
        if expression.pathExpression:
            yield "path", expression.pathExpression, False
        if expression.call:
            yield from _call(expression.call, False)
        for piped in expression.pipedCalls or ():
            yield from _call(piped.call, True)
    elif tokens.call:
        yield from _call(tokens.call, False)
    elif tokens.pathExpression:
        yield "path", tokens.pathExpression, False


def _call(call, piped: bool) -> Iterator:
    if call.funcname == "seriesByTag":
        yield "path", call.raw, False
        return
    yield "call", call, piped
    for argument in call.args or ():
        yield from _expressions(argument)
    for keyword in call.kwargs or ():
        yield from _expressions(keyword.args[0])


@functools.lru_cache(maxsize=1024)
def _parsed(target: str) -> tuple:
    from graphite.render.grammar import grammar

    return tuple(_expressions(grammar.parseString(target)))


def path_expressions(target: str) -> list[str]:
    """The patterns (and `seriesByTag(...)` calls) a target fetches, with repeats."""
    try:
        return [str(item) for kind, item, _ in _parsed(target) if kind == "path"]
    except Exception:  # noqa: BLE001 - graphite's own parse answers the error
        return []


def _argument(call, piped: bool, index: int, keyword: str):
    """A constant argument of a call by position (counting the series argument, which a
    piped call leaves out) or keyword; None when absent or not a constant."""
    from graphite.render.evaluator import evaluateScalarTokens

    if piped and call.funcname not in GENERATORS:
        index -= 1
    value = None
    for argument in call.kwargs or ():
        if argument.argname == keyword:
            value = argument.args[0]
    if value is None and len(call.args or ()) > index:
        value = call.args[index]
    try:
        return None if value is None else evaluateScalarTokens(value)
    except Exception:  # noqa: BLE001 - not a constant: graphite evaluates it
        return None


def _step_seconds(call, piped: bool) -> float | None:
    """The call's interval or step in seconds, None when absent or not a constant."""
    from graphite.render.attime import parseTimeOffset

    index, keyword, is_interval = FUNCTION_STEPS[call.funcname]
    scalar = _argument(call, piped, index, keyword)
    if scalar is None:
        return None
    try:
        if is_interval:
            offset = parseTimeOffset(scalar)
            return offset.days * 86400 + offset.seconds
        return float(scalar)
    except Exception:  # noqa: BLE001 - graphite refuses it itself
        return None


def series_copies(target: str) -> int:
    """How many times the target's functions fetch its series again: timeStack's
    timeShiftEnd - timeShiftStart shifted copies (1 without timeStack)."""
    try:
        items = _parsed(target)
    except Exception:  # noqa: BLE001 - graphite's own parse answers the error
        return 1
    copies = 1
    for kind, call, piped in items:
        if kind == "call" and call.funcname == "timeStack":
            start, end = _argument(call, piped, 2, "timeShiftStart"), _argument(call, piped, 3, "timeShiftEnd")
            try:
                copies *= max(1, int(7 if end is None else end) - int(0 if start is None else start))
            except (TypeError, ValueError, OverflowError):
                continue
    return copies


def function_points(target: str, start: datetime, end: datetime) -> int:
    """The most points per series the target's FUNCTION_STEPS functions produce between
    start and end (0 when it uses none); StepRefused for an interval that is not positive."""
    try:
        items = _parsed(target)
    except Exception:  # noqa: BLE001 - graphite's own parse answers the error
        return 0
    span = max((end - start).total_seconds(), 1.0)
    most = 0
    for kind, call, piped in items:
        if kind != "call" or call.funcname not in FUNCTION_STEPS:
            continue
        seconds = _step_seconds(call, piped)
        if seconds is None:
            continue
        if not seconds > 0:
            raise StepRefused(f"{call.raw}: the interval must be a positive duration, not {seconds:g} seconds")
        most = max(most, int(span // seconds) + 1)
    return most


IMAGE_FORMATS = (None, "png", "svg", "pdf")  # formats graphite draws with cairo


def check_request(graph_options: dict, request_options: dict, max_points: int, max_pixels: int,
                  max_series: int) -> None:
    """RenderTooLarge (400) for parsed render options graphite would fail on or that build
    more than the limits allow (see the module docstring)."""
    max_data_points = request_options.get("maxDataPoints")
    if max_data_points is not None and max_data_points < 1:
        raise RenderTooLarge(f"maxDataPoints={max_data_points}: it must be at least 1")
    if request_options.get("format") in IMAGE_FORMATS:
        width, height = graph_options.get("width", 0), graph_options.get("height", 0)
        try:
            pixels = int(float(width)) * int(float(height))
        except (TypeError, ValueError, OverflowError):
            pixels = 0  # graphite's own error
        if pixels > max_pixels:
            raise RenderTooLarge(f"an image of {width}x{height} is {pixels} pixels, more than {max_pixels}"
                                 " (graphite-web setting BG_MAX_RENDER_PIXELS)")
    for target in request_options.get("targets", ()):
        copies = series_copies(target)
        if copies > max_series:
            raise RenderTooLarge(f"{target[:200]} fetches its series {copies} times, more than {max_series}"
                                 " (graphite-web setting BG_MAX_RENDER_SERIES)")
        points = function_points(target, request_options["startTime"], request_options["endTime"])
        if points > max_points:
            raise RenderTooLarge(f"{target[:200]} makes {points} points per series over this time range, more"
                                 f" than {max_points} (graphite-web setting BG_MAX_RENDER_POINTS); use a longer"
                                 " interval or a shorter range")
