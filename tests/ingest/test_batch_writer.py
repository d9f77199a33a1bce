"""batch_writer.BatchWriter without a store: what it drops, keeps and retries, for a writer
whose insert fails on one point for good (a bug), or on everything until a moment (a full
disk). The real stores under it: tests/receiver/test_hostile_full_disk.py."""
from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np

from biggraphite_like.ingest.batch_writer import BatchWriter
from biggraphite_like.errors import StoreFull, StoreLocked
from biggraphite_like.ingest.buffer import Batch


@dataclasses.dataclass
class Policy:
    retries: int = 2
    retry_delay: float = 0.01
    retry_max_delay: float = 0.05


class Recorder(BatchWriter[Batch]):
    """Stores values in `stored`; fails with `error` on any batch holding a value in `poison`,
    or with StoreFull while `full` is set."""

    def __init__(self, stopping: threading.Event, poison: set[float] = frozenset(), full: threading.Event | None = None,
                 locked: threading.Event | None = None):
        super().__init__(Policy(), stopping)
        self.poison, self.full, self.locked = poison, full, locked
        self.sizes: list[int] = []  # of every batch insert was called with
        self.stored: list[float] = []
        self.dropped_points = 0
        self.failures: list[str] = []

    def insert(self, batch: Batch) -> None:
        self.sizes.append(len(batch))
        if self.locked is not None and self.locked.is_set():
            raise StoreLocked("database is locked")
        if self.full is not None and self.full.is_set():
            raise StoreFull("the disk is full")
        if self.poison & set(batch.values.tolist()):
            raise ValueError("a bug")
        self.stored.extend(batch.values.tolist())

    def failed(self, batch: Batch, exc: Exception, how: str, then: str) -> None:
        self.failures.append(how)

    def dropped(self, points: int, batch: Batch, exc: BaseException | None) -> None:
        self.dropped_points += points


def batch(count: int) -> Batch:
    names = [f"m{i}" for i in range(count // 2)]
    owner = np.arange(count) % len(names)
    return Batch(names, owner, np.full(count, 60.0), np.arange(count, dtype=np.float64), np.arange(len(names)))


def test_a_point_that_fails_for_good_costs_only_its_smallest_batch():
    writer = Recorder(threading.Event(), poison={12_345.0})
    writer.write(batch(100_000))
    assert writer.dropped_points <= 1000 and len(writer.stored) + writer.dropped_points == 100_000
    assert 12_345.0 not in writer.stored
    assert writer.stored == sorted(writer.stored)  # in arrival order
    assert writer.failures.count("attempt 3") == 1  # the smallest batch, retried twice, then dropped


def test_a_full_disk_is_retried_until_it_passes_and_nothing_is_dropped():
    full = threading.Event()
    full.set()
    writer = Recorder(threading.Event(), full=full)
    threading.Timer(0.5, full.clear).start()
    started = time.monotonic()
    writer.write(batch(4000))
    assert time.monotonic() - started >= 0.5
    assert writer.dropped_points == 0 and writer.stored == list(range(4000))
    assert len(writer.failures) > writer.policy.retries + 1  # past the retries: it can recover


def test_stopping_on_a_full_disk_drops_the_rest_after_the_retries_and_counts_it():
    stopping, full = threading.Event(), threading.Event()
    stopping.set()
    full.set()
    writer = Recorder(stopping, full=full)
    writer.write(batch(4000))
    assert writer.dropped_points == 4000 and writer.giving_up
    writer.write(batch(10))  # then one attempt a batch
    assert writer.dropped_points == 4010 and writer.failures[-1] == "one attempt"


def test_a_store_locked_by_another_writer_is_retried_whole_not_halved():
    """Each half would wait the lock's timeout again: the batch waits whole, and gets in whole."""
    locked = threading.Event()
    locked.set()
    writer = Recorder(threading.Event(), locked=locked)
    threading.Timer(0.3, locked.clear).start()
    writer.write(batch(100_000))
    assert writer.dropped_points == 0 and writer.stored == list(range(100_000))
    assert set(writer.sizes) == {100_000} and len(writer.sizes) > writer.policy.retries + 1
