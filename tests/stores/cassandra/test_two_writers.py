"""Two `bgl receive` processes writing to one keyspace of the real Cassandra node at once, with
distinct `writer_id`s: each stream is stored exactly. The streams share half their metrics
(each writer sends other minutes of them), so both create the same metrics and directories
concurrently, and each computes the hourly stage of metrics the other also writes."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from biggraphite_like.accessor import Accessor
from tests.carbon_env import plaintext, send_to_carbon
from tests.receiver_env import BglReceive

NOW = int(time.time()) // 3600 * 3600 - 60  # the last minute of an hour: the hour's 60 minutes are in the past
SCHEMAS = "[default]\npattern = .*\nretentions = 60s:1d,1h:30d\n"
METRICS = 400  # per writer: the first half shared with the other writer
MINUTES = 30  # per metric and writer: even minutes for writer 1, odd ones for writer 2


def stream(writer: int) -> list[tuple[str, int, float]]:
    """(name, timestamp, value): writer 1 sends even minutes, writer 2 odd ones; shared metrics first."""
    points = []
    for m in range(METRICS):
        name = f"two.shared.m{m:03d}" if m < METRICS // 2 else f"two.w{writer}.m{m:03d}"
        for k in range(MINUTES):
            minute = 2 * k + (writer - 1)
            points.append((name, NOW - 60 * minute, writer * 1e6 + m * 1000 + minute + 0.5))
    return points


@pytest.mark.parametrize("mode", ["sasi", "sai"])
def test_two_receivers_with_distinct_writer_ids_store_both_streams_exactly(real_keyspaces, tmp_path, mode):
    url = real_keyspaces.url(mode)
    schemas = tmp_path / "storage-schemas.conf"
    schemas.write_text(SCHEMAS)
    receivers = [BglReceive(tmp_path / f"receiver{w}", f"{url}?writer_id={w}", "--storage-schemas", str(schemas),
                            "--flush-interval", "0.2").start() for w in (1, 2)]
    streams = {w: stream(w) for w in (1, 2)}
    try:
        senders = [threading.Thread(target=send_to_carbon, args=(r.line_port, plaintext(streams[w])))
                   for w, r in zip((1, 2), receivers)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(300)
        codes = [r.stop() for r in receivers]
    finally:
        for r in receivers:
            r.kill()
    assert codes == [0, 0], [r.output() for r in receivers]
    for w, r in zip((1, 2), receivers):
        counters = r.counters()
        assert counters["metricsReceived"] == len(streams[w])
        assert counters["refusedLines"] == 0 and counters["droppedPoints"] == 0

    points = streams[1] + streams[2]
    accessor = Accessor.from_url(url)
    try:
        names = sorted({n for n, _, _ in points})
        series = accessor.fetch(names, NOW - 3600, NOW + 60, now=NOW + 60)
        wrong = [(n, t) for n, t, v in points if series[n].values[(t - series[n].start) // series[n].step] != v]
        stored = sum(int((~np.isnan(s.values)).sum()) for s in series.values())
        print(f"{mode}: sent {len(points)}, acknowledged (received) {len(points)}, stored {stored}, wrong {len(wrong)}")
        assert not wrong, f"{len(wrong)} points not stored as sent, e.g. {wrong[:3]}"
        assert stored == len(points)
        assert len(accessor.glob_metrics("two.**")) == len(names)
        assert accessor.glob_directories("two.*") == ["two.shared", "two.w1", "two.w2"]
    finally:
        accessor.close()
