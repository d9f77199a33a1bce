"""Issue 30 (hostile): a full disk under a stream of new metrics, on a real small tmpfs.

A real `bgl receive` process stores into a 40 MiB tmpfs of which ballast files take
32 MiB. A client sends new metrics (one point each) until the disk is full, keeps sending
while it is full, then the ballast is deleted. Every line the kernel accepted from the
client (counted by the bytes send() took) must be stored once space returns, without any
restart: the receiver holds what it could not write (bounded by --max-buffered-points,
then it stops reading and the client blocks), retries without limit while the error can
recover, and halves a batch so that what fits gets in. The WAL that grew while the disk
was full gives its space back, and the exit message and counters say what was dropped
(nothing, here). `--retries 2`: retries bound only the errors that cannot recover (a
full disk never makes the receiver drop: before the fix, batches were dropped after
their retries, 1.4 s with this setting).
"""
from __future__ import annotations

import select
import socket
import threading
import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.receiver_env import BglReceive
from tests.small_disk import IS_ROOT, SmallDisk

NOW = int(time.time()) // 60 * 60
RATE, CHUNK = 4000, 400  # new metrics a second at most, and at once
DISK_MIB, BALLAST_MIB = 40, 32
WAL_AFTER = 1 << 20  # the store bounds its WAL at 1 MiB while its disk is nearly full (TIGHT_WAL_BYTES)
pytestmark = [pytest.mark.slow,  # about 40 s, 10 s and 15 s
              pytest.mark.skipif(not IS_ROOT, reason="needs root to mount a small tmpfs for the receiver")]


@pytest.fixture
def disk(tmp_path):
    disk = SmallDisk(tmp_path / "disk", DISK_MIB)
    try:
        yield disk
    finally:
        disk.unmount()


class Sender(threading.Thread):
    """Sends lines of new metrics `hfd.m<i>` on one TCP connection at RATE a second at most,
    counting the lines whose every byte the kernel accepted (`sent`) and the seconds a send
    could not proceed (the receiver stopped reading)."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 << 10)  # blocks soon once not read
        self.sock.connect(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.sent = 0
        self.blocked_seconds = 0.0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            pending = b""
            while not self._halt.is_set():
                if not pending:  # CHUNK lines every CHUNK / RATE seconds, no catching up after a block
                    time.sleep(CHUNK / RATE)
                    pending = "".join(f"hfd.m{i:07d} {i} {NOW}\n"
                                      for i in range(self.sent, self.sent + CHUNK)).encode()
                waited = time.monotonic()
                _, writable, _ = select.select([], [self.sock], [], 0.2)
                self.blocked_seconds += time.monotonic() - waited
                if not writable:
                    continue
                taken = self.sock.send(pending)
                done = pending[:taken].count(b"\n")
                self.sent += done
                pending = pending[taken:]
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def finish(self) -> None:
        """Stop sending (the line being sent is completed first), then close the connection."""
        self._halt.set()
        self.join(30)
        self.sock.setblocking(True)
        self.sock.settimeout(120)
        self.sock.shutdown(socket.SHUT_WR)
        while self.sock.recv(65536):  # the receiver closes once it read everything
            pass
        self.sock.close()


def stored_count(accessor: Accessor, count: int) -> int:
    return stored_count_of(accessor, [f"hfd.m{i:07d}" for i in range(count)])


def stored_count_of(accessor: Accessor, names: list[str]) -> int:
    return sum(len(accessor.store.get_metrics(names[start:start + 5000])) for start in range(0, len(names), 5000))


def wait_for(condition, timeout: float, step: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def wal_size(path) -> int:
    return path.stat().st_size if path.exists() else 0


def test_a_full_disk_loses_nothing_the_receiver_read_and_ingest_resumes_by_itself(tmp_path, disk):
    ballast = [disk.path / f"ballast{i}" for i in range(BALLAST_MIB // 2)]
    for piece in ballast:
        piece.write_bytes(b"\0" * (2 << 20))
    path = disk.path / "bgl.db"
    wal = disk.path / "bgl.db-wal"
    schemas = tmp_path / "schemas.conf"
    schemas.write_text("[all]\npattern = .*\nretentions = 60s:1d\n")
    receiver = BglReceive(tmp_path / "receiver", f"sqlite://{path}", "--max-buffered-points", "60000",
                          "--retries", "2", "--flush-interval", "0.2", "--stats-interval", "1",
                          "--storage-schemas", str(schemas)).start()
    sender = Sender(receiver.line_port)
    reader = Accessor.from_url(f"sqlite://{path}")
    wal_while_full = 0

    def watch(seconds: float) -> None:
        nonlocal wal_while_full
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            wal_while_full = max(wal_while_full, wal_size(wal))
            time.sleep(0.05)

    try:
        sender.start()
        assert wait_for(lambda: "is full" in receiver.output(), 60), "the disk never filled up"
        full_at = sender.sent
        watch(12)  # sending on while the disk is full: the receiver holds the points, then stops reading
        blocked_while_full = sender.blocked_seconds
        assert blocked_while_full > 1, "the receiver never stopped reading"

        # 2 MiB come back, less than the backlog needs: halved batches fill them, then it is full again
        stored_before = stored_count(reader, sender.sent)
        ballast.pop().unlink()
        full_again = receiver.output().count("is full")
        # (the flusher's next attempt comes within its longest backoff, 10 s)
        assert wait_for(lambda: stored_count(reader, sender.sent) - stored_before > 2000, 30, 1.0), \
            f"{stored_count(reader, sender.sent) - stored_before} points stored in the 2 MiB freed"
        assert wait_for(lambda: receiver.output().count("is full") > full_again, 30), \
            "2 MiB were enough for the whole backlog"
        watch(3)
        stored_in_2_mib = stored_count(reader, sender.sent) - stored_before
        assert "writing it in halves" in receiver.output()

        for piece in ballast:  # the operator frees the rest
            piece.unlink()
        time.sleep(4)  # sending on after the space returned
        sender.finish()
        assert sender.error is None, sender.error
        sent = sender.sent
        assert wait_for(lambda: stored_count(reader, sent) == sent, 60, 1.0), \
            f"ingest did not resume: {stored_count(reader, sent)} of {sent} sent lines stored\n{receiver.output()[-3000:]}"
        # the WAL gives its space back once writes succeed (the disk is still nearly full: at the next commit)
        assert wait_for(lambda: wal_size(wal) <= WAL_AFTER, 20), \
            f"WAL of {wal_size(wal)} bytes after recovery ({wal_while_full} at most while full)"
        wal_after = wal_size(wal)
        values = {}
        for start in range(0, sent, 2000):
            names = [f"hfd.m{i:07d}" for i in range(start, min(sent, start + 2000))]
            for name, series in reader.fetch(names, NOW - 600, NOW + 60, now=NOW + 60).items():
                values[name] = [v for v in series.values_list() if v is not None] if series else []
        wrong = [n for n, v in values.items() if v != [float(int(n[5:]))]]
        assert not wrong, f"{len(wrong)} metrics without their one point, e.g. {wrong[:3]}"

        assert receiver.stop() == 0, receiver.output()
        output = receiver.output()
        counters = receiver.counters()
        assert counters["storeErrors"] >= 1
        assert ("everything received is stored" in output) == (counters["droppedPoints"] == 0), output[-3000:]
        assert counters["droppedPoints"] == 0, output[-3000:]
        print(f"\nfull disk: sent {sent} new metrics ({full_at} before the disk was full), the sender blocked"
              f" {blocked_while_full:.1f}s while it was; {stored_in_2_mib} stored in the first 2 MiB freed, all"
              f" after {BALLAST_MIB} MiB; WAL {wal_while_full >> 10} KiB at most while full, {wal_after >> 10} KiB after;"
              f" storeErrors {counters['storeErrors']:.0f}, readPauses {counters['readPauses']:.0f}")
    finally:
        reader.close()
        receiver.kill()
        sender.sock.close()


def test_stopped_while_the_disk_is_full_the_receiver_says_what_it_dropped(tmp_path, disk):
    """SIGTERM while the disk is still full: after --retries attempts the receiver gives up,
    counts every point it could not store (droppedPoints = sent - stored, exactly) and its
    exit message says so instead of "everything received is stored"."""
    (disk.path / "ballast").write_bytes(b"\0" * ((DISK_MIB - 4) << 20))
    path = disk.path / "bgl.db"
    schemas = tmp_path / "schemas.conf"
    schemas.write_text("[all]\npattern = .*\nretentions = 60s:1d\n")
    receiver = BglReceive(tmp_path / "receiver", f"sqlite://{path}", "--retries", "1", "--flush-interval", "0.2",
                          "--stats-interval", "0", "--storage-schemas", str(schemas)).start()
    sender = Sender(receiver.line_port)
    try:
        sender.start()
        assert wait_for(lambda: "is full" in receiver.output(), 60), "the disk never filled up"
        time.sleep(2)
        sender.finish()
        sent = sender.sent
        assert receiver.stop() == 0, receiver.output()
        output = receiver.output()
        counters = receiver.counters()
        reader = Accessor.from_url(f"sqlite://{path}")
        stored = stored_count(reader, sent)
        reader.close()
        assert 0 < stored < sent
        assert counters["droppedPoints"] == sent - stored, output[-3000:]
        assert "everything received is stored" not in output
        assert f"stopped, {sent - stored} points received were NOT stored" in output
        print(f"\nstopped on a full disk: sent {sent}, stored {stored}, dropped and counted {sent - stored}")
    finally:
        receiver.kill()
        sender.sock.close()


def test_carbons_plugin_holds_its_points_on_a_full_disk_and_stores_them_once_space_returns(tmp_path, disk):
    """Carbon's plugin on the same full disk (its real buffer, flusher and writer process,
    BG_RETRIES 0): the flusher halves the call that does not fit, keeps retrying what
    still does not (the buffer, then carbon's cache, holds the rest), and stores every
    point once the ballast is deleted; nothing dropped (before: dropped at the first
    failure with BG_RETRIES 0)."""
    from carbon_plugin.buffer import WriteBuffer
    from carbon_plugin.flusher import Flusher
    from carbon_plugin.known import KnownMetrics
    from carbon_plugin.options import PluginOptions
    from carbon_plugin.stats import PluginStats
    from carbon_plugin.writer_process import ProcessWriter

    ballast = disk.path / "ballast"
    ballast.write_bytes(b"\0" * ((DISK_MIB - 4) << 20))
    url = f"sqlite://{disk.path / 'bgl.db'}"
    Accessor.from_url(url).syncdb()
    options = PluginOptions(store_url=url, flush_interval=0.2, retries=0, retry_max_delay=1.0)
    stats = PluginStats()
    known = KnownMetrics(lambda: Accessor.from_url(url), options, stats)
    buffer = WriteBuffer(options.flush_size, options.flush_interval, options.max_buffered_points)
    flusher = Flusher(ProcessWriter(url), buffer, known, options, stats)
    meta = MetricMetadata.create("60s:1d")
    count = 40_000
    names = [f"hfd.carbon.m{i:06d}" for i in range(count)]
    try:
        for i, name in enumerate(names):
            known.set(name, meta)
            buffer.add(name, [(NOW, float(i))])
        flusher.ensure_started()
        assert wait_for(lambda: stats.totals()["storeErrors"] >= 1, 60), "the disk never filled up"
        flushed = flusher.flush_now(3)
        held = stats.totals()
        assert held["droppedPoints"] == 0, held
        assert not flushed, "the whole buffer fit in 4 MiB"
        assert 1000 <= held["storedPoints"] < count, held  # halves got in
        ballast.unlink()
        assert flusher.flush_now(60), "the flusher did not resume"
    finally:
        flusher.stop()
    totals = stats.totals()
    assert totals["droppedPoints"] == 0 and totals["storedPoints"] == count, totals
    reader = Accessor.from_url(url)
    assert stored_count_of(reader, names) == count
    reader.close()
    print(f"\ncarbon's plugin on a full disk: {held['storedPoints']} of {count} stored in the 4 MiB left,"
          f" all after the ballast was deleted; storeErrors {totals['storeErrors']}")
