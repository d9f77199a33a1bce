"""A real carbon-cache (whisper database) holding recent points only CarbonLink can see, beside
the same older points in whisper and in our store: for the tests that merge cached points."""
from __future__ import annotations

import os
import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.carbon_env import WHISPER_LAUNCHER, CarbonCache
from tests.graphite_env import setup_graphite_app, whisper_path

METRICS = {"cl.avg": "average", "cl.max": "max"}


@pytest.fixture(scope="module")
def carbon_and_data(tmp_path_factory):
    setup_graphite_app()
    import whisper

    root = tmp_path_factory.mktemp("graphite-carbonlink")
    now = int(time.time())
    url = f"sqlite://{root / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    whisper_dir = str(root / "reference")
    for index, (name, method) in enumerate(METRICS.items()):
        stored = [(now - 60 * age, float(index * 1000 + age)) for age in range(11, 100)]
        path = whisper_path(whisper_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        whisper.create(path, [(60, 60), (300, 288)], 0.5, method)
        whisper.update_many(path, stored, now=now)
        accessor.insert_points({name: stored}, now=now, create=MetricMetadata.create("60s:1h,300s:1d", method, 0.5))
    accessor.close()
    carbon = CarbonCache(root / "carbon", store_url=None, database="whisper", launcher=WHISPER_LAUNCHER,
                         settings={"MIN_TIMESTAMP_LAG": 10 ** 8, "CACHE_WRITE_STRATEGY": "timesorted"})
    # the writer leaves every point in the cache: only the timesorted strategy heeds the lag
    carbon.start()
    try:
        cached = [(name, now - 60 * age, float(500 + index * 10 + age))
                  for index, name in enumerate(METRICS) for age in range(0, 10)]
        carbon.send_plaintext(cached)
        yield carbon, whisper_dir, url, now, cached
    finally:
        carbon.kill()
