"""Charging a profiled receiver's CPU to its stages (bench/receiver_profile.py): each
function's own CPU time (cProfile's inline time) to the stage of its module, and the
time of functions of no stage (numpy, the standard library, builtins, shared helpers)
to their callers' stages, in proportion to the time each caller spent in them."""
from __future__ import annotations

from pathlib import Path

PROBE_STAGE = "self-metrics and counters file (the probe)"
STAGES_BY_BUILTIN = (("'commit' of 'sqlite3", "commit"), ("'recv' of '_socket", "socket reads"),
                     ("poll", "event loop"), ("select", "event loop"))
STAGES_BY_MODULE = (
    ("ingest/lines.py", "decode"), ("ingest/pickles.py", "decode"), ("ingest/unpickler.py", "decode"),
    ("receiver/framing.py", "decode"), ("ingest/points.py", "checks (finite, time range)"),
    ("biggraphite_like/point_check.py", "checks (finite, time range)"),
    ("ingest/buffer.py:take", "grouping (buffer.take)"), ("ingest/buffer.py", "name lookup (buffer.add)"),
    ("biggraphite_like/names.py:normalize", "name lookup (buffer.add)"), ("biggraphite_like/names.py", None),
    ("receiver/listeners.py", "event loop"), ("receiver/stats.py", PROBE_STAGE),
    ("biggraphite_like/counters.py", PROBE_STAGE), ("maintenance/metrics_file.py", PROBE_STAGE),
    ("receiver/flusher.py", "flusher and batch writer"), ("ingest/batch_writer.py", "flusher and batch writer"),
    ("ingest/policy.py", "flusher and batch writer"), ("ingest/refusal_log.py", "decode"),
    ("accessor.py:insert_columns", "accessor: checks, grouping"),
    ("accessor.py:_insert_valid", "accessor: checks, grouping"), ("accessor.py:_write_batch", "accessor: checks, grouping"),
    ("biggraphite_like/batch_parts.py", "accessor: checks, grouping"),
    ("accessor.py:_with_points_to_keep", "metric creation"), ("accessor.py:_create", "metric creation"),
    ("accessor.py:_check_ancestors", "metric creation"), ("accessor.py:create", "metric creation"),
    ("receiver/rules.py", "metric creation"), ("biggraphite_like/metric.py", None),
    ("accessor.py:touch", "touch (updated_on)"), ("accessor.py:_due", "touch (updated_on)"),
    ("accessor.py:_undue", "touch (updated_on)"),
    ("accessor.py", "metadata lookup"), ("metric_cache.py", "metadata lookup"),
    ("biggraphite_like/downsampling.py", "downsampling"), ("biggraphite_like/open_intervals.py", "downsampling"),
    ("biggraphite_like/aggregation.py", "downsampling"), ("biggraphite_like/retention.py", "downsampling"),
    ("biggraphite_like/chunks/", "downsampling"),
    ("stores/sqlite/points.py", "store write: points"), ("stores/sqlite/windows.py", "store write: points"),
    ("stores/sqlite/metadata.py", "store write: names and metadata"),
    ("stores/sqlite/name_strings.py", "store write: names and metadata"),
    ("stores/sqlite/name_tree.py", "store write: names and metadata"),
    ("stores/sqlite/tags.py", "store write: names and metadata"),
    ("stores/sqlite/checkpointer.py", "WAL checkpoints"),
    ("stores/sqlite/connection.py:write_batch", "commit"), ("stores/sqlite/free_pages.py", "commit"),
    ("stores/sqlite/", "store: transactions and the rest"), ("stores/", "store: transactions and the rest"),
    ("biggraphite_like/", "other (project)"),
)


def _stage_of(key: str) -> str | None:
    """A function's own stage, or None when its time goes to its callers' (helpers shared
    by several stages, as Metric's properties, are marked None in STAGES_BY_MODULE)."""
    if "/" not in key:  # a builtin: `<method 'x' of 'y' objects>`, `<built-in method ...>`
        return next((stage for marker, stage in STAGES_BY_BUILTIN if marker in key), None)
    path, _, rest = key.rpartition(":")
    name = rest[rest.find("(") + 1:-1]
    if "/biggraphite_like/" not in path:
        return None
    where = path[path.rfind("/biggraphite_like/") + 1:]
    for marker, stage in STAGES_BY_MODULE:
        module, _, function = marker.partition(":")
        if module in where and (not function or name == function):
            return stage
    return "other (project)"


def stages(report: dict, before: dict | None) -> dict[str, float]:
    """CPU seconds a stage over the window between two profile reports: each function's own
    time to its stage; a function of no stage (numpy, the standard library, builtins)
    shares its own time among its callers in proportion to the time each spent in it."""
    functions = _difference(report["functions"], (before or {}).get("functions", {}))
    callers: dict[str, dict[str, float]] = {}
    for caller, calls in report["callees"].items():
        for callee, spent in calls.items():
            earlier = (before or {}).get("callees", {}).get(caller, {}).get(callee, 0.0)
            if spent - earlier > 0:
                callers.setdefault(callee, {})[caller] = spent - earlier
    memo: dict[str, dict[str, float]] = {}

    def shares(key: str, visiting: frozenset) -> dict[str, float]:
        if key in memo:
            return memo[key]
        stage = _stage_of(key)
        if stage is not None:
            return {stage: 1.0}
        parents = {p: t for p, t in callers.get(key, {}).items() if p not in visiting}
        total = sum(parents.values())
        if not total:
            return {"other (outside the project)": 1.0}
        result: dict[str, float] = {}
        for parent, spent in parents.items():
            for stage, part in shares(parent, visiting | {key}).items():
                result[stage] = result.get(stage, 0.0) + part * spent / total
        memo[key] = result
        return result

    totals: dict[str, float] = {}
    for key, (_, own, _) in functions.items():
        for stage, part in shares(key, frozenset()).items():
            totals[stage] = totals.get(stage, 0.0) + own * part
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def _difference(now: dict[str, list], before: dict[str, list]) -> dict[str, list]:
    diff = {}
    for key, (calls, own, total) in now.items():
        b = before.get(key, (0, 0.0, 0.0))
        if own - b[1] > 0:
            diff[key] = [calls - b[0], own - b[1], total - b[2]]
    return diff


def top_functions(report: dict, before: dict | None, count: int = 12) -> list[tuple[str, int, float]]:
    functions = _difference(report["functions"], (before or {}).get("functions", {}))
    ranked = sorted(functions.items(), key=lambda item: -item[1][1])[:count]
    return [(key.replace(str(Path(__file__).resolve().parent.parent) + "/", ""), calls, own)
            for key, (calls, own, _) in ranked]
