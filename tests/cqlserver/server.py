"""CQLTestServer: a CQL native protocol v4 server for tests (never a production store).

It accepts the real cassandra-driver over TCP, one thread per connection,
answers requests in order on each connection, and counts them by opcode
(``statement_counts``) so tests can check how many round trips a store makes.
"""
from __future__ import annotations

import collections
import logging
import socket
import threading
from typing import Any

from . import protocol as p
from .engine import Engine, Session
from .errors import CQLError, ProtocolError, ServerError
from .state import load_state, save_state
from .system import CQL_VERSION

log = logging.getLogger(__name__)


class CQLTestServer:
    """A single-node CQL test server on ``host:port`` (port 0 picks a free port)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, sasi: bool = True, sai: bool = True,
                 state_file: str | None = None):
        self.host = host
        self.port = port
        self.state_file = state_file
        self.engine = Engine(host=host, sasi=sasi, sai=sai)
        self.statement_counts: collections.Counter = collections.Counter()
        self._counts_lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._stopping = threading.Event()
        self.request_delay = 0.0  # test hook: seconds each QUERY/EXECUTE/BATCH waits before it is answered

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> "CQLTestServer":
        if self.state_file:
            load_state(self.engine, self.state_file)
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        self.engine.port = self.port
        self._sock = sock
        self._stopping.clear()
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"cqlserver-accept-{self.port}", daemon=True)
        self._accept_thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close every connection, and save state if a state file is set."""
        self._stopping.set()
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
            self._sock = None
        with self._conn_lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=5)
            self._accept_thread = None
        if self.state_file:
            self.save()

    def save(self, path: str | None = None) -> None:
        with self.engine.lock:
            save_state(self.engine, path or self.state_file)

    def __enter__(self) -> "CQLTestServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- test helpers --------------------------------------------------------------------
    def reset_counts(self) -> None:
        with self._counts_lock:
            self.statement_counts.clear()

    def slow_down(self, seconds: float) -> None:
        """Answer every later QUERY, EXECUTE and BATCH `seconds` late (0: at once). Requests
        of one connection are answered in order, so a burst of n waits n x seconds: a slow or
        overloaded node, for timeout tests."""
        self.request_delay = seconds

    def advance_clock(self, seconds: float) -> None:
        """Move the server clock forward: TTLs expire without sleeping."""
        self.engine.advance(seconds)

    def drop_all(self) -> None:
        """Forget every keyspace (and prepared statement)."""
        self.engine.drop_all()

    def _count(self, key: str, n: int = 1) -> None:
        with self._counts_lock:
            self.statement_counts[key] += n

    # -- networking ----------------------------------------------------------------------
    def _accept_loop(self) -> None:
        sock = self._sock
        while not self._stopping.is_set() and sock is not None:
            try:
                conn, _ = sock.accept()
            except OSError:
                break
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._conn_lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="cqlserver-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        session = Session()
        buf = bytearray()
        header = p.HEADER
        try:
            while not self._stopping.is_set():
                try:
                    data = conn.recv(262144)
                except OSError:
                    break
                if not data:
                    break
                buf += data
                out = []
                while len(buf) >= 9:
                    version, flags, stream, opcode, length = header.unpack_from(buf, 0)
                    if len(buf) < 9 + length:
                        break
                    body = bytes(buf[9:9 + length])
                    del buf[:9 + length]
                    out.append(self._handle(session, version, flags, stream, opcode, body))
                if out:
                    conn.sendall(b"".join(out))
        except OSError:
            pass
        finally:
            with self._conn_lock:
                self._conns.discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def _handle(self, session: Session, version: int, flags: int, stream: int, opcode: int, body: bytes) -> bytes:
        if version & 0x7F != p.VERSION:
            err = ProtocolError(f"Invalid or unsupported protocol version ({version & 0x7F}); "
                                "supported versions are (4/v4)")
            return p.frame(stream, p.ERROR, err.body(), p.RESPONSE_VERSION)
        name = p.OPCODE_NAMES.get(opcode)
        if name:
            self._count(name)
        try:
            if flags & 0x01:
                raise ProtocolError("Compression is not supported by the CQL test server")
            r = p.Reader(body)
            if flags & 0x04:
                r.bytes_map()  # custom payload, ignored
            return p.frame(stream, *self._dispatch(session, opcode, r))
        except CQLError as e:
            return p.frame(stream, p.ERROR, e.body())
        except Exception as e:  # a server bug: report it to the client, keep serving
            log.exception("CQL test server error")
            return p.frame(stream, p.ERROR, ServerError(f"{type(e).__name__}: {e}").body())

    def _dispatch(self, session: Session, opcode: int, r: p.Reader) -> tuple[int, bytes]:
        engine = self.engine
        if opcode in (p.QUERY, p.EXECUTE, p.BATCH) and self.request_delay:
            self._stopping.wait(self.request_delay)
        if opcode == p.QUERY:
            text = r.long_string()
            values, opts = p.read_query_parameters(r)
            return p.RESULT, p.encode_result(engine.query(session, text, values, opts))
        if opcode == p.EXECUTE:
            qid = r.short_bytes()
            values, opts = p.read_query_parameters(r)
            return p.RESULT, p.encode_result(engine.execute(session, qid, values, opts), opts.skip_metadata)
        if opcode == p.BATCH:
            kind, items, opts = p.read_batch(r)
            self._count("batch_statements", len(items))
            return p.RESULT, p.encode_result(engine.batch(session, kind, items, opts))
        if opcode == p.PREPARE:
            text = r.long_string()
            return p.RESULT, p.encode_result(engine.prepare(session, text))
        if opcode == p.STARTUP:
            options = r.string_map()
            if options.get("COMPRESSION"):
                raise ProtocolError(f"Unknown compression algorithm: {options['COMPRESSION']}")
            return p.READY, b""
        if opcode == p.OPTIONS:
            return p.SUPPORTED, p.string_multimap({"CQL_VERSION": [CQL_VERSION], "COMPRESSION": [],
                                                    "PROTOCOL_VERSIONS": ["4/v4"]})
        if opcode == p.REGISTER:
            r.string_list()
            return p.READY, b""
        raise ProtocolError(f"Unsupported opcode 0x{opcode:02x} (the CQL test server needs no authentication)")


__all__ = ["CQLTestServer"]
