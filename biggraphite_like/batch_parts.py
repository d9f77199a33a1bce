"""A batch of points as columns (point i belongs to names[owner[i]]) cut into parts by a
group per name, each metric's points together and in arrival order: the one way a batch
is cut (the accessor's writes of many metrics, the carbon plugin's store calls)."""
from __future__ import annotations

import dataclasses
from typing import Iterator, Sequence

import numpy as np

_SCANNED_GROUPS = 64  # groups in the names' order up to which each part's points are found by a scan


@dataclasses.dataclass
class BatchPart:
    """One part of a cut batch: names[i] for i in `names` (indices into the batch's names,
    in order), its points' indices in the batch (`points`, in arrival order) and their owner
    within the part (`owner[k]`: the index in `names` of point k's name)."""

    names: np.ndarray
    points: np.ndarray
    owner: np.ndarray

    def names_of(self, every: Sequence) -> list:
        """This part's items of a list aligned with the batch's names (its names, their metadata)."""
        return [every[i] for i in self.names.tolist()]


def cut_by_group(owner: np.ndarray, group_of_name: np.ndarray) -> Iterator[BatchPart]:
    """A batch (point i belongs to name owner[i]) cut into one part per group of names
    (group_of_name[j]: the group of name j), in increasing group order; groups without a
    point are left out. Each metric's points stay together and in arrival order. The one
    way a batch is cut: `insert_columns` (max_metrics_per_write metrics a part), the carbon
    plugin's flusher (about BG_FLUSH_SIZE points a call, metrics without metadata apart)."""
    group_of_name = np.asarray(group_of_name, np.int64)
    count = len(group_of_name)
    if count and not (group_of_name[1:] < group_of_name[:-1]).any() \
            and group_of_name[-1] - group_of_name[0] < _SCANNED_GROUPS:
        yield from _cut_in_name_order(owner, group_of_name)
        return
    name_order = np.argsort(group_of_name, kind="stable")
    groups, name_starts = np.unique(group_of_name[name_order], return_index=True)
    name_bounds = np.append(name_starts, count)
    local = np.empty(count, np.int64)  # a name's index within its group
    local[name_order] = np.arange(count) - np.repeat(name_starts, np.diff(name_bounds))
    group_of_point = group_of_name[owner]
    point_order = np.argsort(group_of_point, kind="stable")
    point_bounds = np.searchsorted(group_of_point[point_order], groups).tolist() + [len(owner)]
    name_bounds = name_bounds.tolist()
    for index in range(len(groups)):
        points = point_order[point_bounds[index]:point_bounds[index + 1]]
        if len(points):
            yield BatchPart(name_order[name_bounds[index]:name_bounds[index + 1]], points, local[owner[points]])


def _cut_in_name_order(owner: np.ndarray, group_of_name: np.ndarray) -> Iterator[BatchPart]:
    """cut_by_group when the groups follow the names' order and are few (insert_columns'
    parts of max_metrics_per_write names): each part's points found by one pass over `owner`, no
    sort of the batch's points (whose order and group arrays, a few integers a point, were
    most of a receiver flush's transient memory besides the points themselves)."""
    _, name_starts = np.unique(group_of_name, return_index=True)
    name_bounds = np.append(name_starts, len(group_of_name)).tolist()
    for first, end in zip(name_bounds[:-1], name_bounds[1:]):
        points = np.flatnonzero((owner >= first) & (owner < end))
        if len(points):
            yield BatchPart(np.arange(first, end), points, owner[points] - first)
