"""carbon's pickle protocol (carbon-relay and carbon-aggregator send it): frames of a
4-byte big-endian length and a pickled list of `(name, (timestamp, value))`.

Unpickling is restricted as carbon's SafeUnpickler restricts it: no global may be loaded
except `copy_reg._reconstructor` and `__builtin__.object` (what carbon allows), so a
pickle that would import or call anything else is refused before it runs.
"""
from __future__ import annotations

import copyreg
import io
import pickle

import numpy as np

from biggraphite_like.receiver.points import Points, Refusals

# carbon.util.SafeUnpickler.PICKLE_SAFE: module -> names a pickle may load
PICKLE_SAFE = {"copy_reg": {"_reconstructor"}, "__builtin__": {"object"}}
_SAFE_OBJECTS = {("copy_reg", "_reconstructor"): copyreg._reconstructor, ("__builtin__", "object"): object}


class SafeUnpickler(pickle.Unpickler):
    """pickle.Unpickler that refuses every global outside PICKLE_SAFE."""

    def find_class(self, module: str, name: str):  # noqa: D102 - pickle's hook
        if module not in PICKLE_SAFE:
            raise pickle.UnpicklingError(f"Attempting to unpickle unsafe module {module}")
        if name not in PICKLE_SAFE[module]:
            raise pickle.UnpicklingError(f"Attempting to unpickle unsafe class {name}")
        return _SAFE_OBJECTS[(module, name)]


def safe_loads(data: bytes) -> object:
    """Unpickle data with SafeUnpickler (what carbon's receivers and CarbonLink accept)."""
    return SafeUnpickler(io.BytesIO(data), encoding="utf-8").load()


def decode_pickle(frame: bytes, refusals: Refusals) -> Points:
    """The points of one pickle frame; an unsafe or malformed pickle is refused whole, a
    malformed point alone."""
    try:
        message = safe_loads(frame)
    except Exception as exc:  # any exception a hostile pickle can raise: refused, not fatal
        refusals.add(f"invalid pickle ({type(exc).__name__}: {exc})", frame[:100])
        return Points.empty()
    if not isinstance(message, (list, tuple)):
        refusals.add("a pickle message must be a list of (name, (timestamp, value))", message)
        return Points.empty()
    try:  # the common case in bulk: well-formed (str, (number, number)) items
        names = [item[0] for item in message]
        pairs = np.array([item[1] for item in message], dtype=np.float64)
        if pairs.shape != (len(message), 2) or not all(type(n) is str for n in names):
            raise ValueError("not uniform")
        return Points(names, pairs[:, 0].copy(), pairs[:, 1].copy())
    except (TypeError, ValueError, IndexError, KeyError):
        return _decode_item_by_item(message, refusals)


def _decode_item_by_item(message, refusals: Refusals) -> Points:
    names, timestamps, values = [], [], []
    for item in message:
        try:
            name, (timestamp, value) = item
            timestamp, value = float(timestamp), float(value)
        except (TypeError, ValueError):
            refusals.add("expected (name, (timestamp, value))", item)
            continue
        if isinstance(name, bytes):
            try:
                name = name.decode("utf-8")
            except UnicodeDecodeError:
                refusals.add("name is not UTF-8", item)
                continue
        if not isinstance(name, str):
            refusals.add("name is not a string", item)
            continue
        names.append(name)
        timestamps.append(timestamp)
        values.append(value)
    return Points(names, np.array(timestamps, dtype=np.float64), np.array(values, dtype=np.float64))
