"""Tags end to end through `bgl run`: tagged series sent over TCP (plaintext, tags in any
order, one invalid name among them) are indexed at creation by either ingest path (our
receiver, or carbon-cache with our plugin under `--carbon`) and answered over HTTP by graphite-web: /tags, autocomplete, findSeries, seriesByTag renders. And
the plugin's `tag()` (carbon's tag queue) on carbon's real settings object."""
from __future__ import annotations

import time

import pytest

from tests.carbon_env import plaintext, send_to_carbon
from tests.stack_env import BglRun


@pytest.fixture(params=[False, True], ids=["receiver", "carbon"])
def stack(tmp_path, request):
    run = BglRun(tmp_path / "data", carbon=request.param)
    yield run
    run.kill()


def _wait(condition, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout}s")
        time.sleep(0.5)


def test_tagged_series_sent_over_tcp_are_queried_by_tag_over_http(stack):
    stack.start()
    now = int(time.time()) // 60 * 60
    points = [(f"app.req;host=web{h};dc={'us' if h < 2 else 'eu'}", now - 60 * age, float(10 * h + age))
              for h in range(3) for age in range(3)]
    points.append(("app.req;dc=us;host=", now, 1.0))  # empty value: refused, the rest kept
    send_to_carbon(stack.line_port, plaintext(points))
    found = _wait(lambda: (lambda f: f if len(f) == 3 else None)(stack.get_json("/tags/findSeries", expr="name=app.req")))
    assert found == ["app.req;dc=eu;host=web2", "app.req;dc=us;host=web0", "app.req;dc=us;host=web1"]
    assert [t["tag"] for t in stack.get_json("/tags")] == ["dc", "host", "name"]
    assert stack.get_json("/tags/dc")["values"] == [{"value": "eu", "count": 1}, {"value": "us", "count": 2}]
    assert stack.get_json("/tags/autoComplete/tags", tagPrefix="h") == ["host"]
    assert stack.get_json("/tags/autoComplete/values", tag="host", expr="dc=us") == ["web0", "web1"]
    series = _wait(lambda: (lambda s: s if s and all(len([v for v, _ in x["datapoints"] if v is not None]) == 3
                                                      for x in s) else None)(
        stack.get_json("/render", target="seriesByTag('dc=us')", format="json", **{"from": "-10min"})))
    assert [s["target"] for s in series] == ["app.req;dc=us;host=web0", "app.req;dc=us;host=web1"]
    assert [s["tags"]["host"] for s in series] == ["web0", "web1"]
    grouped = stack.get_json("/render", target="groupByTags(seriesByTag('name=app.req'), 'sum', 'dc')",
                             format="json", **{"from": "-10min"})
    sums = {s["tags"]["dc"]: [v for v, _ in s["datapoints"] if v is not None] for s in grouped}
    assert sums == {"eu": [22.0, 21.0, 20.0], "us": [14.0, 12.0, 10.0]}  # the refused point is not in them


def test_carbon_plugin_tag_indexes_directly_and_counts_refused_names(tmp_path):
    """carbon's tag queue calls `tag()`: the store's index is updated in the process (no
    HTTP), each series' time of last write refreshed, invalid names counted."""
    from carbon.conf import Settings

    from biggraphite_like.accessor import Accessor
    from carbon_plugin.database import BigGraphiteLikeDatabase

    url = f"sqlite://{tmp_path / 'bgl.db'}"
    Accessor.from_url(url).syncdb()
    settings = Settings()
    settings.update(BG_STORE=url, BG_WRITER_PROCESS="false", GRAPHITE_URL="http://127.0.0.1:9")  # nothing listens
    database = BigGraphiteLikeDatabase(settings)
    try:
        database.tag("cpu;dc=us;host=a", "cpu;host=b", "bad;host=", "bad;^x=1")
        totals = database.stats.totals()
        assert (totals["taggedSeries"], totals["invalidTags"], totals["storeErrors"]) == (2, 2, 0)
        tags = Accessor.from_url(url).tags
        assert tags.find_series(["name=cpu"]) == ["cpu;dc=us;host=a", "cpu;host=b"]
        first = tags.index.series_times(["cpu;host=b"])["cpu;host=b"]
        time.sleep(1.1)
        database.tag("cpu;host=b")
        assert tags.index.series_times(["cpu;host=b"])["cpu;host=b"] > first
    finally:
        database.close()
