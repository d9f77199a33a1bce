"""What `bgl receive` takes: `ReceiverOptions`, the one home of its defaults (its command
line options read them here; ports and the flush policy's come from settings.py and
ingest.policy.FlushPolicy, the connection limits from limits.py)."""
from __future__ import annotations

import dataclasses

from biggraphite_like import settings
from biggraphite_like.errors import ReceiverConfigError
from biggraphite_like.ingest.buffer import MAX_NAME_CACHE_BYTES
from biggraphite_like.ingest.policy import DEFAULT as FLUSH, FlushPolicy
from biggraphite_like.receiver.limits import MIB, ConnectionLimits

MIN_BUFFERED_POINTS = 1000  # --max-buffered-points at least
DRAIN_TIMEOUT = 10.0  # seconds, on SIGTERM, to read what connected clients already sent
DRAIN_IDLE = 1.0  # seconds of silence after which a connection counts as drained


@dataclasses.dataclass(frozen=True)
class ReceiverOptions:
    """What `bgl receive` takes, with its defaults."""

    bind: str = settings.DEFAULT_BIND
    line_port: int | None = settings.LINE_PORT
    pickle_port: int | None = settings.PICKLE_PORT
    carbonlink_port: int | None = settings.CARBONLINK_PORT
    udp_port: int | None = None  # off unless asked, as carbon's ENABLE_UDP_LISTENER
    flush_interval: float = FLUSH.flush_interval
    flush_size: int = FLUSH.flush_size  # points per store batch at most (a metric's points in one batch cost about one's)
    max_buffered_points: int = FLUSH.max_buffered_points
    storage_schemas: str | None = None
    storage_aggregation: str | None = None
    drain_timeout: float = DRAIN_TIMEOUT
    drain_idle: float = DRAIN_IDLE
    stats_interval: float = settings.DEFAULT_SELF_METRICS_INTERVAL  # 0: no self-metrics
    metrics_file: str | None = None
    retries: int = FLUSH.retries
    host: str | None = None  # the <host> of carbon.agents.<host>
    max_connections: int = ConnectionLimits.max_connections  # per TCP listener (limits.py)
    max_partial_bytes: int = ConnectionLimits.max_partial_bytes
    partial_timeout: float = ConnectionLimits.partial_timeout
    max_name_cache_bytes: int = MAX_NAME_CACHE_BYTES  # names remembered besides canonical ones (buffer.py)
    prometheus_port: int | None = None  # GET /metrics on --bind (prometheus.py); off unless asked

    @property
    def flush_policy(self) -> FlushPolicy:
        return FlushPolicy(flush_interval=self.flush_interval, flush_size=self.flush_size,
                           max_buffered_points=self.max_buffered_points, retries=self.retries)

    @property
    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(self.max_connections, self.max_partial_bytes, self.partial_timeout)

    def validate(self) -> None:
        if self.flush_interval <= 0:
            raise ReceiverConfigError(f"--flush-interval {self.flush_interval}: give a positive number of seconds")
        if self.flush_size < 1:
            raise ReceiverConfigError(f"--flush-size {self.flush_size}: give at least 1 point")
        if self.max_buffered_points < MIN_BUFFERED_POINTS:
            raise ReceiverConfigError(f"--max-buffered-points {self.max_buffered_points}: give at least"
                                      f" {MIN_BUFFERED_POINTS}")
        for name in ("line_port", "pickle_port", "carbonlink_port", "udp_port", "prometheus_port"):
            port = getattr(self, name)
            if port is not None and not 0 <= port < 65536:
                raise ReceiverConfigError(f"--{name.replace('_', '-')} {port} is not a port (0-65535)")
        if self.drain_timeout < 0 or self.drain_idle < 0 or self.stats_interval < 0 or self.retries < 0:
            raise ReceiverConfigError("--drain-timeout, --drain-idle, --stats-interval and --retries take"
                                      " numbers >= 0")
        self.connection_limits.validate()
        if self.max_name_cache_bytes < MIB:
            raise ReceiverConfigError(f"--max-name-cache-bytes {self.max_name_cache_bytes}: give at least {MIB}")
