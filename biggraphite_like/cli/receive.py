"""`bgl receive`: the native carbon-protocol receiver (biggraphite_like.receiver)."""
from __future__ import annotations

import argparse
import logging

from biggraphite_like import settings
from biggraphite_like.cli.common import open_accessor
from biggraphite_like.cli.streams import Streams


def cmd_receive(args: argparse.Namespace, io: Streams) -> int:
    from biggraphite_like.receiver import ReceiverOptions, serve

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
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS",
                   help="address the plaintext, pickle and UDP receivers listen on (default 127.0.0.1; 0.0.0.0 for"
                        " every interface); CarbonLink stays on 127.0.0.1")
    for option, default, what in (("--line-port", 2003, "plaintext over TCP"),
                                  ("--pickle-port", 2004, "pickle over TCP (carbon-relay, carbon-aggregator)"),
                                  ("--carbonlink-port", 7002, "CarbonLink (graphite-web's cache queries)")):
        p.add_argument(option, type=int, default=default, metavar="PORT", help=f"{what} (default {default}; 0: off)")
    p.add_argument("--udp-port", type=int, default=None, metavar="PORT",
                   help="plaintext over UDP (off unless given; carbon's is 2003)")
    p.add_argument("--flush-interval", type=float, default=1.0, metavar="SECONDS",
                   help="seconds between two store batches (default 1): SIGKILL loses at most this much")
    p.add_argument("--flush-size", type=int, default=500_000, metavar="N",
                   help="points per store batch at most (default 500,000): a backlog is written in several"
                        " batches, bounding the store's memory")
    p.add_argument("--max-buffered-points", type=int, default=1_000_000, metavar="N",
                   help="points held in memory at most (default 1,000,000): TCP reads stop before, UDP drops"
                        " (counted) at it")
    p.add_argument("--storage-schemas", metavar="FILE",
                   help="carbon's storage-schemas.conf for new metrics (without it, or past its last section:"
                        f" {settings.DEFAULT_RETENTION}, as bgl write and bgl run)")
    p.add_argument("--storage-aggregation", metavar="FILE",
                   help="carbon's storage-aggregation.conf (default: average, xFilesFactor 0.5)")
    p.add_argument("--drain-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="on SIGTERM, seconds to read what connected clients already sent (default 10)")
    p.add_argument("--drain-idle", type=float, default=1.0, metavar="SECONDS",
                   help="during the drain, a connection silent this long is done (default 1)")
    p.add_argument("--stats-interval", type=float, default=60.0, metavar="SECONDS",
                   help="seconds between two records of the carbon.agents.<host>.* self-metrics (default 60;"
                        " 0: none)")
    p.add_argument("--metrics-file", metavar="PATH",
                   help="also write the counters there, Prometheus text format, at each record")
    p.add_argument("--prometheus-port", type=int, default=0, metavar="PORT",
                   help="serve the counters at http://BIND:PORT/metrics, Prometheus text format (default 0: off)")
    p.add_argument("--retries", type=int, default=10, metavar="N",
                   help="attempts after a store batch failed for a reason that cannot recover (a bug, a corrupt"
                        " store) before its points are dropped (default 10, backoff 0.2 s doubling to 10 s); a"
                        " full disk or an unavailable store is retried until it passes (N times once stopping)")
    p.add_argument("--max-connections", type=int, default=10_000, metavar="N",
                   help="connections per TCP listener at most (default 10,000, and no more than the open files"
                        " limit allows, raised to its hard limit at start): past it, the connection silent"
                        " longest is closed to serve a new one")
    p.add_argument("--max-partial-bytes", type=int, default=64 * 2**20, metavar="BYTES",
                   help="bytes of incomplete lines and pickle messages held over every connection (default"
                        " 64 MiB): past it, the connections holding them are closed, silent longest first")
    p.add_argument("--partial-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="a connection whose incomplete line or pickle message receives nothing this long is"
                        " closed (default 60)")
    p.add_argument("--max-name-cache-bytes", type=int, default=64 * 2**20, metavar="BYTES",
                   help="bytes of names remembered besides canonical ones (other spellings, invalid names;"
                        " default 64 MiB): past it they are forgotten and checked again when seen")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="what goes to stderr (default info)")
    p.set_defaults(handler=cmd_receive)
