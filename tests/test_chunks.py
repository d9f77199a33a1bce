"""The chunk codec (biggraphite_like.chunks): lossless to the bit on every kind of window,
compact on the data metrics hold, and loud on damaged bytes."""
from __future__ import annotations

import numpy as np
import pytest

from biggraphite_like import chunks
from biggraphite_like.errors import CorruptChunk

START = 1_600_000_000 - 1_600_000_000 % 43_200


def _roundtrip(ts, values, counts=None) -> bytes:
    ts = np.asarray(ts, np.int64)
    values = np.asarray(values, np.float64)
    data = chunks.encode(chunks.Points(ts, values, None if counts is None else np.asarray(counts, np.int64)))
    back = chunks.decode(data)
    np.testing.assert_array_equal(back.timestamps, ts)
    assert back.timestamps.dtype == np.int64 and back.values.dtype == np.float64
    # bit for bit: NaN payloads and -0.0 included
    np.testing.assert_array_equal(back.values.view(np.uint64), values.view(np.uint64))
    if counts is None:
        assert back.counts is None
    else:
        np.testing.assert_array_equal(back.counts, counts)
    return data


def _window(rng, n, precision=60, sparse=False):
    slots = np.sort(rng.choice(10 * n if sparse else n, n, replace=False)) if n else np.zeros(0, np.int64)
    return START + precision * slots.astype(np.int64)


@pytest.mark.parametrize("seed", range(40))
def test_random_windows_round_trip_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 2, 3, 17, 100, 720, 1440]))
    kind = seed % 5
    if kind == 0:  # any bits that are a float64 (NaN payloads, subnormals, inf: the codec keeps them all)
        values = rng.integers(0, 2**64, n, dtype=np.uint64).view(np.float64)
    elif kind == 1:
        values = np.round(rng.uniform(-1e6, 1e6, n), int(rng.integers(0, 6)))
    elif kind == 2:
        values = rng.normal(0, 1e-3, n) * 10.0 ** rng.integers(-300, 300)
    elif kind == 3:
        values = np.cumsum(rng.integers(0, 10**6, n)).astype(np.float64) + float(rng.integers(0, 2**50))
    else:
        values = np.round(rng.uniform(0, 100, n), 2)
    specials = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, np.float64(np.uint64(0x7FF8DEADBEEF0001).view(np.float64)),
                         5e-324, -5e-324, np.finfo(np.float64).max, -np.finfo(np.float64).max])
    where = rng.random(n) < 0.1
    values = values.copy()
    values[where] = rng.choice(specials, int(where.sum()))
    counts = rng.integers(1, 2**31, n) if seed % 2 else None
    _roundtrip(_window(rng, n, int(rng.choice([1, 10, 60, 3600])), sparse=bool(seed % 3)), values, counts)


def test_empty_and_single_point_windows():
    _roundtrip([], [])
    _roundtrip([], [], [])
    _roundtrip([START], [np.nan])
    _roundtrip([START], [-0.0], [3])
    _roundtrip([2**32 - 1], [1.5])


def test_nan_and_negative_zero_only():
    _roundtrip(START + 60 * np.arange(300), np.full(300, np.nan))
    _roundtrip(START + 60 * np.arange(300), np.where(np.arange(300) % 2, -0.0, 0.0))


def test_timestamps_off_the_precision_grid_are_kept():
    _roundtrip([START + 1, START + 61, START + 62, START + 4000], [1.0, 2.0, 3.0, 4.0])


def test_realistic_windows_are_small():
    """Bytes per point of a full window of 720 slots at 60 s: the aims of the storage issue."""
    rng = np.random.default_rng(3)
    n = 720
    ts = START + 60 * np.arange(n)
    cases = {
        "gauge": (np.round(50 + np.cumsum(rng.normal(0, 0.5, n)), 2), 1.5),
        "counter": (np.cumsum(rng.integers(0, 1000, n)).astype(np.float64) + 1e9, 2.0),
        "constant": (np.full(n, 3.0), 0.2),
        "random two decimals": (np.round(rng.uniform(0, 100, n), 2), 2.2),
        "aggregated average": (np.round(rng.uniform(0, 100, n), 2) / 3, 8.5),  # no decimal: raw bits, XORed
    }
    for name, (values, limit) in cases.items():
        size = len(_roundtrip(ts, values)) / n
        assert size <= limit, (name, size)
    with_counts = _roundtrip(ts, cases["gauge"][0], np.full(n, 5))
    assert len(with_counts) - len(_roundtrip(ts, cases["gauge"][0])) < 16  # constant counts cost ~nothing


def test_damaged_bytes_are_an_error_that_says_so():
    data = _roundtrip(START + 60 * np.arange(100), np.arange(100) / 4)
    for bad in (b"", b"\x07" + data[1:], data[:-5], data[:1] + bytes(len(data) - 1)):
        with pytest.raises(CorruptChunk, match="chunk"):
            chunks.decode(bad)


def test_many_chunks_decode_together_each_point_to_its_chunk():
    """decode_many groups chunks of one layout for numpy; every point still names its chunk."""
    rng = np.random.default_rng(11)
    originals = []
    for i in range(30):
        n = int(rng.choice([0, 1, 720, 720, 720, 300]))
        values = np.round(rng.uniform(0, 100, n), 2) if i % 3 else rng.normal(0, 1, n)
        if n and i % 4 == 0:
            values[int(rng.integers(0, n))] = np.nan
        counts = rng.integers(1, 10, n) if i % 5 == 0 else None
        originals.append(chunks.Points(_window(rng, n, 60), values, counts))
    index, ts, values, counts = chunks.decode_many([chunks.encode(p) for p in originals])
    assert counts is not None and len(index) == len(ts) == len(values) == len(counts)
    for i, p in enumerate(originals):
        mine = index == i
        np.testing.assert_array_equal(ts[mine], p.timestamps)
        np.testing.assert_array_equal(values[mine].view(np.uint64), p.values.view(np.uint64))
        if p.counts is not None:
            np.testing.assert_array_equal(counts[mine], p.counts)


def test_decode_groups_give_each_chunk_once_by_layout_and_labels_name_points():
    """decode_groups yields every chunk once, its points as a row of its layout's group;
    decode_many's labels replace the chunk index of each point."""
    rng = np.random.default_rng(12)
    originals = [chunks.Points(_window(rng, n, 60), np.round(rng.uniform(0, 100, n), 2) if i % 2 else rng.normal(0, 1, n))
                 for i, n in enumerate([720, 720, 719, 720, 3, 0, 720, 719])]
    blobs = [chunks.encode(p) for p in originals]
    seen = []
    for index, ts, values, counts in chunks.decode_groups(blobs):
        assert ts.shape == values.shape == (len(index), len(originals[index[0]])) and counts is None
        for row, i in enumerate(index.tolist()):
            seen.append(i)
            np.testing.assert_array_equal(ts[row], originals[i].timestamps)
            np.testing.assert_array_equal(values[row].view(np.uint64), originals[i].values.view(np.uint64))
    assert sorted(seen) == list(range(len(blobs)))
    labels = np.arange(len(blobs)) * 10 + 3
    label, ts, _, _ = chunks.decode_many(blobs, labels)
    index, ts_by_index, _, _ = chunks.decode_many(blobs)
    np.testing.assert_array_equal(label, labels[index])
    np.testing.assert_array_equal(ts, ts_by_index)
