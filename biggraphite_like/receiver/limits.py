"""What one client, or all of them together, may make the receiver hold: connections per
listener, bytes of incomplete lines and frames, how long an incomplete frame may wait;
and the process's open files limit, which caps the connections.

At --max-connections on a listener, a new connection is served and the connection of
that listener silent the longest (nothing received for the longest time, nothing waiting
to be read) is closed: refusing the new one instead would let anyone who opens that many
connections and sends nothing lock every other sender out for as long as they like,
while closing the longest silent keeps a sender that is sending served, and a client
closed so reconnects as carbon's clients do. The cap is also lowered to what the open
files limit allows (less FD_RESERVE for the store, CarbonLink and logs, shared between
the TCP listeners), so accept() is not the one to fail with EMFILE.
"""
from __future__ import annotations

import dataclasses
import logging
import resource

from biggraphite_like.errors import ReceiverConfigError
from biggraphite_like.receiver.framing import MAX_FRAME

_log = logging.getLogger(__name__)

FD_RESERVE = 128  # descriptors kept for the store, CarbonLink, logs and the listeners themselves
ACCEPT_BACKOFF = 1.0  # seconds a listener is not polled after accept() failed (EMFILE, ENFILE, ...)
MIB = 2**20


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    """The bounds of `bgl receive` on its clients (options of the same names)."""

    max_connections: int = 10_000  # per TCP listener (and no more than the open files limit allows)
    max_partial_bytes: int = 64 * MIB  # incomplete lines and frames held, over every connection
    partial_timeout: float = 60.0  # seconds an incomplete line or frame may wait for its next byte

    def validate(self) -> None:
        if self.max_connections < 1:
            raise ReceiverConfigError(f"--max-connections {self.max_connections}: give at least 1")
        if self.max_partial_bytes < 4 * MAX_FRAME:
            raise ReceiverConfigError(f"--max-partial-bytes {self.max_partial_bytes}: give at least {4 * MAX_FRAME}"
                                      " (four pickle messages of the largest size)")
        if self.partial_timeout <= 0:
            raise ReceiverConfigError(f"--partial-timeout {self.partial_timeout}: give a positive number of seconds")


def raise_open_files_limit() -> int:
    """Raise RLIMIT_NOFILE's soft limit to its hard limit (logged); the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        _log.info("open files limit: %s (its hard limit)", _limit(soft))
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        _log.warning("open files limit stays %s: cannot raise it to its hard limit %s: %s", _limit(soft),
                     _limit(hard), exc)
        return soft
    _log.info("open files limit raised from %s to its hard limit %s", _limit(soft), _limit(hard))
    return hard


def connections_allowed(listeners: int) -> int:
    """Connections each of `listeners` TCP listeners may hold under the open files limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 2**31
    usable = soft - FD_RESERVE if soft > 2 * FD_RESERVE else soft // 2
    return max(1, usable // max(1, listeners))


def _limit(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)
