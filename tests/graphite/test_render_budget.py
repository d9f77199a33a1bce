"""Big renders do not take graphite-web down: `bgl run` (two gunicorn workers of four
threads) on 100,000 metrics; four concurrent renders of all of them are refused with 400
naming BG_MAX_RENDER_SERIES before anything is read, `/metrics/find` keeps answering
within 3 s meanwhile, and the workers' memory is back near its baseline afterwards."""
from __future__ import annotations

import concurrent.futures
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata

pytestmark = pytest.mark.slow

SERIES = 100_000
META = MetricMetadata.create("60s:1d", "average", 0.5)
MEMORY_SLACK = 64 << 20  # bytes a worker may keep after the renders (a cached 100,000-name glob answer is ~10 MB)


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _post(url: str, form: dict, timeout: float = 120.0) -> tuple[int, bytes]:
    data = urllib.parse.urlencode(form).encode()
    try:
        with urllib.request.urlopen(url, data=data, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_four_renders_of_100000_series_leave_finds_served_and_memory_back(bgl_stack):
    stack = bgl_stack
    stack.data_dir.mkdir(parents=True)
    accessor = Accessor.from_url(f"sqlite://{stack.data_dir / 'bgl.db'}")
    accessor.syncdb()
    names = [f"big.h{i // 100:04d}.m{i % 100:02d}" for i in range(SERIES)]
    for offset in range(0, SERIES, 10_000):
        accessor.create_metrics([(n, META) for n in names[offset:offset + 10_000]])
    accessor.insert_points({"big.h0001.m01": [(int(time.time()) - 60, 1.0)]})
    accessor.close()
    stack.start()
    workers = [pid for pid in stack.children() if "gunicorn" in open(f"/proc/{pid}/cmdline").read()]
    for _ in range(8):  # warm both workers up: imports, store connection, a small render
        assert stack.get("/metrics/find", query="big.h0001.*")[0] == 200
        assert _post(stack.web + "/render", {"target": "big.h0001.m01", "format": "json"})[0] == 200
    baseline = {pid: _rss(pid) for pid in workers}

    latencies: list[float] = []
    done = threading.Event()

    def keep_finding() -> None:
        while not done.is_set():
            started = time.monotonic()
            status, body, _ = stack.get("/metrics/find", query="big.h0002.*", format="json")
            latencies.append(time.monotonic() - started)
            assert status == 200 and body.count(b'"path"') == 100
            time.sleep(0.1)

    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        finder = pool.submit(keep_finding)
        renders = [pool.submit(_post, stack.web + "/render", {"target": "big.*.*", "format": "json", "from": "-1d"})
                   for _ in range(4)]
        answers = [render.result() for render in renders]
        done.set()
        finder.result()
    for status, body in answers:
        assert status == 400 and b"BG_MAX_RENDER_SERIES" in body and b"100000 series" in body, (status, body[:300])
    assert latencies and max(latencies) < 3.0, latencies
    after = {pid: _rss(pid) for pid in workers}
    print(f"finds during the renders: {len(latencies)}, slowest {max(latencies):.3f} s; worker RSS MiB"
          f" before/after: {[(baseline[p] >> 20, after[p] >> 20) for p in workers]}")
    for pid in workers:
        assert after[pid] <= baseline[pid] + MEMORY_SLACK, (pid, baseline[pid] >> 20, after[pid] >> 20)
