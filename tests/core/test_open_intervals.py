"""The downsampler's open-interval memory (biggraphite_like/open_intervals.py) against a
plain model of its rules, and its bound. The whisper differential tests check that the
downsampler stays exact with it; these check the memory itself, operation by operation."""
from __future__ import annotations

import random

import numpy as np

from biggraphite_like.open_intervals import OpenIntervals


class Model:
    """The rules, one dict entry per (table, metric): the latest interval's start and row."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], tuple[int, np.ndarray]] = {}

    def lookup(self, table, names, starts, grid, alone):
        hit = np.zeros(len(names), dtype=bool)
        for row in np.flatnonzero(alone).tolist():
            entry = self.entries.get((table, names[row]))
            if entry is not None and entry[0] == starts[row]:
                grid[row] = entry[1]
                hit[row] = True
        return hit

    def remember(self, table, names, starts, grid, alone):
        for row, name in enumerate(names):
            key = (table, name)
            entry = self.entries.get(key)
            if not alone[row] or (entry is not None and entry[0] > starts[row]):
                self.entries.pop(key, None)
            else:
                self.entries[key] = (int(starts[row]), grid[row].copy())


def _batch(rng: random.Random, names: list[str], width: int):
    """Rows sorted by metric, some metrics with two intervals, sparse rows of exact values."""
    rows = []
    for name in rng.sample(names, rng.randint(1, len(names))):
        for start in sorted(rng.sample(range(0, 3 * width, width), rng.choice([1, 1, 1, 2]))):
            rows.append((name, start))
    rows.sort()
    picked = [name for name, _ in rows]
    starts = np.array([start for _, start in rows], dtype=np.int64)
    alone = np.array([picked.count(name) == 1 for name in picked])
    grid = np.full((len(rows), width), np.nan)
    for row in range(len(rows)):
        for column in rng.sample(range(width), rng.randint(0, width)):
            grid[row, column] = rng.choice([0.0, -0.0, 1e300, -2.5, rng.uniform(-1e9, 1e9), 5e-324])
    return picked, starts, grid, alone


def test_lookups_answer_what_the_rules_remember():
    rng = random.Random(21)
    ours, model = OpenIntervals(max_entries=10_000), Model()
    names = [f"m.{i}" for i in range(40)]
    hits = 0
    for step in range(400):
        table, width = rng.choice([("t60", 60), ("t10", 6), ("t1", 1)])
        picked, starts, grid, alone = _batch(rng, names, width)
        mine, theirs = np.full_like(grid, np.nan), np.full_like(grid, np.nan)
        found = ours.lookup(table, picked, starts, mine, alone)
        expected = model.lookup(table, picked, starts, theirs, alone)
        assert (found == expected).all(), step
        # bit for bit, -0.0 and NaN included
        assert (mine.view(np.int64) == theirs.view(np.int64)).all(), step
        hits += int(found.sum())
        ours.remember(table, picked, starts, grid, alone)
        model.remember(table, picked, starts, grid, alone)
        assert len(ours) == len(model.entries), step
        if step % 97 == 96:
            ours.clear()
            model.entries.clear()
    assert hits > 700  # the memory answered, not only missed


def test_the_least_recently_written_are_forgotten_past_the_bound():
    memory = OpenIntervals(max_entries=100)
    width = 60
    for batch in range(12):  # 10 new metrics a batch, one point each
        names = [f"m.{batch}.{i}" for i in range(10)]
        grid = np.full((10, width), np.nan)
        grid[:, batch] = np.arange(10) + batch * 10.0
        memory.remember("t", names, np.zeros(10, np.int64), grid, np.ones(10, dtype=bool))
        memory.remember("t", [f"m.0.{i}" for i in range(10)][:1], np.zeros(1, np.int64), grid[:1], np.ones(1, bool))
    assert len(memory) <= 100
    grid = np.full((3, width), np.nan)
    found = memory.lookup("t", ["m.0.0", "m.1.0", "m.11.9"], np.zeros(3, np.int64), grid, np.ones(3, dtype=bool))
    # m.0.0 was written again in every batch, m.1.0 not since the second: it went first
    assert found.tolist() == [True, False, True]
    assert grid[2, 11] == 119.0 and np.isnan(grid[2]).sum() == width - 1
    assert grid[0, 11] == 110.0  # m.0.0's latest row: the one of the last batch


def test_points_cost_memory_not_rows():
    """100,000 metrics with 5 points each in a 60-slot interval: a few MiB (one NumPy row
    and two tuples a metric took about 70 MiB)."""
    memory = OpenIntervals()
    count, width = 100_000, 60
    names = [f"young.m{i}" for i in range(count)]
    grid = np.full((count, width), np.nan)
    grid[:, :5] = 1.5
    memory.remember("t", names, np.full(count, 3600, np.int64), grid, np.ones(count, dtype=bool))
    table = memory._tables["t"]
    arrays = sum(a.nbytes for a in (table.start, table.offset, table.count, table.used, table.values, table.columns))
    assert len(memory) == count
    assert arrays < 12 * count * 5 + 40 * count * 3 // 2 + 100_000, arrays


def test_the_pool_stays_near_its_live_points_as_every_metric_is_written_again():
    """The receiver's existing round: every metric's interval written again with more
    points, 10 parts of a batch one after the other. The pool's arrays stay within a
    quarter of its live points (plus a page's slack): growing by 1.5x and compacting only
    past a third dead held 1.7x (the points of the peer bench's flush, 17 MiB for 10)."""
    memory = OpenIntervals()
    count, width, parts = 20_000, 60, 10
    names = [f"bench.m{i}" for i in range(count)]
    for points in (5, 10):
        grid = np.full((count // parts, width), np.nan)
        grid[:, :points] = np.arange(points, dtype=np.float64)
        for part in range(parts):
            chunk = names[part * count // parts:(part + 1) * count // parts]
            memory.remember("t", chunk, np.full(len(chunk), 3600, np.int64), grid, np.ones(len(chunk), dtype=bool))
    table = memory._tables["t"]
    assert table.live == count * 10
    assert len(table.values) <= table.live * 5 // 4 + 4096, (len(table.values), table.live)
    asked = names[::997]
    grid = np.full((len(asked), width), np.nan)
    assert memory.lookup("t", asked, np.full(len(asked), 3600, np.int64), grid, np.ones(len(asked), dtype=bool)).all()
    assert (grid[:, :10] == np.arange(10.0)).all() and np.isnan(grid[:, 10:]).all()


def test_points_appended_after_the_held_ones_are_what_remember_of_the_grid_would_keep():
    """extend() (the downsampler's steady state: one interval a metric, new points after
    the held ones, no grid) against the model's remember() of the grid those points make;
    where it does not apply (an interval not held, a point at or before a held one) it
    changes nothing and says so."""
    rng = random.Random(32)
    ours, model = OpenIntervals(max_entries=10_000), Model()
    names = [f"m.{i}" for i in range(30)]
    appended = refused = 0
    for step in range(600):
        table, width = rng.choice([("t60", 60), ("t10", 6)])
        if rng.random() < 0.3:  # a grid written the usual way
            picked, starts, grid, alone = _batch(rng, names, width)
            ours.remember(table, picked, starts, grid, alone)
            model.remember(table, picked, starts, grid, alone)
            continue
        kept = [name for name in names if (table, name) in model.entries]
        pool = kept if len(kept) >= 4 and rng.random() < 0.9 else names  # mostly metrics memory holds
        picked = sorted(rng.sample(pool, rng.randint(1, 4)))
        entries = [model.entries.get((table, name)) for name in picked]  # mostly the held interval, after its points
        starts = np.array([e[0] if e and rng.random() < 0.95 else rng.choice([0, width, 2 * width]) for e in entries],
                          dtype=np.int64)
        rows, columns, values = [], [], []
        for row, entry in enumerate(entries):
            count = rng.randint(0, 3)
            held_columns = np.flatnonzero(~np.isnan(entry[1])) if entry else []
            after = int(held_columns[-1]) + 1 if len(held_columns) else 0
            first = min(width - 1, after) if rng.random() < 0.97 else rng.randint(0, width - 1)
            for column in sorted(rng.sample(range(first, width), min(count, width - first))):
                rows.append(row)
                columns.append(column)
                values.append(rng.choice([0.0, -0.0, 1e300, rng.uniform(-1e9, 1e9), 5e-324]) if rng.random() > 0.01
                              else float("nan"))  # an aggregate of infinities: no point, the grid path's
        rows, columns, values = np.array(rows, np.int64), np.array(columns, np.int64), np.array(values)
        before = np.full((len(picked), width), np.nan)
        held = model.lookup(table, picked, starts, before, np.ones(len(picked), dtype=bool))
        last = [max([c for c in range(width) if not np.isnan(before[r, c])], default=-1) for r in range(len(picked))]
        applies = held.all() and all(columns[k] > last[rows[k]] for k in range(len(rows))) \
            and not np.isnan(values).any()
        totals = ours.extend(table, ours.slots(table, picked), starts, width, rows, columns, values)
        assert (totals is not None) == applies, step
        if applies:
            grid = before.copy()
            grid[rows, columns] = values
            model.remember(table, picked, starts, grid, np.ones(len(picked), dtype=bool))
            assert totals.tolist() == (~np.isnan(grid)).sum(axis=1).tolist(), step
            appended += 1
        else:
            refused += 1
        mine, theirs = np.full((len(picked), width), np.nan), np.full((len(picked), width), np.nan)
        every = np.ones(len(picked), dtype=bool)
        assert (ours.lookup(table, picked, starts, mine, every) == model.lookup(table, picked, starts, theirs, every)).all()
        assert (mine.view(np.int64) == theirs.view(np.int64)).all(), step
        assert len(ours) == len(model.entries), step
    assert appended > 80 and refused > 80, (appended, refused)
