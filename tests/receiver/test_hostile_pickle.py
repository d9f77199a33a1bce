"""Hostile pickle frames (issue #30, rows 1, 3 and 12) against the real `bgl receive` and
the real carbon-cache with our plugin: good points sent before and after the bad frame, on
the same connection and on another one, are all stored; the bad frame is refused and
counted; the process stays up; a billion-laughs frame costs neither time nor memory; a
point too old for its retention creates no metric."""
from __future__ import annotations

import pickle
import socket
import struct
import time

import numpy as np
import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.ingest.pickles import decode_pickle, safe_loads
from biggraphite_like.ingest.points import Refusals
from tests import receiver_env
from tests.carbon_env import CarbonCache, send_to_carbon
from tests.conftest import make_store_url
from tests.receiver_env import BglReceive

NOW = int(time.time()) // 60 * 60
SCHEMAS = "[default]\npattern = .*\nretentions = 60s:1d\n"
DEEP = 100_000


def billion_laughs(levels: int = 26) -> bytes:
    """A list whose level k holds level k-1 twice, by memo references: 2^levels once built."""
    out = b"\x80\x02]q\x00K\x01a"
    for level in range(1, levels + 1):
        out += b"]q" + bytes([level]) + b"(h" + bytes([level - 1]) + b"h" + bytes([level - 1]) + b"e"
    return out + b"."


HOSTILE = {  # row -> (pickled message, refusals it counts, the reason logged)
    "int-10e400-in-a-point": (pickle.dumps([("hostile.big", (NOW, 10**400)), ("hostile.ok", (NOW, 1.0))], 2), 1,
                              "value is an integer of 1329 bits, out of a float's range"),
    "bare-int-10e5000": (pickle.dumps(10**5000, protocol=2), 1, "<an integer of 16610 bits>"),
    "list-100000-deep": (b"\x80\x02" + b"]" * DEEP + b"a" * (DEEP - 1) + b".", 1, "deeper than 8 levels"),
    "billion-laughs": (billion_laughs(), 1, "expands to more than"),
}
STORED_FROM_HOSTILE = {"int-10e400-in-a-point": [("hostile.ok", NOW, 1.0)]}


def frame(payload: bytes) -> bytes:
    return struct.pack("!L", len(payload)) + payload


def good(prefix: str, count: int) -> list[tuple[str, float, float]]:
    return [(f"good.{prefix}.m{i % 50}", NOW - 60 * (i // 50), i + 0.5) for i in range(count)]


def frames(points, batch: int = 250) -> bytes:
    return b"".join(frame(pickle.dumps([(n, (t, v)) for n, t, v in points[i:i + batch]], protocol=2))
                    for i in range(0, len(points), batch))


def stored_points(url: str, points) -> int:
    return receiver_env.stored_points(url, points, NOW)


def wait_stored(url: str, points, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while (held := stored_points(url, points)) != len(points):
        assert time.monotonic() < deadline, f"{held} of {len(points)} good points stored after {timeout}s"
        time.sleep(0.3)


def peak_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def send_around(port: int, bad: bytes) -> tuple[list, float]:
    """Good frames, the bad frame, good frames on one connection; good frames on a second
    connection after the bad one was sent. Returns the good points and the seconds from
    sending the bad frame to the end of the connection (every byte read by the server)."""
    before, after, other = good("before", 1000), good("after", 1000), good("other", 500)
    first = socket.create_connection(("127.0.0.1", port), timeout=120)
    second = socket.create_connection(("127.0.0.1", port), timeout=120)
    try:
        first.sendall(frames(before))
        started = time.monotonic()
        first.sendall(frame(bad) + frames(after))
        second.sendall(frames(other))
        for sock in (first, second):
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):  # the server closes once it read everything
                pass
        elapsed = time.monotonic() - started
    finally:
        first.close()
        second.close()
    return before + after + other, elapsed


# -- bgl receive --------------------------------------------------------------------------------
@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return make_store_url("sqlite", tmp_path)


@pytest.fixture
def receiver(tmp_path, sqlite_url):
    schemas = tmp_path / "storage-schemas.conf"
    schemas.write_text(SCHEMAS)
    process = BglReceive(tmp_path / "receiver", sqlite_url, "--storage-schemas", str(schemas),
                         "--flush-interval", "0.2", "--stats-interval", "1").start()
    yield process
    process.kill()


def wait_counter(receiver: BglReceive, name: str, expected: float, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while receiver.counters().get(name) != expected:
        assert receiver.process.poll() is None, f"the receiver died:\n{receiver.output()[-3000:]}"
        assert time.monotonic() < deadline, f"{name} = {receiver.counters().get(name)}, not {expected}"
        time.sleep(0.2)


@pytest.mark.parametrize("row", sorted(HOSTILE))
def test_receiver_refuses_a_hostile_frame_and_keeps_everything_else(receiver, sqlite_url, row):
    bad, refused, reason = HOSTILE[row]
    rss_before = peak_rss_kib(receiver.process.pid)
    points, elapsed = send_around(receiver.pickle_port, bad)
    assert receiver.process.poll() is None, f"the receiver died:\n{receiver.output()[-3000:]}"
    wait_stored(sqlite_url, points + STORED_FROM_HOSTILE.get(row, []))
    wait_counter(receiver, "refusedLines", refused)
    assert receiver.process.poll() is None
    assert reason in receiver.output()
    if row == "billion-laughs":  # refused before expanding: no time, no memory
        assert elapsed < 20, f"{elapsed:.1f}s to read a 200-byte frame"
        grown = peak_rss_kib(receiver.process.pid) - rss_before
        assert grown < 64 * 1024, f"peak RSS grew by {grown} KiB"


# row 12: a point at timestamp 1 (older than the 1-day retention) of a new metric, and one of a
# metric that also has a point to keep
TOO_OLD_FRAME = pickle.dumps([("hostile.too_old", (1, 5.0)), ("hostile.mixed", (1, 5.0)),
                              ("hostile.mixed", (NOW, 6.0))], protocol=2)


def assert_no_metric_too_old(url: str) -> None:
    """No empty metric was left behind by the point too old to keep."""
    accessor = Accessor.from_url(url)
    try:
        assert accessor.get_metric("hostile.too_old") is None
        assert accessor.glob_metrics("hostile.*") == ["hostile.mixed"]
    finally:
        accessor.close()


def test_receiver_creates_no_metric_for_a_point_too_old_to_keep(receiver, sqlite_url):
    """Row 12: a point at timestamp 1 (older than the 1-day retention) is counted too old
    and leaves no empty metric behind; a point of a metric with a valid one is stored."""
    points, _ = send_around(receiver.pickle_port, TOO_OLD_FRAME)
    wait_stored(sqlite_url, points + [("hostile.mixed", NOW, 6.0)])
    wait_counter(receiver, "tooOldPoints", 2)
    assert_no_metric_too_old(sqlite_url)


# -- carbon-cache with our plugin ----------------------------------------------------------------
@pytest.fixture
def carbon(tmp_path, sqlite_url):
    accessor = Accessor.from_url(sqlite_url)
    accessor.syncdb()
    accessor.close()
    cache = CarbonCache(tmp_path / "carbon", sqlite_url, schemas=(("default", ".*", "60s:1d"),),
                        settings={"BG_FLUSH_INTERVAL": 0.2})
    cache.start()
    yield cache
    cache.kill()


@pytest.mark.parametrize("row", sorted(HOSTILE))
def test_carbon_plugin_refuses_a_hostile_frame_and_keeps_everything_else(carbon, sqlite_url, row):
    bad, _, reason = HOSTILE[row]
    rss_before = peak_rss_kib(carbon.process.pid)
    points, elapsed = send_around(carbon.pickle_port, bad)
    assert carbon.process.poll() is None, carbon.log()[-3000:]
    wait_stored(sqlite_url, points + STORED_FROM_HOSTILE.get(row, []))
    carbon.wait_for_log(reason)
    assert carbon.process.poll() is None
    if row == "billion-laughs":
        assert elapsed < 20, f"{elapsed:.1f}s to read a 200-byte frame"
        grown = peak_rss_kib(carbon.process.pid) - rss_before
        assert grown < 64 * 1024, f"peak RSS grew by {grown} KiB"


def test_carbon_plugin_creates_no_metric_for_a_point_too_old_to_keep(carbon, sqlite_url):
    points, _ = send_around(carbon.pickle_port, TOO_OLD_FRAME)
    wait_stored(sqlite_url, points + [("hostile.mixed", NOW, 6.0)])
    assert_no_metric_too_old(sqlite_url)


# -- the accessor, on each store --------------------------------------------------------------------
def test_accessor_creates_no_metric_for_points_too_old_to_keep(accessor):
    """Row 12 at its root: insert_columns and insert_points create an unknown metric only
    when one of its points is within its retention; the others count as too old."""
    metadata = MetricMetadata.create("60s:1d")
    result = accessor.insert_columns(["old.a", "old.b"], np.array([0, 1, 1]), np.array([1.0, 1.0, NOW]),
                                     np.array([5.0, 5.0, 6.0]), now=NOW, create=metadata)
    assert (result.stored, result.too_old, result.created, result.rejected) == (1, 2, 1, 0)
    assert accessor.get_metric("old.a") is None and accessor.get_metric("old.b") is not None
    result = accessor.insert_points({"old.c": [(1, 1.0)], "old.d": [(NOW - 2 * 86_400, 1.0)]}, now=NOW,
                                    create=metadata)
    assert (result.stored, result.too_old, result.created, result.rejected) == (0, 2, 0, 0)
    assert accessor.glob_metrics("old.*") == ["old.b"]
    assert accessor.glob_directories("*") == ["old"]


# -- CarbonLink requests to the receiver --------------------------------------------------------------
def carbonlink_exchange(sock: socket.socket, payload: bytes) -> dict:
    sock.sendall(frame(payload))
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack("!L", data[:4])[0]:
        chunk = sock.recv(65536)
        assert chunk, "the receiver closed the CarbonLink connection"
        data += chunk
    return pickle.loads(data[4:])


HOSTILE_REQUESTS = {  # request -> what its error says
    "type-10e5000": (pickle.dumps({"type": 10**5000}, protocol=2), "<an integer of 16610 bits>"),
    "billion-laughs": (billion_laughs(), "expands to more than"),
    "list-100000-deep": (HOSTILE["list-100000-deep"][0], "deeper than 8 levels"),
    "memo-index-2e31": (b"\x80\x02}r\xff\xff\xff\x7f.", "memo index 2147483647"),
}


def test_carbonlink_refuses_hostile_requests_and_keeps_the_connection(receiver, sqlite_url):
    with socket.create_connection(("127.0.0.1", receiver.carbonlink_port), timeout=60) as sock:
        for name, (payload, reason) in HOSTILE_REQUESTS.items():
            answer = carbonlink_exchange(sock, payload)
            assert set(answer) == {"error"} and reason in answer["error"], (name, answer)
        query = pickle.dumps({"type": "cache-query", "metric": "good.none"}, protocol=2)
        assert carbonlink_exchange(sock, query) == {"datapoints": []}
    assert receiver.process.poll() is None
    send_to_carbon(receiver.pickle_port, frames(good("late", 10)))
    wait_stored(sqlite_url, good("late", 10))
    assert "request refused" in receiver.output()


# -- CarbonLink answers read by graphite-web's side ------------------------------------------------------
class HostileCarbonLink:
    """A CarbonLink peer that answers every request with one hostile payload (what a broken
    or hostile carbon-cache could send back to graphite-web)."""

    def __init__(self, answer: bytes):
        import threading

        self.answer = answer
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                try:
                    while True:
                        header = conn.recv(4, socket.MSG_WAITALL)
                        if len(header) < 4:
                            break
                        conn.recv(struct.unpack("!L", header)[0], socket.MSG_WAITALL)
                        self.requests += 1
                        conn.sendall(frame(self.answer))
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


HOSTILE_ANSWERS = {
    "billion-laughs": billion_laughs(),
    "bare-int-10e5000": HOSTILE["bare-int-10e5000"][0],
    "list-100000-deep": HOSTILE["list-100000-deep"][0],
    "bad-points": pickle.dumps({"datapointsByMetric": {"cl.a": [(10**400, 1.0), ("x", "y"), [NOW - 60, 5.0]]}}, 2),
}


@pytest.mark.parametrize("row", sorted(HOSTILE_ANSWERS))
def test_graphite_web_renders_whatever_carbonlink_answers(tmp_path, row):
    import json

    from django.test import Client

    from tests.graphite_env import setup_graphite_app, use_finders

    setup_graphite_app()
    url = make_store_url("sqlite", tmp_path)
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    accessor.insert_points({"cl.a": [(NOW - 120, 1.5)]}, now=NOW, create=MetricMetadata.create("60s:1d"))
    accessor.close()
    peer = HostileCarbonLink(HOSTILE_ANSWERS[row])
    try:
        with use_finders(["graphite_plugin.Finder"], BG_STORE=url, CARBONLINK_HOSTS=[f"127.0.0.1:{peer.port}"]):
            response = Client(raise_request_exception=False).post(
                "/render", {"target": "cl.a", "format": "json", "from": "-10min", "now": str(NOW)})
    finally:
        peer.close()
    assert peer.requests >= 1
    assert response.status_code == 200, response.content[:500]
    values = {t: v for v, t in json.loads(response.content)[0]["datapoints"] if v is not None}
    expected = {NOW - 120: 1.5, NOW - 60: 5.0} if row == "bad-points" else {NOW - 120: 1.5}
    assert values == expected


# -- the decoder on its own ---------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", range(6))
def test_decoded_points_are_what_pickle_loads_gives(protocol):
    """A guard of the new decoder (passes on main too): carbon's layout read directly and
    the general path give exactly the points pickle.loads gives, in every protocol."""
    shared = "shared.name"  # one str object: pickled once, then memo references
    messages = [
        [],
        [("one", (NOW, 1.5))],
        [(shared, (NOW + i, float(i))) for i in range(3)] + [(f"m.{i}", (NOW - i, i * 0.25)) for i in range(2500)],
        [("ints", (NOW, 7)), ("neg", (NOW, -2**31)), ("u16", (NOW, 65535)), ("long", (2**40, 1.0))],
        [("é.ü", (float(NOW), float("nan"))), (b"bytes.name", (NOW, 2.0)), ["list.item", [NOW, 3.0]]],
    ]
    for message in messages:
        refusals = Refusals()
        points = decode_pickle(pickle.dumps(message, protocol=protocol), refusals)
        names = [n.decode() if isinstance(n, bytes) else n for n, _ in message]
        if protocol < 3:
            names = [n for n in names if n != "bytes.name"]  # protocols 0-2 pickle bytes through _codecs.encode
        if protocol < 3 and any(n == b"bytes.name" for n, _ in message):
            assert refusals.count == 1 and "unsafe module _codecs" in refusals.samples[0][0]
            continue
        assert refusals.count == 0, refusals.samples
        assert points.names == names
        pairs = [p for _, p in message]
        assert np.array_equal(points.timestamps, np.array([t for t, _ in pairs], dtype=float))
        assert np.array_equal(points.values, np.array([v for _, v in pairs], dtype=float), equal_nan=True)


UNBUILT = {  # frames refused before pickle's unpickler would even start building them
    "memo index 2^31": (b"\x80\x02]r\xff\xff\xff\x7f.", "memo index 2147483647"),
    "a set": (b"\x80\x04\x8f" + b"K\x01" * 10 + b".", "opcode EMPTY_SET"),
    "a list in itself": (b"\x80\x02]q\x00h\x00a.", "after referring to it"),
    "a list changed after a reference": (b"\x80\x02]q\x00]q\x01h\x00a0K\x01a.", "after referring to it"),
    "a text int of 5000 digits": (b"I" + b"9" * 5000 + b"\n.", "5000 characters"),
    "a global": (b"cos\nsystem\n.", "unsafe module os"),
    "a dict of 65 items": (b"}(" + b"".join(b"K" + bytes([i]) + b"N" for i in range(65)) + b"u.", "more than 64 items"),
    "truncated": (pickle.dumps([("a", (1, 2))], protocol=2)[:-3], "truncated pickle"),
}


@pytest.mark.parametrize("protocol", range(6))
def test_restricted_loads_builds_what_pickle_builds(protocol):
    message = [(), ((),), [[], {}], {"type": "cache-query-bulk", "metrics": ["a", "b"]}, (None, True, False),
               -1, 2**70, -2**70, 1e300, "é", [1.5] * 3] + ([b"\x00\xff"] if protocol >= 3 else [])
    assert safe_loads(pickle.dumps(message, protocol=protocol)) == message


@pytest.mark.parametrize("case", sorted(UNBUILT))
def test_frames_refused_with_their_reason(case):
    data, reason = UNBUILT[case]
    refusals = Refusals()
    assert len(decode_pickle(data, refusals)) == 0
    assert refusals.count == 1 and reason in refusals.samples[0][0], refusals.samples
    with pytest.raises(pickle.UnpicklingError):
        safe_loads(data)
