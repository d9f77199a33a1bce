"""Soak run (not in CI): ingest, creation, clean, finds and reads together for N minutes.

    python -m tests.soak --minutes 10 [--store sqlite:///tmp/soak.db] [--keep]

Starts one process of each worker of tests/fault_workers.py on one SQLite store (a
temporary file unless --store is given): `write` (batches of 40 points, half of them to
metrics it creates), `create` (100 metrics a batch), `clean` (leaves stale metrics
behind, then `clean --max-age 1h`), `find` (globs) and `read` (fetches of 10 series over
a day, what a render does), lets them run for N minutes, stops them and checks the store
as the fault suite does. Prints points sent, acknowledged, stored and lost, the
operations of every worker, and exits 1 when anything acknowledged was lost, the store
is inconsistent or a worker failed.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from biggraphite_like.accessor import Accessor
from tests import fault_workers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = {"write": 0.0, "create": 0.05, "clean": 1.0, "find": 0.01, "read": 0.01}  # kind: pause between operations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, required=True, help="how long the workers run")
    parser.add_argument("--store", help="an SQLite store URL (default: a new file in a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bgl-soak-")
    url = args.store or f"sqlite://{os.path.join(work, 'soak.db')}"
    if not url.startswith("sqlite://"):
        parser.error("--store: the soak run checks an SQLite file (sqlite:///path)")
    Accessor.from_url(url).syncdb()
    seconds = args.minutes * 60
    print(f"soak: {url}, {args.minutes:g} min, workers: {', '.join(KINDS)}", flush=True)
    workers = {
        kind: subprocess.Popen([sys.executable, "-m", "tests.fault_workers", kind, url, os.path.join(work, f"acks-{kind}"),
                                "0", str(seconds), str(pause)], cwd=REPO, stderr=subprocess.PIPE, text=True)
        for kind, pause in KINDS.items()
    }
    failed = []
    for kind, worker in workers.items():
        try:
            _, stderr = worker.communicate(timeout=seconds + 600)
        except subprocess.TimeoutExpired:
            worker.kill()
            _, stderr = worker.communicate()
        if worker.returncode != 0:
            failed.append(kind)
            print(f"soak: worker {kind} failed (status {worker.returncode}):\n{stderr[-2000:]}", flush=True)
    acks: dict[str, list[list[str]]] = {}
    for kind in KINDS:
        for name, entries in fault_workers.acknowledged(os.path.join(work, f"acks-{kind}")).items():
            acks.setdefault(name, []).extend(entries)
    sent = len(acks.get("send", [])) * fault_workers.WRITE_METRICS
    acknowledged = len(acks.get("write", [])) * fault_workers.WRITE_METRICS
    try:
        counts = fault_workers.check_store(url, acks)
        problem = ""
    except AssertionError as exc:
        counts, problem = {}, str(exc)
    print(f"soak: points sent {sent}, acknowledged {acknowledged}, checked in the last day of each metric"
          f" {counts.get('points_acknowledged', '?')}, stored {counts.get('points_stored', '?')},"
          f" lost {counts['points_acknowledged'] - counts['points_stored'] if counts else '?'}")
    print(f"soak: metrics created (acknowledged) {counts.get('metrics_created_acknowledged', '?')}, in the store"
          f" {counts.get('metrics', '?')}; cleans {len(acks.get('clean', []))} (metrics removed"
          f" {sum(int(f[1]) for f in acks.get('clean', []))}), finds {len(acks.get('find', []))},"
          f" reads {len(acks.get('read', []))}")
    if problem:
        print(f"soak: FAILED: {problem}")
    if not args.keep and not args.store:
        for name in os.listdir(work):
            os.remove(os.path.join(work, name))
        os.rmdir(work)
    elif args.keep:
        print(f"soak: files kept in {work}")
    return 1 if problem or failed or sent != acknowledged else 0


if __name__ == "__main__":
    sys.exit(main())
