"""The Grafana dashboard of docs/monitoring.md (issue #19 item 9): importable JSON whose
every target names a self-metric the stack really writes.

The first test reads the file; the second writes graphite-web's self-metrics into a real
SQLite store and into one that cannot be opened (the failure is counted, then reported);
the last runs `bgl run --carbon` and `bgl run` (the receiver) side by side with
`--self-metrics-interval 5` (carbon-cache's CARBON_METRIC_INTERVAL, the receiver's
--stats-interval and graphite-web's BG_SELF_METRICS_INTERVAL at 5 s), sends points, makes
finds and renders, waits for the first self-metrics and asks each graphite-web for every
target of the dashboard (the `$agent` variable as `*`, its "All" value): each target must
be written by at least one of the two modes (a series with values, and each metric path in
it existing, in that mode), and one that neither writes is reported; the finds and renders
graphite-web counted are at least those the test made.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.carbon_env import REPO_ROOT, plaintext, send_to_carbon
from tests.stack_env import BglRun

DASHBOARD = REPO_ROOT / "docs" / "grafana" / "bgl-stack.json"
PAGE = REPO_ROOT / "docs" / "monitoring.md"
METRIC_PATH = re.compile(r"(?:carbon\.agents\.\$agent|bgl\.web\.\*)\.[A-Za-z_.]+[A-Za-z_]")
# what the page names a self-metric by: without its agent (and the plugin's prefix) or worker
DOCUMENTED_AS = re.compile(r"^(?:carbon\.agents\.\$agent\.(?:biggraphite_like\.)?|bgl\.web\.\*\.)")


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
        assert f"`{DOCUMENTED_AS.sub('', path)}`" in page, path


def test_web_self_metrics_are_written_and_failures_counted(tmp_path):
    from tests.graphite_env import configure

    configure()
    from biggraphite_like.accessor import Accessor
    from graphite_plugin.self_metrics import RequestTimes, SelfMetricsWriter

    accessor = Accessor.from_url(f"sqlite://{tmp_path / 'web.db'}")
    accessor.syncdb()
    stores = [Accessor.from_url(f"sqlite://{tmp_path / 'missing' / 'web.db'}"), accessor]  # the first fails
    writer = SelfMetricsWriter(RequestTimes(), 5, lambda: stores.pop(0) if len(stores) > 1 else stores[0],
                               prefix=lambda: "bgl.web.h-1")
    for milliseconds in (3.0, 1.5, 7.25):
        writer.times.record("find", milliseconds)
    writer.times.record("render", 40.0)
    now = (int(time.time()) // 5) * 5 - 10  # the last write (now + 5) is in the past too
    assert writer.write_once(now - 5) is False and writer.errors == 1  # the store's folder does not exist
    assert writer.write_once(now) is True  # what the failed write held, and the failure
    written = {name: [v for v in series.values if v == v]
               for name, series in accessor.fetch(accessor.glob_metrics("bgl.web.h-1.**"), now - 60, now + 5).items()}
    assert written == {"bgl.web.h-1.writeErrors": [1.0],
                       "bgl.web.h-1.find.count": [3.0], "bgl.web.h-1.find.totalMilliseconds": [11.75],
                       "bgl.web.h-1.find.maxMilliseconds": [7.25],
                       "bgl.web.h-1.render.count": [1.0], "bgl.web.h-1.render.totalMilliseconds": [40.0],
                       "bgl.web.h-1.render.maxMilliseconds": [40.0]}, written
    assert {m.metadata.aggregator.value for m in map(accessor.get_metric, written) if "max" in m.name} == {"max"}
    assert writer.write_once(now + 5) is True and writer.errors == 1  # nothing measured: zeros, no error
    assert [v for v in accessor.fetch(["bgl.web.h-1.find.count"], now - 1, now + 10)["bgl.web.h-1.find.count"].values
            if v == v] == [3.0, 0.0]


def values(series: list) -> list[float]:
    return [v for s in series for v, _ in s["datapoints"] if v is not None]


# A target no mode writes: the check below must report it unwritten by both.
NOWHERE = "alias(sumSeries(carbon.agents.$agent.noSuchCounter), 'nothing')"


def unwritten(run: BglRun, targets: list[str]) -> dict[str, str]:
    """The targets this stack does not write, each with why: no series, only nulls, or a
    metric path in it that does not exist (the `$agent` variable as `*`, its "All")."""
    problems = {}
    for target in targets:
        series = run.get_json("/render", target=target.replace("$agent", "*"), format="json", **{"from": "-10min"})
        if not series or not values(series):
            problems[target] = "no series" if not series else "only nulls"
            continue
        for path in METRIC_PATH.findall(target):
            found = run.get_json("/metrics/find", query=path.replace("$agent", "*"))
            if not found or not all(node["leaf"] for node in found):
                problems[target] = f"{path}: {found}"
                break
    return problems


def wait_for_self_metric(run: BglRun, target: str, get_json=None) -> None:
    """Until target has a non-zero value (points sent meanwhile, for the counts to move)."""
    deadline = time.monotonic() + 120
    while True:
        stored = (get_json or run.get_json)("/render", target=target, format="json", **{"from": "-10min"})
        if stored and any(v for v, _ in stored[0]["datapoints"]):
            return
        assert time.monotonic() < deadline, f"{run.receiver_name}: {target} recorded nothing within 120 s"
        send_to_carbon(run.line_port, plaintext([("mon.tick", int(time.time()), 1.0)]))
        time.sleep(2)


@pytest.mark.slow
def test_every_target_names_a_metric_the_stack_writes(tmp_path, monkeypatch):
    """Each target is written by `bgl run --carbon` or by `bgl run` (the receiver): carbon-cache's
    own metrics only by the first, the receiver's storedPoints only by the second."""
    monkeypatch.setenv("BGL_SELF_METRICS_INTERVAL", "600")  # the option wins over graphite-web's variable
    options = ("--self-metrics-interval", "5")
    runs = {"carbon": BglRun(tmp_path / "carbon", carbon=True, options=options),
            "receiver": BglRun(tmp_path / "receiver", options=options)}
    try:
        for run in runs.values():
            run.start()
        now = int(time.time())
        run = runs["carbon"]
        for each in runs.values():
            send_to_carbon(each.line_port, plaintext([(f"mon.m{i}", now - 60, float(i)) for i in range(20)]))
        requests = {"find": 0, "render": 0}

        def get_json(path: str, **params: object) -> object:
            requests["find" if path == "/metrics/find" else "render"] += 1
            return run.get_json(path, **params)

        for pattern in ("*", "mon.*", "mon.m1*", "carbon.agents.*"):
            get_json("/metrics/find", query=pattern)
        # carbon-cache and the receiver record their self-metrics every 5 s
        wait_for_self_metric(run, "sumSeries(carbon.agents.*.biggraphite_like.storedPoints)", get_json)
        wait_for_self_metric(runs["receiver"], "sumSeries(carbon.agents.*.storedPoints)")
        made = dict(requests)
        time.sleep(12)  # graphite-web's workers write what they measured every 5 s
        targets = dashboard_targets()
        missing = {mode: unwritten(each, targets + [NOWHERE]) for mode, each in runs.items()}
        for target in targets:
            assert any(target not in problems for problems in missing.values()), (target, missing)
        assert all(NOWHERE in problems for problems in missing.values()), missing  # neither: fails
        receiver_stored, = (t for t in targets if "$agent.storedPoints" in t)
        cache_size, = (t for t in targets if "$agent.cache.size" in t)
        assert receiver_stored in missing["carbon"] and receiver_stored not in missing["receiver"], missing
        assert cache_size in missing["receiver"] and cache_size not in missing["carbon"], missing
        for kind, count in made.items():
            counted = values(get_json("/render", target=f"sumSeries(bgl.web.*.{kind}.count)", format="json",
                                      **{"from": "-10min"}))
            assert sum(counted) >= count, (kind, counted, count)
            slowest = values(get_json("/render", target=f"maxSeries(bgl.web.*.{kind}.maxMilliseconds)",
                                      format="json", **{"from": "-10min"}))
            assert 0 < max(slowest) < 60_000, (kind, slowest)
        (size,) = get_json("/render", target="carbon.agents.*.biggraphite_like.storeBytes", format="json",
                           **{"from": "-10min"})
        store = tmp_path / "carbon" / "bgl.db"  # bgl run's default store
        on_disk = sum(p.stat().st_size for p in (store, Path(f"{store}-wal")) if p.exists())
        assert 4096 <= values([size])[-1] <= 2 * on_disk, (values([size]), on_disk)
        for each in runs.values():
            assert each.stop() == 0
    finally:
        for each in runs.values():
            each.kill()
