"""`bgl run --store cassandra://...` end to end on the real Cassandra node (issue 20, item 5).

The real carbon-cache (our plugin) writes what it receives over TCP into a store on the
session's real node (tests/cassandra_node), and the real graphite-web (our finder) finds and
renders it; skipped without a real node (see conftest.py).
"""
from __future__ import annotations

import signal
import time

import pytest

from biggraphite_like.accessor import Accessor
from tests.carbon_env import plaintext, send_to_carbon
from tests.stack_env import BglRun

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["sai"])  # one mode: the stack is the same above either index
def test_bgl_run_on_a_real_cassandra_node(real_keyspaces, tmp_path, mode):
    url = real_keyspaces.url(mode)
    stack = BglRun(tmp_path / "data", store_url=url)
    try:
        banner = stack.start()
        assert url in banner
        now = int(time.time()) // 60 * 60
        points = [(f"real.host{h}.cpu", now - 60 * age, float(10 * h + age)) for h in range(3) for age in range(5)]
        send_to_carbon(stack.line_port, plaintext(points))
        datapoints = stack.wait_for_values("real.host2.cpu", [24.0, 23.0, 22.0, 21.0, 20.0], timeout=120,
                                           **{"from": "-10min"})
        assert [t for v, t in datapoints if v is not None] == [now - 60 * age for age in range(4, -1, -1)]
        found = stack.get_json("/metrics/find", query="real.*")
        assert [(node["id"], node["leaf"]) for node in found] == [(f"real.host{h}", 0) for h in range(3)]
        summed = stack.get_json("/render", target="sumSeries(real.*.cpu)", format="json", **{"from": "-10min"})
        assert [v for v, _ in summed[0]["datapoints"] if v is not None] == [float(30 + 3 * a) for a in range(4, -1, -1)]
        assert stack.stop(signal.SIGINT) == 0
    finally:
        stack.kill()
    # the points are in the node itself, not in a cache: another process reads them there
    reader = Accessor.from_url(url)
    try:
        series = reader.fetch(["real.host0.cpu"], now - 600, now + 60, now + 60)["real.host0.cpu"]
        assert [v for v in series.values_list() if v is not None] == [4.0, 3.0, 2.0, 1.0, 0.0]
    finally:
        reader.close()
