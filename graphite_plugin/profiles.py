"""graphite-web's default user profile, read once in a while instead of on every request.

`/metrics/find` in its default format (treejson: Grafana's and the UI's tree) calls
`getProfile(request)` for one flag, `advancedUI`; for a user who has not logged in that
is `graphite.user_util.default_profile()`: two database queries (get_or_create of the
`default` user, then of its profile) on every request, a fifth of a cached find's time.
DefaultProfileMiddleware (in MIDDLEWARE through graphite_plugin.settings) installs, when
Django builds its middleware chain, a `default_profile` that keeps the profile
PROFILE_TTL seconds per process and hands out copies, so a view changing its copy
changes nothing shared. Profiles of logged-in users are read per request, as before.
"""
from __future__ import annotations

import copy
import threading
import time
from typing import Any, Callable

PROFILE_TTL = 10.0  # seconds a process reuses the default profile (an edit shows up that late)

_lock = threading.Lock()
_installed: dict[str, Any] = {}  # "original": graphite's default_profile, "cached": (expiry, profile)


def cached_default_profile() -> Any:
    """A copy of graphite's default profile, read from the database at most every PROFILE_TTL seconds."""
    now = time.monotonic()
    entry = _installed.get("cached")
    if entry is None or entry[0] <= now:
        profile = _installed["original"]()
        with _lock:
            _installed["cached"] = entry = (now + PROFILE_TTL, profile)
    return copy.copy(entry[1])


def install() -> None:
    """Make graphite.user_util.default_profile the cached one (once per process)."""
    from graphite import user_util

    with _lock:
        if "original" not in _installed:
            _installed["original"] = user_util.default_profile
            user_util.default_profile = cached_default_profile


def forget() -> None:
    """Drop the kept profile: the next request reads it again."""
    _installed.pop("cached", None)


class DefaultProfileMiddleware:
    """Installs cached_default_profile when Django loads the middleware; passes requests through."""

    def __init__(self, get_response: Callable):
        install()
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)
