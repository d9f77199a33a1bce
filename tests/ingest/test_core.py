"""The ingest core both receiving paths share (biggraphite_like/ingest/) and the accessor's
contract on names and points: a name is normalised once where it enters, a point is
checked by one function, a batch is cut one way, and the carbon plugin loads nothing of
the receiver."""
from __future__ import annotations

import subprocess
import sys
import time

import numpy as np

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.batch_parts import cut_by_group
from biggraphite_like.point_check import invalid_points
from biggraphite_like.ingest.buffer import PointBuffer
from biggraphite_like.ingest.points import ReceivedPoints, Refusals
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.receiver.carbonlink import CarbonLinkService
from biggraphite_like.receiver.rules import StorageRules

NOW = int(time.time()) // 60 * 60


def counting_normalize(monkeypatch) -> list[str]:
    """names.normalize, counting the names it is given."""
    calls: list[str] = []
    real = names_mod.normalize

    def normalize(name: str) -> str:
        calls.append(name)
        return real(name)

    monkeypatch.setattr(names_mod, "normalize", normalize)
    return calls


def test_carbonlink_set_metadata_normalises_its_name_once(tmp_path, monkeypatch):
    accessor = Accessor.from_url(f"sqlite://{tmp_path / 'bgl.db'}")
    accessor.syncdb()
    accessor.create_metric("cl.m", MetricMetadata.create("60s:1d", "average", 0.5))
    service = CarbonLinkService(PointBuffer(), Accessor.from_url(f"sqlite://{tmp_path / 'bgl.db'}"),
                                StorageRules.load(None, None))
    calls = counting_normalize(monkeypatch)
    answer = service.answer({"type": "set-metadata", "metric": "cl..m", "key": "aggregationMethod", "value": "max"})
    assert answer == {"old_value": "average", "new_value": "max"}
    assert calls == ["cl..m"]
    assert Accessor.from_url(f"sqlite://{tmp_path / 'bgl.db'}").get_metric("cl.m").metadata.aggregator.value == "max"


def test_cached_points_normalise_only_names_never_received(monkeypatch):
    """CarbonLink's lookup (20,000 names for a wide render) uses the id of a name as
    received; only a spelling the buffer has not seen is normalised, with the same answer."""
    buffer = PointBuffer()
    received = ["c.m", "c..alias", "bad name"]
    buffer.add(ReceivedPoints(received, np.array([NOW, NOW + 60, NOW], dtype=float), np.array([1.0, 2.0, 3.0])),
               Refusals())
    calls = counting_normalize(monkeypatch)
    asked = ["c.m", "c..alias", "c.alias", ".c.m", "bad name", "c.none", "bad\tname"]
    assert buffer.cached(asked) == {"c.m": [(NOW, 1.0)], "c..alias": [(NOW + 60, 2.0)], "c.alias": [(NOW + 60, 2.0)],
                                    ".c.m": [(NOW, 1.0)], "bad name": [], "c.none": [], "bad\tname": []}
    assert calls == [".c.m", "c.none", "bad\tname"]  # "c.alias" was interned when "c..alias" came


def test_new_names_are_interned_together_as_one_by_one(monkeypatch):
    """A read of new names that are all canonical is interned in one go (no normalize()
    call), with the ids one by one gives (first seen, first id); a read holding another
    spelling goes one by one; the batches taken name the same metrics either way."""
    plain = [f"n.m{i % 7}" for i in range(20)]
    mixed = ["n.m1", "n..m9", "n.m8", "n.m9", "bad name"]
    batches = []
    for bulk in (True, False):
        if not bulk:
            monkeypatch.setattr(names_mod, "all_canonical", lambda names: False)
        buffer = PointBuffer()
        for received in (plain, mixed):
            buffer.add(ReceivedPoints(received, np.full(len(received), float(NOW)), np.arange(len(received), dtype=float)),
                       Refusals())
        batch = buffer.take()
        batches.append((batch.ids.tolist(), [(batch.names[o], v) for o, v in zip(batch.owner.tolist(), batch.values.tolist())]))
    monkeypatch.undo()
    assert batches[0] == batches[1]
    assert [name for name, _ in batches[0][1][:8]] == ["n.m0", "n.m1", "n.m2", "n.m3", "n.m4", "n.m5", "n.m6", "n.m0"]
    assert ("n.m9", 1.0) in batches[0][1] and ("n.m9", 3.0) in batches[0][1]  # "n..m9" is n.m9
    calls = counting_normalize(monkeypatch)
    buffer = PointBuffer()
    buffer.add(ReceivedPoints(plain, np.full(len(plain), float(NOW)), np.zeros(len(plain))), Refusals())
    assert calls == [] and len(buffer.take().names) == 7


def test_get_metric_and_update_metadata_normalise_a_name_once(tmp_path, monkeypatch):
    accessor = Accessor.from_url(f"sqlite://{tmp_path / 'bgl.db'}")
    accessor.syncdb()
    metadata = MetricMetadata.create("60s:1d", "average", 0.5)
    accessor.create_metric("a.b", metadata)
    accessor.cache_ttl = 0  # no name is canonical for being cached
    calls = counting_normalize(monkeypatch)
    assert accessor.get_metric("a..b").name == "a.b"
    assert calls == ["a..b"]
    calls.clear()
    assert accessor.update_metadata("a..b", MetricMetadata.create("60s:1d", "max", 0.5)).name == "a.b"
    assert calls == ["a..b"]


def test_the_receiver_refuses_exactly_the_points_the_accessor_refuses():
    timestamps = np.array([NOW, 0.0, 2.0**32, np.nan, NOW, NOW, 2.0**32 - 1, 1.0])
    values = np.array([1.0, 1.0, 1.0, 1.0, np.inf, np.nan, 2.0, 3.0])
    refusals = Refusals()
    kept = ReceivedPoints([f"m{i}" for i in range(8)], timestamps, values).checked(refusals)
    _, bad = invalid_points(timestamps, values)
    assert kept.names == [f"m{i}" for i in np.flatnonzero(~bad).tolist()] == ["m0", "m6", "m7"]
    assert refusals.count == 5
    assert [why for why, _ in refusals.samples][:2] == ["timestamp 0.0 is outside 1..4294967295",
                                                        "timestamp 4294967296.0 is outside 1..4294967295"]


def test_a_batch_is_cut_by_group_with_each_metrics_points_together_in_arrival_order():
    owner = np.array([2, 0, 1, 2, 3, 0, 2])
    group_of_name = np.array([1, 0, 1, 0])  # names 1 and 3 first, then 0 and 2
    parts = list(cut_by_group(owner, group_of_name))
    assert [p.names.tolist() for p in parts] == [[1, 3], [0, 2]]
    assert [p.points.tolist() for p in parts] == [[2, 4], [0, 1, 3, 5, 6]]
    assert [p.owner.tolist() for p in parts] == [[0, 1], [1, 0, 1, 0, 1]]
    assert parts[1].names_of(["n0", "n1", "n2", "n3"]) == ["n0", "n2"]


def test_a_group_without_points_makes_no_part():
    parts = list(cut_by_group(np.array([0, 0]), np.array([5, 7])))
    assert [(p.names.tolist(), p.points.tolist()) for p in parts] == [([0], [0, 1])]


def test_the_carbon_plugin_loads_nothing_of_the_receiver():
    code = ("import sys, carbon_plugin.flusher, carbon_plugin.buffer, carbon_plugin.receivers, carbon_plugin.known,"
            " carbon_plugin.retry, carbon_plugin.connection_drain, carbon_plugin.writer_loop;"
            " print(sorted(m for m in sys.modules if m.startswith('biggraphite_like.receiver')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_parts_in_the_names_order_are_the_general_cut():
    """insert_columns' parts (groups following the names, found by a scan of the points)
    equal what the sort of every point gives."""
    rng = np.random.default_rng(7)
    owner = rng.integers(0, 1000, 20_000)
    group_of_name = np.arange(1000) // 70
    fast = list(cut_by_group(owner, group_of_name))
    shuffled = rng.permutation(1000)  # the same groups under other name numbers: the sorting path
    general = list(cut_by_group(np.argsort(shuffled)[owner], group_of_name[shuffled]))
    assert len(fast) == len(general) == 15
    for a, b in zip(fast, general):
        assert a.names.tolist() == sorted(shuffled[b.names].tolist())
        assert a.points.tolist() == b.points.tolist()
        assert [a.names[i] for i in a.owner.tolist()] == [shuffled[b.names[i]] for i in b.owner.tolist()]
