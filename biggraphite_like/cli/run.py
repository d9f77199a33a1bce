"""`bgl run`: the whole local stack on one store, until Ctrl-C."""
from __future__ import annotations

import argparse

from biggraphite_like import settings
from biggraphite_like.cli.streams import Streams
from biggraphite_like.cli.common import UsageError


def cmd_run(args: argparse.Namespace, io: Streams) -> int:
    from biggraphite_like import stack

    if args.web_workers < 1:
        raise UsageError(f"--web-workers {args.web_workers}: give at least 1")
    if args.self_metrics_interval is not None and not 0 <= args.self_metrics_interval < float("inf"):
        raise UsageError(f"--self-metrics-interval {args.self_metrics_interval}: give seconds, 0 or more"
                         " (0: no self-metrics)")
    config = stack.StackConfig.create(
        args.data_dir or settings.default_data_dir(), args.store, bind=args.bind, line_port=args.line_port,
        pickle_port=args.pickle_port, carbonlink_port=args.carbonlink_port, web_port=args.web_port,
        web_workers=args.web_workers, carbon=args.carbon, self_metrics_interval=args.self_metrics_interval)
    return stack.run(config, io.out, io.err)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the receiver (bgl receive) and graphite-web on the store until Ctrl-C",
                       epilog="One `bgl run` at a time on a data directory: it holds DIR/run/bgl-run.lock while it"
                              " runs; another one started on DIR changes nothing and exits with status 3, naming"
                              " the first one's pid and ports. Exit status: 0 after Ctrl-C or SIGTERM with both"
                              " services stopped cleanly, 1 when something failed, 3 when DIR is in use.")
    p.add_argument("--data-dir", metavar="DIR",
                   help="configuration, logs and the default store (default: the data dir above)")
    p.add_argument("--bind", default=settings.DEFAULT_BIND, metavar="ADDRESS",
                   help=f"address the receivers and graphite-web listen on (default {settings.DEFAULT_BIND}; 0.0.0.0"
                        f" for every interface); CarbonLink stays on {settings.CARBONLINK_INTERFACE}")
    for option, default, what in (("--line-port", settings.LINE_PORT, "carbon's plaintext receiver"),
                                  ("--pickle-port", settings.PICKLE_PORT, "carbon's pickle receiver"),
                                  ("--carbonlink-port", settings.CARBONLINK_PORT,
                                   "carbon's cache queries (graphite-web's CarbonLink)"),
                                  ("--web-port", settings.WEB_PORT, "graphite-web")):
        p.add_argument(option, type=int, default=default, metavar="PORT", help=f"{what} (default {default})")
    p.add_argument("--carbon", action="store_true",
                   help="receive with carbon-cache and our carbon plugin instead of `bgl receive` (needs carbon)")
    p.add_argument("--web-workers", type=int, default=2, metavar="N",
                   help="graphite-web processes, 8 threads each (default 2)")
    p.add_argument("--self-metrics-interval", type=float, metavar="SECONDS",
                   help="seconds between two records of the receiver's (or carbon-cache's) carbon.agents.*"
                        f" and graphite-web's bgl.web.* self-metrics (default {settings.DEFAULT_SELF_METRICS_INTERVAL:g};"
                        " graphite-web's follows"
                        " $BGL_SELF_METRICS_INTERVAL when this is not given; 0: none)")
    p.set_defaults(handler=cmd_run)
