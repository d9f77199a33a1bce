"""graphite-web's CarbonLinkPool asks `bgl receive` for points not in the store yet, and
/render through our finder merges them, as it does with carbon-cache."""
from __future__ import annotations

import json
import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.receiver.carbonlink import NAMES_QUERY
from tests.carbon_env import carbonlink_request, plaintext, send_to_carbon
from tests.graphite_env import setup_graphite_app, use_finders
from tests.receiver_env import BglReceive

NOW = int(time.time()) // 60 * 60
AGGREGATION = "[max]\npattern = \\.max$\nxFilesFactor = 0.1\naggregationMethod = max\n"


@pytest.fixture(scope="module")
def receiver(tmp_path_factory):
    setup_graphite_app()
    root = tmp_path_factory.mktemp("receiver-carbonlink")
    url = f"sqlite://{root / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    stored = [(NOW - 60 * age, float(age)) for age in range(11, 60)]
    accessor.insert_points({"cl.avg": stored}, now=NOW, create=MetricMetadata.create("60s:1d", "average", 0.5))
    accessor.close()
    aggregation = root / "storage-aggregation.conf"
    aggregation.write_text(AGGREGATION)
    process = BglReceive(root / "receiver", url, "--flush-interval", "3600",  # points stay in the buffer
                         "--storage-aggregation", str(aggregation)).start()
    cached = [("cl.avg", NOW - 60 * age, 500.0 + age) for age in range(0, 10)]
    cached += [("cl.new.max", NOW - 60, 7.0), ("cl.new.max", NOW, 8.0), ("cl.new.max", NOW, 9.0)]
    send_to_carbon(process.line_port, plaintext(cached))
    yield process, url, cached
    process.kill()


def test_carbonlink_pool_queries_and_metadata(receiver):
    from graphite.carbonlink import CarbonLinkPool

    process, _, cached = receiver
    pool = CarbonLinkPool([("127.0.0.1", process.carbonlink_port, "a")], timeout=10)
    assert pool.query("cl.avg") == sorted((t, v) for n, t, v in cached if n == "cl.avg")
    assert pool.query("cl.new.max") == [(NOW - 60, 7.0), (NOW, 9.0)]  # the last value of a timestamp wins
    assert pool.query("cl.unknown") == []
    assert pool.get_metadata("cl.avg", "aggregationMethod") == "average"
    assert pool.get_metadata("cl.new.max", "aggregationMethod") == "max"  # from the rules, not stored yet
    assert pool.get_metadata("cl.new.max", "xFilesFactor") == 0.1
    bulk = carbonlink_request(process.carbonlink_port, {"type": "cache-query-bulk", "metrics": ["cl.avg", "nope"]})
    assert bulk["datapointsByMetric"]["nope"] == [] and len(bulk["datapointsByMetric"]["cl.avg"]) == 10
    refused = carbonlink_request(process.carbonlink_port, {"type": "get-metadata", "metric": "cl.avg", "key": "x"})
    assert "Unsupported metadata key" in refused["error"]


def test_names_query_answers_only_names_with_points(receiver):
    process, _, cached = receiver
    names = "\n".join(["cl.avg", "nope", "cl..new.max", "bad name", "cl.unknown"])
    answer = carbonlink_request(process.carbonlink_port, {"type": NAMES_QUERY, "names": names})
    bulk = carbonlink_request(process.carbonlink_port, {"type": "cache-query-bulk", "metrics": names.split("\n")})
    # the bulk answer without its empty lists; a name is answered as asked ("cl..new.max")
    assert answer == {"datapointsByMetric": {n: p for n, p in bulk["datapointsByMetric"].items() if p}}
    assert answer["datapointsByMetric"]["cl..new.max"] == [(NOW - 60, 7.0), (NOW, 9.0)]
    assert answer["datapointsByMetric"]["cl.avg"] == sorted((t, v) for n, t, v in cached if n == "cl.avg")
    assert set(answer["datapointsByMetric"]) == {"cl.avg", "cl..new.max"}
    assert carbonlink_request(process.carbonlink_port, {"type": NAMES_QUERY, "names": ""}) == \
        {"datapointsByMetric": {}}
    wrong = carbonlink_request(process.carbonlink_port, {"type": NAMES_QUERY, "names": ["cl.avg"]})
    assert "one string, one name a line" in wrong["error"]


def test_render_merges_buffered_points(receiver, monkeypatch):
    from django.test import Client
    from graphite_plugin import carbonlink as plugin_carbonlink

    process, url, cached = receiver
    hosts = [f"127.0.0.1:{process.carbonlink_port}"]
    asked = []  # the type of every request our finder sends: the compact query only
    ask = plugin_carbonlink._ask
    monkeypatch.setattr(plugin_carbonlink, "_BULK_ONLY", {})  # a carbon-cache another test ran on this port
    monkeypatch.setattr(plugin_carbonlink, "_ask", lambda pool, host, request, *rest:
                        asked.append(request["type"]) or ask(pool, host, request, *rest))
    with use_finders(["graphite_plugin.Finder"], BG_STORE=url, CARBONLINK_HOSTS=hosts):
        response = Client().post("/render", {"target": "cl.avg", "format": "json", "from": "-30min",
                                             "now": str(NOW)})
    assert response.status_code == 200, response.content[:300]
    assert asked == [NAMES_QUERY]
    points = {t: v for v, t in json.loads(response.content)[0]["datapoints"]}
    for name, timestamp, value in cached:
        if name == "cl.avg":
            assert points[timestamp] == value
    assert points[NOW - 60 * 20] == 20.0  # stored point
