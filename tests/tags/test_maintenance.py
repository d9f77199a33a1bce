"""Maintenance of tagged series on every store: delete and clean remove them from the
tag index, repair indexes tagged metrics the index lacks, stats counts the index, and
`bgl tags` lists series by expression, tags and values."""
from __future__ import annotations

import io
import json

from biggraphite_like.cli import main
from biggraphite_like.maintenance.clean import clean
from biggraphite_like.maintenance.delete import delete
from biggraphite_like.maintenance.repair import repair
from biggraphite_like.maintenance.usage import statistics
from biggraphite_like.metric import MetricMetadata

META = MetricMetadata.create("60s:1d", "average", 0.5)
NOW = 1_700_000_000


def _fill(accessor):
    accessor.create_metrics([("cpu;host=a;dc=us", META), ("cpu;host=b;dc=eu", META)], now=NOW - 10 * 86400)
    accessor.create_metrics([("disk.used;host=a", META), ("plain.metric", META)], now=NOW)


def test_delete_and_clean_remove_series_and_their_postings(accessor):
    _fill(accessor)
    report = delete(accessor, "cpu;dc=eu;host=b")
    assert report.metrics == ["cpu;dc=eu;host=b"]
    assert accessor.tags.find_series(["name=cpu"]) == ["cpu;dc=us;host=a"]
    assert accessor.tags.list_values("dc") == [("us", 1)]
    clean(accessor, max_age=86400, now=NOW)  # cpu;dc=us;host=a was last written 10 days ago
    assert accessor.tags.find_series(["host=a"]) == ["disk.used;host=a"]
    assert accessor.tags.list_tags() == ["host", "name"]
    assert accessor.get_metric("plain.metric") is not None


def test_repair_indexes_tagged_metrics_the_index_lacks_and_stats_count_it(accessor):
    _fill(accessor)
    accessor.tags.index.remove_series(["disk.used;host=a"])  # as a store written before tags were indexed
    found = repair(accessor, dry_run=True)
    assert found.tagged_metrics_indexed == 1 and accessor.tags.find_series(["name=disk.used"]) == []
    report = repair(accessor)
    assert report.tagged_metrics_indexed == 1 and report.examples["tagged metrics indexed"] == ["disk.used;host=a"]
    assert accessor.tags.find_series(["name=disk.used"]) == ["disk.used;host=a"]
    assert repair(accessor).tagged_metrics_indexed == 0
    facts = statistics(accessor, now=NOW)
    assert (facts["tagged_series"], facts["tags"], facts["tag_values"]) == (3, 3, 6)  # name: cpu, disk.used; host: a, b; dc: us, eu


def _bgl(url, *argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["--store", url, *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_bgl_du_counts_tagged_series_and_the_tag_index(accessor, store_url):
    _fill(accessor)
    code, out, _ = _bgl(store_url, "du", "--format", "json")
    document = json.loads(out)
    assert document["tag_index"] == {"tagged_series": 3, "tags": 3, "tag_values": 6}
    assert [(e["name"], e["metrics"], e["tagged"]) for e in document["entries"]] == [
        ("cpu;dc=eu;host=b", 1, 1), ("cpu;dc=us;host=a", 1, 1), ("disk", 1, 1), ("plain", 1, 0)]
    assert (document["total"]["metrics"], document["total"]["tagged"]) == (4, 3)
    code, out, _ = _bgl(store_url, "du", "disk.*")
    lines = out.splitlines()
    assert lines[1].split()[1:] == ["1", "1440", "disk.used;host=a"]
    assert lines[3].split() == ["1", "of", "which", "tagged", "series"]  # GLOB's; the store's tag index: du alone
    whole = next(line for line in _bgl(store_url, "du")[1].splitlines() if "tag index" in line)
    assert whole.split()[:10] == ["3", "of", "which", "tagged", "series;", "the", "store's", "tag", "index:", "3"]
    accessor.delete_metrics(["cpu;dc=eu;host=b", "cpu;dc=us;host=a", "disk.used;host=a"])
    after = _bgl(store_url, "du")[1]  # no tagged series: no line about them (the per-table lines name tag tables)
    assert "tagged series" not in after and "tag index" not in after


def test_bgl_tags_find_and_list(accessor, store_url):
    _fill(accessor)
    assert _bgl(store_url, "tags", "find", "host=a") == (0, "cpu;dc=us;host=a\ndisk.used;host=a\n", "")
    assert _bgl(store_url, "tags", "find", "host=~.", "name!=cpu", "--format", "json")[1] == '["disk.used;host=a"]\n'
    assert _bgl(store_url, "tags", "list")[1] == "dc\nhost\nname\n"
    code, out, _ = _bgl(store_url, "tags", "list", "host", "--format", "json")
    assert json.loads(out) == [{"value": "a", "count": 2}, {"value": "b", "count": 1}]
    assert _bgl(store_url, "tags", "list", "name", "--filter", "d")[1] == "        1  disk.used\n"
    code, _, err = _bgl(store_url, "tags", "find", "host!=a")
    assert code == 1 and "at least one expression must require a non-empty value" in err
