"""A gunicorn worker that gives a thread only to a connection whose request has arrived.

gunicorn's gthread worker (27.0.1, pinned) hands every new connection to a thread, which
waits up to 5 s for its first bytes and then blocks reading the rest of the request: 40
idle or slow connections hold every thread of `bgl run`'s two workers, and nobody else is
served. `RequestFirstWorker` keeps a connection in the worker's poller (no thread) until
its request head, and a body of up to MAX_BUFFERED_BODY bytes, have arrived; a connection
that has not sent a whole request within REQUEST_ARRIVAL_TIMEOUT seconds of its first
wait (a new connection, or a kept-alive one that starts a request) is closed; a request
already whole when its connection is accepted goes to a thread at once (no turn of the
poller). A connection closed after its answer lingers in the poller (its late bytes
drained, LINGER_SECONDS at most), not in the poller's thread as gthread's graceful close
does. Everything else is gthread's: the thread parses the bytes already read and runs
the application, except for a request graphite_plugin.wsgi's fronts answer (a plain GET
to a find or tag read, LightRequest): the thread reads its head and answers it from the
front without gunicorn's parser and WSGI plumbing, head and body in one write, with
gunicorn's response head, keep-alive rules, hooks and access log (anything the fronts
decline goes gunicorn's way, from the same bytes). Its request threads are
graphite_plugin.thread_pool.LastIdlePool instead of gthread's executor: the thread that
went idle last takes the next request.

    worker_class = "graphite_plugin.gunicorn_worker.RequestFirstWorker"   # gunicorn.conf.py
"""
from __future__ import annotations

import ctypes
import errno
import gc
import io
import os
import re
import selectors
import socket
import sys
import threading
import time
from collections import deque
from datetime import datetime
from functools import partial

from gunicorn import util
from gunicorn.glogging import Logger
from gunicorn.http.wsgi import Response, base_environ
from gunicorn.workers.gthread import TConn, ThreadWorker

from graphite_plugin.thread_pool import LastIdlePool

REQUEST_ARRIVAL_TIMEOUT = 10.0  # seconds a client has to send a whole request
MAX_BUFFERED_BODY = 1 << 20  # bodies up to this size are read before a thread is given
_HEAD_END = b"\r\n\r\n"
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_READ_SIZE = 1 << 16
LINGER_SECONDS = 2.0  # a closed connection's late bytes are drained this long at most (gunicorn's close_graceful) ...
LINGER_MAX_DRAIN = 1 << 16  # ... and up to this many
MAX_WORKER_RSS = 1 << 30  # bytes: a worker past this after a request is replaced (bgl run's default) ...
MAX_WORKER_RSS_ENV = "BGL_WEB_MAX_RSS"  # ... unless this variable gives another number of bytes
HEARTBEAT_INTERVAL = 1.0  # seconds between two heartbeats to the arbiter (its timeout: bgl run's 120 s)


def request_complete(data: bytes, max_head: int) -> bool:
    """Whether `data` holds a whole request (or enough that a thread will not wait on the
    client: a head past `max_head` bytes, which gunicorn refuses, a chunked or large body)."""
    head_end = data.find(_HEAD_END)
    if head_end < 0:
        return len(data) > max_head
    head = data[:head_end]
    if b"chunked" in head.lower():
        return True
    match = _CONTENT_LENGTH.search(head)
    length = int(match.group(1)) if match else 0
    return length > MAX_BUFFERED_BODY or len(data) >= head_end + len(_HEAD_END) + length


class RequestFirstWorker(ThreadWorker):
    """gthread, except that a thread gets a connection only once its request has arrived."""

    _heartbeat_due = 0.0
    _max_head = 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lingering: deque[_Lingering] = deque()  # connections closed on our side, oldest first (_linger)

    def run(self):
        """gthread's loop, over a SettledConfig (this worker's connections, parsers,
        responses and access log read it)."""
        self.cfg = SettledConfig(self.cfg)
        if getattr(self.log, "cfg", None) is not None:
            self.log.cfg = SettledConfig(self.log.cfg)
        super().run()

    def get_thread_pool(self):
        """The request threads: the most recently idle one takes the next request
        (graphite_plugin.thread_pool)."""
        return LastIdlePool(self.cfg.threads)

    def notify(self):
        """The heartbeat (a utime on the worker's temporary file), at most once every
        HEARTBEAT_INTERVAL seconds: gthread beats at every turn of its loop, three a request,
        and a utime on a disk file waits for the file system's journal when it is busy."""
        now = time.monotonic()
        if now >= self._heartbeat_due:
            self._heartbeat_due = now + HEARTBEAT_INTERVAL
            super().notify()

    _front = None  # graphite_plugin.wsgi.front_answer when it is the application served
    _front_paths: frozenset[str] = frozenset()
    _declined = None  # graphite_plugin.wsgi.graphite_declined, with _front

    def load_wsgi(self):
        """gthread's, then what loading the application made (Django, graphite-web, their
        modules: most objects the collector tracks in a worker) left out of later
        collections (gc.freeze): a full collection during a request scans only what
        requests made since (tens of milliseconds less at the collections that hit a find).
        The light path (LightRequest) is taken when the application is graphite_plugin.wsgi's."""
        super().load_wsgi()
        fronts = sys.modules.get("graphite_plugin.wsgi")
        if fronts is not None and self.wsgi is fronts.application and not os.environ.get("SCRIPT_NAME") \
                and LIGHT_FIELDS.isdisjoint(name.upper() for name in (*self.cfg.secure_scheme_headers,
                                                                       *self.cfg.forwarder_headers)):
            self._front, self._front_paths, self._declined = \
                fronts.front_answer, fronts.FRONT_PATHS, fronts.graphite_declined
        gc.freeze()

    def accept(self, listener):
        if self.cfg.is_ssl:  # the TLS handshake needs a thread: gthread's way
            return super().accept(listener)
        try:
            client_sock, client_addr = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = LingeringConn(self.cfg, client_sock, client_addr, listener.getsockname())
        conn.linger = self._linger
        self._await_request(conn)

    def on_client_socket_readable(self, conn, client):
        """A kept-alive connection starts its next request: wait for all of it too."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._await_request(conn)

    def _await_request(self, conn) -> None:
        conn.sock.setblocking(False)
        conn.arrived = bytearray()
        data = self._read_request(conn)
        if data is not None:  # all of it came with the connection: a thread without a turn of the poller
            self._dispatch(conn, data)
            return
        conn.timeout = time.monotonic() + REQUEST_ARRIVAL_TIMEOUT  # murder_pending closes it then
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_bytes, conn))

    def _on_bytes(self, conn, sock) -> None:
        data = self._read_request(conn)
        if data is None:
            return
        self.poller.unregister(sock)
        self.pending_conns.remove(conn)
        self._dispatch(conn, data)

    def _read_request(self, conn) -> bytes | None:
        """What a read of the connection gave once the request is whole (b"": the client
        went away), None while it is still arriving (nothing to read yet, or a part)."""
        data = _receive(conn.sock, _READ_SIZE)
        if data is None:
            return None
        if data:
            conn.arrived += data
            if not self._max_head:
                cfg = self.cfg
                self._max_head = cfg.limit_request_line + cfg.limit_request_fields * cfg.limit_request_field_size
            if not request_complete(bytes(conn.arrived), self._max_head):
                return None
        return data

    def _linger(self, sock) -> None:
        """gunicorn's graceful close (close_graceful: the write side shut, the client's late
        bytes drained until it closes, LINGER_SECONDS or LINGER_MAX_DRAIN bytes at most, so
        that no reset cuts the answer short) in the poller: gunicorn's waits in the poller's
        thread, and a client that keeps its side open after a `Connection: close` answer
        stopped every other connection of the worker for two seconds."""
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.setblocking(False)
        except OSError:
            sock.close()
            return
        lingering = _Lingering(sock, time.monotonic() + LINGER_SECONDS)
        self.lingering.append(lingering)
        self.poller.register(sock, selectors.EVENT_READ, partial(self._on_late_bytes, lingering))

    def _on_late_bytes(self, lingering: "_Lingering", sock) -> None:
        data = _receive(sock, 4096)
        if data is None:
            return
        lingering.drained += len(data)
        if not data or lingering.drained >= LINGER_MAX_DRAIN:
            self._close_lingering(lingering)

    def _close_lingering(self, lingering: "_Lingering") -> None:
        if lingering.sock is None:
            return
        sock, lingering.sock = lingering.sock, None
        self.poller.unregister(sock)
        sock.close()

    def murder_pending(self):
        """gthread's, and lingering connections past their LINGER_SECONDS closed."""
        super().murder_pending()
        now = time.monotonic()
        while self.lingering and (self.lingering[0].deadline <= now or self.lingering[0].sock is None):
            self._close_lingering(self.lingering.popleft())

    def _dispatch(self, conn, data: bytes) -> None:
        """The connection's thread, once its whole request has arrived; closed when the
        client went away before sending one."""
        if not data:  # the client went away before sending a whole request
            self.nr_conns -= 1
            conn.close()
            return
        if not conn.initialized:
            conn.init()  # builds the HTTP/1 parser (plain sockets: nothing is read)
        if self._front is not None and conn.arrived.startswith(b"GET /"):
            conn.light = bytes(conn.arrived)  # maybe a front's: read in the thread (handle)
        else:
            conn.parser.unreader.unread(bytes(conn.arrived))
        conn.arrived = bytearray()
        conn.data_ready = True
        self.enqueue_req(conn)


    def handle(self, conn):
        """gthread's, or the light path's answer for a request a front answers."""
        data = conn.light
        if data is None:
            return super().handle(conn)
        conn.light = None
        request = LightRequest.parse(data, self._front_paths, self.cfg)
        if request is not None:
            kept = self._answer_light(conn, request)
            if kept is not None:
                return kept
        conn.parser.unreader.unread(data)  # gunicorn's way, graphite's application without the fronts
        with self._declined():
            return super().handle(conn)

    def _answer_light(self, conn, request: "LightRequest") -> bool | None:
        """The front's answer to `request` written as gthread's handle_request writes an
        answer (gunicorn's Response: its head, Connection and keep-alive rules; pre_request,
        post_request, the access log), head and body in one write; whether the connection
        is kept alive; None when no front answers (nothing sent, no hook called: the request
        then goes gunicorn's way, whose handle_request calls pre_request)."""
        cfg, sock = self.cfg, conn.sock
        environ = request.environ(cfg, conn)
        if environ is None:
            return None
        request_start = datetime.now()
        answer = self._front(environ)
        if answer is None:
            return None  # gunicorn's way then calls pre_request, once
        cfg.pre_request(self, request)  # once a front answers (its answer built, nothing sent yet)
        status, headers, body, sent = answer
        resp = Response(request, sock, cfg)
        try:
            self.nr += 1
            if self.nr >= self.max_requests:
                if self.alive:
                    self.log.info("Autorestarting worker after current request.")
                    self.alive = False
                resp.force_close()
            if not self.alive or not cfg.keepalive or len(self.keepalived_conns) >= self.max_keepalived:
                resp.force_close()
            resp.start_response(status, headers)
            if resp.response_length != len(body) or resp.chunked or resp.upgrade:
                raise AssertionError(f"a front's answer without its length: {headers!r}")
            head = "".join(resp.default_headers()) + "".join("%s: %s\r\n" % pair for pair in resp.headers) + "\r\n"
            sock.setblocking(True)
            resp.headers_sent = True
            util.write(sock, head.encode("latin-1") + body)
            resp.sent = len(body)
            return not resp.should_close()
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                self.log.exception("Socket error processing request.")
            return False
        except Exception as exc:  # noqa: BLE001 - gthread's handle: gunicorn's error answer, nothing sent yet
            resp.status = None  # handle_error logs its own line
            self.handle_error(request, sock, conn.client, exc)
            return False
        finally:
            if sent is not None:
                sent()
            if resp.status is not None:
                self.log.access(resp, request, environ, datetime.now() - request_start)
            try:
                cfg.post_request(self, request, environ, resp)
            except Exception:  # noqa: BLE001 - gthread's handling of a failing hook
                self.log.exception("Exception in post_request hook")


class LightRequest:
    """A request the light path may answer: exactly one `GET <front path> HTTP/1.1` head with
    no body, its target printable ASCII (gunicorn's rule) without a fragment, its fields
    among LIGHT_FIELDS (no proxy, forwarding, body or upgrade field: nothing that changes
    what gunicorn's environ would say), each once, within gunicorn's limits. What gunicorn's
    Request offers its Response, its hooks and its access log (method, uri, path, query,
    version, headers as (NAME, value), should_close)."""

    __slots__ = ("uri", "path", "query", "headers")
    method = "GET"
    version = (1, 1)
    scheme = "http"
    fragment = ""
    proxy_protocol_info = None
    body = None  # no body (what gunicorn's error answer reads of it)

    def __init__(self, uri: str, path: str, query: str, headers: list[tuple[str, str]]):
        self.uri, self.path, self.query, self.headers = uri, path, query, headers

    @classmethod
    def parse(cls, data: bytes, paths: frozenset[str], cfg) -> "LightRequest | None":
        """The request in `data` (a whole request's bytes) when it is one, else None."""
        if len(data) > LIGHT_MAX_HEAD or not data.endswith(_HEAD_END):
            return None
        lines = data[:-len(_HEAD_END)].split(b"\r\n")
        line = _LIGHT_REQUEST_LINE.fullmatch(lines[0])
        if line is None or (0 < cfg.limit_request_line < len(lines[0]) + 2) \
                or len(lines) - 1 > _limit(cfg.limit_request_fields):
            return None
        uri = line.group(1).decode("ascii")
        path, _, query = uri.partition("?")
        if path not in paths:
            return None
        headers: list[tuple[str, str]] = []
        names = set()
        field_limit = _limit(cfg.limit_request_field_size)
        for field in lines[1:]:
            match = _LIGHT_FIELD.fullmatch(field)
            if match is None or len(field) + 2 > field_limit:
                return None
            name = match.group(1).decode("ascii").upper()
            if name not in LIGHT_FIELDS or name in names:
                return None
            names.add(name)
            headers.append((name, match.group(2).decode("ascii").strip(" \t")))
        return cls(uri, path, query, headers)

    def should_close(self) -> bool:
        """gunicorn's Message.should_close for HTTP/1.1."""
        for name, value in self.headers:
            if name == "CONNECTION":
                return value.lower() == "close"
        return False

    def environ(self, cfg, conn) -> dict | None:
        """gunicorn's environ for this request (wsgi.create's, no body), None for a client
        or server address that is not an (address, port) pair."""
        client, server = conn.client, conn.server
        if not isinstance(client, tuple) or not isinstance(server, tuple):
            return None
        environ = base_environ(cfg)
        environ.update({
            "wsgi.input": io.BytesIO(), "gunicorn.socket": conn.sock, "REQUEST_METHOD": "GET",
            "QUERY_STRING": self.query, "RAW_URI": self.uri, "SERVER_PROTOCOL": "HTTP/1.1",
        })
        for name, value in self.headers:
            environ["HTTP_" + name.replace("-", "_")] = value
        environ.update({
            "wsgi.url_scheme": "http", "REMOTE_ADDR": client[0], "REMOTE_PORT": str(client[1]),
            "SERVER_NAME": server[0], "SERVER_PORT": str(server[1]), "PATH_INFO": self.path, "SCRIPT_NAME": "",
            "wsgi.early_hints": _no_early_hints, "wsgi.multithread": True,
        })
        return environ


def _no_early_hints(headers) -> None:
    """wsgi.early_hints of a light request: the fronts send no 103 (gunicorn's sends one)."""


LIGHT_MAX_HEAD = 4096  # a longer head goes gunicorn's way
LIGHT_FIELDS = frozenset({"HOST", "USER-AGENT", "ACCEPT", "ACCEPT-ENCODING", "ACCEPT-LANGUAGE", "CONNECTION",
                          "CACHE-CONTROL", "PRAGMA"})
_LIGHT_REQUEST_LINE = re.compile(rb"GET (/[\x21\x22\x24-\x7e]*) HTTP/1\.1")
_LIGHT_FIELD = re.compile(rb"([A-Za-z-]+):([ \t\x21-\x7e]*)")


def _limit(value: int) -> int:
    """A gunicorn limit (0 or less: its default maximum) as the light path applies it: at most 8190."""
    return value if 0 < value < 8190 else 8190


def _receive(sock, size: int) -> bytes | None:
    """A non-blocking read: its bytes, b"" when the client has gone (end of stream or an
    error), None when nothing has arrived yet."""
    try:
        return sock.recv(size)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


class SettledConfig:
    """A worker's view of gunicorn's Config, each setting read once: Config finds a setting
    through its Setting object at every read (some forty reads a request, 1 to 2 us each:
    parser, environ, response, access log), and a worker's settings never change (a reload
    starts new workers)."""

    def __init__(self, cfg) -> None:
        object.__setattr__(self, "_cfg", cfg)

    def __getattr__(self, name: str):
        value = getattr(self._cfg, name)
        object.__setattr__(self, name, value)
        return value


class LingeringConn(TConn):
    """gthread's connection, whose graceful close is the worker's (RequestFirstWorker._linger)."""

    linger = None
    light = None  # a whole request's bytes the light path may answer (RequestFirstWorker.handle)

    def close(self, graceful=False):
        if graceful and self.linger is not None:
            self.linger(self.sock)
        else:
            super().close(graceful)


class _Lingering:
    """A connection closed on our side whose late bytes are drained until `deadline`."""

    __slots__ = ("sock", "deadline", "drained")

    def __init__(self, sock, deadline: float):
        self.sock, self.deadline, self.drained = sock, deadline, 0


class _Statm:
    """/proc/self/statm kept open by each process that reads it (one pread a request after
    the first, instead of an open, a read and a close: a tenth of the cost)."""

    PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

    def __init__(self) -> None:
        self._pid = self._fd = -1
        self._lock = threading.Lock()

    def resident_bytes(self) -> int:
        pid = os.getpid()
        if self._pid != pid:  # first read in this process (a forked worker: not its parent's file)
            with self._lock:
                if self._pid != pid:
                    self._fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
                    self._pid = pid
        return int(os.pread(self._fd, 128, 0).split()[1]) * self.PAGE_SIZE


_STATM = _Statm()


def resident_bytes() -> int:
    """This process's resident memory (Linux /proc/self/statm), 0 when unknown."""
    try:
        return _STATM.resident_bytes()
    except (OSError, ValueError, IndexError):
        return 0


def max_worker_rss() -> int:
    """The bytes a worker may hold after a request: $BGL_WEB_MAX_RSS, else MAX_WORKER_RSS."""
    text = os.environ.get(MAX_WORKER_RSS_ENV, "").strip()
    try:
        return int(text) if text else MAX_WORKER_RSS
    except ValueError:
        raise ValueError(f"${MAX_WORKER_RSS_ENV}={text!r}: expected a number of bytes") from None


class FreedMemory:
    """Gives memory back to the system after a request that grew the process: the SQLite
    store's file pages that this thread's connection touched through mmap once the RSS grew
    by RELEASE_GROWTH bytes since the last request (release_mapped_pages: a remap, tens of
    microseconds), and the C allocator's freed memory (glibc's `malloc_trim`) once it has
    grown by TRIM_GROWTH bytes since it last did: a find of 100,000 names or a wide render
    frees tens of MiB that glibc otherwise keeps, and the next large answer's peak would
    start from there. About 2 ms a trim, so not after every request."""

    TRIM_GROWTH = 32 << 20
    RELEASE_GROWTH = 4 << 20

    def __init__(self) -> None:
        self.trimmed_at = 0  # resident bytes after the last trim
        self.seen_at = 0  # resident bytes after the last request
        self.trims = 0
        self.releases = 0
        try:
            self._trim = ctypes.CDLL(None).malloc_trim  # glibc; elsewhere nothing to do
        except (OSError, AttributeError):
            self._trim = None

    def give_back(self, rss: int) -> int:
        """The resident bytes, after a release of mapped pages when `rss` is RELEASE_GROWTH
        past the last request's and a trim when it is TRIM_GROWTH past the last trim."""
        if rss >= self.seen_at + self.RELEASE_GROWTH and release_mapped_pages():
            self.releases += 1
            rss = resident_bytes() or rss
        if self._trim is not None and rss >= self.trimmed_at + self.TRIM_GROWTH:
            self._trim(0)
            self.trims += 1
            rss = self.trimmed_at = resident_bytes() or rss
        self.seen_at = rss
        return rss


def release_mapped_pages() -> bool:
    """This thread's store connections map their files afresh (Store.release_mapped_pages):
    the pages of an SQLite store that its reads touched through mmap leave the RSS, which
    counts them once per connection (thread) that touched them. Whether any was released."""
    finder = sys.modules.get("graphite_plugin.finder")  # not imported: no store opened yet
    released = False
    for backend in list(finder.backends.values()) if finder is not None else ():
        released = backend.accessor.store.release_mapped_pages() or released
    return released


FREED_MEMORY = FreedMemory()


def recycle_past(worker, limit: int | None = None) -> None:
    """gunicorn's post_request hook: freed memory given back to the system past some
    growth (FreedMemory); then a worker whose memory is still past `limit` bytes (default
    max_worker_rss(); a render that built large series keeps its arenas) finishes its
    requests and exits; the arbiter starts a fresh one."""
    limit = max_worker_rss() if limit is None else limit
    rss = FREED_MEMORY.give_back(resident_bytes())
    if rss > limit and worker.alive:
        worker.log.warning("worker %s holds %d MiB, more than %d MiB: replaced by a new worker",
                           worker.pid, rss >> 20, limit >> 20)
        worker.alive = False


_FORMAT_KEY = re.compile(r"%\(([^)]*)\)")


class AccessLogger(Logger):
    """gunicorn's Logger, whose access-log line is built only from the atoms its format
    names. gunicorn's builds every request header, response header and environ variable
    as an atom (some fifty) and copies them all to escape quotes, for a line that reads
    nine (its default format): a third of the line's cost. The line is the same."""

    def atoms(self, resp, req, environ, request_time):
        """gunicorn's atoms when the format names a header or environ atom ({...}), else
        only the plain ones."""
        if self._names_braced_atom():
            return super().atoms(resp, req, environ, request_time)
        status = resp.status
        if isinstance(status, str):
            status = status.split(None, 1)[0]
        sent = getattr(resp, "sent", None)
        return {
            "h": environ.get("REMOTE_ADDR", "-"), "l": "-", "u": self._get_user(environ) or "-", "t": self.now(),
            "r": "%s %s %s" % (environ["REQUEST_METHOD"], environ["RAW_URI"], environ["SERVER_PROTOCOL"]),
            "s": status, "m": environ.get("REQUEST_METHOD"), "U": environ.get("PATH_INFO"),
            "q": environ.get("QUERY_STRING"), "H": environ.get("SERVER_PROTOCOL"),
            "b": sent is not None and str(sent) or "-", "B": sent,
            "f": environ.get("HTTP_REFERER", "-"), "a": environ.get("HTTP_USER_AGENT", "-"),
            "T": request_time.seconds, "D": request_time.seconds * 1000000 + request_time.microseconds,
            "M": request_time.seconds * 1000 + int(request_time.microseconds / 1000),
            "L": "%d.%06d" % (request_time.seconds, request_time.microseconds), "p": "<%s>" % os.getpid(),
        }

    def _names_braced_atom(self) -> bool:
        log_format = self.cfg.access_log_format
        if getattr(self, "_format_checked", None) != log_format:  # a reload may change it
            self._braced = any(key.startswith("{") for key in _FORMAT_KEY.findall(log_format))
            self._format_checked = log_format
        return self._braced
