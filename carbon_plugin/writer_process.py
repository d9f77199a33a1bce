"""Store writes in a child process, so they never compete with carbon for its GIL.

carbon-cache receives, decodes and caches points on its reactor thread and drains the cache
on its writer thread, all under one GIL. Writing to the store (downsampling, SQLite) in a
third thread of the same process slows all three down; in a child process it runs on
another core. The plugin's flusher thread sends a batch down a pipe and waits (without
holding the GIL) for the result. A batch is flat arrays (`Accessor.insert_columns`): the
pipe carries the names once each and the owner, timestamp and value arrays as raw bytes,
never a Python object per point. `BG_WRITER_PROCESS = false` keeps the writes in-process.

The child is started on first use (after carbon's daemon fork) with the `spawn` method (a
fresh interpreter: no copy of Twisted's state), ignores SIGINT/SIGTERM (carbon's shutdown
must still be able to flush through it) and exits when asked to or when its pipe closes
(carbon died). If it dies, the batch in flight fails with StoreUnavailable (retried by the
flusher) and the next call starts a new child.
"""
from __future__ import annotations

import multiprocessing
import signal
import threading
from typing import Sequence

import numpy as np

from biggraphite_like.accessor import Accessor, WriteResult
from biggraphite_like.errors import BglError, MetricNotFound, StoreError, StoreFull, StoreLocked, StoreUnavailable
from biggraphite_like.metric import MetricMetadata

# the store errors a writer process sends back as such, most specific first
_STORE_ERRORS = {"full": StoreFull, "locked": StoreLocked, "unavailable": StoreUnavailable, "store": StoreError}


class RemoteError(BglError):
    """An unexpected (non-store) error in the writer process; the message holds its traceback."""


class InProcessWriter:
    """Writes with an accessor of this process (BG_WRITER_PROCESS = false)."""

    def __init__(self, accessor):
        self._accessor = accessor  # () -> Accessor

    def insert_columns(self, names: Sequence[str], owner: np.ndarray, timestamps: np.ndarray, values: np.ndarray,
                       now: int, create: Sequence[MetricMetadata] | None) -> WriteResult:
        return _insert_columns(self._accessor(), names, owner, timestamps, values, now, create)

    def update_metadata(self, name: str, metadata: MetricMetadata) -> None:
        _update_metadata(self._accessor(), name, metadata)

    def close(self) -> None:
        pass


def _insert_columns(accessor: Accessor, names: Sequence[str], owner: np.ndarray, timestamps: np.ndarray,
                    values: np.ndarray, now: int, create: Sequence[MetricMetadata] | None) -> WriteResult:
    """Point i is (timestamps[i], values[i]) of names[owner[i]]; create[j] is the metadata
    names[j] is created with if the store does not have it (None: unknown metrics are refused)."""
    by_name = None if create is None else dict(zip(names, create)).__getitem__
    return accessor.insert_columns(names, owner, timestamps, values, now=now, create=by_name)


def _update_metadata(accessor: Accessor, name: str, metadata: MetricMetadata) -> None:
    try:
        accessor.update_metadata(name, metadata, canonical=True)  # the flusher normalised it
    except MetricNotFound:
        pass  # not stored yet: its first flush creates it with this metadata


class ProcessWriter:
    """Writes through a child process holding its own accessor on the same store URL."""

    def __init__(self, store_url: str):
        self.store_url = store_url
        self._lock = threading.Lock()  # one request at a time on the pipe
        self._process = None
        self._conn = None

    def insert_columns(self, names: Sequence[str], owner: np.ndarray, timestamps: np.ndarray, values: np.ndarray,
                       now: int, create: Sequence[MetricMetadata] | None) -> WriteResult:
        arrays = (np.ascontiguousarray(owner, np.int64).tobytes(),
                  np.ascontiguousarray(timestamps, np.float64).tobytes(),
                  np.ascontiguousarray(values, np.float64).tobytes())
        return self._call("insert_columns", list(names), *arrays, now, None if create is None else list(create))

    def update_metadata(self, name: str, metadata: MetricMetadata) -> None:
        self._call("update_metadata", name, metadata)

    def _call(self, method: str, *args):
        with self._lock:
            conn = self._ensure_child()
            try:
                conn.send((method, args))
                status, value = conn.recv()
            except (EOFError, OSError, BrokenPipeError) as exc:
                self._discard_child()
                raise StoreUnavailable(f"the store writer process died during {method}: {exc!r}") from exc
        if status == "ok":
            return value
        kind, message = value
        if kind in _STORE_ERRORS:
            raise _STORE_ERRORS[kind](message)
        raise RemoteError(message)

    def _ensure_child(self):
        if self._process is not None and self._process.is_alive():
            return self._conn
        self._discard_child()
        context = multiprocessing.get_context("spawn")
        parent_conn, child_conn = context.Pipe()
        process = context.Process(target=_child_main, args=(child_conn, self.store_url),
                                  name="biggraphite_like-writer", daemon=True)
        process.start()
        child_conn.close()
        self._process, self._conn = process, parent_conn
        return parent_conn

    def _discard_child(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._process is not None:
            self._process.join(1)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
        self._process = self._conn = None

    def close(self) -> None:
        """Ask the child to exit and wait for it."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.send(("exit", ()))
                except OSError:
                    pass
                if self._process is not None:
                    self._process.join(30)
            self._discard_child()


def _child_main(conn, store_url: str) -> None:
    """The writer process: serve requests until told to exit or the parent goes away."""
    import traceback

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    accessor = Accessor.from_url(store_url)
    try:
        while True:
            try:
                method, args = conn.recv()
            except (EOFError, OSError):
                return
            if method == "exit":
                return
            try:
                if method == "insert_columns":
                    names, owner, timestamps, values, now, create = args
                    reply = ("ok", _insert_columns(accessor, names, np.frombuffer(owner, np.int64),
                                                   np.frombuffer(timestamps, np.float64),
                                                   np.frombuffer(values, np.float64), now, create))
                elif method == "update_metadata":
                    _update_metadata(accessor, *args)
                    reply = ("ok", None)
                else:
                    reply = ("error", ("other", f"unknown request {method!r}"))
            except StoreError as exc:  # its class says whether it can recover (ingest.batch_writer.RECOVERABLE)
                kind = next(name for name, cls in _STORE_ERRORS.items() if isinstance(exc, cls))
                reply = ("error", (kind, str(exc)))
            except Exception:  # noqa: BLE001 - sent to the parent, which logs and counts it
                reply = ("error", ("other", traceback.format_exc()))
            conn.send(reply)
    finally:
        accessor.close()
