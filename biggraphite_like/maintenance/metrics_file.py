"""A job's counters as a Prometheus text file (for node_exporter's textfile collector).

The file is written to a temporary name in the same directory and renamed over the
target, so a scraper never reads half a file.
"""
from __future__ import annotations

import os
import re
import tempfile
import time
from typing import Mapping

from biggraphite_like.errors import InvalidMaintenanceOption

_NAME_RE = re.compile(r"[^a-zA-Z0-9_]")


def render(job: str, counters: Mapping[str, int | float], help_texts: Mapping[str, str] | None = None,
           finished: float | None = None) -> str:
    """Prometheus exposition text: one gauge `bgl_<job>_<counter>` per counter, plus the end time."""
    help_texts = help_texts or {}
    prefix = "bgl_" + _NAME_RE.sub("_", job)
    lines = []
    for key, value in counters.items():
        name = f"{prefix}_{_NAME_RE.sub('_', key)}"
        lines.append(f"# HELP {name} {help_texts.get(key, key.replace('_', ' '))}")
        lines.append(f"# TYPE {name} gauge")
        lines.append(f"{name} {float(value)!r}")
    name = f"{prefix}_last_run_timestamp_seconds"
    lines += [f"# HELP {name} when the last run ended (epoch seconds)", f"# TYPE {name} gauge",
              f"{name} {float(time.time() if finished is None else finished)!r}"]
    return "\n".join(lines) + "\n"


def write_atomically(path: str, text: str, mode: int = 0o644) -> None:
    """Replace path with text in one rename (readers see the old file or the new one)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=".bgl-", suffix=".prom.tmp", dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def check_writable(path: str | None) -> None:
    """Refuse an unwritable --metrics-file before the job (or the receiver) runs, not after."""
    if path:
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
            raise InvalidMaintenanceOption(f"--metrics-file {path}: directory {directory} does not exist or is not writable")


def write(path: str, job: str, counters: Mapping[str, int | float], help_texts: Mapping[str, str] | None = None,
          mode: int = 0o644) -> None:
    write_atomically(path, render(job, counters, help_texts), mode)
