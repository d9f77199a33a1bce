"""Faults on carbon's receiving side, with the real carbon-cache daemon (bgl-carbon-cache).

carbon 1.1.10 alone drops the rest of a connection after a line with a NaN/inf timestamp or
a byte that is not UTF-8, and loses the bytes still unread in its sockets on SIGTERM. These
tests send real bursts over TCP and count the points stored against the points sent.
"""
from __future__ import annotations

import math
import pickle
import re
import socket
import struct
import threading
import time

import pytest

from biggraphite_like.accessor import Accessor
from tests.carbon_env import SIGTERM_EXIT, CarbonCache, plaintext, send_to_carbon
from tests.store_env import make_store

pytestmark = pytest.mark.slow

SCHEMAS = (("carbon", r"^carbon\.", "60s:1d"), ("default", ".*", "1s:2h"))


def burst(prefix: str, metrics: int, points: int, now: int) -> list[tuple[str, float, float]]:
    """metrics x points distinct points, one a second for each metric, ending a minute ago."""
    return [(f"{prefix}.m{m}", float(now - 60 - p), float(m * 1000 + p)) for p in range(points) for m in range(metrics)]


def stored_count(accessor: Accessor, prefix: str, metrics: int, now: int) -> int:
    names = [f"{prefix}.m{m}" for m in range(metrics)]
    total = 0
    for name, series in accessor.fetch(names, now - 3600, now, now).items():
        if series is not None:
            total += sum(1 for v in series.values.tolist() if not math.isnan(v))
    return total


def sigterm(carbon: CarbonCache) -> tuple[int, float]:
    """SIGTERM carbon-cache now; its exit status and the seconds it took to exit."""
    started = time.monotonic()
    carbon.process.send_signal(15)
    code = carbon.process.wait(120)
    return code, time.monotonic() - started


def refused_total(log: str) -> int:
    found = re.findall(r"refused lines since start: (\d+)", log)
    assert found, log[-3000:]
    return int(found[-1])


def recorded_refusals(accessor, since: int) -> float:
    """The refusedLines self-metric's points added up (0 before its first record)."""
    counters = accessor.glob_metrics("carbon.agents.*.biggraphite_like.refusedLines")
    if not counters:
        return 0.0
    [counter] = counters
    end = int(time.time()) + 1
    recorded = accessor.fetch([counter], since - 600, end, end)[counter]
    return sum(v for v in recorded.values.tolist() if not math.isnan(v))


def test_bad_lines_are_refused_and_counted_and_the_connection_goes_on(tmp_path):
    url, accessor = make_store(tmp_path)
    now = int(time.time())
    good = burst("faults.line", 100, 100, now)  # 10,000 lines
    bad = [b"faults.bad.nan 1 nan\n", b"faults.bad.inf 1 inf\n", b"faults.bad.neginf 1 -inf\n",
           b"faults.bad.\xff\xfe 1 %d\n" % now, b"faults.bad.garbage\n", b"faults.bad 1 2 3 4\n"]
    data = plaintext(good[:5000]) + b"".join(bad) + plaintext(good[5000:])
    # pickle: a NaN timestamp, a name that is not a string, then good points, one message
    pickled = burst("faults.pickle", 10, 10, now)
    message = [("faults.bad.pickle", (math.nan, 1.0)), (42, (now - 60, 1.0))]
    message += [(n, (t, v)) for n, t, v in pickled]
    payload = pickle.dumps(message, protocol=2)
    # self-metrics every second, kept at one-second precision: the refusedLines points add up
    carbon = CarbonCache(tmp_path / "carbon", url, schemas=(("carbon", r"^carbon\.", "1s:1h"), *SCHEMAS[1:]),
                         settings={"CARBON_METRIC_INTERVAL": 1})
    carbon.start()
    try:
        send_to_carbon(carbon.line_port, data)
        send_to_carbon(carbon.pickle_port, struct.pack("!L", len(payload)) + payload)
        # wait (bounded) for a self-metrics record after the last refusal: one a second, but a
        # loaded machine can delay carbon's timer well past that
        deadline = time.monotonic() + 30
        while recorded_refusals(accessor, now) < len(bad) + 2 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        assert carbon.stop() in SIGTERM_EXIT
    log = carbon.log()
    assert stored_count(accessor, "faults.line", 100, now) == len(good)
    assert stored_count(accessor, "faults.pickle", 10, now) == len(pickled)
    assert refused_total(log) == len(bad) + 2
    assert "refused from 127.0.0.1" in log and "not UTF-8" in log and "is not a finite number" in log
    assert recorded_refusals(accessor, now) == len(bad) + 2
    assert accessor.glob_metrics("faults.bad.**") == []


def test_refusals_are_logged_at_most_ten_a_minute_but_all_counted(tmp_path):
    url, accessor = make_store(tmp_path)
    carbon = CarbonCache(tmp_path / "carbon", url, schemas=SCHEMAS)
    carbon.start()
    try:
        send_to_carbon(carbon.line_port, b"faults.bad 1 nan\n" * 500)
    finally:
        assert carbon.stop() in SIGTERM_EXIT
    log = carbon.log()
    assert refused_total(log) == 500
    assert log.count("refused from 127.0.0.1") == 10


def test_sigterm_right_after_a_closed_burst_stores_all_of_it(tmp_path):
    url, accessor = make_store(tmp_path)
    now = int(time.time())
    points = burst("faults.burst", 500, 100, now)  # 50,000 lines
    carbon = CarbonCache(tmp_path / "carbon", url, schemas=SCHEMAS)
    carbon.start()
    try:
        with socket.create_connection(("127.0.0.1", carbon.line_port), timeout=120) as sock:
            sock.sendall(plaintext(points))
        code, _ = sigterm(carbon)  # closed, most of it still in carbon's socket buffer: stop at once
    finally:
        carbon.kill()
    log = carbon.log()
    assert code in SIGTERM_EXIT, log[-3000:]
    assert stored_count(accessor, "faults.burst", 500, now) == len(points)
    assert "receivers drained" in log


def test_sigterm_does_not_wait_for_an_idle_open_connection(tmp_path):
    url, accessor = make_store(tmp_path)
    now = int(time.time())
    points = burst("faults.idle", 10, 10, now)
    carbon = CarbonCache(tmp_path / "carbon", url, schemas=SCHEMAS,
                         settings={"BG_DRAIN_TIMEOUT": 60, "BG_DRAIN_IDLE": 0.5})
    carbon.start()
    try:
        with socket.create_connection(("127.0.0.1", carbon.line_port), timeout=120) as sock:
            sock.sendall(plaintext(points))
            time.sleep(1.0)  # read by carbon; the client stays connected and silent
            code, waited = sigterm(carbon)
    finally:
        carbon.kill()
    assert code in SIGTERM_EXIT
    assert waited < 30, f"shutdown waited {waited:.1f}s for an idle connection (BG_DRAIN_TIMEOUT is 60s)"
    assert stored_count(accessor, "faults.idle", 10, now) == len(points)


def test_the_drain_gives_up_at_its_deadline_and_says_what_was_left(tmp_path):
    url, accessor = make_store(tmp_path)
    carbon = CarbonCache(tmp_path / "carbon", url, schemas=SCHEMAS, settings={"BG_DRAIN_TIMEOUT": 2})
    carbon.start()
    stop_sending = threading.Event()

    def send_forever() -> None:
        line = b"faults.forever 1 %d\n" % (int(time.time()) - 60)
        try:
            with socket.create_connection(("127.0.0.1", carbon.line_port), timeout=30) as sock:
                while not stop_sending.is_set():
                    sock.sendall(line * 1000)
        except OSError:
            pass  # carbon closed the connection

    sender = threading.Thread(target=send_forever, daemon=True)
    sender.start()
    try:
        time.sleep(1.0)
        code, waited = sigterm(carbon)
    finally:
        stop_sending.set()
        carbon.kill()
        sender.join(30)
    assert code in SIGTERM_EXIT
    assert 2 <= waited < 30, waited
    log = carbon.log()
    assert re.search(r"BG_DRAIN_TIMEOUT \(2s\) reached with 1 connections still receiving, \d+ bytes unread", log), \
        log[-3000:]
