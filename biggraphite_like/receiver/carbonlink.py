"""CarbonLink: graphite-web asks the receiver for points not in the store yet.

The protocol of carbon's CacheManagementHandler, as graphite-web's CarbonLinkPool speaks
it: each request and answer is a 4-byte big-endian length then a pickle (requests are
unpickled by the bounded, restricted unpickler, unpickler.py; answers use protocol 2). Requests:

- `{'type': 'cache-query', 'metric': name}` -> `{'datapoints': [(timestamp, value), ...]}`
- `{'type': 'cache-query-bulk', 'metrics': [...]}` -> `{'datapointsByMetric': {name: [...]}}`
- `{'type': 'bgl-cache-query-names', 'names': 'a.b\\nc.d...'}` -> `{'datapointsByMetric': {name: [...]}}`,
  our own compact form of the bulk query (graphite_plugin.carbonlink asks it; carbon-cache
  answers it with an error, and is then asked `cache-query-bulk`): the names in one string,
  one a line, and only the names holding points in the answer (a name left out has none).
  For a render of 20,000 series the bulk query's list of names and its answer of 20,000
  empty lists cost more than the render's sum (each read by a pure-Python unpickler);
  one string, and an answer of the few names with points, cost next to nothing.
- `{'type': 'get-metadata', 'metric', 'key'}` -> `{'value': ...}` or `{'error': ...}`
- `{'type': 'set-metadata', 'metric', 'key', 'value'}` -> `{'old_value', 'new_value'}` or `{'error'}`

keys: aggregationMethod, xFilesFactor. A query sees the points buffered and those in the
flush being written. Served by one thread per connection (graphite-web keeps a few
persistent ones), so a slow store lookup never delays the I/O thread.

A request that cannot be unpickled (unsafe, malformed, over the unpickler's bounds) or
makes answering fail is answered `{'error': reason}`, counted (`refused`), logged (at most
10 lines a minute), and the connection is kept; one announcing more than MAX_REQUEST bytes
is logged and its connection closed (its bytes cannot be skipped safely).
"""
from __future__ import annotations

import logging
import pickle
import socket
import socketserver
import struct
import threading

from biggraphite_like import names
from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import BglError, ReceiverConfigError
from biggraphite_like.ingest import metadata as carbonlink_metadata
from biggraphite_like.ingest.buffer import PointBuffer
from biggraphite_like.ingest.pickles import safe_loads
from biggraphite_like.ingest.points import Refusals, describe
from biggraphite_like.ingest.refusal_log import RateLimitedLog
from biggraphite_like.metric import Metric, MetricMetadata
from biggraphite_like.receiver.rules import StorageRules

_log = logging.getLogger(__name__)
_LENGTH = struct.Struct("!L")
MAX_REQUEST = 1024 ** 2 * 16  # bytes
NAMES_QUERY = "bgl-cache-query-names"  # the compact bulk query (module docstring)


class BadRequest(BglError, ValueError):
    """A CarbonLink request that is not one (not a dict, no or an unknown type, a missing field)."""


class CarbonLinkService:
    """Answers CarbonLink requests from the buffer and the store."""

    def __init__(self, buffer: PointBuffer, accessor: Accessor, rules: StorageRules):
        self.buffer = buffer
        self.accessor = accessor
        self.rules = rules
        self.refused = 0  # requests answered with an error because they were bad or made answering fail
        self._refusal_log = RateLimitedLog(_log)
        self._lock = threading.Lock()

    def answer_frame(self, body: bytes, peer: str) -> dict:
        """The answer to one request's pickle; never raises for what the request holds."""
        try:
            request = safe_loads(body)
        except Exception as exc:  # noqa: BLE001 - PickleRefused, or anything a hostile pickle raises
            return self._refuse(peer, f"invalid request pickle: {exc}" if isinstance(exc, BglError) else
                                f"invalid request pickle ({type(exc).__name__})", body[:100])
        try:
            return self.answer(request)
        except BadRequest as exc:
            return self._refuse(peer, str(exc), request)
        except Exception as exc:  # noqa: BLE001 - a request must never take the server thread down
            _log.exception("CarbonLink request %s from %s failed", describe(request), peer)
            return self._refuse(peer, f"the request failed ({type(exc).__name__})", request)

    def _refuse(self, peer: str, reason: str, excerpt: object) -> dict:
        with self._lock:
            self.refused += 1
        refusals = Refusals()
        refusals.add(reason, excerpt)
        self._refusal_log.refused(f"CarbonLink client {peer}", refusals, "request refused")
        return {"error": reason}

    def answer(self, request: object) -> dict:
        """The answer to a request; BadRequest when it is not one (answered as an error too)."""
        if not isinstance(request, dict) or "type" not in request:
            raise BadRequest("a CarbonLink request is a dict with a 'type'")
        kind = request["type"]
        if not isinstance(kind, str):
            raise BadRequest(f"a CarbonLink request's type is a string, not {describe(kind)}")
        try:
            if kind == "cache-query":
                return {"datapoints": self.buffer.cached([request["metric"]])[request["metric"]]}
            if kind == "cache-query-bulk":
                return {"datapointsByMetric": self.buffer.cached(list(request["metrics"]))}
            if kind == NAMES_QUERY:
                return {"datapointsByMetric": self._cached_names(request["names"])}
            if kind == "get-metadata":
                return {"value": self._get(request["metric"], request["key"])}
            if kind == "set-metadata":
                return self._set(request["metric"], request["key"], request["value"])
        except (KeyError, TypeError) as exc:
            raise BadRequest(f"malformed {kind[:100]} request: missing or bad {str(exc)[:100]}") from None
        except (BglError, ValueError) as exc:
            return {"error": str(exc)}
        raise BadRequest(f'Invalid request type "{kind[:100]}"')

    def _cached_names(self, joined: object) -> dict:
        """The points of the names of a NAMES_QUERY (one a line), only those with points."""
        if type(joined) is not str:
            raise BadRequest(f"a {NAMES_QUERY} request's names are one string, one name a line,"
                             f" not {describe(joined)}")
        cached = self.buffer.cached(joined.split("\n") if joined else [])
        return {name: points for name, points in cached.items() if points}

    def _metadata(self, name: str, key: str) -> tuple[Metric | None, MetricMetadata]:
        """The stored metric (None: received, not flushed yet) and its metadata; the name is
        normalised here, once (InvalidMetricName is answered as an error)."""
        carbonlink_metadata.check_key(key)
        canonical = names.normalize(name)
        metric = self.accessor.get_metrics([canonical], canonical=True).get(canonical)
        if metric is None:
            if self.buffer.cached([name])[name]:  # received, created by the next flush
                return None, self.rules.metadata_for(canonical)
            raise ValueError(f"metric {name!r} does not exist")
        return metric, metric.metadata

    def _get(self, name: str, key: str):
        _, metadata = self._metadata(name, key)
        return carbonlink_metadata.metadata_value(metadata, key)

    def _set(self, name: str, key: str, value) -> dict:
        metric, metadata = self._metadata(name, key)
        if metric is None:
            raise ValueError(f"metric {name!r} is not in the store yet: ask again after the next flush")
        old, new = carbonlink_metadata.changed(metadata, key, value)
        self.accessor.update_metadata(metric.name, new, canonical=True)
        return {"old_value": old, "new_value": value}


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        service: CarbonLinkService = self.server.service  # type: ignore[attr-defined]
        sock: socket.socket = self.request
        while True:
            header = _receive(sock, 4)
            if header is None:
                return
            (length,) = _LENGTH.unpack(header)
            if length > MAX_REQUEST:
                _log.warning("CarbonLink request of %d bytes from %s refused: over %d", length,
                             self.client_address, MAX_REQUEST)
                return
            body = _receive(sock, length)
            if body is None:
                return
            answer = service.answer_frame(body, f"{self.client_address[0]}:{self.client_address[1]}")
            payload = pickle.dumps(answer, protocol=2)
            sock.sendall(_LENGTH.pack(len(payload)) + payload)


def _receive(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        try:
            chunk = sock.recv(size - len(chunks))
        except OSError:
            return None
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class CarbonLinkServer:
    """The CarbonLink listener, in threads of its own."""

    def __init__(self, service: CarbonLinkService, host: str, port: int):
        try:
            self._server = _Server((host, port), _Handler)
        except OSError as exc:
            raise ReceiverConfigError(f"cannot listen on {host}:{port} (CarbonLink): {exc.strerror}") from None
        self._server.service = service  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="bgl-receiver-carbonlink", daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
