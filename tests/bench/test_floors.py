"""bench/floors.py at small sizes: each step of the young store's lower bound adds bytes
(the 64 component columns alone cost more than their record header), and the find floor
reads exactly the series of the value it asks for."""
from __future__ import annotations

from bench import floors
from bench.tags_bench import tag_value


def test_young_floor_grows_with_each_part(tmp_path):
    figures = floors.young(str(tmp_path), metrics=3_000)
    assert figures["metrics_rows"] > floors.COMPONENTS  # a byte of record header per column, NULL or not
    assert figures["metrics_rows"] < figures["with_directories"] < figures["with_component_indexes"]
    assert list(tmp_path.iterdir()) == []  # its files are removed


def test_find_floor_reads_the_series_of_one_value(tmp_path):
    series = 20_000
    figures = floors.find(str(tmp_path), series=series, queries=50)
    per_value = sum(1 for i in range(series) if tag_value(7, i) == "v0")
    assert figures["paths_p50"] >= 1 and abs(figures["paths_p50"] - per_value) <= 4 * max(1, per_value ** 0.5)
    assert figures["p50_us"] <= figures["p99_us"] and figures["bytes"] > series * 60
