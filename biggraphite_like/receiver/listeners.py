"""The receiver's I/O thread: carbon's plaintext (TCP, and UDP when asked) and pickle
(TCP) listeners, read with `selectors` in one thread.

Why one thread with selectors, not asyncio: the work per read is one bulk decode of up to
READ_SIZE bytes (framing.py, lines.py) and one append to the buffer; an event loop adds a
callback, a Future and a Protocol call per read and gives nothing back here, and threads
per connection would fight for the GIL on every small read. The store is written by the
flusher thread (its SQLite and Cassandra calls release the GIL), CarbonLink is served by
threads of its own (carbonlink.py) so that a query never delays a read.

Back-pressure: while the buffer holds `pause_at` points or more (the store is behind),
TCP connections are not read (taken out of the selector): clients block in send(), as
they do with carbon's USE_FLOW_CONTROL; reading resumes below `resume_at`. `pause_at` is
--max-buffered-points less what one read can add (HEADROOM: a 64 KB read of the shortest
lines, plus one whole pickle frame), so the bound holds (with --max-buffered-points of at
least twice HEADROOM, about 200,000; below that reads pause at half the bound). UDP cannot be paused: a datagram arriving while the buffer is full is dropped,
counted (droppedPoints) and logged.

Shutdown (`drain`): listeners close first; open connections are read until their clients
close them, or they received nothing for `idle` seconds with nothing left unread, or the
deadline passes; what remains unread then is logged.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import selectors
import socket
import termios
import time
from typing import Callable

from biggraphite_like.errors import ReceiverConfigError
from biggraphite_like.receiver.buffer import PointBuffer
from biggraphite_like.receiver.framing import MAX_FRAME, LineFraming, PickleFraming
from biggraphite_like.receiver.lines import decode_lines
from biggraphite_like.receiver.points import Points, Refusals
from biggraphite_like.receiver.stats import RateLimitedLog, ReceiverStats

_log = logging.getLogger(__name__)

READ_SIZE = 64 * 1024  # bytes read from a connection at once
MAX_POINTS_PER_READ = READ_SIZE // 6 + 1  # the shortest line, "a 1 1\n", is 6 bytes
MAX_POINTS_PER_FRAME = MAX_FRAME // 12  # the smallest pickled point takes about 12 bytes
HEADROOM = MAX_POINTS_PER_READ + MAX_POINTS_PER_FRAME  # points one read can add at most (~98,000)
UDP_SIZE = 65536


def listen_tcp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ReceiverConfigError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def listen_udp(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ReceiverConfigError(f"cannot listen on UDP {host}:{port}: {exc.strerror}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
    sock.setblocking(False)
    return sock


def unread_bytes(sock: socket.socket) -> int:
    try:
        return int.from_bytes(fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"), "little")
    except OSError:
        return 0


class Connection:
    """One client's TCP connection and its framing."""

    def __init__(self, sock: socket.socket, peer: str, framing: LineFraming | PickleFraming):
        self.sock = sock
        self.peer = peer
        self.framing = framing
        self.last_data = time.monotonic()
        self.registered = False


class Listeners:
    """The listening sockets and the connections, served by `run_once` from one thread."""

    def __init__(self, buffer: PointBuffer, stats: ReceiverStats, max_buffered_points: int,
                 refusal_log: RateLimitedLog | None = None):
        self.buffer = buffer
        self.stats = stats
        self.refusal_log = refusal_log or RateLimitedLog(_log)
        self.selector = selectors.DefaultSelector()
        self.connections: dict[int, Connection] = {}
        self._listening: list[socket.socket] = []
        self.paused = False
        self.max_buffered_points = max_buffered_points
        self.pause_at = max(max_buffered_points - HEADROOM, max_buffered_points // 2)
        self.resume_at = self.pause_at // 2
        self._udp_full_since: float | None = None

    # -- listening ------------------------------------------------------------------------
    def add_tcp(self, sock: socket.socket, framing: Callable[[], LineFraming | PickleFraming]) -> None:
        self._listening.append(sock)
        self.selector.register(sock, selectors.EVENT_READ, ("accept", framing))

    def add_udp(self, sock: socket.socket) -> None:
        self._listening.append(sock)
        self.selector.register(sock, selectors.EVENT_READ, ("udp", None))

    def stop_listening(self) -> None:
        for sock in self._listening:
            self.selector.unregister(sock)
            sock.close()
        self._listening = []

    # -- the loop -------------------------------------------------------------------------
    def run_once(self, timeout: float) -> None:
        """Wait up to `timeout` for sockets to be ready, and serve them."""
        self._apply_back_pressure()
        for key, _ in self.selector.select(timeout):
            kind, data = key.data
            if kind == "accept":
                self._accept(key.fileobj, data)
            elif kind == "udp":
                self._read_udp(key.fileobj)
            else:
                self._read(data)
            if not self.paused and self.buffer.buffered >= self.pause_at:
                self._apply_back_pressure()

    def _apply_back_pressure(self) -> None:
        buffered = self.buffer.buffered
        if not self.paused and buffered >= self.pause_at:
            self.paused = True
            self.stats.increment("readPauses")
            for connection in self.connections.values():
                self._unregister(connection)
            _log.info("store behind: %d points buffered, reading paused until %d", buffered, self.resume_at)
        elif self.paused and buffered < self.resume_at:
            self.paused = False
            for connection in self.connections.values():
                self._register(connection)

    def _register(self, connection: Connection) -> None:
        if not connection.registered:
            self.selector.register(connection.sock, selectors.EVENT_READ, ("read", connection))
            connection.registered = True

    def _unregister(self, connection: Connection) -> None:
        if connection.registered:
            self.selector.unregister(connection.sock)
            connection.registered = False

    def _accept(self, listener: socket.socket, framing: Callable[[], LineFraming | PickleFraming]) -> None:
        for _ in range(64):
            try:
                sock, address = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. EMFILE: logged, the listener stays
                _log.error("accept failed: %s", exc)
                return
            sock.setblocking(False)
            peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
            connection = Connection(sock, peer, framing())
            self.connections[sock.fileno()] = connection
            if not self.paused:
                self._register(connection)

    def _read(self, connection: Connection) -> None:
        try:
            data = connection.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            if exc.errno != errno.ECONNRESET:
                _log.warning("connection from %s failed: %s", connection.peer, exc)
            data = b""
        refusals = Refusals()
        if data:
            connection.last_data = time.monotonic()
            points = connection.framing.feed(data, refusals)
        else:
            points = connection.framing.close(refusals)
            self._close(connection)
        self._accept_points(points, refusals, connection.peer)

    def _read_udp(self, sock: socket.socket) -> None:
        for _ in range(256):
            try:
                data, address = sock.recvfrom(UDP_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                _log.warning("UDP receive failed: %s", exc)
                return
            refusals = Refusals()
            points = decode_lines(data, refusals)
            if self.buffer.buffered + len(points) > self.max_buffered_points:
                self.stats.increment("metricsReceived", len(points))
                self.stats.increment("droppedPoints", len(points))
                now = time.monotonic()
                if self._udp_full_since is None or now - self._udp_full_since >= 60:
                    self._udp_full_since = now
                    _log.error("buffer full (%d points): UDP datagrams are dropped (counted in droppedPoints)"
                               " until the store catches up", self.buffer.buffered)
                continue
            self._accept_points(points, refusals, f"udp:{address[0]}:{address[1]}")

    def _accept_points(self, points: Points, refusals: Refusals, peer: str) -> None:
        received = len(points) + refusals.count
        points = points.checked(refusals)
        self.buffer.add(points, refusals)
        if received:
            self.stats.increment("metricsReceived", received)
        if refusals.count:
            self.stats.increment("refusedLines", refusals.count)
            self.refusal_log.refused(peer, refusals)

    def _finish(self, connection: Connection) -> None:
        """Close a connection, keeping a last line that had no newline."""
        refusals = Refusals()
        self._accept_points(connection.framing.close(refusals), refusals, connection.peer)
        self._close(connection)

    def _close(self, connection: Connection) -> None:
        self._unregister(connection)
        self.connections.pop(connection.sock.fileno(), None)
        connection.sock.close()

    # -- shutdown -------------------------------------------------------------------------
    def drain(self, timeout: float, idle: float) -> None:
        """Stop listening, then read the open connections to their end (see the module doc)."""
        self.stop_listening()
        start = time.monotonic()
        opened = len(self.connections)
        while self.connections and time.monotonic() - start < timeout:
            now = time.monotonic()
            for connection in list(self.connections.values()):
                if not self.paused and now - connection.last_data >= idle and not unread_bytes(connection.sock):
                    self._finish(connection)
            if self.connections:
                self.run_once(0.05)
        left = list(self.connections.values())
        unread = sum(unread_bytes(c.sock) for c in left)
        for connection in left:
            self._finish(connection)
        message = (f"connections drained in {time.monotonic() - start:.1f}s: {opened} open at SIGTERM,"
                   f" {opened - len(left)} read to their end or idle")
        if left:
            message += f"; deadline ({timeout:g}s) reached with {len(left)} still sending, {unread} bytes unread (lost)"
            _log.error(message)
        else:
            _log.info(message)

    def close(self) -> None:
        for connection in list(self.connections.values()):
            self._close(connection)
        self.stop_listening()
        self.selector.close()
