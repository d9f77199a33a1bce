"""bench/floors.py at small sizes: the young store's lower bound orders its steps as their
rows' bytes do (a tail of 12-byte records, a chunk under a 9-byte open id, under a
shorter sealed id, a byte; the inverted index of components costs bytes), and the find
floor reads exactly the series of the value it asks for."""
from __future__ import annotations

from bench import floors
from bench.tags_bench import tag_value


def test_young_floor_orders_its_steps(tmp_path):
    metrics = 3_000
    figures = floors.young(str(tmp_path), metrics=metrics)
    assert figures["metrics"] == metrics
    assert figures["names_without_component_index"] < figures["names"] <= figures["names_as_written"]
    assert figures["names"] < figures["with_one_byte_rows"] < figures["with_chunks"] < figures["with_open_chunks"] \
        < figures["with_tails"]
    assert figures["with_one_byte_rows"] < figures["with_one_byte_open_rows"] < figures["with_open_chunks"]
    # a tail row holds 5 records of 12 bytes: at least that much above the names
    assert figures["with_tails"] - figures["names"] > floors.YOUNG_POINTS * 12
    assert 0 < figures["chunk_bytes"] < floors.YOUNG_POINTS * 12
    assert figures["aim_2x_vm"] == 2 * floors.VM_YOUNG_BYTES_PER_POINT * floors.YOUNG_POINTS
    assert list(tmp_path.iterdir()) == []  # its files are removed


def test_find_floor_reads_the_series_of_one_value(tmp_path):
    series = 20_000
    figures = floors.find(str(tmp_path), series=series, queries=50)
    per_value = sum(1 for i in range(series) if tag_value(7, i) == "v0")
    assert figures["paths_p50"] >= 1 and abs(figures["paths_p50"] - per_value) <= 4 * max(1, per_value ** 0.5)
    assert figures["p50_us"] <= figures["p99_us"] and figures["bytes"] > series * 60
