"""The receiver's I/O loop on real sockets, without a store: reads pause at the
high-water mark and resume once the buffer drains; UDP, which cannot be paused, drops
past the bound and counts what it dropped."""
from __future__ import annotations

import socket
import time

from biggraphite_like.ingest.buffer import PointBuffer
from biggraphite_like.receiver.framing import LineFraming
from biggraphite_like.receiver.listeners import Listeners, listen_tcp, listen_udp
from biggraphite_like.receiver.stats import ReceiverStats


def lines(count: int, prefix: str = "f") -> bytes:
    return b"".join(b"%s.m%d 1 %d\n" % (prefix.encode(), i, 1_700_000_000 + i) for i in range(count))


def serve_until(listeners: Listeners, condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        listeners.run_once(0.02)


def test_tcp_reads_pause_at_the_high_water_mark_and_resume_after_a_flush():
    buffer, stats = PointBuffer(), ReceiverStats()
    listeners = Listeners(buffer, stats, max_buffered_points=4000)  # pauses at 2,000, resumes below 1,000
    server = listen_tcp("127.0.0.1", 0)
    listeners.add_tcp(server, LineFraming)
    client = socket.create_connection(server.getsockname())
    try:
        client.sendall(lines(20_000))
        serve_until(listeners, lambda: listeners.paused)
        for _ in range(20):  # paused: nothing more is read, the rest waits in the socket
            listeners.run_once(0.01)
        held = buffer.buffered
        assert listeners.pause_at <= held < listeners.pause_at + 6000 and held < 20_000
        assert stats.totals()["readPauses"] == 1
        taken = []
        while sum(taken) < 20_000:  # a flusher taking batches: reading resumes each time
            batch = buffer.take()
            if batch is not None:
                taken.append(len(batch))
                buffer.done(batch)
            listeners.run_once(0.01)
            assert buffer.buffered <= listeners.pause_at + 6000
        assert sum(taken) == 20_000 and stats.totals()["droppedPoints"] == 0
    finally:
        client.close()
        listeners.close()


def test_udp_past_the_bound_is_dropped_and_counted():
    buffer, stats = PointBuffer(), ReceiverStats()
    listeners = Listeners(buffer, stats, max_buffered_points=1000)
    server = listen_udp("127.0.0.1", 0)
    listeners.add_udp(server)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
        for index in range(15):  # 1,500 points, 100 a datagram, never flushed
            client.sendto(lines(100, f"u{index}"), server.getsockname())
        serve_until(listeners, lambda: stats.totals()["metricsReceived"] == 1500)
    listeners.close()
    assert buffer.buffered == 1000
    assert stats.totals()["droppedPoints"] == 500


def test_the_flusher_takes_bounded_batches_in_arrival_order():
    from biggraphite_like.ingest.points import Refusals
    from biggraphite_like.ingest.lines import decode_lines

    buffer = PointBuffer()
    for start in range(0, 10_000, 1000):  # ten reads of 1,000 points, names repeating
        data = b"".join(b"o.m%d %d %d\n" % (i % 300, i, 1_700_000_000 + i) for i in range(start, start + 1000))
        buffer.add(decode_lines(data, Refusals()), Refusals())
    sizes, values = [], []
    while (batch := buffer.take(2500)) is not None:
        sizes.append(len(batch))
        values.extend(batch.values[batch.owner == batch.names.index("o.m7")].tolist())
        buffer.done(batch)
    assert sizes == [2000] * 5  # whole reads, at most 2,500 points
    assert values == [float(i) for i in range(7, 10_000, 300)]  # one metric's points stay in order


def test_a_burst_is_flushed_once_it_is_over_not_a_flush_interval_later(tmp_path):
    """--flush-quiet: points that stopped coming for flush_quiet seconds are flushed then,
    a quarter of the flush interval after the last flush at the soonest; with 0, they wait
    for the interval."""
    import threading

    from biggraphite_like.ingest.lines import decode_lines
    from biggraphite_like.ingest.points import Refusals
    from biggraphite_like.ingest.policy import FlushPolicy
    from biggraphite_like.receiver.flusher import Flusher
    from biggraphite_like.receiver.rules import StorageRules
    from tests.store_env import make_store

    interval = 8.0
    sides = {}
    for quiet in (0.1, 0.0):
        (tmp_path / str(quiet)).mkdir()
        _, accessor = make_store(tmp_path / str(quiet))
        buffer = PointBuffer()
        flusher = Flusher(accessor, buffer, StorageRules(), ReceiverStats(),
                          FlushPolicy(flush_interval=interval, flush_quiet=quiet))
        flushed = threading.Event()
        flusher.on_flush = flushed.set
        sides[quiet] = (flusher, buffer, flushed)
    started = time.monotonic()
    for flusher, buffer, _ in sides.values():
        flusher.start()
        buffer.add(decode_lines(lines(500, "q"), Refusals()).checked(Refusals()), Refusals())
    try:
        assert sides[0.1][2].wait(interval * 0.75), "the burst was not flushed once it was over"
        at = time.monotonic() - started
        assert interval / 4 - 0.1 <= at < interval * 0.75  # not before a quarter interval after the start
        assert sides[0.1][1].buffered == 0
        assert not sides[0.0][2].is_set() and sides[0.0][1].buffered == 500  # off: waits for the interval
    finally:
        for flusher, _, _ in sides.values():
            flusher.stop()
    assert sides[0.0][1].buffered == 0  # stop() flushed it
