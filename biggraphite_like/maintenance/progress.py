"""Progress of a long job on a terminal, and the summary printed when it ends.

The bar is drawn on stderr only when stderr is a terminal (redrawn at most 10 times a
second, on one line with carriage returns); pipes and log files get the summary alone, or,
for a job given a `log_interval`, a plain line every that many seconds.
"""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Mapping, TextIO

if TYPE_CHECKING:
    from biggraphite_like.stores.base import Store

_REDRAW_SECONDS = 0.1
LOG_INTERVAL = 10.0  # seconds between two progress lines of a long job when stderr is no terminal
_BAR_WIDTH = 30


class Progress:
    """Counts units of work done, out of a total when it is known."""

    def __init__(self, label: str, total: int | None = None, stream: TextIO | None = None,
                 enabled: bool | None = None, log_interval: float | None = None):
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty())
        self.enabled = enabled
        self.log_interval = None if enabled else log_interval  # seconds between two lines off a terminal
        self.done = 0
        self.started = time.monotonic()
        self._drawn = 0.0
        self._logged = self.started
        self._width = 0

    def advance(self, count: int = 1, label: str | None = None) -> None:
        self.done += count
        if label is not None:
            self.label = label
        if self.enabled:
            now = time.monotonic()
            if now - self._drawn >= _REDRAW_SECONDS:
                self._drawn = now
                self._draw(now)
        elif self.log_interval is not None:
            now = time.monotonic()
            if now - self._logged >= self.log_interval:
                self._logged = now
                self.stream.write(self._text(now, bar=False) + "\n")
                self.stream.flush()

    def _text(self, now: float, bar: bool = True) -> str:
        elapsed = now - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.total:
            fraction = min(self.done / self.total, 1.0)
            filled = int(fraction * _BAR_WIDTH)
            drawn = f" [{'#' * filled + '-' * (_BAR_WIDTH - filled)}]" if bar else ""
            return f"{self.label}{drawn} {self.done}/{self.total} {fraction:4.0%} {rate:,.0f}/s"
        return f"{self.label} {self.done} {rate:,.0f}/s"

    def _draw(self, now: float) -> None:
        text = self._text(now)
        padding = " " * max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write(f"\r{text}{padding}")
        self.stream.flush()

    def write(self, message: str) -> None:
        """Write a message to the progress stream on a line of its own: a bar drawn on a
        terminal is erased first (the next update draws it again, below the message)."""
        if self.enabled and self._width:
            self.stream.write("\r\033[K")
            self._width = 0
            self._drawn = 0.0
        self.stream.write(message)

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line (terminal only)."""
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0


def show_total(progress: Progress, store: "Store", key: str, nshards: int = 1) -> None:
    """Give a bar drawn on a terminal the row count `store.stats()[key]` (split over shards).

    Only when the bar is drawn: on some stores `stats()` costs a scan.
    """
    if not progress.enabled:
        return
    from biggraphite_like.errors import BglError

    try:
        value = store.stats().get(key)
    except BglError:  # a progress bar never fails a job: draw it without a total
        return
    if isinstance(value, int):
        progress.total = -(-value // nshards)


# the last word of a counter that says what a job changed: "would be ..." in a dry run
_CHANGES = frozenset({"removed", "created", "changed", "copied", "deleted", "imported", "indexed", "fixed", "expired",
                      "written", "dropped", "restored", "stored"})


def format_summary(job: str, counters: Mapping[str, int | float], dry_run: bool = False) -> str:
    """`bgl JOB: a=1, b=2, duration=1.2s` (one line a job, stable order: the mapping's); in
    a dry run, what the job would change says "that would be" (`metrics that would be removed 3`)."""
    parts = []
    for key, value in counters.items():
        if key == "duration_seconds":
            parts.append(f"duration {value:.1f}s")
            continue
        words = key.split("_")
        if dry_run and words[-1] in _CHANGES:
            words.insert(-1, "that would be")
        parts.append(f"{' '.join(words)} {value}")
    prefix = f"bgl {job} (dry run, nothing changed)" if dry_run else f"bgl {job}"
    return f"{prefix}: " + ", ".join(parts)
