"""`python -m tests.cassandra_node [--dir DIR] [--heap 512M]`: one real node in the foreground, until Ctrl-C."""
from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from pathlib import Path

from tests.cassandra_node import CassandraNode, CassandraUnavailableHere, NodeFailed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cassandra_node", description=__doc__)
    parser.add_argument("--dir", type=Path, help="the node's folder (data, logs, conf); a temporary one by default")
    parser.add_argument("--heap", default="512M", help="JVM heap, -Xms and -Xmx (512M)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bgl-cassandra-") as temporary:
        node = CassandraNode.single(args.dir or Path(temporary), heap=args.heap)
        try:
            node.start()
            version = node.wait_ready()
        except CassandraUnavailableHere as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except NodeFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            node.stop()
            return 1
        print(f"Cassandra {version} ready: cassandra://{node.address}/KEYSPACE  (Ctrl-C stops it)", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            node.process.wait()
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            node.stop()
            print("Cassandra stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
