"""The receiver's I/O thread: carbon's plaintext (TCP, and UDP when asked) and pickle
(TCP) listeners, read with `selectors` in one thread.

Why one thread with selectors, not asyncio: the work per read is one bulk decode of up to
READ_SIZE bytes (framing.py, ingest/lines.py) and one append to the buffer; an event loop adds a
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

Limits (limits.py says why these): a listener at --max-connections closes its connection
silent the longest to serve a new one; the incomplete lines and frames of every connection
together are held up to --max-partial-bytes, past which the connections holding them,
silent longest first, are closed; an incomplete line or frame that receives nothing for
--partial-timeout seconds closes its connection; a pickle length over the limit closes
its connection (framing.py). Each is counted (closedConnections, and the incomplete line
or frame lost in refusedLines) and logged, at most a few lines a minute. An accept() that
fails (EMFILE, ENFILE) stops polling its listener for ACCEPT_BACKOFF seconds rather than
spinning on a backlog it cannot take, counted in acceptErrors, logged likewise.

Shutdown (`drain`): listeners close first; open connections are read until their clients
close them, or they received nothing for `idle` seconds with nothing left unread, or the
deadline passes; what remains unread then is logged.
"""
from __future__ import annotations

import errno
import fcntl
import itertools
import logging
import selectors
import socket
import termios
import time
from collections import OrderedDict
from typing import Callable

from biggraphite_like.errors import ReceiverConfigError
from biggraphite_like.ingest.buffer import PointBuffer
from biggraphite_like.receiver.framing import MAX_FRAME, FrameTooLong, LineFraming, PickleFraming
from biggraphite_like.receiver.limits import ACCEPT_BACKOFF, ConnectionLimits, connections_allowed
from biggraphite_like.ingest.lines import decode_lines
from biggraphite_like.ingest.points import ReceivedPoints, Refusals
from biggraphite_like.ingest.refusal_log import RateLimitedLog
from biggraphite_like.receiver.stats import ReceiverStats

_log = logging.getLogger(__name__)

READ_SIZE = 64 * 1024  # bytes read from a connection at once
MAX_POINTS_PER_READ = READ_SIZE // 6 + 1  # the shortest line, "a 1 1\n", is 6 bytes
MAX_POINTS_PER_FRAME = MAX_FRAME // 12  # the smallest pickled point takes about 12 bytes
HEADROOM = MAX_POINTS_PER_READ + MAX_POINTS_PER_FRAME  # points one read can add at most (~98,000)
UDP_SIZE = 65536
HOUSEKEEPING = 0.5  # seconds between two checks of backed-off listeners and silent incomplete frames
EVICTION_CANDIDATES = 8  # longest silent connections looked at for one with nothing unread


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


Framing = Callable[[], LineFraming | PickleFraming]


class TcpListener:
    """A listening socket, its connections (silent longest first) and its accept back-off."""

    def __init__(self, sock: socket.socket, framing: Framing):
        self.sock = sock
        self.framing = framing
        host, port = sock.getsockname()[:2]
        self.name = f"listener {host}:{port}"
        self.connections: OrderedDict[int, Connection] = OrderedDict()
        self.registered = False
        self.backed_off_until: float | None = None


class Connection:
    """One client's TCP connection and its framing."""

    def __init__(self, sock: socket.socket, peer: str, framing: LineFraming | PickleFraming, listener: TcpListener):
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.framing = framing
        self.listener = listener
        self.last_data = time.monotonic()
        self.registered = False
        self.closed = False  # closed while a select() batch still names it
        self.held = 0  # bytes of an incomplete line or frame, as counted in Listeners.partial_bytes


class Listeners:
    """The listening sockets and the connections, served by `run_once` from one thread."""

    def __init__(self, buffer: PointBuffer, stats: ReceiverStats, max_buffered_points: int,
                 refusal_log: RateLimitedLog | None = None, limits: ConnectionLimits = ConnectionLimits()):
        limits.validate()
        self.buffer = buffer
        self.stats = stats
        self.refusal_log = refusal_log or RateLimitedLog(_log)
        self._event_logs: dict[str, RateLimitedLog] = {}  # one per kind: a flood of one hides no other
        self.limits = limits
        self.selector = selectors.DefaultSelector()
        self.connections: dict[int, Connection] = {}
        self._tcp: list[TcpListener] = []
        self._udp: list[socket.socket] = []
        self.paused = False
        self.max_buffered_points = max_buffered_points
        self.pause_at = max(max_buffered_points - HEADROOM, max_buffered_points // 2)
        self.resume_at = self.pause_at // 2
        self.partial_bytes = 0  # incomplete lines and frames held, over every connection
        self._udp_full_since: float | None = None
        self._next_housekeeping = 0.0
        self._per_listener = limits.max_connections

    # -- listening ------------------------------------------------------------------------
    def add_tcp(self, sock: socket.socket, framing: Framing) -> None:
        listener = TcpListener(sock, framing)
        self._tcp.append(listener)
        self._register_listener(listener)
        self._per_listener = min(self.limits.max_connections, connections_allowed(len(self._tcp)))

    def add_udp(self, sock: socket.socket) -> None:
        self._udp.append(sock)
        self.selector.register(sock, selectors.EVENT_READ, ("udp", None))

    def stop_listening(self) -> None:
        for listener in self._tcp:
            if listener.registered:
                self.selector.unregister(listener.sock)
            listener.sock.close()
        for sock in self._udp:
            self.selector.unregister(sock)
            sock.close()
        self._tcp, self._udp = [], []

    def _register_listener(self, listener: TcpListener) -> None:
        self.selector.register(listener.sock, selectors.EVENT_READ, ("accept", listener))
        listener.registered = True
        listener.backed_off_until = None

    # -- the loop -------------------------------------------------------------------------
    def run_once(self, timeout: float) -> None:
        """Wait up to `timeout` for sockets to be ready, and serve them."""
        self._apply_back_pressure()
        now = time.monotonic()
        if now >= self._next_housekeeping:
            self._next_housekeeping = now + HOUSEKEEPING
            self._housekeeping(now)
        for key, _ in self.selector.select(timeout):
            kind, data = key.data
            if kind == "accept":
                self._accept(data)
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

    def _housekeeping(self, now: float) -> None:
        """Poll backed-off listeners again; close connections whose incomplete line or frame
        received nothing for partial_timeout (not while paused: they are not read then)."""
        for listener in self._tcp:
            if listener.backed_off_until is not None and now >= listener.backed_off_until:
                self._register_listener(listener)
        if self.paused:
            return
        timeout = self.limits.partial_timeout
        for listener in self._tcp:
            stalled = []
            for connection in listener.connections.values():  # silent longest first
                if now - connection.last_data < timeout:
                    break
                if connection.framing.pending and not unread_bytes(connection.sock):
                    stalled.append(connection)
            for connection in stalled:
                self._shut(connection, f"an incomplete line or pickle message of {connection.framing.pending}"
                                       f" bytes received nothing for {now - connection.last_data:.0f}s"
                                       f" (--partial-timeout {timeout:g}): dropped", refused=1,
                           kind="closings for --partial-timeout")

    def _accept(self, listener: TcpListener) -> None:
        for _ in range(64):
            try:
                sock, address = listener.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS...: the backlog waits, the loop does not spin
                self._back_off(listener, exc)
                return
            sock.setblocking(False)
            peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else str(address)
            if len(listener.connections) >= self._per_listener and not self._make_room(listener):
                self.stats.increment("refusedConnections")
                self._event_log("refused connections").warning(
                    "%s: refused a connection from %s: at its limit of %d connections (--max-connections %d, open"
                    " files limit), each of the longest silent with data not read yet", listener.name, peer,
                    self._per_listener, self.limits.max_connections)
                sock.close()
                continue
            connection = Connection(sock, peer, listener.framing(), listener)
            self.connections[connection.fd] = connection
            listener.connections[connection.fd] = connection
            if not self.paused:
                self._register(connection)

    def _back_off(self, listener: TcpListener, exc: OSError) -> None:
        self.stats.increment("acceptErrors")
        if listener.registered:
            self.selector.unregister(listener.sock)
            listener.registered = False
        listener.backed_off_until = time.monotonic() + ACCEPT_BACKOFF
        self._event_log("failed accepts").warning("%s: accept failed: %s; not accepting for %gs (%d connections"
                                                  " open)", listener.name, exc, ACCEPT_BACKOFF, len(self.connections))

    def _make_room(self, listener: TcpListener) -> bool:
        """Close the listener's connection silent longest, if one of the longest silent has
        nothing waiting to be read; False if none."""
        for victim in itertools.islice(listener.connections.values(), EVICTION_CANDIDATES):
            if not unread_bytes(victim.sock):
                break
        else:
            return False
        self._shut(victim, f"{listener.name} is at its limit of {self._per_listener} connections: the one silent"
                           f" longest ({time.monotonic() - victim.last_data:.0f}s) is closed for a new one",
                   refused=1 if victim.framing.pending else 0, kind="closings for --max-connections")
        return True

    def _read(self, connection: Connection) -> None:
        if connection.closed:
            return
        try:
            data = connection.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            if exc.errno != errno.ECONNRESET:
                _log.warning("connection from %s failed: %s", connection.peer, exc)
            data = b""
        refusals = Refusals()
        if not data:
            points = connection.framing.close(refusals)
            self._close(connection)
            self._accept_points(points, refusals, connection.peer)
            return
        connection.last_data = time.monotonic()
        connection.listener.connections.move_to_end(connection.fd)
        try:
            points = connection.framing.feed(data, refusals)
        except FrameTooLong as exc:  # what came before it is stored; the rest cannot be framed
            self._accept_points(exc.points, refusals, connection.peer)
            self._shut(connection, f"{exc}; what it sent before is stored, what follows is not read", refused=1,
                       kind="closings for a pickle length over the limit")
            return
        self._accept_points(points, refusals, connection.peer)
        held = connection.framing.pending
        self.partial_bytes += held - connection.held
        connection.held = held
        if self.partial_bytes > self.limits.max_partial_bytes:
            self._shed_partials()

    def _shed_partials(self) -> None:
        """Over max_partial_bytes: close the connections holding incomplete lines or frames,
        silent longest first, down to three quarters of the bound (so that the next reads
        do not come back here)."""
        holders = sorted((c for c in self.connections.values() if c.held), key=lambda c: c.last_data)
        target = self.limits.max_partial_bytes * 3 // 4
        for connection in holders:
            if self.partial_bytes <= target:
                break
            self._shut(connection, f"incomplete lines and pickle messages hold {self.partial_bytes} bytes over"
                                   f" every connection (--max-partial-bytes {self.limits.max_partial_bytes}):"
                                   f" its {connection.held} bytes, silent"
                                   f" {time.monotonic() - connection.last_data:.0f}s, are dropped", refused=1,
                       kind="closings for --max-partial-bytes")

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

    def _accept_points(self, points: ReceivedPoints, refusals: Refusals, peer: str) -> None:
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

    def _event_log(self, kind: str) -> RateLimitedLog:
        log = self._event_logs.get(kind)
        if log is None:
            log = self._event_logs[kind] = RateLimitedLog(_log, what=kind)
        return log

    def _shut(self, connection: Connection, reason: str, refused: int, kind: str) -> None:
        """Close a connection the receiver gives up on, counted and logged (rate-limited by
        kind); the incomplete line or frame it held, `refused`, is counted as refused."""
        self.stats.increment("closedConnections")
        if refused:
            self.stats.increment("metricsReceived", refused)
            self.stats.increment("refusedLines", refused)
        self._event_log(kind).warning("closing the connection from %s: %s", connection.peer, reason)
        self._close(connection)

    def _close(self, connection: Connection) -> None:
        if connection.closed:
            return
        self._unregister(connection)
        del self.connections[connection.fd]
        del connection.listener.connections[connection.fd]
        self.partial_bytes -= connection.held
        connection.held = 0
        connection.closed = True
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
