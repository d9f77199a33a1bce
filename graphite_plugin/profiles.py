"""graphite-web's default user profile, read once in a while instead of on every request.

`/metrics/find` in its default format (treejson: Grafana's and the UI's tree) needs the
user's profile for one flag, `advancedUI`; for a user who has not logged in graphite's
`getProfile` calls `graphite.user_util.default_profile()`: two database queries
(get_or_create of the `default` user, then of its profile), a fifth of a cached find's
time. Our find shortcuts (graphite_plugin.find_view, used by ViewShortcutMiddleware and
the WSGI front) ask `advanced_ui` instead: the flag of graphite's own `default_profile()`
result kept PROFILE_TTL seconds per process (read only, never handed out). Logged-in
users' profiles are read per request with graphite's `getProfile`. graphite's own views
are left as they are (nothing of graphite is replaced).
"""
from __future__ import annotations

import threading
import time
from typing import Any

PROFILE_TTL = 10.0  # seconds a process reuses the default profile (an edit shows up that late)

_lock = threading.Lock()
_cached: dict[str, tuple[float, Any]] = {}  # "default": (expiry, graphite's default profile)


def _default_profile() -> Any:
    """graphite's default profile, read from the database at most every PROFILE_TTL seconds
    (shared: read it, never change it)."""
    from graphite.user_util import default_profile

    now = time.monotonic()
    entry = _cached.get("default")
    if entry is None or entry[0] <= now:
        profile = default_profile()
        with _lock:
            _cached["default"] = entry = (now + PROFILE_TTL, profile)
    return entry[1]


def advanced_ui(request) -> bool:
    """The `advancedUI` flag of graphite's getProfile(request), the default profile of an
    anonymous user kept."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        from graphite.user_util import getProfile

        return getProfile(request).advancedUI
    return _default_profile().advancedUI


def forget() -> None:
    """Drop the kept profile: the next request reads it again."""
    _cached.pop("default", None)
