"""Hand-made series that json.dumps and graphite's replacements make awkward, and the render
options they are encoded under: shared by the render view's and the fast render's tests."""
from __future__ import annotations

import math

NOW = 1_700_000_000 - 1_700_000_000 % 60
EXTREME = [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e308, 5e-324, 2.2250738585072014e-308, 1e16, 9999999999999998.0,
           1e-4, 9.999999999999999e-05, 0.1 + 0.2, 1 / 3, -123.456, 123456789012345.67, None]


def series(name, values, start=NOW - 600, step=60, tags=None):
    from graphite.render.datalib import TimeSeries

    return TimeSeries(name, start, start + step * len(values), step, list(values), tags=tags)


def hand_made() -> list:
    return [
        series("a.b", EXTREME),
        series("sumSeries(x.NaN,y.Infinity,z)", [1.0, None, 2.5]),
        series("None.None", [None, None]),
        series("ints", [1, 2.0, None, 3, True]),  # json.dumps' own encoding
        series("empty", []),
        series("tagged;dc=NaN,x;env=Infinity,", [0.5, math.nan], tags={"name": "tagged", "dc": "NaN,x", "z": "é"}),
        series("shifted", [1.0, 2.0] * 3, start=NOW - 3600, step=120),
        series("nan only", [math.nan, None]),
        series("numpy floats", [__import__("numpy").float64(1.5)]),
    ]


OPTION_SETS = [{}, {"maxDataPoints": 1}, {"maxDataPoints": 4}, {"maxDataPoints": 1000}, {"noNullPoints": True},
               {"noNullPoints": True, "maxDataPoints": 3}]
