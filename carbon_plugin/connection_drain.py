"""On SIGTERM, read what clients already sent before carbon-cache exits.

Twisted closes every connection when the reactor stops: bytes a client had sent but carbon
had not read yet (a burst still in the socket buffer, 89% of a 50,000-line burst once) were
lost. `install()` adds a reactor trigger that runs before the shutdown: carbon stops
listening (its own trigger), and the receivers go on reading their connections until each
one is closed by its client or has received nothing for `idle` seconds, or until the
`timeout` (carbon.conf BG_DRAIN_TIMEOUT, BG_DRAIN_IDLE). Only then does the reactor close
the connections and the database plugin write carbon's cache and its buffer to the store.
The log says how many connections were drained and, when the deadline cut it short, how
many bytes were still unread.
"""
from __future__ import annotations

import fcntl
import termios
import time
from typing import Any, Iterable, Mapping

from carbon_plugin.options import number_setting

DRAIN_TIMEOUT = 30.0  # seconds the shutdown waits at most for clients' bytes
DRAIN_IDLE = 1.0  # a connection that received nothing for this long counts as drained
_POLL = 0.05


def drain_settings(settings: Mapping[str, Any]) -> tuple[float, float]:
    """(timeout, idle) from carbon.conf's BG_DRAIN_TIMEOUT and BG_DRAIN_IDLE."""
    timeout = number_setting(settings, "BG_DRAIN_TIMEOUT", float, 0.0)
    idle = number_setting(settings, "BG_DRAIN_IDLE", float, 0.0)
    return (DRAIN_TIMEOUT if timeout is None else timeout), (DRAIN_IDLE if idle is None else idle)


def unread_bytes(protocol: Any) -> int:
    """Bytes waiting in a connection's socket receive buffer (0 when unknown)."""
    try:
        fileno = protocol.transport.fileno()
        return int.from_bytes(fcntl.ioctl(fileno, termios.FIONREAD, b"\0\0\0\0"), "little")
    except (AttributeError, OSError, ValueError):
        return 0


def still_receiving(connections: Iterable[Any], now: float, idle: float, paused: bool) -> list[Any]:
    """The connections not drained yet: open, and bytes arrived within `idle` seconds (or
    carbon paused reading, USE_FLOW_CONTROL, so silence says nothing)."""
    return [p for p in connections
            if paused or now - getattr(p, "last_data", 0.0) < idle or unread_bytes(p) > 0]


def install(settings: Mapping[str, Any]) -> None:
    """Add the drain to the reactor's 'before shutdown' triggers (carbon's process)."""
    from twisted.internet import reactor

    timeout, idle = drain_settings(settings)
    reactor.addSystemEventTrigger("before", "shutdown", drain, timeout, idle)


def drain(timeout: float, idle: float):
    """A Deferred that fires once carbon's receiver connections are drained or `timeout` passed."""
    from carbon import log, state
    from twisted.internet import defer
    from twisted.internet.task import LoopingCall

    from carbon_plugin import receivers

    start = time.monotonic()
    connections = state.connectedMetricReceiverProtocols
    opened = len(connections)
    done = defer.Deferred()

    def check() -> None:
        now = time.monotonic()
        waiting = still_receiving(list(connections), now, idle, state.metricReceiversPaused)
        if waiting and now - start < timeout:
            return
        loop.stop()
        message = (f"biggraphite_like: receivers drained in {now - start:.1f}s: {opened} connections open at"
                   f" SIGTERM, {opened - len(waiting)} read to their end or idle;"
                   f" refused lines since start: {receivers.stats.totals()['refusedLines']}")
        if waiting:
            lost = sum(unread_bytes(p) for p in waiting)
            message += (f"; BG_DRAIN_TIMEOUT ({timeout:g}s) reached with {len(waiting)} connections still"
                        f" receiving, {lost} bytes unread (lost)")
        log.msg(message)
        done.callback(None)

    if opened:
        log.msg(f"biggraphite_like: SIGTERM: reading what {opened} connected clients already sent"
                f" (at most {timeout:g}s)")
    loop = LoopingCall(check)
    loop.start(_POLL, now=True)
    return done
