"""Writing a batch the store refuses as a whole in halves.

A batch too big for the space left on a full disk (or one holding a point that makes the
store fail) is cut in two, in arrival order, and each half is written the same way, so
that as much as fits gets in, in order, and a failure that does not go away ends up
confined to a batch of at most `min_size` points. `bgl write -` (cli/points.py), the
receiver's flusher and carbon's plugin write through `write_halving`; what happens to a
smallest batch that still fails (give up, retry, drop) is theirs to say (`last`).
"""
from __future__ import annotations

from typing import Callable, Protocol, Self, TypeVar

MIN_BATCH = 1_000  # points: a failing batch is halved down to this many


class Halvable(Protocol):
    def __len__(self) -> int: ...

    def halves(self) -> tuple[Self, Self]: ...


B = TypeVar("B", bound=Halvable)


def write_halving(batch: B, write: Callable[[B], object], min_size: int = MIN_BATCH,
                  may_split: Callable[[Exception], bool] = lambda exc: True,
                  last: Callable[[B], object] | None = None,
                  on_split: Callable[[B, Exception], None] | None = None) -> None:
    """write(batch); if it raises an error `may_split` accepts and the batch holds more
    than `min_size` points, write its halves instead, the first one first, each the same
    way (`on_split` is told, to count and log). A batch of `min_size` points or fewer is
    written by `last` (default: write) alone; its errors, and those `may_split` refuses,
    go up (the halves not written yet are then not tried)."""
    if len(batch) <= min_size:
        (last or write)(batch)
        return
    try:
        write(batch)
        return
    except Exception as exc:
        if not may_split(exc):
            raise
        if on_split is not None:
            on_split(batch, exc)
    for half in batch.halves():
        write_halving(half, write, min_size, may_split, last, on_split)
