"""graphite-web's `/render?format=json` body, encoded with numpy: the bytes of
`graphite.render.views.renderViewJson`, several times faster.

renderViewJson builds a list of `(value, timestamp)` tuples per series
(`TimeSeries.datapoints()`), `json.dumps` the whole answer, then replaces `NaN,` by
`null,` and `Infinity,` by `1e9999,` in the whole text (series names and tags included).
Here the text of each series' points is assembled from byte tables instead: one
`float.__repr__` per distinct value of the whole answer (what `json.dumps` writes for a
float; json's C encoder writes them all at once), digit rows for the timestamps, and a
fixed-width byte matrix per series whose padding is dropped. Writing a float costs
Python's `repr` (up to ~1 us for 17 significant digits): values with few digits or that
repeat (gauges with two decimals, integer counts) are several times faster to encode
than with renderViewJson, values of full precision (averages, rates) hardly faster. A
series whose values are not all floats or None (an int from `transformNull(x, 0)`, a
bool...) is encoded by `json.dumps` itself;
names and tags always are. What renderViewJson does before encoding (maxDataPoints'
consolidation, which changes the series in place, noNullPoints) is done with the same
code, on the same objects. tests/graphite/test_render_view.py compares both byte for byte.
"""
from __future__ import annotations

import functools
import json
import math
import operator
from typing import Any, Sequence

import numpy as np

NULL, POS_INF, NEG_INF = "null", "1e9999", "-1e9999"  # None and NaN; inf and -inf after graphite's replace
_BRACKET, _COMMA, _SPACE, _CLOSE = ord("["), ord(","), ord(" "), ord("]")


def graphite_replace(text: str) -> str:
    """renderViewJson's replacements on its whole output (they change names and tags too)."""
    return text.replace("NaN,", "null,").replace("Infinity,", "1e9999,")


def consolidate_for(series_list: Sequence, max_data_points: int | None) -> None:
    """renderViewJson's maxDataPoints handling: the same changes to the same series."""
    if max_data_points is None:
        return
    start_time = min(series.start for series in series_list)
    end_time = max(series.end for series in series_list)
    time_range = end_time - start_time
    for series in series_list:
        if max_data_points == 1:
            series.consolidate(len(series))
            continue
        number_of_data_points = time_range / series.step
        if max_data_points < number_of_data_points:
            values_per_point = math.ceil(float(number_of_data_points) / float(max_data_points))
            seconds_per_point = int(values_per_point * series.step)
            nudge = seconds_per_point + (series.start % series.step) - (series.start % seconds_per_point)
            series.start = series.start + nudge
            values_to_lose = int(nudge / series.step)
            for _ in range(1, values_to_lose):
                del series[0]
            series.consolidate(values_per_point)


class _Points:
    """One series' points to encode: float64 values (NaN for None) and their timestamps."""

    __slots__ = ("head", "values", "timestamps")

    def __init__(self, head: str, values: np.ndarray, timestamps: np.ndarray):
        self.head, self.values, self.timestamps = head, values, timestamps


class GridSeries:
    """A series as read (graphite_plugin.render_fast), handed to `encode` as its float64
    array (NaN: no point) instead of a graphite TimeSeries of Python floats: what encode
    reads of a TimeSeries that maxDataPoints does not consolidate."""

    __slots__ = ("name", "tags", "start", "end", "step", "array")
    valuesPerPoint = 1

    def __init__(self, name: str, start: int, end: int, step: int, array: np.ndarray):
        self.name, self.tags, self.start, self.end, self.step, self.array = name, {"name": name}, start, end, step, array

    def __len__(self) -> int:
        return len(self.array)


def float_values(values: list, fetched: tuple[list, np.ndarray] | None = None) -> np.ndarray | None:
    """The values as float64 (NaN for None) when each is a float or None; else None
    (json.dumps writes ints, bools and anything else its own way). `fetched` is the
    (values, array) pair the finder read for the series' name: its array serves when the
    series still holds the very same objects (a graphite function changed nothing)."""
    if fetched is not None and len(fetched[0]) == len(values) and all(map(operator.is_, values, fetched[0])):
        return fetched[1]
    kinds = set(map(type, values))
    if not kinds <= {float, type(None)}:
        return None
    if type(None) not in kinds:
        return np.array(values, dtype=np.float64)
    nan = math.nan
    return np.array([nan if value is None else value for value in values], dtype=np.float64)


@functools.lru_cache(maxsize=64)
def stamp_texts(start: int, step: int, count: int) -> np.ndarray:
    """The decimal digits of `count` timestamps from `start` by `step`, one row of bytes
    each, padded with zero bytes (dropped when written). Read-only and kept: the series of
    one answer usually share their timestamps."""
    stamps = np.arange(start, start + count * step, step, dtype=np.int64)[:count]
    if count == 0:
        return np.zeros((0, 1), dtype=np.uint8)
    if stamps.min() < 0:  # numpy's own text, padded on the right
        width = max(len(str(int(stamps.min()))), len(str(int(stamps.max()))))
        return stamps.astype(f"S{width}").view(np.uint8).reshape(count, width)
    width = len(str(int(stamps.max())))
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    rows = (stamps[:, None] // powers % 10 + ord("0")).astype(np.uint8)
    rows[:, :-1][stamps[:, None] < powers[:-1]] = 0  # no leading zeros (0 itself keeps its digit)
    rows.flags.writeable = False
    return rows


def _head(series) -> str:
    """`{"target": ..., "tags": {...}, "datapoints": [` as json.dumps writes it, replaced. A
    series tagged with its name only, a name json.dumps writes as it is (printable ASCII
    without quotes or backslashes: most names), costs no json.dumps."""
    name = series.name
    if type(name) is str and name.isascii() and name.isprintable() and '"' not in name and "\\" not in name \
            and series.tags == {"name": name}:
        return graphite_replace(f'{{"target": "{name}", "tags": {{"name": "{name}"}}, "datapoints": [')
    text = json.dumps(dict(target=series.name, tags=dict(series.tags), datapoints=[]))
    return graphite_replace(text[:-2])  # without `]}`


def encode(series_list: Sequence, options: dict[str, Any], fetched: dict | None = None) -> str:
    """renderViewJson's output text for these series and request options (without jsonp);
    `fetched`: the arrays graphite_plugin.Finder read, by series name (see float_values)."""
    fetched = fetched or {}
    if options.get("pretty"):
        raise ValueError("pretty output is left to graphite-web's renderViewJson")
    pieces: list[Any] = []
    if any(series_list):
        consolidate_for(series_list, options["maxDataPoints"] if "maxDataPoints" in options else None)
        no_nulls = "noNullPoints" in options
        for series in series_list:
            timestamps = range(int(series.start), int(series.end) + 1, int(series.step * series.valuesPerPoint))
            values = list(series) if series.valuesPerPoint > 1 else series
            if type(series) is GridSeries:
                floats = series.array
            else:
                floats = float_values(values, fetched.get(series.name)) if timestamps.step > 0 else None
            if floats is None:  # json.dumps' own encoding of this series
                datapoints = list(zip(values, timestamps))
                if no_nulls:
                    datapoints = [point for point in datapoints if point[0] is not None and not math.isnan(point[0])]
                    if not datapoints:
                        continue
                pieces.append(graphite_replace(json.dumps(dict(target=series.name, tags=dict(series.tags),
                                                               datapoints=datapoints))))
                continue
            count = min(len(floats), len(timestamps))
            floats = floats[:count]
            stamps = stamp_texts(timestamps.start, timestamps.step, count)
            if no_nulls:
                kept = ~np.isnan(floats)
                if not kept.any():
                    continue
                floats, stamps = floats[kept], stamps[kept]
            pieces.append(_Points(_head(series), floats, stamps))
    _encode_points([piece for piece in pieces if isinstance(piece, _Points)], pieces)
    return "[" + ", ".join(pieces) + "]"


def _encode_points(points: list[_Points], pieces: list) -> None:
    """Replace each _Points of `pieces` by its series' text."""
    if not points:
        return
    values = np.concatenate([p.values for p in points])
    finite = np.isfinite(values)
    # distinct values by their bits: -0.0 and 0.0 are written differently
    distinct, inverse = np.unique(values[finite].view(np.int64), return_inverse=True)
    table = token_table(distinct.view(np.float64))
    index = np.full(len(values), len(table) - 3, dtype=np.int64)  # NaN: null
    index[finite] = inverse.reshape(-1)
    index[values == math.inf] = len(table) - 2
    index[values == -math.inf] = len(table) - 1
    texts = iter(_bodies(points, table, index))  # in the order of the _Points in pieces
    for position, piece in enumerate(pieces):
        if isinstance(piece, _Points):
            pieces[position] = piece.head + next(texts) + "]}"


TABLE_BLOCK = 1 << 16  # tokens laid out at once (bounds the gather's index array)


def token_table(distinct: np.ndarray) -> np.ndarray:
    """One row per finite value: its text as json.dumps writes it (float.__repr__, written by
    json's C encoder for all of them at once), then `null`, `1e9999` and `-1e9999`; zero
    bytes pad the rows to the longest."""
    specials = [NULL, POS_INF, NEG_INF]
    if not len(distinct):
        return np.array(specials, dtype=bytes).view(np.uint8).reshape(3, -1)
    text = np.frombuffer(json.dumps(distinct.tolist())[1:-1].encode("ascii"), dtype=np.uint8)
    separators = np.flatnonzero(text == _COMMA)  # `, ` between two numbers
    starts = np.r_[0, separators + 2]
    lengths = np.r_[separators, len(text)] - starts
    width = max(int(lengths.max()), max(map(len, specials)))
    table = np.zeros((len(distinct) + 3, width), dtype=np.uint8)
    columns = np.arange(width)
    for low in range(0, len(distinct), TABLE_BLOCK):
        block = slice(low, min(low + TABLE_BLOCK, len(distinct)))
        rows = text[np.minimum(starts[block, None] + columns, len(text) - 1)]
        rows[columns >= lengths[block, None]] = 0
        table[block] = rows
    table[-3:] = np.array(specials, dtype=f"S{width}").view(np.uint8).reshape(3, width)
    return table


BODY_BLOCK = 1 << 16  # points laid out at once (series are not split: a longer one goes alone)


def _bodies(points: list[_Points], table: np.ndarray, index: np.ndarray) -> list[str]:
    """`[v, t], [v, t]` of each series, in order; the series laid out together, a block of
    up to BODY_BLOCK points at a time (many short series cost a few numpy calls, not a few
    per series)."""
    texts: list[str] = []
    group: list[_Points] = []
    size = offset = 0
    for p in points:
        if group and size + len(p.values) > BODY_BLOCK:
            texts += _group_bodies(group, table, index[offset:offset + size])
            offset, group, size = offset + size, [], 0
        group.append(p)
        size += len(p.values)
    if group:
        texts += _group_bodies(group, table, index[offset:offset + size])
    return texts


def _group_bodies(group: list[_Points], table: np.ndarray, index: np.ndarray) -> list[str]:
    """The bodies of consecutive series: a row of fixed width per point (value token,
    timestamp digits, separators), zero bytes as padding, dropped; cut at series ends."""
    counts = np.array([len(p.values) for p in group], dtype=np.int64)
    if not counts.sum():
        return [""] * len(group)
    width = table.shape[1]
    stamp_width = max(p.timestamps.shape[1] for p in group)
    stamps = np.concatenate([p.timestamps if p.timestamps.shape[1] == stamp_width else
                             np.pad(p.timestamps, ((0, 0), (0, stamp_width - p.timestamps.shape[1])))
                             for p in group])
    rows = np.zeros((len(index), width + stamp_width + 6), dtype=np.uint8)
    rows[:, 0] = _BRACKET
    rows[:, 1:1 + width] = table[index]
    rows[:, 1 + width] = _COMMA
    rows[:, 2 + width] = _SPACE
    rows[:, 3 + width:3 + width + stamp_width] = stamps
    rows[:, -3] = _CLOSE
    rows[:, -2] = _COMMA
    rows[:, -1] = _SPACE
    ends = np.cumsum(counts)
    rows[ends[counts > 0] - 1, -2:] = 0  # no `, ` after a series' last point
    kept = rows != 0
    text = rows[kept].tobytes().decode("ascii")
    after = np.r_[0, np.cumsum(np.count_nonzero(kept, axis=1))][ends].tolist()  # text offset after each series
    return [text[start:end] for start, end in zip([0] + after[:-1], after)]
