"""storage-schemas.conf and storage-aggregation.conf: the same files and the same points
through a real carbon-cache + whisper and through `bgl receive` give every metric the same
retention, aggregation method, xFilesFactor and values (first match wins, sections without
a pattern or with a retention whisper refuses skipped, carbon's defaults last)."""
from __future__ import annotations

import time

import pytest

from biggraphite_like import settings
from biggraphite_like.accessor import Accessor
from biggraphite_like.receiver.rules import StorageRules
from biggraphite_like.retention import Retention
from tests.carbon_env import WHISPER_LAUNCHER, CarbonCache, plaintext, send_to_carbon
from tests.graphite_env import whisper_path
from tests.receiver_env import BglReceive

SCHEMAS = """\
[no_pattern]
retentions = 1s:1m

[refused_by_whisper]
pattern = ^bad\\.
retentions = 60s:1h,120s:30m

[fine]
pattern = ^app\\.fine\\.
retentions = 10s:1h,60s:1d

[app]
pattern = ^app\\.
retentions = 60s:1d,300s:7d

[also_app_never_reached]
pattern = ^app\\.
retentions = 1s:5m
"""

AGGREGATION = """\
[max]
pattern = \\.max$
xFilesFactor = 0.1
aggregationMethod = max

[only_xff]
pattern = \\.ratio$
xFilesFactor = 0.9

[only_method]
pattern = \\.count$
aggregationMethod = sum

[no_pattern]
aggregationMethod = min
"""

NAMES = ["app.fine.latency.max", "app.requests.count", "app.cpu.ratio", "app.other", "bad.thing.max", "misc.value",
         "misc.value.count"]


def test_same_metadata_and_values_as_carbon_and_whisper(tmp_path):
    import whisper

    now = int(time.time()) // 300 * 300
    points = [(name, now - 60 * age, float(index * 100 + age)) for index, name in enumerate(NAMES)
              for age in range(5)]
    carbon = CarbonCache(tmp_path / "carbon", store_url=None, database="whisper", launcher=WHISPER_LAUNCHER)
    (carbon.conf_dir / "storage-schemas.conf").write_text(SCHEMAS)
    (carbon.conf_dir / "storage-aggregation.conf").write_text(AGGREGATION)
    carbon.start()
    try:
        send_to_carbon(carbon.line_port, plaintext(points))
        deadline = time.monotonic() + 60
        paths = {name: whisper_path(carbon.whisper_dir, name) for name in NAMES}
        while True:
            try:
                complete = all(sum(v is not None for v in whisper.fetch(path, now - 600, now + 1, now=now + 1)[1]) == 5
                               for path in paths.values())
            except (OSError, whisper.WhisperException):
                complete = False
            if complete:
                break
            assert time.monotonic() < deadline, carbon.log()[-2000:]
            time.sleep(0.2)
    finally:
        carbon.kill()
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    receiver = BglReceive(tmp_path / "receiver", url, "--storage-schemas", str(carbon.conf_dir / "storage-schemas.conf"),
                          "--storage-aggregation", str(carbon.conf_dir / "storage-aggregation.conf"),
                          "--stats-interval", "0").start()
    send_to_carbon(receiver.line_port, plaintext(points))
    assert receiver.stop() == 0, receiver.output()
    accessor = Accessor.from_url(url)
    try:
        for name, path in paths.items():
            info = whisper.info(path)
            metric = accessor.get_metric(name)
            expected = [(a["secondsPerPoint"], a["points"]) for a in info["archives"]]
            if expected == [(60, 10080)]:  # carbon's built-in default; bgl's one default is settings.DEFAULT_RETENTION
                expected = Retention.parse(settings.DEFAULT_RETENTION).as_tuples()
            assert metric.retention.as_tuples() == expected, name
            assert metric.metadata.aggregator.value == info["aggregationMethod"], name
            assert metric.metadata.xfilesfactor == pytest.approx(info["xFilesFactor"]), name
            for start in (now - 600, now - 86400 * 2):
                (w_start, w_end, w_step), w_values = whisper.fetch(path, start, now + 1, now=now + 1)
                ours = accessor.fetch([name], start, now + 1, now=now + 1)[name]
                assert (ours.start, ours.end, ours.step) == (w_start, w_end, w_step), name
                assert ours.values_list() == w_values, name
    finally:
        accessor.close()
    assert "has no 'pattern': skipped" in receiver.output()
    assert "invalid schema [refused_by_whisper]" in receiver.output()


def test_rules_without_files_are_carbons_defaults():
    metadata = StorageRules.load(None, None).metadata_for("any.name")
    assert metadata.retention.as_tuples() == [(60, 11520), (3600, 17520)]  # bgl's one default, 60s:8d,1h:2y
    assert (metadata.aggregator.value, metadata.xfilesfactor) == ("average", 0.5)
