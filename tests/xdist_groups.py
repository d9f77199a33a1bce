"""`--dist loadgroup` that works with pytest 9: tests marked `xdist_group(name)` run on one worker.

pytest-xdist 3.8 sends a group to one worker by appending `@name` to each test's node id on
the workers (`item._nodeid`), which pytest 9 no longer reads (node ids are built from
`item._id`): every test would be scheduled alone, and each worker would start its own real
Cassandra node. Here the workers write each marked test's group to a file the controller
named, and the controller's scheduler (LoadScopeScheduling, the base of xdist's own) reads
its work units from it. Test ids stay as they are.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

GROUPS_INPUT = "bgl_xdist_groups"  # workerinput key: the directory where workers write their groups


def _groups_dir(config) -> Path | None:
    directory = getattr(config, "_bgl_xdist_groups", None)
    if directory is None and config.getoption("dist", "no") == "loadgroup" and not hasattr(config, "workerinput"):
        directory = config._bgl_xdist_groups = Path(tempfile.mkdtemp(prefix="bgl-xdist-groups-"))
    return directory


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """Controller: tells each worker where to write its groups."""
    directory = _groups_dir(node.config)
    if directory is not None:
        node.workerinput[GROUPS_INPUT] = str(directory)


def record_groups(config, items) -> None:
    """Worker: writes {node id: group} for the tests marked xdist_group, before the controller schedules."""
    directory = getattr(config, "workerinput", {}).get(GROUPS_INPUT)
    if directory is None:
        return
    groups = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None:
            groups[item.nodeid] = str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    path = Path(directory, f"{config.workerinput['workerid']}.json")
    path.with_suffix(".tmp").write_text(json.dumps(groups))
    os.replace(path.with_suffix(".tmp"), path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Controller: a LoadScopeScheduling whose work units are the groups (one test per unit otherwise)."""
    directory = _groups_dir(config)
    if directory is None:
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                files = sorted(directory.glob("*.json"))
                if not files:
                    raise RuntimeError(f"no worker wrote its test groups into {directory}")
                self._groups = json.loads(files[0].read_text())
            group = self._groups.get(nodeid)
            return f"group:{group}" if group is not None else nodeid

    return GroupScheduling(config, log)


def pytest_unconfigure(config) -> None:
    directory = getattr(config, "_bgl_xdist_groups", None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
