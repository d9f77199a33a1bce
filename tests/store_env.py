"""A real SQLite store for a test, and what it holds, for the tests that write through carbon or
the accessor and read the points back."""
from __future__ import annotations

import math
from pathlib import Path

from biggraphite_like.accessor import Accessor


def make_store(tmp_path: Path) -> tuple[str, Accessor]:
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    return url, accessor


def stored_values(accessor: Accessor, names: list[str], start: int, now: int) -> dict[str, dict[int, float]]:
    """{name: {timestamp: value}} of the non-empty slots of each metric's finest stage."""
    result = {}
    for name, series in accessor.fetch(names, start, now, now).items():
        assert series is not None, name
        values = {}
        for i, value in enumerate(series.values.tolist()):
            if not math.isnan(value):
                values[series.start + i * series.step] = value
        result[name] = values
    return result
