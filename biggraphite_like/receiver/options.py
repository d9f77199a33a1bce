"""What `bgl receive` takes: `ReceiverOptions`, the one home of its defaults, and its command
line options (`add_arguments`, read back by `from_args`), the same for `bgl receive` and
`python -m biggraphite_like.receiver`; ports and the flush policy's defaults come from
settings.py and ingest.policy.FlushPolicy, the connection limits from limits.py."""
from __future__ import annotations

import argparse
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
    flush_quiet: float = FLUSH.flush_quiet  # a burst's end: a flush once no point came for this long (0: off)
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
        return FlushPolicy(flush_interval=self.flush_interval, flush_quiet=self.flush_quiet, flush_size=self.flush_size,
                           max_buffered_points=self.max_buffered_points, retries=self.retries)

    @property
    def connection_limits(self) -> ConnectionLimits:
        return ConnectionLimits(self.max_connections, self.max_partial_bytes, self.partial_timeout)

    def validate(self) -> None:
        if self.flush_interval <= 0:
            raise ReceiverConfigError(f"--flush-interval {self.flush_interval}: give a positive number of seconds")
        if self.flush_quiet < 0:
            raise ReceiverConfigError(f"--flush-quiet {self.flush_quiet}: give a number of seconds >= 0 (0: off)")
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


DEFAULTS = ReceiverOptions()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The receiver's command line options (the store's, --store, are the caller's)."""
    d = DEFAULTS
    p.add_argument("--bind", default=d.bind, metavar="ADDRESS",
                   help=f"address the plaintext, pickle and UDP receivers listen on (default {d.bind}; 0.0.0.0 for"
                        f" every interface); CarbonLink stays on {settings.CARBONLINK_INTERFACE}")
    for option, default, what in (("--line-port", d.line_port, "plaintext over TCP"),
                                  ("--pickle-port", d.pickle_port, "pickle over TCP (carbon-relay, carbon-aggregator)"),
                                  ("--carbonlink-port", d.carbonlink_port, "CarbonLink (graphite-web's cache queries)")):
        p.add_argument(option, type=int, default=default, metavar="PORT", help=f"{what} (default {default}; 0: off)")
    p.add_argument("--udp-port", type=int, default=None, metavar="PORT",
                   help="plaintext over UDP (off unless given; carbon's is 2003)")
    p.add_argument("--flush-interval", type=float, default=d.flush_interval, metavar="SECONDS",
                   help=f"seconds between two store batches (default {d.flush_interval:g}): SIGKILL loses at most"
                        " this much")
    p.add_argument("--flush-quiet", type=float, default=d.flush_quiet, metavar="SECONDS",
                   help=f"a flush also starts once no point has come for this long (default {d.flush_quiet:g}; 0: off):"
                        " a sender's burst is written when it ends, not up to --flush-interval later; never sooner"
                        " than a quarter of --flush-interval after the last flush started")
    p.add_argument("--flush-size", type=int, default=d.flush_size, metavar="N",
                   help=f"points per store batch at most (default {d.flush_size:,}): a backlog is written in several"
                        " batches, bounding the store's memory")
    p.add_argument("--max-buffered-points", type=int, default=d.max_buffered_points, metavar="N",
                   help=f"points held in memory at most (default {d.max_buffered_points:,}): TCP reads stop before,"
                        " UDP drops (counted) at it")
    p.add_argument("--storage-schemas", metavar="FILE",
                   help="carbon's storage-schemas.conf for new metrics (without it, or past its last section:"
                        f" {settings.DEFAULT_RETENTION}, as bgl write and bgl run)")
    p.add_argument("--storage-aggregation", metavar="FILE",
                   help="carbon's storage-aggregation.conf (default: average, xFilesFactor 0.5)")
    p.add_argument("--drain-timeout", type=float, default=d.drain_timeout, metavar="SECONDS",
                   help=f"on SIGTERM, seconds to read what connected clients already sent (default {d.drain_timeout:g})")
    p.add_argument("--drain-idle", type=float, default=d.drain_idle, metavar="SECONDS",
                   help=f"during the drain, a connection silent this long is done (default {d.drain_idle:g})")
    p.add_argument("--stats-interval", type=float, default=d.stats_interval, metavar="SECONDS",
                   help="seconds between two records of the carbon.agents.<host>.* self-metrics (default"
                        f" {d.stats_interval:g}; 0: none)")
    p.add_argument("--metrics-file", metavar="PATH",
                   help="also write the counters there, Prometheus text format, at each record")
    p.add_argument("--prometheus-port", type=int, default=0, metavar="PORT",
                   help="serve the counters at http://BIND:PORT/metrics, Prometheus text format (default 0: off)")
    policy = d.flush_policy
    p.add_argument("--retries", type=int, default=d.retries, metavar="N",
                   help="attempts after a store batch failed for a reason that cannot recover (a bug, a corrupt"
                        f" store) before its points are dropped (default {d.retries}, backoff {policy.retry_delay:g} s"
                        f" doubling to {policy.retry_max_delay:g} s); a full disk or an unavailable store is retried"
                        " until it passes (N times once stopping)")
    p.add_argument("--max-connections", type=int, default=d.max_connections, metavar="N",
                   help=f"connections per TCP listener at most (default {d.max_connections:,}, and no more than the"
                        " open files limit allows, raised to its hard limit at start): past it, the connection"
                        " silent longest is closed to serve a new one")
    p.add_argument("--max-partial-bytes", type=int, default=d.max_partial_bytes, metavar="BYTES",
                   help="bytes of incomplete lines and pickle messages held over every connection (default"
                        f" {d.max_partial_bytes // 2**20} MiB): past it, the connections holding them are closed,"
                        " silent longest first")
    p.add_argument("--partial-timeout", type=float, default=d.partial_timeout, metavar="SECONDS",
                   help="a connection whose incomplete line or pickle message receives nothing this long is"
                        f" closed (default {d.partial_timeout:g})")
    p.add_argument("--max-name-cache-bytes", type=int, default=d.max_name_cache_bytes, metavar="BYTES",
                   help="bytes of names remembered besides canonical ones (other spellings, invalid names;"
                        f" default {d.max_name_cache_bytes // 2**20} MiB): past it they are forgotten and checked"
                        " again when seen")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="what goes to stderr (default info)")


def from_args(args: argparse.Namespace) -> ReceiverOptions:
    """The options add_arguments' parser read (a port of 0: that listener off)."""
    return ReceiverOptions(
        bind=args.bind, line_port=args.line_port or None, pickle_port=args.pickle_port or None,
        carbonlink_port=args.carbonlink_port or None, udp_port=args.udp_port,
        flush_interval=args.flush_interval, flush_quiet=args.flush_quiet, flush_size=args.flush_size, max_buffered_points=args.max_buffered_points,
        storage_schemas=args.storage_schemas, storage_aggregation=args.storage_aggregation,
        drain_timeout=args.drain_timeout, drain_idle=args.drain_idle, stats_interval=args.stats_interval,
        metrics_file=args.metrics_file, retries=args.retries, max_connections=args.max_connections,
        max_partial_bytes=args.max_partial_bytes, partial_timeout=args.partial_timeout,
        max_name_cache_bytes=args.max_name_cache_bytes, prometheus_port=args.prometheus_port or None)
