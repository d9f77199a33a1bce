"""The one point check: a point is stored only with a finite timestamp in 1..MAX_TIMESTAMP
(whisper's unsigned 32-bit timestamps) and a finite value. `invalid_points` is the check;
the receiver calls it as it decodes, the accessor's writes (`check_columns`,
`check_pairs`) for every other writer (the accessor's module doc states the contract).
A refused point is reported in the batch's `WriteResult` with its reason.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from biggraphite_like.errors import InvalidPoint

MAX_TIMESTAMP = 2**32 - 1  # whisper stores timestamps as unsigned 32-bit integers
MAX_REPORTED_ERRORS = 100


@dataclasses.dataclass
class WriteResult:
    """What happened to a batch: points stored, points refused and why."""

    stored: int = 0
    too_old: int = 0  # older than the metric's whole retention: whisper drops them too
    rejected: int = 0  # invalid value or timestamp, or unknown metric
    created: int = 0  # metrics this batch created (`create` given)
    errors: list[str] = dataclasses.field(default_factory=list)

    def reject(self, count: int, message: str) -> None:
        self.rejected += count
        if len(self.errors) < MAX_REPORTED_ERRORS:
            self.errors.append(message)


def check_pairs(
    names: Sequence[str], owner: np.ndarray, flat: list, result: WriteResult
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(owner, timestamps truncated to int64 like whisper's int(), values) of the valid points."""
    malformed = np.zeros(len(flat), dtype=bool)
    try:
        array = np.array(flat, dtype=np.float64)
        if array.shape != (len(flat), 2):
            raise ValueError("not pairs")
    except (TypeError, ValueError):
        array = np.full((len(flat), 2), np.nan)
        for index, point in enumerate(flat):
            try:
                array[index] = float(point[0]), float(point[1])
            except (TypeError, ValueError, IndexError):
                malformed[index] = True
                result.reject(1, f"{names[owner[index]]}: point {point!r} is not a (timestamp, value) pair of numbers")
    return check_columns(names, owner, array[:, 0], array[:, 1], malformed, result)


def invalid_points(timestamps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bad timestamp, bad point) masks: a point is stored only with a finite timestamp in
    1..MAX_TIMESTAMP and a finite value. The one point check (see the module doc): the
    receiver calls it when it decodes, `insert_columns` and `insert_points` otherwise."""
    bad_time = ~np.isfinite(timestamps) | (timestamps < 1) | (timestamps >= MAX_TIMESTAMP + 1)
    return bad_time, bad_time | ~np.isfinite(values)


def point_problem(timestamp: float, value: float, bad_time: bool) -> str:
    """Why a point `invalid_points` marks is refused."""
    if bad_time:
        return f"timestamp {float(timestamp)!r} is outside 1..{MAX_TIMESTAMP}"
    return f"value {float(value)!r} is not a finite number"


def check_columns(names: Sequence[str], owner: np.ndarray, timestamps: np.ndarray, values: np.ndarray,
                  malformed: np.ndarray, result: WriteResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Refuse (in result) the points `invalid_points` marks; returns (owner, timestamps
    truncated to int64, values) of the rest."""
    bad_time, bad = invalid_points(timestamps, values)
    reportable = np.flatnonzero(bad & ~malformed)
    for index in reportable[:MAX_REPORTED_ERRORS].tolist():
        why = point_problem(timestamps[index], values[index], bad_time[index])
        result.reject(1, f"{names[owner[index]]}: {why}")
    if len(reportable) > MAX_REPORTED_ERRORS:
        extra = len(reportable) - MAX_REPORTED_ERRORS
        result.reject(extra, f"{extra} more invalid points")
    keep = ~bad
    return owner[keep], np.trunc(timestamps[keep]).astype(np.int64), values[keep]


def check_point(timestamp: float, value: float) -> tuple[int, float]:
    """Validate one point, raising InvalidPoint with the reason (CLI and plugins)."""
    result = WriteResult()
    _, ts, vs = check_pairs(["point"], np.zeros(1, np.int64), [(timestamp, value)], result)
    if result.errors:
        raise InvalidPoint(result.errors[0])
    return int(ts[0]), float(vs[0])
