"""The chunk codec (biggraphite_like.chunks): lossless to the bit on every kind of window,
compact on the data metrics hold, and loud on damaged bytes."""
from __future__ import annotations

import gzip
import hashlib
import sqlite3
import zlib

import numpy as np
import pytest

from biggraphite_like import chunks
from biggraphite_like.chunks import encoder, streams
from biggraphite_like.errors import CorruptChunk, InvalidPoint
from tests.paths import DATA

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
        "gauge": (np.round(50 + np.cumsum(rng.normal(0, 0.5, n)), 2), 1.25),
        "counter": (np.cumsum(rng.integers(0, 1000, n)).astype(np.float64) + 1e9, 1.4),  # ~10 bits a value
        "constant": (np.full(n, 3.0), 0.2),
        "random two decimals": (np.round(rng.uniform(0, 100, n), 2), 1.75),  # ~13.3 bits of entropy a value
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


@pytest.mark.parametrize("precision, step", [(60, 60), (60, 20), (7, 3)])
def test_decode_groups_give_grid_columns_from_an_origin(precision, step):
    """With an origin (first, step), decode_groups gives each point's column
    (timestamp - first) // step, points before first included (negative columns): by
    whole steps when the chunk's unit is one, through the timestamps when not."""
    rng = np.random.default_rng(13)
    originals = [chunks.Points(_window(rng, n, precision, sparse=i % 2 == 1), rng.normal(0, 1, n))
                 for i, n in enumerate([720, 720, 300, 1, 50])]
    blobs = [chunks.encode(p) for p in originals]
    first = START + 37 * precision + 1  # not on a step: the floor matters
    seen = []
    for index, columns, values, _ in chunks.decode_groups(blobs, (first, step)):
        for row, i in enumerate(index.tolist()):
            seen.append(i)
            np.testing.assert_array_equal(columns[row], (originals[i].timestamps - first) // step)
            np.testing.assert_array_equal(values[row].view(np.uint64), originals[i].values.view(np.uint64))
    assert sorted(seen) == list(range(len(blobs)))


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


# Chunks written by earlier encoders (versions 1 and 2), as they were: every version stays readable.
_FROZEN = [
    ("01e360606038c019170fa4186c40040323030347232303024442e9cf50fa07943e04a5e5191a1a8054c33b4d868b3fb46edde87560b0ff7f"
     "c0dedeb1828191a9b48ca11800",
     START + 60 * np.arange(8), np.array([12.5, 12.75, np.nan, -0.0, 13.0, np.inf, 12.25, 1e-300]),
     np.array([60, 60, 59, 60, 1, 60, 60, 2])),
    ("016366606038c019170fa4181841980948723040008f0003834ca8af6468856ea8e0ea50c657a1ebc2424bfe5fbdf3d1feff7e00",
     START + np.array([0, 7, 3600]), np.array([1 / 3, -np.pi, np.uint64(0x7FF8DEADBEEF0001).view(np.float64)]), None),
    ("0206000000c0095e5f000000000a000000000001000008000000000000ed624b0a7a2410122116bf32c2e41fb4cf5afabdd5b321260a8fb7"
     "8710246711c5944563ceeab506ecb10d6f0a6307f3",
     START + 10 * np.arange(6),
     np.array([0xdce670afac210ed, 0x622476854726028f, 0x6891b332923923c4, 0xb9727b5218d35ce, 0xc7b62a500428ab4,
               0xffca01812618b890], np.uint64).view(np.float64), None),
]


@pytest.mark.parametrize("frozen", _FROZEN, ids=["version 1 with counts", "version 1 raw bits", "version 2"])
def test_chunks_of_earlier_versions_decode_bit_for_bit(frozen):
    data, ts, values, counts = frozen
    back = chunks.decode(bytes.fromhex(data))
    np.testing.assert_array_equal(back.timestamps, ts)
    np.testing.assert_array_equal(back.values.view(np.uint64), values.view(np.uint64))
    if counts is None:
        assert back.counts is None
    else:
        np.testing.assert_array_equal(back.counts, counts)


def test_chunks_of_the_windows_store_fixture_decode_and_encode_again(tmp_path):
    """Every chunk of tests/data/windows_store.db.gz (version 1, written before window-first
    ids) decodes, alone and with today's chunks, and today's encoding of its points gives
    them back bit for bit (test_sqlite_upgrade compares them with what that release read)."""
    path = tmp_path / "windows_store.db"
    path.write_bytes(gzip.decompress((DATA / "windows_store.db.gz").read_bytes()))
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'datapoints%'")]
    blobs = [b for t in tables for (b,) in conn.execute(f"SELECT data FROM {t} WHERE id % 2 = 0")]
    conn.close()
    assert len(blobs) >= 40 and {b[0] for b in blobs} == {chunks.VERSION}
    again = []
    for blob in blobs:
        old = chunks.decode(blob)
        new = chunks.encode(old)
        again.append(new)
        back = chunks.decode(new)
        np.testing.assert_array_equal(back.timestamps, old.timestamps)
        np.testing.assert_array_equal(back.values.view(np.uint64), old.values.view(np.uint64))
        np.testing.assert_array_equal(back.counts if old.counts is not None else 0, old.counts if old.counts is not None else 0)
    index, ts, values, _ = chunks.decode_many(blobs + again)  # old and new versions in one call
    for i, blob in enumerate(blobs):
        np.testing.assert_array_equal(values[index == i].view(np.uint64),
                                      values[index == len(blobs) + i].view(np.uint64))


def test_values_never_negative_are_kept_less_their_minimum():
    """Random two-decimal values (never negative) and counter increments: stored less their
    minimum (version 3), one bit a value smaller than zigzagged, and bit for bit."""
    rng = np.random.default_rng(8)
    ts = START + 60 * np.arange(720)
    for values in (np.round(rng.uniform(0, 100, 720), 2), np.cumsum(rng.integers(0, 1000, 720)) + 1e9):
        data = _roundtrip(ts, values)
        assert data[0] in (chunks.VERSION_BASED, chunks.VERSION_BASED_PACKED)
    # big random integers: deflate saves nothing, the planes are kept as they are (version 4)
    raw = _roundtrip(ts[:40], np.random.default_rng(1).integers(0, 10**12, 40).astype(np.float64))
    assert raw[0] == chunks.VERSION_BASED_RAW


def test_each_plane_may_get_a_deflate_block_of_its_own():
    """A chunk is one raw-deflate stream whatever its blocks: random two-decimal values (a
    uniform low byte, a skewed high one) are smaller with a block a plane than in one run."""
    rng = np.random.default_rng(9)
    data = _roundtrip(START + 60 * np.arange(720), np.round(rng.uniform(0, 100, 720), 2))
    payload = zlib.decompress(data[1:], -15)
    one_run = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert len(data) - 1 < 0.95 * len(one_run.compress(payload) + one_run.flush())


def _packed_mask(data: bytes) -> int:
    return int.from_bytes(zlib.decompress(data[1:], -15)[-4:], "little")


def test_parts_deflate_cannot_shrink_are_stored_after_one_block():
    """Full-precision random values (the low planes of their XORs are noise): a packed
    chunk (version 5 or 6), the noise planes stored after one deflate block of the rest,
    named by its mask; bit for bit with gaps, NaN exceptions, counts, and read together
    with chunks of the other versions."""
    rng = np.random.default_rng(21)
    ts = START + 60 * np.sort(rng.choice(760, 720, replace=False))
    packed = (chunks.VERSION_PACKED, chunks.VERSION_BASED_PACKED)
    floats = _roundtrip(ts, rng.random(720) * 100)
    decimals = np.round(rng.uniform(0, 1e6, 720), 4)
    decimals[rng.choice(720, 20, replace=False)] = np.nan  # exceptions: a part of their own
    decimals[5] = -0.0
    excepted = _roundtrip(ts, decimals)
    counts = rng.integers(1, 2**40, 720)  # noise planes among the counts too
    aggregated = _roundtrip(ts, rng.random(720) * 100, counts)
    for data in (floats, excepted, aggregated):
        assert data[0] in packed and _packed_mask(data)
    older = _roundtrip(ts[:40], decimals[:40])  # too few points for blocks: version 1 or 3
    assert older[0] in (chunks.VERSION, chunks.VERSION_BASED)
    index, got_ts, values, got_counts = chunks.decode_many([floats, excepted, aggregated, older])
    np.testing.assert_array_equal(values[index == 1].view(np.uint64), decimals.view(np.uint64))
    np.testing.assert_array_equal(got_counts[index == 2], counts)
    np.testing.assert_array_equal(got_ts[index == 3], ts[:40])


def test_a_part_deflate_shrinks_by_under_a_tenth_is_stored(monkeypatch):
    """Full-precision floats of [0, 100): the byte under the exponent (the XORs' 7th plane,
    part 7) deflates to about 92 %: stored with the noise below it (reads inflate its
    literals no more), the top plane alone deflated; it costs under a hundredth more bytes
    than deflating it (here nothing: its Huffman codes cost what they saved)."""
    rng = np.random.default_rng(21)
    ts = START + 60 * np.sort(rng.choice(760, 720, replace=False))
    values = rng.random(720) * 100
    data = _roundtrip(ts, values)
    assert data[0] == chunks.VERSION_PACKED and _packed_mask(data) == 0b1111_1110
    monkeypatch.setattr(streams, "_STORED_SHARE", 0.98)  # the share before: that plane deflated
    deflated = chunks.encode(chunks.Points(ts, values))
    assert _packed_mask(deflated) == 0b0111_1110
    assert len(data) <= 1.01 * len(deflated)


def test_a_chunk_is_packed_only_when_that_costs_at_most_a_hundredth_more(monkeypatch):
    """Packing (one Huffman table a chunk on reads) is chosen where it costs at most 1 %
    more bytes than a deflate block a part, which is kept otherwise."""
    rng = np.random.default_rng(22)
    cases = [np.round(rng.uniform(0, 100, 720), 2), rng.random(720) * 100,
             np.round(50 + np.cumsum(rng.normal(0, 0.5, 720)), 2)]
    ts = START + 60 * np.arange(720)
    chosen = [chunks.encode(chunks.Points(ts, v)) for v in cases]
    monkeypatch.setattr(streams, "_PACKED_SLACK", 0.0)
    per_part = [chunks.encode(chunks.Points(ts, v)) for v in cases]
    assert all(p[0] not in (chunks.VERSION_PACKED, chunks.VERSION_BASED_PACKED) for p in per_part)
    for mine, theirs in zip(chosen, per_part):
        assert len(mine) <= len(theirs) * 1.01 + 1
        assert mine[0] in (chunks.VERSION_PACKED, chunks.VERSION_BASED_PACKED) or mine == theirs
    assert chosen[1][0] == chunks.VERSION_PACKED  # the noise: packed


def test_a_damaged_packed_mask_is_an_error():
    rng = np.random.default_rng(23)
    data = _roundtrip(START + 60 * np.arange(720), rng.random(720) * 100)
    assert data[0] == chunks.VERSION_PACKED
    payload = bytearray(zlib.decompress(data[1:], -15))
    payload[-4:] = (1 << 30).to_bytes(4, "little")  # a part this chunk does not have
    again = zlib.compressobj(6, zlib.DEFLATED, -15)
    with pytest.raises(CorruptChunk, match="mask"):
        chunks.decode(bytes([chunks.VERSION_PACKED]) + again.compress(bytes(payload)) + again.flush())


def test_a_damaged_base_flag_is_an_error():
    data = bytearray(_roundtrip(START + 60 * np.arange(40),
                                np.random.default_rng(1).integers(0, 10**12, 40).astype(np.float64)))
    assert data[0] == chunks.VERSION_BASED_RAW
    data[0] = chunks.VERSION_RAW  # the same payload read with the header of version 2: values less a base without one
    with pytest.raises(CorruptChunk, match="chunk"):
        chunks.decode(bytes(data))


# 10**e of e in [-300, 300), each the float nearest to it (parsed, not computed: numpy's power
# differs by an ulp between its AVX-512 and other kernels, and the windows must not depend on the CPU)
_POWERS_OF_TEN = np.array([float(f"1e{e}") for e in range(-300, 300)])


def _mixed_windows(seed: int, count: int) -> list[chunks.Points]:
    """Windows of every kind an encoder meets, mixed: lengths 0 to 1,440, full and with
    gaps, off the precision grid, NaN (payloads too), inf, -0.0, subnormals, huge and
    tiny floats, decimals of 0 to 6 places, about one odd value in eight (where the
    decimal mode's exception limit and its sampled first look decide), counters,
    constants, averages, with counts (small or wide) or not."""
    rng = np.random.default_rng(seed)
    specials = np.array([np.nan, -0.0, np.inf, -np.inf, np.uint64(0x7FF8DEADBEEF0001).view(np.float64),
                         5e-324, -5e-324, np.finfo(np.float64).max, 1e-300, -1e300])
    out = []
    for _ in range(count):
        n = int(rng.choice([0, 1, 2, 3, 17, 63, 64, 65, 100, 300, 719, 720, 720, 720, 1440]))
        precision = int(rng.choice([1, 10, 60, 60, 3600]))
        slots = np.sort(rng.choice(3 * n, n, replace=False)) if rng.random() < 0.4 and n else np.arange(n)
        ts = START + int(rng.integers(0, 100)) * precision + precision * slots.astype(np.int64)
        if rng.random() < 0.05 and n:
            ts = ts + int(rng.integers(1, precision + 1))  # off the grid
        if rng.random() < 0.03 and n:
            ts = 2**40 + ts
        kind = int(rng.integers(0, 10))
        if kind == 0:  # any float64 bits
            values = rng.integers(0, 2**64, n, dtype=np.uint64).view(np.float64)
        elif kind == 1:
            values = np.round(rng.uniform(-1e4, 1e4, n), int(rng.integers(0, 7)))
        elif kind == 2:  # a gauge wandering, two decimals
            values = np.round(50 + np.cumsum(rng.normal(0, 0.5, n)), 2)
        elif kind == 3:  # a counter
            values = (float(rng.integers(0, 2**40)) + np.cumsum(rng.integers(0, 1000, n))).astype(np.float64)
        elif kind == 4:
            values = rng.normal(0, 1, n) * _POWERS_OF_TEN[rng.integers(-300, 300, n) + 300]
        elif kind == 5:
            values = np.full(n, float(rng.choice([0.0, 3.0, -0.0, 1e-7, 12.5])))
        elif kind == 6:  # averages: no decimal
            values = np.round(rng.uniform(0, 100, n), 2) / 3
        elif kind == 7:  # decimals, about one value in eight odd
            values = np.round(rng.uniform(0, 1e3, n), int(rng.integers(0, 4)))
            odd = rng.random(n) < rng.uniform(0.08, 0.2)
            values[odd] = rng.random(int(odd.sum())) / 7
        elif kind == 8:
            values = rng.integers(-5, 6, n).astype(np.float64)
        else:  # big random integers: deflate saves nothing on short windows
            values = rng.integers(0, 10**12, n).astype(np.float64)
        values = values.copy()
        if n and rng.random() < 0.5:
            where = rng.random(n) < rng.choice([0.01, 0.1, 0.3, 1.0])
            values[where] = rng.choice(specials, int(where.sum()))
        counts = None
        if rng.random() < 0.4:
            counts = rng.choice([np.full(n, 1), rng.integers(1, 60, n), rng.integers(1, 2**40, n)]).astype(np.int64)
        out.append(chunks.Points(ts.astype(np.int64), values, counts))
    return out


# sha256 of the chunks (each as its length, 4 bytes little-endian, then its bytes) of
# _mixed_windows(2024, 600), as the encoder before encode_many (chunks.py at 48c3e62^) wrote them
# window by window; the same with numpy's AVX-512 kernels on and off (NPY_DISABLE_CPU_FEATURES).
_MIXED_DIGEST = "576a4aaba8253cbd5545033e59458d0add1ca0f46bfac80ebe693b41bac5e8fd"


def test_encode_many_gives_the_bytes_of_encode_and_of_the_encoder_before_it(monkeypatch):
    """encode_many encodes windows of one length together; each chunk is byte for byte the
    one encode gives alone, and the one the encoder before encode_many gave (the format
    did not change: stores written before read the same, bytes per point are the same),
    whatever the windows encoded with it and however they are cut into batches; every
    chunk decodes to its window bit for bit."""
    windows = _mixed_windows(2024, 600)
    assert {c is None for c in (w.counts for w in windows)} == {True, False}
    together = chunks.encode_many(windows)
    assert {blob[0] for blob in together} == set(chunks.VERSIONS)  # every kind of chunk is made
    digest = hashlib.sha256(b"".join(len(b).to_bytes(4, "little") + b for b in together)).hexdigest()
    assert digest == _MIXED_DIGEST
    assert together == [chunks.encode(w) for w in windows]
    assert chunks.encode_many(windows[::-1]) == together[::-1]
    monkeypatch.setattr(encoder, "_BATCH_POINTS", 1000)  # many batches, of a row or a few
    assert chunks.encode_many(windows) == together
    assert chunks.encode_many([]) == []
    index, ts, values, counts = chunks.decode_many(together)
    for i, window in enumerate(windows):
        mine = index == i
        np.testing.assert_array_equal(ts[mine], window.timestamps)
        np.testing.assert_array_equal(values[mine].view(np.uint64), window.values.view(np.uint64))
        np.testing.assert_array_equal(counts[mine], window.counts if window.counts is not None else 0)


def test_timestamps_a_chunk_cannot_hold_are_an_error_that_says_so():
    with pytest.raises(InvalidPoint, match="2\\*\\*32 - 1 s apart"):
        chunks.encode_many([chunks.Points(np.array([0, 2**33], np.int64), np.array([1.0, 2.0]))])
