"""When buffered points are written, in batches of what size, and how a failed batch is
retried: one `FlushPolicy`, whose defaults are both ingest paths' (`bgl receive`'s
options and carbon.conf's BG_* keys read them from here, and so do the docs' tables).
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class FlushPolicy:
    """A flush every `flush_interval` seconds (or once `flush_size` points wait, for the
    carbon plugin; for `bgl receive`, also once no point came for `flush_quiet` seconds,
    the end of a sender's burst, at least a quarter interval after the last flush started;
    the carbon plugin flushes when carbon's writer pass ends instead), in store batches of `flush_size` points at most; at most
    `max_buffered_points` held (then senders are held back); a failed batch retried with
    backoff from `retry_delay` doubling to `retry_max_delay` (batch_writer.retry):
    without limit while the error can recover, `retries` times otherwise."""

    flush_interval: float = 1.0  # seconds a point waits at most before its flush starts
    flush_quiet: float = 0.1  # bgl receive: a flush once no point came for this long, a quarter interval after the last (0: off)
    flush_size: int = 500_000  # points per store batch at most (one transaction on SQLite)
    max_buffered_points: int = 1_000_000  # points held in memory at most
    retries: int = 10  # attempts after a failure that cannot recover (any failure once stopping)
    retry_delay: float = 0.2  # seconds before the first retry, doubled after each failure
    retry_max_delay: float = 10.0  # seconds between two attempts at most


DEFAULT = FlushPolicy()
