"""Retentions: the stages (precision x points) a metric keeps, as whisper's archives.

Three spellings are accepted, the ones operators already use:
- carbon's storage-schemas `10s:6h,1m:7d` (precision:duration or precision:points; units
  s, m(in), h, d, w, y as whisper's prefixes);
- BigGraphite's `2160*10s:10080*60s` (points*precision, stages joined by ':');
- carbon's plugin call form `[(secondsPerPoint, points), ...]`.
Stages are sorted by precision (as whisper.create does) and must satisfy whisper's rules (each precision divides
the next, each stage covers more time, enough points to fill one coarser point).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Sequence

from biggraphite_like.errors import InvalidRetention, InvalidTimeRange

UNIT_SECONDS = {
    "seconds": 1,
    "minutes": 60,
    "hours": 3600,
    "days": 86400,
    "weeks": 86400 * 7,
    "years": 86400 * 365,
}
_AMOUNT_RE = re.compile(r"^(\d+)([a-z]*)$")


def parse_duration(text: str, what: str = "duration") -> int:
    """Seconds in `90`, `90s`, `5min`, `6h`, `7d`, `1w`, `2y` (whisper's unit prefixes)."""
    match = _AMOUNT_RE.match(str(text).strip().lower())
    if not match:
        raise InvalidRetention(f"invalid {what} {text!r}: expected a number with an optional unit (s, m, h, d, w, y)")
    amount, unit = int(match.group(1)), match.group(2)
    if not unit:
        return amount
    for name, seconds in UNIT_SECONDS.items():
        if name.startswith(unit):
            return amount * seconds
    raise InvalidRetention(f"invalid unit {unit!r} in {what} {text!r}: use s, m, h, d, w or y")


@dataclasses.dataclass(frozen=True, order=True)
class Stage:
    """One resolution of a metric: `points` values, one every `precision` seconds."""

    precision: int
    points: int

    @property
    def duration(self) -> int:
        """Seconds of history this stage keeps (whisper's archive 'retention')."""
        return self.precision * self.points

    def align(self, timestamp: int) -> int:
        """Start of the interval of this stage holding timestamp."""
        return timestamp - timestamp % self.precision

    def __str__(self) -> str:
        return f"{self.points}*{self.precision}s"


@dataclasses.dataclass(frozen=True)
class Retention:
    """The ordered stages of a metric, finest first."""

    stages: tuple[Stage, ...]

    def __post_init__(self) -> None:
        _validate(self.stages)

    @classmethod
    def parse(cls, value: "str | Retention | Sequence[Sequence[int]]") -> "Retention":
        """Parse any accepted spelling (see the module docstring)."""
        if isinstance(value, Retention):
            return value
        if isinstance(value, str):
            text = value.strip()
            if not text:
                raise InvalidRetention("empty retention: give stages like '60s:1d' or '1440*60s'")
            if "*" in text:
                return cls(tuple(sorted(_parse_biggraphite_stage(s) for s in text.split(":"))))
            return cls(tuple(sorted(_parse_carbon_stage(s) for s in text.split(","))))
        try:
            stages = tuple(sorted(Stage(int(p), int(n)) for p, n in value))
        except (TypeError, ValueError):
            raise InvalidRetention(
                f"invalid retention {value!r}: expected [(secondsPerPoint, points), ...]"
            ) from None
        return cls(stages)

    @property
    def duration(self) -> int:
        """The longest history kept (whisper's maxRetention)."""
        return self.stages[-1].duration

    def stage_index_for_age(self, age: int) -> int | None:
        """The finest stage a point `age` seconds old goes to (whisper's routing), or None if too old."""
        for index, stage in enumerate(self.stages):
            if stage.duration >= age:
                return index
        return None

    def stage_index_for_read(self, age: int) -> int:
        """The stage whisper reads for a window starting `age` seconds ago (already clamped)."""
        for index, stage in enumerate(self.stages):
            if stage.duration >= age:
                return index
        return len(self.stages) - 1

    def read_window(self, start: int, end: int, now: int) -> "ReadWindow | None":
        """What whisper.fetch(start, end, now) reads: the stage and aligned [start, end), or None.

        None when the range is entirely in the future or entirely past the retention.
        """
        if start > end:
            raise InvalidTimeRange(f"invalid time range: from {start} is after until {end}")
        oldest = now - self.duration
        if start > now or end < oldest:
            return None
        start, end = max(start, oldest), min(end, now)
        index = self.stage_index_for_read(now - start)
        step = self.stages[index].precision
        first = start - start % step + step
        last = end - end % step + step
        if first == last:  # zero-length range: whisper includes the next point
            last += step
        return ReadWindow(index, first, last, step)

    def as_tuples(self) -> list[tuple[int, int]]:
        """carbon's form: [(secondsPerPoint, points), ...]."""
        return [(s.precision, s.points) for s in self.stages]

    def __str__(self) -> str:
        return ":".join(str(s) for s in self.stages)


@dataclasses.dataclass(frozen=True)
class ReadWindow:
    """The points a read returns: stage `stage_index`, timestamps start, start+step, ... < end."""

    stage_index: int
    start: int
    end: int
    step: int

    @property
    def size(self) -> int:
        return (self.end - self.start) // self.step


def _parse_carbon_stage(text: str) -> Stage:
    try:
        precision_text, points_text = text.strip().split(":", 1)
    except ValueError:
        raise InvalidRetention(f"invalid retention stage {text!r}: expected precision:duration like '10s:6h'") from None
    precision = parse_duration(precision_text, "precision")
    points_text = points_text.strip().lower()
    if points_text.isdigit():
        points = int(points_text)
    else:
        if precision <= 0:
            raise InvalidRetention(f"invalid retention stage {text!r}: precision must be positive")
        points = parse_duration(points_text, "duration") // precision
    return Stage(precision, points)


def _parse_biggraphite_stage(text: str) -> Stage:
    try:
        points_text, precision_text = text.strip().split("*", 1)
        points = int(points_text)
    except ValueError:
        raise InvalidRetention(f"invalid retention stage {text!r}: expected points*precision like '1440*60s'") from None
    return Stage(parse_duration(precision_text, "precision"), points)


def _validate(stages: Iterable[Stage]) -> None:
    stages = list(stages)
    if not stages:
        raise InvalidRetention("a retention needs at least one stage")
    for stage in stages:
        if stage.precision <= 0 or stage.points <= 0:
            raise InvalidRetention(f"stage {stage} must have a positive precision and number of points")
    if stages != sorted(stages):
        raise InvalidRetention(
            f"stages {':'.join(map(str, stages))} must be ordered from the finest precision to the coarsest"
        )
    for finer, coarser in zip(stages, stages[1:]):
        if finer.precision == coarser.precision:
            raise InvalidRetention(f"two stages have the same precision {finer.precision}s")
        if coarser.precision % finer.precision:
            raise InvalidRetention(
                f"precision {coarser.precision}s is not a multiple of the finer precision {finer.precision}s"
            )
        if coarser.duration <= finer.duration:
            raise InvalidRetention(
                f"stage {coarser} keeps {coarser.duration}s, not more than the finer stage {finer} ({finer.duration}s)"
            )
        if finer.points < coarser.precision // finer.precision:
            raise InvalidRetention(
                f"stage {finer} has fewer points than one point of {coarser} aggregates"
                f" ({coarser.precision // finer.precision})"
            )
