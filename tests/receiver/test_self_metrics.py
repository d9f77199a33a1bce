"""The receiver's self-metrics (receiver/stats.py) from a real `bgl receive`: `storedPoints`
counts the points the store accepted, and `committedPoints`, its former name, carries the
same value (in the store and in the Prometheus text file) while the alias lives; a record
in the same second as the previous one (the last at shutdown) loses none of its counts."""
from __future__ import annotations

import socket
import time

from biggraphite_like.accessor import Accessor
from biggraphite_like.receiver.stats import ReceiverStats, agent_prefix
from tests.receiver_env import BglReceive

POINTS = 300
SCHEMAS = "[self]\npattern = ^carbon\\.agents\\.\nretentions = 1s:1h\n[default]\npattern = .*\nretentions = 60s:1d\n"


def recorded(url: str, name: str, now: int) -> dict[int, float]:
    """The values (timestamp -> value) of a self-metric in the store."""
    accessor = Accessor.from_url(url)
    try:
        if accessor.get_metric(name) is None:
            return {}
        series = accessor.fetch([name], now - 600, now + 60, now=now + 60)[name]
        return {series.start + i * series.step: v for i, v in enumerate(series.values.tolist()) if v == v}
    finally:
        accessor.close()


def test_stored_points_and_its_deprecated_alias_carry_the_same_value(tmp_path):
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    schemas = tmp_path / "storage-schemas.conf"
    schemas.write_text(SCHEMAS)  # a point a second: each record of the self-metrics is kept
    receiver = BglReceive(tmp_path / "r", url, "--storage-schemas", str(schemas), "--flush-interval", "0.2",
                          "--stats-interval", "1").start()
    now = int(time.time())
    prefix = agent_prefix()
    try:
        lines = b"".join(f"self.m{i % 10} {i} {now - 60 * (i // 10)}\n".encode() for i in range(POINTS))
        with socket.create_connection(("127.0.0.1", receiver.line_port), timeout=30) as sock:
            sock.sendall(lines)
        deadline = time.monotonic() + 120
        while sum(recorded(url, f"{prefix}.storedPoints", now).values()) < POINTS:
            assert receiver.process.poll() is None, receiver.output()[-3000:]
            assert time.monotonic() < deadline, "no storedPoints recorded for the points sent within 120 s"
            time.sleep(0.5)
    finally:
        assert receiver.stop() == 0
    stored = recorded(url, f"{prefix}.storedPoints", now)
    assert stored == recorded(url, f"{prefix}.committedPoints", now) and sum(stored.values()) >= POINTS, stored
    totals = receiver.counters()
    assert totals["storedPoints"] == totals["committedPoints"] >= POINTS, totals
    assert "deprecated" in receiver.metrics_file.read_text().split("bgl_receiver_committedPoints", 1)[1]


def test_a_record_in_the_same_second_carries_the_previous_counts():
    stats = ReceiverStats()
    stats.increment("storedPoints", 300)
    first = stats.self_metric_points("p", 0, 1000.2)
    stats.increment("storedPoints", 16)
    same_second = stats.self_metric_points("p", 0, 1000.9)  # replaces `first` in the store
    stats.increment("storedPoints", 5)
    later = stats.self_metric_points("p", 0, 1001.0)

    def value(points, name):
        return dict(zip(points.names, points.values.tolist()))[f"p.{name}"]

    assert [value(p, "storedPoints") for p in (first, same_second, later)] == [300, 316, 5]
    assert [value(p, "committedPoints") for p in (first, same_second, later)] == [300, 316, 5]
    assert set(same_second.timestamps.tolist()) == {1000.0}
