"""The DECIMAL value mode's choice: the exponent e of each window whose values are m / 10**e
exactly (but a few exceptions), and the integers m."""
from __future__ import annotations

import numpy as np

_MAX_EXPONENT = 15
MAX_EXACT = 2.0**53  # |m| below this: m is an exact float64
_EXCEPTION_SHARE = 8  # DECIMAL is kept while fewer than 1 value in this many is an exception
_SCALES = np.array([10.0**e for e in range(_MAX_EXPONENT + 1)])[:, None, None]  # 10**e of every exponent


def _exact(values: np.ndarray, e: int | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(m, ok): rint(values * 10**e), and where m / 10**e gives the value back bit for bit
    (e an array: the scales 10**e themselves, broadcast against values)."""
    scale = 10.0**e if isinstance(e, int) else e
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.multiply(values, scale)
        np.rint(m, out=m)
        back = np.abs(m)
        ok = back < MAX_EXACT
        np.divide(m, scale, out=back)  # in place: every fresh array of a batch costs page faults
        ok &= back.view(np.uint64) == values.view(np.uint64)
        return m, ok


def decimal_parts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(e, m, regular) of k windows' values (k, n): e, the smallest exponent for which
    all values of a row but a few are m / 10**e exactly (-1: none does; NaN, inf and -0.0
    are always exceptions and do not count against the few); for the rows of an
    exponent, in order, m (int64, an exception repeats the value before it, or the first
    regular one: it costs no delta) and where its values are not exceptions (bool)."""
    k, n = values.shape
    special = ~np.isfinite(values) | ((values == 0) & np.signbit(values))
    n_special = special.sum(axis=1)
    regular = n - n_special
    limit = regular // _EXCEPTION_SHARE
    # a cheap first look at each exponent for rows of over 64 regular values, all exponents at once:
    # skip[e, row], more than one in eight of a sample of ~32 of its regular values is no m / 10**e
    skip = np.zeros((_MAX_EXPONENT + 1, k), bool)
    for count in sorted({c for c in regular.tolist() if c > 64}):
        rows = np.flatnonzero(regular == count)
        stride = max(1, count // 32)
        if count == n:
            sample = values[rows, ::stride]
        else:  # the regular values' positions in order (a stable sort puts them first), every stride-th
            where = np.argsort(special[rows], axis=1, kind="stable")[:, :count:stride]
            sample = np.take_along_axis(values[rows], where, axis=1)
        misses = (~_exact(sample[None], _SCALES)[1]).sum(axis=2)
        skip[:, rows] = misses > sample.shape[1] // _EXCEPTION_SHARE
    exponent = np.full(k, -1, np.int64)
    m_all, ok_all = np.zeros((k, n)), np.zeros((k, n), bool)
    odd = bool(n_special.any())
    for e in range(_MAX_EXPONENT + 1):
        pending = exponent < 0
        rows = np.flatnonzero(pending & ~skip[e])
        if not len(rows):
            if not pending.any():
                break
            continue
        whole = len(rows) == k
        m, ok = _exact(values if whole else values[rows], e)
        if odd:
            ok &= ~special[rows]
        accept = n - ok.sum(axis=1) - n_special[rows] <= limit[rows]
        if whole and accept.all():  # every window at once (no copy)
            exponent[:], m_all, ok_all = e, m, ok
            break
        rows = rows[accept]
        exponent[rows], m_all[rows], ok_all[rows] = e, m[accept], ok[accept]
    decimal = exponent >= 0
    m, ok = (m_all, ok_all) if decimal.all() else (m_all[decimal], ok_all[decimal])
    if not ok.all():  # exceptions repeat their neighbour: the value before, or the first regular one
        at = np.where(ok, np.arange(n), -1)
        np.maximum.accumulate(at, axis=1, out=at)
        at = np.where(at >= 0, at, np.argmax(ok, axis=1)[:, None])
        m = np.take_along_axis(m, at, axis=1)
        m[~ok.any(axis=1)] = 0
    return exponent, m.astype(np.int64), ok
