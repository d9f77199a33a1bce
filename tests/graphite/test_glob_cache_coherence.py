"""The glob caches of graphite-web's gunicorn workers agree: `bgl run` serves graphite-web
with two worker processes, each with its own cache of find answers; a metric created or
deleted by another process shows up in every worker within a second (the store's names
token, `Store.names_token`), long before the cache's TTL (BG_FIND_CACHE_TTL, 60 s)."""
from __future__ import annotations

import concurrent.futures
import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.stack_env import BglRun

pytestmark = pytest.mark.slow

META = MetricMetadata.create("60s:1d", "average", 0.5)
REQUESTS = 40  # over 4 client threads: both sync workers answer many of them


def _answers(stack: BglRun, pattern: str) -> set[tuple[str, ...]]:
    """The distinct answers of REQUESTS concurrent /metrics/find calls (whichever worker took each)."""
    def find(_: int) -> tuple[str, ...]:
        return tuple(node["path"] for node in stack.get_json("/metrics/find", query=pattern, format="json"))

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        return set(pool.map(find, range(REQUESTS)))


def test_a_created_or_deleted_metric_is_seen_by_every_worker_within_a_second(bgl_stack):
    stack = bgl_stack
    stack.start()
    workers = [pid for pid in stack.children() if "gunicorn" in open(f"/proc/{pid}/cmdline").read()]
    assert len(workers) >= 3, workers  # the arbiter and its two workers
    accessor = Accessor.from_url(f"sqlite://{stack.data_dir / 'bgl.db'}")
    try:
        accessor.create_metrics([(f"servers.host{i:02d}.cpu", META) for i in range(50)])
        old = tuple(f"servers.host{i:02d}" for i in range(50))
        assert _answers(stack, "servers.*") == {old}  # every worker cached it

        accessor.create_metric("servers.host50.cpu", META)
        time.sleep(1.0)
        assert _answers(stack, "servers.*") == {old + ("servers.host50",)}

        accessor.delete_metrics(["servers.host07.cpu"])
        accessor.store.delete_directories(["servers.host07"])  # as `bgl clean` removes it
        time.sleep(1.0)
        assert _answers(stack, "servers.*.cpu") == {tuple(f"servers.host{i:02d}.cpu" for i in range(51) if i != 7)}
        assert _answers(stack, "servers.*") == {tuple(f"servers.host{i:02d}" for i in range(51) if i != 7)}
    finally:
        accessor.close()
