"""`bgl receive`: the native carbon-protocol receiver (biggraphite_like.receiver)."""
from __future__ import annotations

import argparse
import logging

from biggraphite_like import settings
from biggraphite_like.cli.common import open_accessor
from biggraphite_like.cli.streams import Streams
from biggraphite_like.receiver.options import ReceiverOptions

DEFAULTS = ReceiverOptions()  # the one home of the defaults below


def cmd_receive(args: argparse.Namespace, io: Streams) -> int:
    from biggraphite_like.receiver import serve

    handler = logging.StreamHandler(io.err)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("biggraphite_like")
    logger.addHandler(handler)
    logger.setLevel(args.log_level.upper())
    options = ReceiverOptions(
        bind=args.bind, line_port=args.line_port or None, pickle_port=args.pickle_port or None,
        carbonlink_port=args.carbonlink_port or None, udp_port=args.udp_port,
        flush_interval=args.flush_interval, flush_size=args.flush_size, max_buffered_points=args.max_buffered_points,
        storage_schemas=args.storage_schemas, storage_aggregation=args.storage_aggregation,
        drain_timeout=args.drain_timeout, drain_idle=args.drain_idle, stats_interval=args.stats_interval,
        metrics_file=args.metrics_file, retries=args.retries, max_connections=args.max_connections,
        max_partial_bytes=args.max_partial_bytes, partial_timeout=args.partial_timeout,
        max_name_cache_bytes=args.max_name_cache_bytes, prometheus_port=args.prometheus_port or None)
    accessor = open_accessor(args)
    try:
        accessor.syncdb()
        return serve(accessor, options, io.out)
    finally:
        logger.removeHandler(handler)
        accessor.close()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("receive", help="receive carbon's plaintext, pickle and UDP streams into the store"
                                       " (and answer graphite-web's CarbonLink)")
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
    p.set_defaults(handler=cmd_receive)
