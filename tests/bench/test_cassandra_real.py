"""bench/cassandra_real.py without a node: bytes on disk are split into tables and index files
(SASI `-SI_*`, SAI `SAI+*`) per table of one keyspace, summed over nodes; the find classes
cover both sizes the aims name."""
from __future__ import annotations

from biggraphite_like.glob import GlobPattern
from bench import cassandra_real


def _sstable(directory, name: str, size: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(b"x" * size)


def test_disk_bytes_splits_tables_and_indexes_and_sums_nodes(tmp_path):
    nodes = [tmp_path / "node1" / "data", tmp_path / "node2" / "data"]
    for data in nodes:
        metrics = data / "ks_metadata" / "metrics-0123abcd"
        _sstable(metrics, "oa-1-big-Data.db", 100)
        _sstable(metrics, "oa-1-big-Index.db", 10)
        _sstable(metrics, "oa-1-big-SI_metrics_component_0_idx.db", 7)  # SASI
        _sstable(metrics, "oa-1-big-SAI+aa+metrics_parent_idx+TermsData.db", 5)  # SAI
        _sstable(metrics / "snapshots" / "s1", "oa-1-big-Data.db", 1000)  # not live data
        _sstable(data / "ks_metadata" / "empty-0123abcd", "oa-1-big-TOC.txt", 0)
        _sstable(data / "other" / "metrics-0123abcd", "oa-1-big-Data.db", 50)  # another keyspace
    sizes = cassandra_real.disk_bytes(nodes, "ks_metadata")
    assert sizes == {"metrics": {"table": 220, "index": 24}}
    assert cassandra_real.disk_bytes(nodes, "missing") == {}


def test_find_classes_span_narrow_and_wide_answers():
    names = cassandra_real.find_names()
    sizes = {pattern: len(GlobPattern(pattern).filter(names)) for pattern, _ in cassandra_real.FIND_CLASSES}
    labels = dict(cassandra_real.FIND_CLASSES)
    narrow = [size for pattern, size in sizes.items() if "names" not in labels[pattern]]
    assert len(narrow) == 6 and all(1 <= size <= 10 for size in narrow)
    assert [sizes[p] for p, label in labels.items() if "names" in label] == [100, 120, 480]
