"""When the store falls behind, `bgl receive` stops reading (the client blocks) instead of
dropping or growing without bound; nothing is lost once the store is back."""
from __future__ import annotations

import sqlite3
import threading
import time

import numpy as np

from biggraphite_like.accessor import Accessor
from tests.carbon_env import plaintext, send_to_carbon
from tests.receiver_env import BglReceive

NOW = int(time.time()) // 60 * 60
LOCK_SECONDS = 6.0


def test_store_held_by_another_writer_pauses_reads_and_loses_nothing(tmp_path):
    path = tmp_path / "bgl.db"
    url = f"sqlite://{path}?timeout=0.5"
    schemas = tmp_path / "schemas.conf"
    schemas.write_text("[all]\npattern = .*\nretentions = 60s:1d\n")
    process = BglReceive(tmp_path / "receiver", url, "--max-buffered-points", "200000", "--flush-interval", "0.2",
                         "--storage-schemas", str(schemas)).start()
    try:
        points = [(f"bp.m{m}", NOW - 60 * p, float(m + p)) for p in range(30) for m in range(20_000)]  # 600,000
        data = plaintext(points)
        blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        blocker.execute("BEGIN EXCLUSIVE")  # another writer holds the store
        release = threading.Timer(LOCK_SECONDS, blocker.execute, ("COMMIT",))
        release.start()
        started = time.monotonic()
        send_to_carbon(process.line_port, data)  # returns once the receiver read every byte
        elapsed = time.monotonic() - started
        release.join()
        blocker.close()
        assert process.stop() == 0, process.output()
        assert elapsed > LOCK_SECONDS * 0.8  # the sender was held back while the store was locked
        counters = process.counters()
        assert counters["readPauses"] >= 1 and counters["droppedPoints"] == 0 and counters["storeErrors"] >= 1
        accessor = Accessor.from_url(f"sqlite://{path}")
        series = accessor.fetch([f"bp.m{m}" for m in range(0, 20_000, 997)], NOW - 3600, NOW + 60, now=NOW + 60)
        for m, ts in enumerate(series.values()):
            assert int((~np.isnan(ts.values)).sum()) == 30
        assert len(accessor.glob_metrics("bp.*")) == 20_000
        accessor.close()
    finally:
        process.kill()
