"""The delta order of each window's integers: the one whose byte planes cost fewest bits."""
from __future__ import annotations

import numpy as np

from biggraphite_like.chunks.decimals import MAX_EXACT
from biggraphite_like.chunks.planes import zigzag

_LOG2 = np.log2(np.arange(1, (1 << 16) + 1, dtype=np.float64))  # log2(z + 1) of z < 1 << 16


def steps(offsets: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """offsets (k, n) // unit (k,): each row's offsets are multiples of its unit, so below
    2**53 a float division is exact, and several times faster than numpy's integer one."""
    if offsets.size and offsets.max() < MAX_EXACT and offsets.min() >= 0:
        return (offsets / unit[:, None].astype(np.float64)).astype(np.int64)
    return offsets // unit[:, None]


def _delta(x: np.ndarray) -> np.ndarray:
    """x[:, i] - x[:, i - 1], x[:, 0] first (np.diff with a 0 prepended, without its overhead)."""
    out = x.copy()
    out[:, 1:] -= x[:, :-1]
    return out


def pack_rows(x: np.ndarray, orders: tuple[int, ...], based: bool = False
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(order, based, base, z) of each row of int64 x (k, n): among the delta orders in
    `orders`, the one of the fewest significant bits in all (a cheap estimate of what the
    planes deflate to; an outlier, as the first delta of a counter, costs its own bits
    only), ties to the smaller sum, then to the lower order; z (k, n), the row's deltas of
    that order zigzagged, or when `based` and they are never negative, less their
    minimum (base; based True). A row all zero (a full window's timestamps) tries no
    other order: nothing beats it."""
    k, n = x.shape
    rows = np.arange(k)
    best: list = []  # order, based, base, z, bits: each row's best so far
    work = np.empty((k, n), np.int64)  # reused (every fresh array of a batch costs page faults)
    deltas = x
    for order in range(max(orders) + 1):
        if order:
            deltas = _delta(deltas)
        if order not in orders:
            continue
        low = deltas.min(axis=1) if n else np.zeros(len(rows), np.int64)
        is_based = low >= 0 if based else np.zeros(len(rows), bool)
        spare = work[:len(rows)]
        if is_based.all():
            z = (deltas - low[:, None]).view(np.uint64)
        else:
            z = zigzag(deltas, spare)
            if is_based.any():
                z[is_based] = (deltas[is_based] - low[is_based, None]).view(np.uint64)
        new = (np.full(len(rows), order), is_based, low, z, _bits(z, spare.view(np.float64)))
        if not best:
            best = list(new)
        else:
            held = best[4][rows]
            better = new[4] < held
            tie = np.flatnonzero(new[4] == held)
            if len(tie):  # the sums only where they decide
                better[tie] = z[tie].sum(axis=1, dtype=np.float64) < best[3][rows[tie]].sum(axis=1, dtype=np.float64)
            if better.all() and len(rows) == k:
                best = list(new)
            elif better.any():
                for kept, value in zip(best, new):
                    kept[rows[better]] = value[better]
        alive = best[4][rows] > 0
        if not alive.all():
            rows, deltas = rows[alive], deltas[alive]
            if not len(rows):
                break
    order, is_based, base, z, _ = best
    return order, is_based, np.where(is_based, base, 0), z


def _bits(z: np.ndarray, work: np.ndarray) -> np.ndarray:
    """The sum of log2(z + 1) over each row of uint64 z (k, n), log2 looked up in a table
    for z below its size (a lookup costs an eighth of a log2): the same float64 each.
    work: a float64 array of z's shape for the terms."""
    top = len(_LOG2) - 1
    if not z.size or z.max() <= top:
        return np.take(_LOG2, z.view(np.int64), out=work, mode="clip").sum(axis=1)
    each = np.take(_LOG2, np.minimum(z, top).view(np.int64), out=work, mode="clip")
    large = z > top
    each[large] = np.log2(z[large].astype(np.float64) + 1.0)
    return each.sum(axis=1)
