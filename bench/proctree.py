"""A process and all its descendants, read from /proc: CPU seconds and peak memory.

Used by the benchmarks to charge a system for everything it started: `bgl run` (carbon-cache,
its writer process, gunicorn and its workers) or a single VictoriaMetrics process.
"""
from __future__ import annotations

import os
from pathlib import Path


def _parents() -> dict[int, int]:
    """{pid: parent pid} of every live process."""
    parents = {}
    for stat_path in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_path.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat_path.parent.name)] = int(fields[1])
    return parents


def tree(pid: int) -> list[int]:
    """The process and its live descendants, at any depth."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def cpu_seconds(pid: int) -> float:
    """utime + stime (every thread) of the process and its live descendants. Descendants that
    already exited are not counted: sample while the system runs."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for member in tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def peak_rss(pid: int) -> int:
    """Sum of the peak resident bytes (VmHWM) of the process and its live descendants (pages
    shared after a fork count once per process)."""
    total = 0
    for member in tree(pid):
        try:
            lines = Path(f"/proc/{member}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("VmHWM:"):
                total += int(line.split()[1]) * 1024
    return total
