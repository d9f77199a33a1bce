"""graphite-web's UI, served by `bgl run`, in headless Chromium: the composer loads with its
static files, its metric tree lists what carbon received, and its graph is a real image.
Screenshots are kept in $BGL_TEST_ARTIFACTS (default test-artifacts/ in the checkout)."""
from __future__ import annotations

import math
import os
import time
import urllib.parse
from pathlib import Path

import pytest

from tests import webdriver
from tests.carbon_env import REPO_ROOT, plaintext, send_to_carbon
from tests.stack_env import BglRun

pytestmark = pytest.mark.slow

ARTIFACTS = Path(os.environ.get("BGL_TEST_ARTIFACTS") or REPO_ROOT / "test-artifacts")
METRIC = "browser.demo.sine"
WIDTH, HEIGHT = 800, 400
MAGENTA = [255, 0, 255]

# In the page: how many pixels of an <img> are within 40 of a colour on each channel (drawn
# on a canvas; same origin).
_COUNT_COLOUR = """
const [image, colour] = arguments;
const canvas = document.createElement('canvas');
canvas.width = image.naturalWidth; canvas.height = image.naturalHeight;
const context = canvas.getContext('2d');
context.drawImage(image, 0, 0);
const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
let count = 0;
for (let i = 0; i < data.length; i += 4) {
  if (Math.abs(data[i] - colour[0]) <= 40 && Math.abs(data[i + 1] - colour[1]) <= 40
      && Math.abs(data[i + 2] - colour[2]) <= 40) count++;
}
return count;
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    problem = webdriver.missing()
    if problem:
        pytest.fail(problem)
    run = BglRun(tmp_path_factory.mktemp("browser") / "data")
    try:
        run.start()
        now = int(time.time()) // 60 * 60
        points = [(METRIC, now - 60 * age, round(50 + 40 * math.sin(age / 6), 3)) for age in range(60)]
        send_to_carbon(run.line_port, plaintext(points))
        run.wait_for_values(METRIC, [value for _, _, value in reversed(points)], **{"from": "-2h"})
        yield run
        assert run.stop() == 0
    finally:
        run.kill()


@pytest.fixture(scope="module")
def browser(stack):
    with webdriver.Browser() as browser:
        yield browser


def test_the_composer_shows_the_metric_in_its_tree_and_graph(stack, browser):
    query = urllib.parse.urlencode({"target": METRIC, "from": "-2h", "showTarget": METRIC})
    browser.open(f"{stack.web}/?{query}")
    assert browser.script("return document.title") == "Graphite Browser"
    # the composer frame: ExtJS from /static, then the tree opened down to the metric by /metrics/find
    frame = "document.getElementById('composerFrame').contentWindow"
    assert browser.wait_for(f"const w = {frame}; return w && w.Ext && w.Ext.version", timeout=60)
    browser.wait_for(f"return {frame}.document.body.innerText.includes('sine')", timeout=60)
    tree_text = browser.script(f"return {frame}.document.body.innerText")
    assert "browser" in tree_text and "demo" in tree_text, tree_text[:2000]
    # the composer's graph: an <img> from /render of the target, really loaded
    size = browser.wait_for(
        f"""const images = Array.from({frame}.document.images).filter(
              i => i.src.includes('/render') && i.src.includes('{METRIC}') && i.complete && i.naturalWidth > 0);
            return images.length && [images[0].naturalWidth, images[0].naturalHeight]""", timeout=60)
    assert size[0] >= 300 and size[1] >= 200, size
    png = browser.screenshot(ARTIFACTS / "browser-composer.png")
    assert png[:4] == b"\x89PNG" and len(png) > 20_000


def test_a_rendered_graph_is_a_real_image_with_the_series_drawn(stack, browser):
    query = urllib.parse.urlencode({"target": METRIC, "from": "-2h", "width": WIDTH, "height": HEIGHT,
                                    "title": "bgl run browser test", "colorList": "ff00ff", "lineWidth": 2})
    browser.open(f"{stack.web}/render?{query}")
    assert browser.script("return document.contentType") == "image/png"
    image = browser.wait_for("const i = document.images[0]; return i && i.complete && i.naturalWidth > 0 && i")
    assert browser.script("return [arguments[0].naturalWidth, arguments[0].naturalHeight]", image) == [WIDTH, HEIGHT]
    png = browser.screenshot(ARTIFACTS / "browser-graph.png")
    assert png[:4] == b"\x89PNG" and len(png) > 10_000
    # the line is drawn in magenta: hundreds of such pixels; graphite's "No Data" graph has none
    assert browser.script(_COUNT_COLOUR, image, MAGENTA) > 500


def test_an_unknown_metric_draws_no_line(stack, browser):
    """The check above can fail: a graph without data has no magenta pixel."""
    query = urllib.parse.urlencode({"target": "browser.nothing", "from": "-2h", "width": WIDTH, "height": HEIGHT,
                                    "colorList": "ff00ff"})
    browser.open(f"{stack.web}/render?{query}")
    image = browser.wait_for("const i = document.images[0]; return i && i.complete && i.naturalWidth > 0 && i")
    assert browser.script(_COUNT_COLOUR, image, MAGENTA) == 0


def test_the_dashboard_opens_clean_saves_loads_and_graphs(stack, browser):
    """graphite-web's /dashboard/: no "Invalid theme 'default'" dialog (its theme CSS is
    found and loaded), a graph of the metric added and drawn, the dashboard saved to
    graphite-web's database, cleared, and loaded back with its graph."""
    status, body, _ = stack.get("/dashboard/")
    assert status == 200 and b"var initialError = null;" in body, body[:3000]
    browser.open(f"{stack.web}/dashboard/")
    assert browser.wait_for("return window.Ext && window.graphStore && window.Ext.isReady", timeout=60)
    assert browser.script("return initialError") is None
    assert "Invalid theme" not in browser.script("return document.body.innerText")
    theme_rules = browser.script("""return Array.from(document.styleSheets)
        .filter(s => (s.href || '').endsWith('/dashboard-default.css')).map(s => s.cssRules.length)""")
    assert theme_rules and theme_rules[0] > 0, theme_rules  # loaded (a missing file has no rules)

    graph_loaded = f"""const images = Array.from(document.images).filter(
        i => i.src.includes('/render') && i.src.includes('{METRIC}') && i.complete && i.naturalWidth > 0);
        return images.length && [images[0].naturalWidth, images[0].naturalHeight]"""
    browser.script(f"defaultGraphParams.colorList = 'ff00ff'; graphAreaToggle('{METRIC}')")
    size = browser.wait_for(graph_loaded, timeout=60)
    assert size[0] >= 200 and size[1] >= 100, size
    image = browser.script(f"return Array.from(document.images).find(i => i.src.includes('{METRIC}'))")
    drawn = browser.script(_COUNT_COLOUR, image, MAGENTA)
    assert drawn > 100, (drawn, browser.script("return arguments[0].src", image))  # the series is drawn

    browser.script("sendSaveRequest('bgl-browser-test')")
    deadline = time.monotonic() + 60
    while True:
        saved = stack.get_json("/dashboard/load/bgl-browser-test")
        if "state" in saved or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert [graph[0] for graph in saved["state"]["graphs"]] == [f"target={METRIC}"], saved

    browser.script("graphStore.removeAll(); updateGraphRecords();")
    assert browser.script("return graphStore.getCount()") == 0
    browser.script("sendLoadRequest('bgl-browser-test')")
    assert browser.wait_for("return graphStore.getCount() === 1 && graphStore.getAt(0).get('target')",
                            timeout=60) == f"target={METRIC}"
    browser.wait_for(graph_loaded, timeout=60)
    png = browser.screenshot(ARTIFACTS / "browser-dashboard.png")
    assert png[:4] == b"\x89PNG" and len(png) > 20_000
