"""graphite-web served over HTTP on 127.0.0.1, configured as the README tells operators:
a local_settings.py whose first line is `from graphite_plugin.settings import *`, the
store named by $BGL_STORE. One server process for the module; requests with urllib.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.paths import REPO_ROOT

REPO = str(REPO_ROOT)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("graphite-live")
    url = f"sqlite://{root / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    now = int(time.time())
    points = {f"live.host{i}.load": [(now - 60 * age, float(i * 100 + age)) for age in range(120)] for i in range(5)}
    points.update({f"big.m{i}": [(now, 1.0)] for i in range(10)})
    accessor.insert_points(points, now=now, create=MetricMetadata.create("60s:1d", "average", 0.5))
    accessor.close()
    (root / "storage" / "log").mkdir(parents=True)
    (root / "operator_settings.py").write_text(textwrap.dedent(f"""\
        from graphite_plugin.settings import *
        SECRET_KEY = "live-test-secret"
        STORAGE_DIR = {str(root / 'storage')!r}
        LOG_DIR = {str(root / 'storage' / 'log')!r}
        BG_MAX_GLOB_RESULTS = 5
        """))
    env = {**os.environ, "BGL_STORE": url, "DJANGO_SETTINGS_MODULE": "graphite.settings",
           "GRAPHITE_SETTINGS_MODULE": "operator_settings",
           "PYTHONPATH": os.pathsep.join([str(root), REPO, os.environ.get("PYTHONPATH", "")]),
           "PYTHONWARNINGS": "ignore"}
    process = subprocess.Popen([sys.executable, "-m", "tests.graphite_env", "serve"], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"server did not start: {process.stderr.read()[-3000:]}")
        facts = json.loads(line)
        yield f"http://127.0.0.1:{facts['port']}", facts, url
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
        process.stderr.close()


def http(base: str, path: str, params: dict | None = None, post: bool = False) -> tuple[int, bytes, str]:
    query = urllib.parse.urlencode(params or {}, doseq=True)
    if post:
        request = urllib.request.Request(base + path, data=query.encode(), method="POST")
    else:
        request = urllib.request.Request(base + path + ("?" + query if query else ""))
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers.get("Content-Type", "")


def test_settings_module_configures_graphite(server):
    _, facts, url = server
    assert facts["STORAGE_FINDERS"] == ["graphite_plugin.Finder"]
    assert facts["BG_STORE"] == url  # from $BGL_STORE
    assert facts["BG_MAX_GLOB_RESULTS"] == 5  # the operator's override after the import
    assert facts["MIDDLEWARE"][-1] == "graphite_plugin.middleware.PatternRefusedMiddleware"
    content = os.path.join(sys.prefix, "webapp", "content")
    if os.path.isdir(content):
        assert facts["STATIC_ROOT"] == content


def test_grafana_requests(server):
    base, _, _ = server
    status, body, _ = http(base, "/functions")  # the Python 3.11 shim at work
    assert status == 200 and json.loads(body)["aliasByNode"]["function"] == "aliasByNode(seriesList, *nodes)"
    status, body, _ = http(base, "/functions/sumSeries")
    assert status == 200 and json.loads(body)["group"] == "Combine"
    status, body, _ = http(base, "/metrics/find", {"query": "live.*"})
    assert status == 200 and [n["id"] for n in json.loads(body)] == [f"live.host{i}" for i in range(5)]
    status, body, _ = http(base, "/render", {"target": ["sumSeries(live.host[0-2].load)", "live.host4.load"],
                                             "format": "json", "from": "-30min", "until": "now",
                                             "maxDataPoints": "1000"}, post=True)
    assert status == 200
    summed, host4 = json.loads(body)
    assert summed["target"] == "sumSeries(live.host[0-2].load)" and len(summed["datapoints"]) == 30
    # the newest point (age 0, value 400) is in the render's last minute, or in the one before
    # when the request came in the minute after the points were written (then the last is None)
    datapoints = host4["datapoints"]
    if datapoints[-1][0] is None:
        datapoints = datapoints[:-1]
    newest = datapoints[-1][1]
    assert datapoints[-29:] == [[400.0 + age, newest - 60 * age] for age in range(28, -1, -1)]
    status, body, content_type = http(base, "/render", {"target": "live.*.load", "from": "-2h", "width": "300"})
    assert status == 200 and content_type == "image/png" and body[:4] == b"\x89PNG" and len(body) > 3000


def test_limit_reaches_the_response(server):
    base, _, _ = server
    for path, params in [("/metrics/find", {"query": "big.*"}), ("/metrics/expand", {"query": "big.*"}),
                         ("/render", {"target": "sumSeries(big.*)", "format": "json"})]:
        status, body, _ = http(base, path, params)
        assert status == 400 and b"max_results=5" in body and b"BG_MAX_GLOB_RESULTS" in body, (path, body)
