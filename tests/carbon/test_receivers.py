"""The plugin's receivers (carbon_plugin/receivers.py), which hand a read's points to carbon's
cache together (pipeline.cache_many), against carbon's own MetricLineReceiver and
MetricPickleReceiver: the same bytes, cut into the same reads, over Twisted's StringTransport
into carbon's real MetricCache, leave the same cache, the same `metricsReceived` count and
the same connection state."""
from __future__ import annotations

import pickle
import random
import struct
import time

import pytest

from carbon_plugin import pipeline, receivers

LINES = [
    b"app.a 1.5 1000", b"app.b 2 1000", b"app.a 3 1060", b"app.a 4 1060",  # a duplicate: the last wins
    b"cpu;host=h2;dc=x 5 1000", b"metric{tag=\"v\"} 6 1000", b"~weird.name 7 1000",  # carbon's tag parse
    b"  spaced.name   8   1000  ", b"crlf.name 9 1000\r", b"", b"two fields", b"app.nan nan 1000",
    b"app.float 10 1000.7", b"app.e 1e3 2e3", "unicode.é 11 1000".encode(),
    # whitespace to str.split() only (carbon: four fields), other whitespace, PEP 515 digits
    b"file\x1csep 12 1000", b"tab.name\t13\t1000", b"vt.name\x0b14 1000", b"under.score 1_000 1_000",
]


@pytest.fixture
def carbon(monkeypatch):
    """carbon's pipeline as carbon-cache sets it up (`PIPELINE = write`, with the plugin's
    write processor), carbon's receivers and ours; carbon's registries and cache put back."""
    from carbon import events, instrumentation, state
    from carbon.cache import MetricCache
    from carbon.pipeline import Processor, run_pipeline
    from carbon.protocols import CarbonServerProtocol, MetricLineReceiver, MetricPickleReceiver

    saved_processors, saved_protocols = dict(Processor.plugins), dict(CarbonServerProtocol.plugins)
    pipeline.register()
    receivers.register()
    ours = {"line": CarbonServerProtocol.plugins["line"], "pickle": CarbonServerProtocol.plugins["pickle"]}
    monkeypatch.setattr(state, "pipeline_processors", [Processor.plugins["write"]()], raising=False)
    monkeypatch.setattr(state, "instrumentation", instrumentation, raising=False)  # as carbon.service sets it
    events.metricReceived.addHandler(run_pipeline)
    cache = MetricCache()
    cache.clear()
    cache.size = 0
    instrumentation.stats.clear()
    yield {"carbon": {"line": MetricLineReceiver, "pickle": MetricPickleReceiver}, "ours": ours}
    events.metricReceived.removeHandler(run_pipeline)
    Processor.plugins.clear()
    Processor.plugins.update(saved_processors)
    CarbonServerProtocol.plugins.clear()
    CarbonServerProtocol.plugins.update(saved_protocols)
    cache.clear()
    cache.size = 0
    instrumentation.stats.clear()


def receive(protocol_class, reads: list[bytes]) -> tuple[dict, int, bool]:
    """Feed the reads to a new connection; carbon's cache, metricsReceived, and whether the
    connection was dropped."""
    from carbon import instrumentation
    from carbon.cache import MetricCache
    from twisted.internet.testing import StringTransport
    from twisted.python.failure import Failure
    from twisted.internet.error import ConnectionDone

    cache = MetricCache()
    cache.clear()
    cache.size = 0
    instrumentation.stats.clear()
    protocol = protocol_class()
    transport = StringTransport()
    protocol.makeConnection(transport)
    try:
        for data in reads:
            protocol.dataReceived(data)
    finally:
        protocol.connectionLost(Failure(ConnectionDone()))
    contents = {name: dict(points) for name, points in cache.items()}
    assert cache.size == sum(map(len, contents.values()))
    return contents, instrumentation.stats.get("metricsReceived", 0), transport.disconnecting


def cut(data: bytes, rng: random.Random) -> list[bytes]:
    """The bytes in reads of random sizes (lines split across reads)."""
    reads, start = [], 0
    while start < len(data):
        size = rng.randint(1, 40)
        reads.append(data[start:start + size])
        start += size
    return reads


@pytest.mark.parametrize("resolution", [0, 60])
def test_plaintext_reads_cache_what_carbons_receiver_caches(carbon, monkeypatch, resolution):
    from carbon.conf import settings

    monkeypatch.setitem(settings, "MIN_TIMESTAMP_RESOLUTION", resolution)
    rng = random.Random(7)
    data = b"\n".join(LINES * 3) + b"\n"
    for reads in ([data], cut(data, rng), cut(data, rng)):
        theirs = receive(carbon["carbon"]["line"], reads)
        assert receive(carbon["ours"]["line"], reads) == theirs
    cached, count, dropped = theirs
    assert count == 3 * 15 and not dropped  # every line but the blank, the malformed, the NaN, the 0x1c one
    assert cached["app.a"] == ({960: 1.5, 1020: 4.0} if resolution else {1000.0: 1.5, 1060.0: 4.0})
    assert "cpu;dc=x;host=h2" in cached  # tags put in order by carbon's parse


def test_a_line_over_max_length_drops_the_connection_after_the_lines_before_it(carbon):
    too_long = b"x" * 20_000
    data = b"app.a 1 1000\napp.b 2 1000\n" + too_long + b"\napp.c 3 1000\n"
    theirs = receive(carbon["carbon"]["line"], [data])
    assert receive(carbon["ours"]["line"], [data]) == theirs
    assert theirs == ({"app.a": {1000.0: 1.0}, "app.b": {1000.0: 2.0}}, 2, True)


def test_minus_one_is_now_for_both(carbon):
    before = time.time()
    theirs, _, _ = receive(carbon["carbon"]["line"], [b"now.m 5 -1\nnow.n 6 -1.5\n"])
    ours, _, _ = receive(carbon["ours"]["line"], [b"now.m 5 -1\nnow.n 6 -1.5\n"])
    after = time.time()
    for cached in (theirs, ours):
        assert set(cached) == {"now.m", "now.n"}
        assert all(before <= ts <= after for points in cached.values() for ts in points)


def test_refused_lines_are_counted_and_the_rest_is_cached(carbon):
    """What carbon's receiver cannot take (it drops the connection there) ours refuses."""
    refused = receivers.stats.totals()["refusedLines"]
    data = b"a.b 1 1000\nbad.ts 1 nan\nbad.bytes\xff 1 1000\nc.d 2 1000\n"
    cached, count, dropped = receive(carbon["ours"]["line"], cut(data, random.Random(3)))
    assert cached == {"a.b": {1000.0: 1.0}, "c.d": {1000.0: 2.0}} and count == 2 and not dropped
    assert receivers.stats.totals()["refusedLines"] - refused == 2


def test_pickle_reads_cache_what_carbons_receiver_caches(carbon):
    points = [("app.a", (1000, 1.5)), ("app.a", (1000, 2.5)), ("cpu;host=h2;dc=x", (1000.0, 3)),
              ("app.nan", (1000, float("nan"))), ("app.b", ("1060", "5")), ("bad.point", (1000,))]
    frames = b"".join(struct.pack("!L", len(p)) + p for p in (pickle.dumps(points, 2), pickle.dumps(points[:2], 2)))
    for reads in ([frames], cut(frames, random.Random(5))):
        theirs = receive(carbon["carbon"]["pickle"], reads)
        assert receive(carbon["ours"]["pickle"], reads) == theirs
    assert theirs == ({"app.a": {1000.0: 2.5}, "app.b": {1060.0: 5.0}, "cpu;dc=x;host=h2": {1000.0: 3.0}}, 6, False)
