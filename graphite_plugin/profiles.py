"""graphite-web's default user profile, read once in a while instead of on every request.

`/metrics/find` in its default format (treejson: Grafana's and the UI's tree) needs the
user's profile for one flag, `advancedUI`; for a user who has not logged in graphite's
`getProfile` calls `graphite.user_util.default_profile()`: two database queries
(get_or_create of the `default` user, then of its profile), a fifth of a cached find's
time. Our find shortcuts (graphite_plugin.find_view, used by ViewShortcutMiddleware and
the WSGI front) ask `profile_for` instead: graphite's own `default_profile()` result kept
PROFILE_TTL seconds per process, handed out as copies so a caller changing its copy
changes nothing shared. Logged-in users' profiles are read per request with graphite's
`getProfile`. graphite's own views are left as they are (nothing of graphite is replaced).
"""
from __future__ import annotations

import copy
import threading
import time
from typing import Any

PROFILE_TTL = 10.0  # seconds a process reuses the default profile (an edit shows up that late)

_lock = threading.Lock()
_cached: dict[str, tuple[float, Any]] = {}  # "default": (expiry, graphite's default profile)


def cached_default_profile() -> Any:
    """A copy of graphite's default profile, read from the database at most every PROFILE_TTL seconds."""
    from graphite.user_util import default_profile

    now = time.monotonic()
    entry = _cached.get("default")
    if entry is None or entry[0] <= now:
        profile = default_profile()
        with _lock:
            _cached["default"] = entry = (now + PROFILE_TTL, profile)
    return copy.copy(entry[1])


def profile_for(request) -> Any:
    """graphite's getProfile(request), with the default profile of an anonymous user kept."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        from graphite.user_util import getProfile

        return getProfile(request)
    return cached_default_profile()


def forget() -> None:
    """Drop the kept profile: the next request reads it again."""
    _cached.pop("default", None)
