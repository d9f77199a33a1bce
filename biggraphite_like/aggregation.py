"""Whisper's aggregation methods and xFilesFactor, and their defaults."""
from __future__ import annotations

import enum
import math

from biggraphite_like.errors import InvalidAggregation

DEFAULT_XFILESFACTOR = 0.5  # whisper's and carbon's default


class Aggregator(enum.Enum):
    """How a coarser stage combines the points of a finer one (whisper's full set)."""

    AVERAGE = "average"
    SUM = "sum"
    LAST = "last"
    MAX = "max"
    MIN = "min"
    AVG_ZERO = "avg_zero"
    ABSMAX = "absmax"
    ABSMIN = "absmin"

    @classmethod
    def parse(cls, value: "str | Aggregator | None") -> "Aggregator":
        """Parse whisper's method name; None gives the default (average)."""
        if value is None:
            return DEFAULT_AGGREGATOR
        if isinstance(value, Aggregator):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            names = ", ".join(a.value for a in cls)
            raise InvalidAggregation(
                f"unknown aggregation method {value!r}: use one of {names}"
            ) from None


DEFAULT_AGGREGATOR = Aggregator.AVERAGE


def parse_xfilesfactor(value: "float | str | None") -> float:
    """Parse an xFilesFactor (fraction of known points needed to aggregate); None gives 0.5."""
    if value is None:
        return DEFAULT_XFILESFACTOR
    try:
        xff = float(value)
    except (TypeError, ValueError):
        raise InvalidAggregation(f"xFilesFactor {value!r} is not a number between 0 and 1") from None
    if math.isnan(xff) or not 0.0 <= xff <= 1.0:
        raise InvalidAggregation(f"xFilesFactor {value!r} is outside [0, 1]")
    return xff
