"""Cardinality: what N new names cost each system, as a user creates them (one plaintext
point a name, sent to `bgl run`'s receiver and to VictoriaMetrics).

* time and CPU until every name is readable, and until idle (bench/peer/probes.py: each
  system's own CPU, its idle-measured probe cost taken off);
* bytes on disk per name: the store less its points (ours: bgl.db + WAL after a checkpoint,
  less the datapoints tables; VictoriaMetrics: every file less its `data` directory, the
  points, once merged), over the names;
* peak RSS of the receiving process (our receiver; VictoriaMetrics' one process) after the
  names are created, and of one graphite-web worker (the largest) once they were found.
"""
from __future__ import annotations

import functools
import time

from bench.peer import probes
from bench.peer.common import Systems, log, ours_disk_bytes, ours_disk_parts
from tests.carbon_env import send_to_carbon


def create_names(systems: Systems, names: list[str], timeout: float, idle_seconds: float,
                 idle_timeout: float) -> dict:
    """Send one point a name to each system in turn; each one's load figures."""
    ts = int(time.time()) - 60
    payload = "".join(f"{name} 1 {ts}\n" for name in names).encode()
    figures = {}
    for side in ("ours", "vm"):
        probe = systems.probe(side)
        idle = probes.measure_idle(systems.pid(side), probe, idle_seconds)
        log(f"peer names: {len(names):,} new names into {side}")
        send = functools.partial(send_to_carbon, systems.port(side), payload)
        figures[side] = probes.load(systems.pid(side), send, probe, len(names), idle, timeout, idle_timeout)
        log(f"  readable after {figures[side]['readable_seconds']:.1f} s, {figures[side]['cpu_readable']:.2f} CPU-s;"
            f" idle after {figures[side]['idle_seconds']:.1f} s, {figures[side]['cpu_idle']:.2f} CPU-s")
    held = systems.vm.series_count()
    if held < len(names):
        raise probes.LoadTimeout(f"VictoriaMetrics holds {held:,} of {len(names):,} names once readable")
    return figures


def name_bytes(systems: Systems, names: int) -> dict:
    """Bytes on disk per name on each side: the store less its points."""
    ours_total = ours_disk_bytes(systems.ours)
    ours_points = ours_disk_parts(systems.ours)["points"] or 0
    vm_total = systems.vm.settle_on_disk(names)
    vm_points = sum(path.stat().st_size for path in (systems.vm.data_dir / "data").rglob("*") if path.is_file())
    return {"ours": {"bytes": ours_total, "points_bytes": ours_points,
                     "bytes_per_name": (ours_total - ours_points) / names},
            "vm": {"bytes": vm_total, "points_bytes": vm_points, "bytes_per_name": (vm_total - vm_points) / names}}
