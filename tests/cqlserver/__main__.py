"""Run the CQL test server by hand (a test tool, never a production store).

    python -m tests.cqlserver --port PORT [--host 127.0.0.1] [--state FILE] [--no-sasi] [--no-sai]

Prints ``cqlserver listening on HOST:PORT`` once it accepts connections.
SIGTERM or SIGINT stops it, saving all data to ``--state FILE`` if given; the
file is loaded at start when it exists.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading

from .server import CQLTestServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cqlserver",
                                     description="CQL native protocol v4 TEST server (in memory, for tests only)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9042, help="port to bind (0 picks a free one)")
    parser.add_argument("--state", default=None, help="JSON file: loaded at start if present, saved at SIGTERM/SIGINT")
    parser.add_argument("--no-sasi", action="store_true", help="behave like Cassandra 5.0 with sasi_indexes_enabled: false")
    parser.add_argument("--no-sai", action="store_true", help="behave like Cassandra 3.11/4.0 (no Storage-Attached Indexes)")
    args = parser.parse_args(argv)
    server = CQLTestServer(host=args.host, port=args.port, sasi=not args.no_sasi, sai=not args.no_sai,
                           state_file=args.state)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        server.start()
    except OSError as exc:
        print(f"cqlserver: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"cqlserver listening on {args.host}:{server.port}", flush=True)
    while not stop.wait(0.5):
        pass
    server.stop()
    if args.state:
        print(f"cqlserver saved state to {args.state}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
