"""kill -9 of a process creating metrics in bulk on the real Cassandra node: every metric it
acknowledged is findable with its directories, and no stored metric (acknowledged or not) lacks
one of its directories (the cleanup job's invariant: a metric is never findable without them).

A child creates batches of metrics and prints each batch's number once create_metrics
returned (acknowledged); it is killed with SIGKILL as soon as one metric of its second batch
is stored, while the batch's other rows are being written (one child per WATCHED position). Counted:
metrics sent (batches started), acknowledged, stored; none lost, no orphan."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from tests.paths import REPO_ROOT

BATCH = 500  # metrics per create_metrics call in the child
BATCHES = 40  # more than the child gets through before it is killed
WATCHED = (0, 150, 400)  # a child is killed as soon as this metric of its second batch is stored

CHILD = textwrap.dedent("""
    import sys
    from biggraphite_like.accessor import Accessor
    from biggraphite_like.metric import MetricMetadata
    from tests.stores.cassandra.test_bulk_crash import batch_names

    accessor = Accessor.from_url(sys.argv[1])
    metadata = MetricMetadata.create("60s:1d,1h:30d", "average", 0.5)
    for number in range(int(sys.argv[3])):
        print(f"sending {number}", flush=True)
        accessor.create_metrics([(name, metadata) for name in batch_names(sys.argv[2], number)])
        print(f"acknowledged {number}", flush=True)
""")


def batch_names(round_: str, number: int) -> list[str]:
    """The names of one batch: 4 to 6 components, new directories in every batch."""
    leaves = ("cpu", "disk.used", "net.if0.rx", "load", "mem.free")
    return [f"crash.{round_}.b{number:03d}.h{i // 5:03d}.{leaves[i % 5]}" for i in range(BATCH)]


def _killed_child(url: str, round_: str, watched: int, reader: Accessor) -> tuple[set[str], set[str]]:
    """(sent, acknowledged) names of a child creating batches, killed as soon as the `watched`th
    metric of its second batch is stored (its other rows are being written then)."""
    watched_name = batch_names(round_, 1)[watched]
    root = str(REPO_ROOT)
    child = subprocess.Popen([sys.executable, "-c", CHILD, url, round_, str(BATCHES)], stdout=subprocess.PIPE,
                             text=True, cwd=root, env={**os.environ, "PYTHONPATH": root})
    sent, acknowledged = set(), set()

    def count(line: str) -> None:
        what, number = line.split()
        (sent if what == "sending" else acknowledged).add(int(number))

    try:
        for line in child.stdout:
            count(line)
            if acknowledged and line.startswith("sending"):
                deadline = time.monotonic() + 120
                while not reader.store.get_metrics([watched_name]) and time.monotonic() < deadline:
                    time.sleep(0.002)
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        # what it printed between the watched metric's row and the kill (it may have finished
        # that batch and started the next): those batches were sent too
        for line in child.stdout.read().splitlines():
            count(line)
    assert child.returncode == -signal.SIGKILL and acknowledged, "the child did not create a batch"
    return ({n for b in sent for n in batch_names(round_, b)},
            {n for b in acknowledged for n in batch_names(round_, b)})


@pytest.mark.parametrize("mode", ["sasi", "sai"])
def test_kill_9_during_bulk_creation_leaves_no_orphan(real_keyspaces, mode):
    url = real_keyspaces.url(mode)
    sent, acknowledged = set(), set()
    accessor = Accessor.from_url(url)
    try:
        for number, watched in enumerate(WATCHED):
            round_sent, round_acknowledged = _killed_child(url, f"r{number}", watched, accessor)
            sent |= round_sent
            acknowledged |= round_acknowledged
        stored = set(accessor.glob_metrics("crash.**"))
        directories = set(accessor.glob_directories("crash")) | set(accessor.glob_directories("crash.**"))
        print(f"{mode}: sent {len(sent)}, acknowledged {len(acknowledged)}, stored {len(stored)}"
              f" ({len(stored - acknowledged)} of the killed batches), directories {len(directories)}")
        assert acknowledged <= stored, f"{len(acknowledged - stored)} acknowledged metrics lost"
        assert stored <= sent
        orphans = {n for n in stored if not set(names_mod.ancestors(n)) <= directories}
        assert not orphans, f"{len(orphans)} metrics without their directories, e.g. {sorted(orphans)[:3]}"
        for name in sorted(acknowledged)[::97]:  # found by the listing of their parent directory too
            assert name in accessor.glob_metrics(names_mod.parent(name) + ".*")
    finally:
        accessor.close()
