"""`import-whisper`: after an import, Accessor.fetch equals whisper.fetch on every file.

Whisper files are written as carbon writes them, batch after batch over simulated time,
so the coarse archives hold history the finest archive no longer covers; the windows
compared fall in every archive, across archive boundaries, partly beyond the retention and
in the future. Bad files are reported with their path and skipped.
"""
from __future__ import annotations

import math
import os
import random
import shutil
import subprocess
import sys

import pytest
import whisper

from biggraphite_like.accessor import Accessor
from biggraphite_like.maintenance.import_whisper import (
    BadWhisperFile,
    WhisperDirectoryMissing,
    import_whisper,
    read_whisper,
)

NOW = 1_700_000_000
BGL = shutil.which("bgl", path=os.path.dirname(sys.executable)) or shutil.which("bgl")

# (relative path, archives, aggregation, xFilesFactor)
FILES = [
    ("web/h1/cpu.wsp", [(10, 60), (60, 60), (300, 48)], "average", 0.5),
    ("web/h1/reqs.wsp", [(1, 120), (10, 60), (120, 30)], "sum", 0.0),
    ("web/h2/lat.wsp", [(60, 30), (600, 20)], "max", 0.3),
    ("db/q.wsp", [(10, 30), (30, 40), (300, 30)], "min", 0.2),
    ("db/last.wsp", [(5, 50), (50, 40)], "last", 0.5),
    ("db/z/avgz.wsp", [(10, 60), (120, 40)], "avg_zero", 0.7),
    ("db/z/absmax.wsp", [(10, 60), (60, 40)], "absmax", 0.1),
    ("db/z/absmin.wsp", [(10, 60), (60, 40)], "absmin", 1.0),
]


def _history(path: str, archives, seed: int) -> None:
    """Write points the way carbon does: in time order, each batch with the clock of its time."""
    rng = random.Random(seed)
    finest = archives[0][0]
    max_retention = max(step * points for step, points in archives)
    start = NOW - max_retention - 5 * finest
    t = start
    while t < NOW:
        batch_end = min(NOW, t + finest * rng.randint(3, 40))
        points = []
        while t < batch_end:
            if rng.random() < 0.85:  # gaps exercise xFilesFactor
                points.append((t + rng.randint(0, finest - 1), round(rng.uniform(-50, 100), rng.choice([0, 3]))))
            t += finest
        if points:
            whisper.update_many(path, points, now=batch_end)
    # a few late points land directly in coarser archives
    late = [(NOW - rng.randint(archives[0][0] * archives[0][1] + 1, max_retention - 1), 7.5) for _ in range(5)]
    whisper.update_many(path, late, now=NOW)


def make_tree(root, files=FILES) -> dict[str, str]:
    """Whisper files under root; returns {metric name: path}."""
    made = {}
    for seed, (relative, archives, method, xff) in enumerate(files):
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        whisper.create(path, archives, xFilesFactor=xff, aggregationMethod=method)
        _history(path, archives, seed)
        made[relative[:-4].replace("/", ".")] = path
    return made


def windows(archives) -> list[tuple[int, int]]:
    """Read windows in every archive, across boundaries, beyond the retention, in the future."""
    result = [(NOW - 1, NOW), (NOW - 30, NOW - 10), (NOW + 10, NOW + 100)]
    retention = 0
    for step, points in archives:
        previous, retention = retention, step * points
        result += [
            (NOW - retention, NOW),
            (NOW - retention + step * 3 + 1, NOW - previous - 7),
            (NOW - retention // 2, NOW - retention // 3),
            (NOW - previous - 2 * step, NOW - previous + step),
        ]
    result += [(NOW - retention - 500, NOW - retention + 100), (NOW - 3 * retention, NOW - 2 * retention)]
    return [(a, b) for a, b in result if a <= b]


def assert_same_as_whisper(accessor: Accessor, name: str, path: str) -> int:
    """Compare every window; returns how many known values were compared."""
    archives = [(a["secondsPerPoint"], a["points"]) for a in whisper.info(path)["archives"]]
    compared = 0
    for start, until in windows(archives):
        expected = whisper.fetch(path, start, until, now=NOW)
        got = accessor.fetch([name], start, until, NOW)[name]
        if expected is None:
            assert got is None, (name, start, until)
            continue
        (w_start, w_end, w_step), values = expected
        assert (got.start, got.end, got.step) == (w_start, w_end, w_step), (name, start, until)
        ours = [None if math.isnan(v) else v for v in got.values.tolist()]
        assert ours == values, (name, start, until)
        compared += sum(v is not None for v in values)
    return compared


def test_import_equals_whisper_fetch_on_every_file(tmp_path, accessor):
    made = make_tree(tmp_path / "whisper")
    report = import_whisper(accessor, str(tmp_path / "whisper"), now=NOW)
    assert (report.files_found, report.metrics_imported, report.files_failed) == (len(FILES), len(FILES), 0)
    assert sorted(accessor.glob_metrics("**")) == sorted(made)
    compared = 0
    for name, path in made.items():
        compared += assert_same_as_whisper(accessor, name, path)
        metric = accessor.get_metric(name)
        header = whisper.info(path)
        assert metric.retention.as_tuples() == [(a["secondsPerPoint"], a["points"]) for a in header["archives"]]
        assert metric.metadata.aggregator.value == header["aggregationMethod"]
        assert metric.metadata.xfilesfactor == header["xFilesFactor"]
    assert compared > 1000


def test_coarse_archives_hold_history_the_finest_does_not(tmp_path, accessor):
    """The check above would be vacuous if coarse windows held nothing but recomputed stage 0."""
    made = make_tree(tmp_path / "w", FILES[:1])
    import_whisper(accessor, str(tmp_path / "w"), now=NOW)
    name, path = next(iter(made.items()))
    (_, _, step), values = whisper.fetch(path, NOW - 14000, NOW - 4000, now=NOW)  # 300 s archive only
    assert step == 300 and sum(v is not None for v in values) > 20
    assert assert_same_as_whisper(accessor, name, path) > 0


def test_prefix_dry_run_and_bad_files(tmp_path, accessor):
    root = tmp_path / "whisper"
    made = make_tree(root, FILES[:3])
    good = os.path.join(root, FILES[0][0])
    (root / "bad").mkdir()
    with open(good, "rb") as handle:
        data = handle.read()
    (root / "bad" / "truncated.wsp").write_bytes(data[: len(data) // 2])
    (root / "bad" / "garbage.wsp").write_bytes(b"this is not a whisper file at all")
    (root / "bad" / "empty.wsp").write_bytes(b"")
    (root / "bad" / "notes.txt").write_text("ignored: not a .wsp file")
    dry = import_whisper(accessor, str(root), prefix="old", dry_run=True, now=NOW)
    assert (dry.files_found, dry.metrics_imported, dry.files_failed) == (6, 3, 3)
    assert accessor.glob_metrics("**") == []
    report = import_whisper(accessor, str(root), prefix="old", now=NOW)
    assert (report.metrics_imported, report.files_failed) == (3, 3)
    assert report.points_imported == dry.points_imported > 0
    assert all(os.path.join(str(root), "bad") in e for e in report.errors)
    assert any("truncated.wsp" in e and "truncated" in e.split("truncated.wsp", 1)[1] for e in report.errors)
    assert sorted(accessor.glob_metrics("old.**")) == sorted(f"old.{n}" for n in made)
    for name, path in made.items():
        assert_same_as_whisper(accessor, f"old.{name}", path)
    with pytest.raises(WhisperDirectoryMissing):
        import_whisper(accessor, str(tmp_path / "nowhere"))
    with pytest.raises(BadWhisperFile, match="unknown aggregation type"):
        read_whisper(str(root / "bad" / "garbage.wsp"), "x")


def test_cli_import_in_parallel_processes(tmp_path):
    """`bgl import-whisper --jobs 2` in a real process, then read back through the accessor."""
    import biggraphite_like.maintenance.import_whisper as module

    root = tmp_path / "whisper"
    made = make_tree(root, FILES[:4])
    # more files than one batch, so two worker processes share the work
    spread = [(f"many/m{i:03d}.wsp", [(60, 10), (600, 10)], "average", 0.5) for i in range(module.FILES_PER_BATCH + 20)]
    for relative, archives, method, xff in spread:
        path = root / relative
        path.parent.mkdir(exist_ok=True)
        whisper.create(str(path), archives, xFilesFactor=xff, aggregationMethod=method)
        whisper.update_many(str(path), [(NOW - 60 * k, float(k)) for k in range(8)], now=NOW)
    (root / "broken.wsp").write_bytes(b"\x00\x00\x00\x01")
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    env = dict(os.environ, BGL_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path))
    process = subprocess.run([BGL, "--store", url, "import-whisper", "--jobs", "2", "--prefix", "imp", str(root)],
                             capture_output=True, text=True, env=env, timeout=120)
    assert process.returncode == 1, process.stderr  # one file was skipped
    assert f"skipped {root / 'broken.wsp'}: truncated header" in process.stderr
    assert f"metrics imported {4 + len(spread)}" in process.stdout
    assert "files failed 1" in process.stdout
    accessor = Accessor.from_url(url)
    for name, path in made.items():
        assert_same_as_whisper(accessor, f"imp.{name}", path)
    series = accessor.fetch([f"imp.many.m{i:03d}" for i in range(len(spread))], NOW - 500, NOW, NOW)
    expected = whisper.fetch(str(root / "many" / "m000.wsp"), NOW - 500, NOW, now=NOW)[1]
    assert all(s.values_list() == expected for s in series.values())
    accessor.close()
