"""Named counters shared by threads: counts since the last record, totals since start.

The carbon plugin's and the receiver's self-metrics both record them every interval;
`prometheus_text` renders totals for the receiver's and graphite-web's `/metrics`.
"""
from __future__ import annotations

import re
import threading
from typing import Iterable


class Counters:
    """Thread-safe counters, taken (and reset) when recorded; totals kept."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = tuple(names)
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self._names, 0)
        self._totals = dict.fromkeys(self._names, 0)

    def increment(self, name: str, count: int = 1) -> None:
        with self._lock:
            self._counts[name] += count
            self._totals[name] += count

    def take(self) -> dict[str, int]:
        """Counts since the previous take."""
        with self._lock:
            counts, self._counts = self._counts, dict.fromkeys(self._names, 0)
        return counts

    def totals(self) -> dict[str, int]:
        """Counts since start (for logs and tests)."""
        with self._lock:
            return dict(self._totals)


def prometheus_text(prefix: str, counters: dict[str, float], gauges: dict[str, float],
                    help_texts: dict[str, str], labels: dict[str, str] | None = None) -> str:
    """Prometheus text exposition (format 0.0.4): each counter as `<prefix>_<name>_total`
    (TYPE counter), each gauge as `<prefix>_<name>` (TYPE gauge), with HELP lines and
    `labels` on every sample; names are carbon's camelCase turned into snake_case
    (metricsReceived: metrics_received)."""
    escaped = (f'{key}="{_escape(value, quotes=True)}"' for key, value in (labels or {}).items())
    label_text = "{" + ",".join(escaped) + "}" if labels else ""
    lines = []
    for values, kind, suffix in ((counters, "counter", "_total"), (gauges, "gauge", "")):
        for key, value in values.items():
            name = f"{prefix}_{snake_case(key)}{suffix}"
            help_text = _escape(help_texts.get(key, key))
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{label_text} {float(value)!r}"]
    return "\n".join(lines) + "\n"


def _escape(text: str, quotes: bool = False) -> str:
    """The exposition format's escapes: backslash, newline (and double quote in label values)."""
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quotes else text


def snake_case(name: str) -> str:
    """`metricsReceived` -> `metrics_received`, `find.count` -> `find_count`."""
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return re.sub(r"[^a-zA-Z0-9_]", "_", name).lower()
