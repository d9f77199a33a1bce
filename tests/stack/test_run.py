"""`bgl run` end to end: our receiver (or, with --carbon, the real carbon-cache with our
plugin) and graphite-web behind gunicorn on free ports, fed plaintext over TCP and read
over HTTP, stopped with Ctrl-C and SIGTERM."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import numpy
import pytest

from biggraphite_like.accessor import Accessor
from tests.carbon_env import REPO_ROOT, plaintext, process_state, send_to_carbon
from tests.stack_env import BglRun

pytestmark = pytest.mark.slow


def _wait_gone(pids: list[int], timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in pids if os.path.exists(f"/proc/{pid}") and process_state(pid) != "Z"]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


@pytest.fixture
def stack(request, tmp_path):
    run = BglRun(tmp_path / "data", carbon=getattr(request, "param", "receiver") == "carbon")
    yield run
    run.kill()


@pytest.mark.parametrize("stack", ["receiver", "carbon"], indirect=True)
def test_points_sent_to_carbon_are_found_and_rendered_by_graphite_web(stack):
    banner = stack.start()
    web_port, line_port = stack.ports["--web-port"], stack.ports["--line-port"]
    assert f"plaintext 127.0.0.1:{line_port}" in banner and f"pickle 127.0.0.1:{stack.ports['--pickle-port']}" in banner
    assert f"browse         http://127.0.0.1:{web_port}/" in banner
    assert f"sqlite://{stack.data_dir / 'bgl.db'}" in banner

    now = int(time.time()) // 60 * 60
    points = [(f"e2e.host{host}.cpu", now - 60 * age, float(10 * host + age)) for host in range(3) for age in range(5)]
    send_to_carbon(line_port, plaintext(points))
    datapoints = stack.wait_for_values("e2e.host2.cpu", [24.0, 23.0, 22.0, 21.0, 20.0], **{"from": "-10min"})
    assert [t for v, t in datapoints if v is not None] == [now - 60 * age for age in range(4, -1, -1)]

    found = stack.get_json("/metrics/find", query="e2e.*")
    assert [(node["id"], node["leaf"]) for node in found] == [(f"e2e.host{h}", 0) for h in range(3)]
    found = stack.get_json("/metrics/find", query="e2e.host1.*")
    assert [(node["id"], node["leaf"]) for node in found] == [("e2e.host1.cpu", 1)]
    summed = stack.get_json("/render", target="sumSeries(e2e.*.cpu)", format="json", **{"from": "-10min"})
    assert [v for v, _ in summed[0]["datapoints"] if v is not None] == [float(30 + 3 * age) for age in range(4, -1, -1)]
    status, body, content_type = stack.get("/render", target="e2e.*.cpu", width=400, height=250)
    assert status == 200 and content_type == "image/png" and body[:4] == b"\x89PNG"

    # the UI and its static files come from the same server
    status, body, _ = stack.get("/")
    assert status == 200 and b"<title>Graphite Browser</title>" in body
    status, body, content_type = stack.get("/static/js/composer_widgets.js")
    assert status == 200 and "javascript" in content_type and len(body) > 10_000

    # the banner's example command works as printed
    example = next(line for line in banner.splitlines() if "e.g. (bash)" in line).split("e.g. (bash) ", 1)[1]
    subprocess.run(["bash", "-c", example], check=True, timeout=30)
    stack.wait_for_values("test.hello", [42.0], **{"from": "-5min"})

    children = stack.children()
    assert len(children) >= 3, children  # the receiver, gunicorn's master and workers
    assert stack.stop(signal.SIGINT) == 0
    assert _wait_gone(children, timeout=5) == []
    assert stack.output().rstrip().splitlines()[-2:] == [
        "stopping graphite-web...", f"bgl run: stopped: {stack.receiver_name} and graphite-web have exited (status 0)"]


def test_configuration_is_written_for_operators_to_reuse(stack):
    stack.start()
    conf = stack.data_dir / "conf"
    carbon = (conf / "carbon.conf").read_text()
    assert "DATABASE = biggraphite_like" in carbon
    assert "LOG_CREATES = False" in carbon  # no log line per metric created
    assert f"BG_STORE = sqlite://{stack.data_dir / 'bgl.db'}" in carbon
    assert f"LINE_RECEIVER_PORT = {stack.ports['--line-port']}" in carbon
    assert "LINE_RECEIVER_INTERFACE = 127.0.0.1" in carbon
    assert "CARBON_METRIC_INTERVAL = 60.0" in carbon  # carbon's own default, until --self-metrics-interval
    settings = (conf / "local_settings.py").read_text()
    assert "BG_SELF_METRICS_INTERVAL" not in settings  # graphite-web's then follows $BGL_SELF_METRICS_INTERVAL
    assert settings.startswith("# graphite-web") and "from graphite_plugin.settings import *" in settings
    assert f"CARBONLINK_HOSTS = ['127.0.0.1:{stack.ports['--carbonlink-port']}:a']" in settings
    gunicorn = (conf / "gunicorn.conf.py").read_text()
    assert f"bind = ['127.0.0.1:{stack.ports['--web-port']}']" in gunicorn
    assert oct((conf / "secret_key").stat().st_mode & 0o777) == "0o600"
    # graphite-web's own database is prepared in the data directory
    assert (stack.data_dir / "storage" / "graphite.db").stat().st_size > 10_000
    # every service listens on the bound address only
    for port in stack.ports.values():
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) == 0, port
    assert stack.stop(signal.SIGTERM) == 0


@pytest.mark.parametrize("stack", ["receiver", "carbon"], indirect=True)
def test_sigterm_loses_no_point_and_a_second_start_keeps_the_data(stack, tmp_path):
    stack.start()
    schemas = stack.data_dir / "conf" / "storage-schemas.conf"
    secret = (stack.data_dir / "conf" / "secret_key").read_text()
    now = int(time.time()) // 60 * 60
    points = [(f"kept.m{i}", now - 60 * age, float(i + age)) for i in range(200) for age in range(3)]
    send_to_carbon(stack.line_port, plaintext(points))
    # carbon has read every byte; its cache and our plugin's buffer may still hold them
    children = stack.children()
    assert stack.stop(signal.SIGTERM) == 0
    assert _wait_gone(children, timeout=5) == []

    accessor = Accessor.from_url(f"sqlite://{stack.data_dir / 'bgl.db'}")
    try:
        series = accessor.fetch([f"kept.m{i}" for i in range(200)], now - 600, now + 60, now=now + 60)
        stored = {name: [v for v in result.values if v == v] for name, result in series.items()}
    finally:
        accessor.close()
    assert stored == {f"kept.m{i}": [float(i + 2), float(i + 1), float(i)] for i in range(200)}

    schemas.write_text(schemas.read_text().replace("[default]", "[default]\n# an operator's edit"))
    again = BglRun(stack.data_dir)
    again.ports = stack.ports
    try:
        again.start()
        assert "# an operator's edit" in schemas.read_text()
        assert (stack.data_dir / "conf" / "secret_key").read_text() == secret
        again.wait_for_values("kept.m7", [9.0, 8.0, 7.0], **{"from": "-10min"})
        assert again.stop(signal.SIGINT) == 0
    finally:
        again.kill()


@pytest.mark.parametrize("stack", ["receiver", "carbon"], indirect=True)
def test_sigterm_right_after_a_closed_burst_stores_all_of_it(stack):
    stack.start()
    now = int(time.time()) // 60 * 60
    points = [(f"burst.m{i}", now - 60 * age, float(i + age)) for age in range(100) for i in range(500)]
    with socket.create_connection(("127.0.0.1", stack.line_port), timeout=120) as sock:
        sock.sendall(plaintext(points))  # 50,000 lines, closed unread: most still in carbon's socket buffer
    assert stack.stop(signal.SIGTERM) == 0
    accessor = Accessor.from_url(f"sqlite://{stack.data_dir / 'bgl.db'}")
    try:
        series = accessor.fetch([f"burst.m{i}" for i in range(500)], now - 7200, now + 60, now=now + 60)
        stored = sum(int(numpy.count_nonzero(~numpy.isnan(result.values))) for result in series.values())
    finally:
        accessor.close()
    assert stored == len(points)
    assert ("receivers drained" if stack.carbon else "connections drained") in stack.receiver_log.read_text()


def test_a_taken_port_is_refused_before_anything_starts(tmp_path):
    run = BglRun(tmp_path / "data")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        run.ports["--pickle-port"] = sock.getsockname()[1]
        result = subprocess.run(run.command(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{run.ports['--pickle-port']} (--pickle-port)" in result.stderr
    assert "choose another port with --pickle-port" in result.stderr
    assert not (tmp_path / "data" / "conf").exists()


def _receiver_pid(stack: BglRun, other_than: int | None = None, timeout: float = 60.0) -> int:
    """The pid of the stack's receiver (bgl receive, or carbon-cache), once one other than `other_than` runs."""
    marker = "carbon.conf" if stack.carbon else "biggraphite_like.receiver"
    deadline = time.monotonic() + timeout
    while True:
        for pid in stack.children():
            try:
                with open(f"/proc/{pid}/cmdline") as cmdline:
                    if marker in cmdline.read() and pid != other_than:
                        return pid
            except OSError:
                continue
        assert time.monotonic() < deadline, f"no new {stack.receiver_name} after {timeout}s:\n{stack.output()}"
        time.sleep(0.1)


@pytest.mark.parametrize("stack", ["receiver", "carbon"], indirect=True)
def test_a_receiver_killed_is_restarted_and_graphite_web_keeps_serving(stack):
    stack.start()
    now = int(time.time()) // 60 * 60
    send_to_carbon(stack.line_port, plaintext([(f"restart.m{i}", now - 60, float(i)) for i in range(20)]))
    stack.wait_for_values("restart.m7", [7.0], **{"from": "-10min"})
    receiver = _receiver_pid(stack)
    web = [pid for pid in stack.children() if pid != receiver]
    os.kill(receiver, signal.SIGKILL)
    _receiver_pid(stack, other_than=receiver)
    stack.wait_for_values("restart.m7", [7.0], **{"from": "-10min"})  # graphite-web kept serving
    deadline = time.monotonic() + 60
    while True:  # the new receiver listens once it has started
        try:
            send_to_carbon(stack.line_port, plaintext([(f"restart.m{i}", now, float(i + 100)) for i in range(20)]))
            break
        except OSError:
            assert time.monotonic() < deadline, stack.output()
            time.sleep(0.2)
    stack.wait_for_values("restart.m7", [7.0, 107.0], **{"from": "-10min"})
    assert _wait_gone(web, timeout=0) == web  # the same graphite-web processes, never restarted
    name = stack.receiver_name
    assert f"bgl run: {name} exited with status -9 (killed by SIGKILL) while running; restarting it" \
           " (restart 1 of at most 5 within 300s)" in stack.output()
    assert stack.stop(signal.SIGINT) == 0


@pytest.mark.parametrize("stack", ["receiver", "carbon"], indirect=True)
def test_a_receiver_that_keeps_dying_stops_the_stack_and_says_why(stack):
    stack.start()
    children = stack.children()
    receiver = _receiver_pid(stack)
    for _ in range(5):  # restarted each time
        os.kill(receiver, signal.SIGKILL)
        receiver = _receiver_pid(stack, other_than=receiver)
    children += [receiver]
    os.kill(receiver, signal.SIGKILL)  # the sixth exit within 300 s
    assert stack.process.wait(120) == 1
    name = stack.receiver_name
    assert f"bgl run: error: {name} exited with status -9 (killed by SIGKILL), after 5 restarts within 300s:" \
           " not restarting it again; stopping graphite-web" in stack.output()
    assert f"{stack.receiver_log.name} (last lines)" in stack.output()
    assert stack.output().rstrip().endswith(f"bgl run: stopped: {name} and graphite-web have exited (status 1)")
    assert _wait_gone(children, timeout=10) == []


def test_children_stop_when_bgl_run_is_killed(stack):
    stack.start()
    children = stack.children()
    os.kill(stack.process.pid, signal.SIGKILL)  # no chance to stop them itself
    stack.process.wait()
    assert _wait_gone(children, timeout=60) == [], [open(f"/proc/{p}/cmdline").read() for p in children]


def test_bgl_run_without_its_parts_says_what_to_install(tmp_path):
    # this Python, seeing the checkout and numpy but none of carbon, graphite-web and gunicorn
    only = tmp_path / "only-numpy"
    only.mkdir()
    site = os.path.dirname(os.path.dirname(numpy.__file__))
    for entry in os.listdir(site):
        if entry == "numpy" or entry.startswith("numpy.libs") or entry.startswith("numpy-"):
            os.symlink(os.path.join(site, entry), only / entry)
    script = ("import sys; sys.path = [p for p in sys.path if 'site-packages' not in p] + sys.argv[1:3];"
              "from biggraphite_like.cli import main; sys.exit(main(['run', '--data-dir', sys.argv[3]]))")
    result = subprocess.run([sys.executable, "-I", "-c", script, str(REPO_ROOT), str(only), str(tmp_path / "data")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "bgl run needs graphite-web, Django, gunicorn, whitenoise in this Python environment" in result.stderr
    assert "pip install -c constraints.txt -e '.[run]', then pip install -c constraints.txt --no-deps graphite-web" \
        in result.stderr
    assert not (tmp_path / "data").exists()
