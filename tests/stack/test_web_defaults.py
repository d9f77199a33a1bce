"""`bgl run`'s web defaults, with the real stack bound to every interface: graphite-web
answers only this machine's names (ALLOWED_HOSTS), refuses writes a browser sends from
another origin while Grafana's reads keep working, and CarbonLink stays on 127.0.0.1."""
from __future__ import annotations

import json
import signal
import socket
import urllib.error
import urllib.parse
import urllib.request

import pytest

from biggraphite_like.stack.config import interface_addresses
from tests.stack_env import BglRun

pytestmark = pytest.mark.slow

EVIL = "http://evil.example"


class WideBglRun(BglRun):
    """bgl run --bind 0.0.0.0"""

    def command(self) -> list[str]:
        return [*super().command(), "--bind", "0.0.0.0"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    run = WideBglRun(tmp_path_factory.mktemp("web-defaults") / "data")
    run.start()
    yield run
    try:
        assert run.stop(signal.SIGTERM) == 0
    finally:
        run.kill()


def request(stack: BglRun, method: str, path: str, headers: dict | None = None, data: dict | bytes | None = None,
            host: str = "127.0.0.1") -> tuple[int, bytes]:
    body = urllib.parse.urlencode(data).encode() if isinstance(data, dict) else data
    req = urllib.request.Request(f"http://{host}:{stack.ports['--web-port']}{path}", data=body, method=method,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def dashboards(stack: BglRun) -> list[str]:
    status, body = request(stack, "GET", "/dashboard/find/?query=")
    assert status == 200, body
    return sorted(d["name"] for d in json.loads(body)["dashboards"])


STATE = {"state": json.dumps({"graphs": []})}


def test_a_browser_on_another_origin_cannot_write(stack):
    cross = {"Origin": EVIL, "Sec-Fetch-Site": "cross-site"}
    status, body = request(stack, "POST", "/dashboard/save/evil", cross, STATE)
    assert status == 403 and b"cross-site request refused" in body
    status, _ = request(stack, "POST", "/dashboard/save/evil", {"Origin": EVIL}, STATE)
    assert status == 403
    # a GET that writes (graphite's composer), sent by an <img> of another site: no Origin
    status, _ = request(stack, "GET", "/composer/mygraph?action=save&graphName=x&url=/render",
                        {"Sec-Fetch-Site": "cross-site"})
    assert status == 403
    status, _ = request(stack, "GET", "/composer/mygraph?action=save&graphName=x&url=/render",
                        {"Referer": EVIL + "/page"})
    assert status == 403
    for path, data in (("/tags/tagSeries", {"path": "a.b;x=y"}), ("/tags/delSeries", {"path": "a.b;x=y"}),
                       ("/events/", None), ("/dashboard/delete/mine", None), ("/s/render?target=a", None)):
        status, body = request(stack, "POST", path, cross, data if data is not None else {})
        assert status == 403, (path, status, body[:300])
    assert dashboards(stack) == []


def test_its_own_pages_and_clients_that_are_not_browsers_still_write(stack):
    own = f"http://127.0.0.1:{stack.ports['--web-port']}"
    assert request(stack, "POST", "/dashboard/save/mine", {"Origin": own, "Sec-Fetch-Site": "same-origin"},
                   STATE)[0] == 200
    assert request(stack, "POST", "/dashboard/save/scripted", {}, STATE)[0] == 200  # curl: no browser header
    assert dashboards(stack) == ["mine", "scripted"]
    assert request(stack, "POST", "/dashboard/delete/scripted", {"Referer": own + "/dashboard/"}, {})[0] == 200
    assert dashboards(stack) == ["mine"]
    # events, tagged through django-tagging, posted by a script and read back as Grafana does
    event = json.dumps({"what": "deploy", "tags": ["web", "v2"], "data": "release 2"}).encode()
    assert request(stack, "POST", "/events/", {"Content-Type": "application/json"}, event)[0] == 200
    status, body = request(stack, "GET", "/events/get_data?tags=v2&from=-1h",
                           {"Origin": "http://grafana.example:3000", "Sec-Fetch-Site": "cross-site"})
    assert status == 200, body
    assert [(e["what"], e["tags"], e["data"]) for e in json.loads(body)] == [("deploy", ["web", "v2"], "release 2")]


def test_grafana_reads_from_another_origin_keep_working(stack):
    grafana = {"Origin": "http://grafana.example:3000", "Sec-Fetch-Site": "cross-site"}
    status, body = request(stack, "POST", "/render", grafana,
                           {"target": "carbon.agents.*.cpuUsage", "format": "json", "from": "-5min",
                            "maxDataPoints": "100"})
    assert status == 200 and body.startswith(b"[")
    status, body = request(stack, "POST", "/metrics/find", grafana, {"query": "*"})
    assert status == 200 and body.startswith(b"[")
    status, body = request(stack, "GET", "/metrics/find?query=*", grafana)
    assert status == 200 and body.startswith(b"[")
    status, body = request(stack, "GET", "/tags/autoComplete/tags", grafana)
    assert status == 200 and body.startswith(b"[")
    status, _ = request(stack, "GET", "/events/get_data?from=-1h", grafana)
    assert status == 200
    status, _ = request(stack, "GET", "/functions", grafana)
    assert status == 200


def test_graphite_web_answers_only_this_machines_names(stack):
    assert request(stack, "GET", "/version/")[0] == 200
    assert request(stack, "GET", "/version/", {"Host": f"localhost:{stack.ports['--web-port']}"})[0] == 200
    status, _ = request(stack, "GET", "/version/", {"Host": "evil.example"})
    assert status == 400  # Django's DisallowedHost
    settings = (stack.data_dir / "conf" / "local_settings.py").read_text()
    assert "ALLOWED_HOSTS = ['127.0.0.1', 'localhost', '[::1]', " in settings
    assert "'*'" not in settings


def test_carbonlink_stays_on_loopback_while_the_receivers_listen_wider(stack):
    carbonlink, line = stack.ports["--carbonlink-port"], stack.ports["--line-port"]
    with socket.create_connection(("127.0.0.1", carbonlink), timeout=5):
        pass
    others = [address for address in interface_addresses() if not address.startswith("127.")]
    if not others:
        pytest.skip("this machine has no address but loopback")
    with socket.create_connection((others[0], line), timeout=5):
        pass  # the receivers follow --bind 0.0.0.0
    with socket.socket() as sock:
        sock.settimeout(5)
        assert sock.connect_ex((others[0], carbonlink)) != 0, f"CarbonLink answers on {others[0]}"
    assert "CACHE_QUERY_INTERFACE = 127.0.0.1" in (stack.data_dir / "conf" / "carbon.conf").read_text()
