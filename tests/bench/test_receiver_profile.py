"""bench/receiver_profile.py at a tiny size, as a real process feeding real `bgl receive`
processes: its figures have their shape and its counts add up (every point sent is stored
and read back, nothing refused or dropped, the profile's stages cover its CPU, the memory
report names the receiver's structures). Its speed is not checked."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.carbon_env import REPO_ROOT

METRICS, POINTS = 400, 2


@pytest.fixture(scope="module")
def figures(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("receiver_profile") / "figures.json"
    completed = subprocess.run(
        [sys.executable, str(Path(REPO_ROOT) / "bench" / "receiver_profile.py"), "--metrics", str(METRICS),
         "--points", str(POINTS), "--runs", "1", "--profile", "--memory", "--idle-seconds", "0.5", "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "points sent 1,600, stored 1,600" in completed.stdout, completed.stdout
    return json.loads(out.read_text())


@pytest.mark.slow
def test_every_point_sent_is_stored_in_every_run(figures):
    runs = figures["runs"]
    assert sorted((r["protocol"], r["mode"]) for r in runs) == sorted(
        (protocol, mode) for protocol in ("plaintext", "pickle") for mode in ("plain", "profile", "memory"))
    for run in runs:
        sent = run["sent"]
        assert sent["points"] == 2 * METRICS * POINTS  # two rounds
        assert run["stored"]["points"] == sent["points"], run
        assert math.isclose(run["stored"]["value_sum"], sent["value_sum"]), run
        assert run["exit_status"] == 0
        counters = run["counters"]
        assert counters["metricsReceived"] == sent["points"]
        assert counters["storedPoints"] >= sent["points"]  # and the self-metrics' points
        assert counters["creates"] >= METRICS
        assert counters["refusedLines"] == counters["droppedPoints"] == counters["rejectedPoints"] == 0
        assert [r["round"] for r in run["rounds"]] == ["new", "existing"]
        assert all(r["points"] == METRICS * POINTS and r["cpu_main_thread"] >= 0 for r in run["rounds"])


@pytest.mark.slow
def test_profile_stages_cover_the_cpu(figures):
    for key in ("plaintext new", "plaintext existing", "pickle new", "pickle existing"):
        entry = figures["summary"][key]
        assert entry["runs"] == 1 and entry["us_per_point"] >= 0
        shares = entry["stages_share"]
        assert math.isclose(sum(shares.values()), 1.0, rel_tol=1e-6)
        profiled = entry["stages_profiled_us_per_point"]  # scaled ones may be 0: a clock tick is 10 ms
        assert profiled.get("decode", 0) > 0, profiled  # the decoder's own time is charged to it
        assert math.isclose(sum(profiled.values()), entry["profiled_us_per_point"], rel_tol=1e-6)
        assert entry["top_functions"]["main"] and entry["top_functions"]["others"]
    assert figures["summary"]["plaintext new"]["stages_profiled_us_per_point"].get("metric creation", 0) > 0


@pytest.mark.slow
def test_memory_report_names_the_receiver_structures(figures):
    memory = [r for r in figures["runs"] if r["mode"] == "memory"]
    for run in memory:
        for result in run["rounds"]:
            report = result["report"]
            assert report["traced"] > 0 and report["status"]["VmRSS"] > report["traced"]
            paths = report["structures"]
            assert any(path.startswith("receiver.buffer") for path in paths), paths
            assert any(path.startswith("receiver.accessor") for path in paths), paths
            assert all(size > 0 for size in paths.values())
            assert report["sites"]


@pytest.mark.slow
def test_the_peer_benchs_names_new_only_are_created_stored_and_read_back(tmp_path):
    out = tmp_path / "figures.json"
    completed = subprocess.run(
        [sys.executable, str(Path(REPO_ROOT) / "bench" / "receiver_profile.py"), "--metrics", "300", "--points", "1",
         "--shape", "tree", "--new-only", "--protocol", "plaintext", "--idle-seconds", "0.5", "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert completed.returncode == 0, completed.stderr[-3000:]
    figures = json.loads(out.read_text())
    (run,) = figures["runs"]
    assert run["shape"] == "tree" and [r["round"] for r in run["rounds"]] == ["new"]
    assert run["sent"]["points"] == run["stored"]["points"] == 300  # read back by the tree's names
    assert run["counters"]["creates"] >= 300
    assert list(figures["summary"]) == ["plaintext new"]
