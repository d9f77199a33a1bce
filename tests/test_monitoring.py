"""The Grafana dashboard of docs/monitoring.md (issue #19 item 9): importable JSON whose
every target names a self-metric the stack really writes.

The first test reads the file; the second runs `bgl run`, sends points, waits for
carbon-cache's first self-metrics (CARBON_METRIC_INTERVAL: 60 s) and asks graphite-web
for every target of the dashboard (the `$agent` variable as `*`, its "All" value): each
must return a series with values, and each metric path in it must exist.
"""
from __future__ import annotations

import json
import re
import time

import pytest

from tests.carbon_env import REPO_ROOT, plaintext, send_to_carbon
from tests.stack_env import BglRun

DASHBOARD = REPO_ROOT / "docs" / "grafana" / "bgl-stack.json"
PAGE = REPO_ROOT / "docs" / "monitoring.md"
METRIC_PATH = re.compile(r"carbon\.agents\.\$agent\.[A-Za-z_.]+[A-Za-z_]")


def dashboard_targets() -> list[str]:
    document = json.loads(DASHBOARD.read_text())
    return [target["target"] for panel in document["panels"] for target in panel["targets"]]


def test_the_dashboard_is_importable_grafana_json():
    document = json.loads(DASHBOARD.read_text())
    assert [i["name"] for i in document["__inputs"]] == ["DS_GRAPHITE"]
    assert document["__inputs"][0]["pluginId"] == "graphite"
    assert document["uid"] and document["title"] and document["schemaVersion"] >= 30
    (variable,) = document["templating"]["list"]
    assert (variable["name"], variable["query"], variable["allValue"]) == ("agent", "carbon.agents.*", "*")
    ids = [panel["id"] for panel in document["panels"]]
    assert len(ids) == len(set(ids)) >= 8
    for panel in document["panels"]:
        assert panel["datasource"] == {"type": "graphite", "uid": "${DS_GRAPHITE}"}, panel["title"]
        assert panel["targets"] and all(METRIC_PATH.search(t["target"]) for t in panel["targets"]), panel["title"]
        assert [t["refId"] for t in panel["targets"]] == [chr(65 + i) for i in range(len(panel["targets"]))]
    page = PAGE.read_text()
    assert "grafana/bgl-stack.json" in page
    # every self-metric a target uses is documented on the page
    for path in {m.group(0) for t in dashboard_targets() for m in METRIC_PATH.finditer(t)}:
        assert f"`{path.split('$agent.', 1)[1].removeprefix('biggraphite_like.')}`" in page, path


@pytest.mark.slow
def test_every_target_names_a_metric_the_stack_writes(tmp_path):
    run = BglRun(tmp_path / "data")
    try:
        run.start()
        now = int(time.time())
        send_to_carbon(run.line_port, plaintext([(f"mon.m{i}", now - 60, float(i)) for i in range(20)]))
        deadline = time.monotonic() + 240
        while True:  # carbon records its self-metrics once a minute
            stored = run.get_json("/render", target="sumSeries(carbon.agents.*.biggraphite_like.storedPoints)",
                                  format="json", **{"from": "-10min"})
            if stored and any(v for v, _ in stored[0]["datapoints"]):
                break
            assert time.monotonic() < deadline, "carbon-cache recorded no self-metric within 240 s"
            send_to_carbon(run.line_port, plaintext([("mon.tick", int(time.time()), 1.0)]))
            time.sleep(5)
        for target in dashboard_targets():
            concrete = target.replace("$agent", "*")
            series = run.get_json("/render", target=concrete, format="json", **{"from": "-10min"})
            assert series, f"{concrete}: no series"
            assert any(v is not None for s in series for v, _ in s["datapoints"]), f"{concrete}: only nulls"
            for path in METRIC_PATH.findall(target):
                found = run.get_json("/metrics/find", query=path.replace("$agent", "*"))
                assert found and all(node["leaf"] for node in found), (path, found)
        assert run.stop() == 0
    finally:
        run.kill()
