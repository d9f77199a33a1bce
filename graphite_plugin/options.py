"""The BG_* settings graphite-web's local_settings.py may hold, and their defaults.

Django-free, so that `graphite_plugin.settings` can export them while Django's settings
are being built.
"""
from __future__ import annotations

from biggraphite_like import glob as _glob
from biggraphite_like.accessor import DEFAULT_CACHE_TTL, DEFAULT_TOUCH_INTERVAL
from biggraphite_like.tags import queries as _tags
from graphite_plugin import glob_cache as _glob_cache

# BG_STORE (the store URL) has no fixed default: $BGL_STORE, else bgl's default store.
OPTION_DEFAULTS: dict[str, float | int] = {
    "BG_MAX_GLOB_EXPANSION": _glob.DEFAULT_MAX_EXPANSION,  # alternatives a pattern may expand to
    "BG_MAX_GLOB_RESULTS": _glob.DEFAULT_MAX_RESULTS,  # names one glob may match
    "BG_CACHE_TTL": DEFAULT_CACHE_TTL,  # seconds metric metadata is trusted without reading it again
    "BG_TOUCH_INTERVAL": DEFAULT_TOUCH_INTERVAL,  # seconds between two read_on updates of a metric
    "BG_FIND_CACHE_TTL": 60,  # seconds a glob's answer is reused at most (0: never)
    "BG_FIND_CACHE_SIZE": 10_000,  # glob answers kept (least recently used dropped first)
    "BG_FIND_CACHE_NAMES": _glob_cache.DEFAULT_MAX_NAMES,  # names held by the glob answers kept, in all (~100 bytes each)
    "BG_FIND_CACHE_CHECK_INTERVAL": 0.5,  # seconds between two reads of the store's names token by a process
    "BG_MAX_RENDER_SERIES": 20_000,  # series one render (one fetch of its targets) may read
    "BG_MAX_RENDER_POINTS": 10_000_000,  # points one render may read, summed over its series
    "BG_MAX_RENDER_PIXELS": 16_000_000,  # pixels of one rendered image (width x height; 4000x4000)
    "BG_MAX_TAG_SERIES": _tags.DEFAULT_MAX_TAG_SERIES,  # series the driving term of a tag query may cover
    "BG_MAX_TAG_VALUES": _tags.DEFAULT_MAX_TAG_VALUES,  # values of a tag one tag expression may read
}

# The Accessor argument each accessor option becomes.
ACCESSOR_ARGUMENTS = {
    "BG_MAX_GLOB_EXPANSION": "max_glob_expansion",
    "BG_MAX_GLOB_RESULTS": "max_glob_results",
    "BG_CACHE_TTL": "cache_ttl",
    "BG_TOUCH_INTERVAL": "touch_interval",
}

# graphite-web's own find and render times, written into the store (graphite_plugin.self_metrics)
SELF_METRICS_INTERVAL_ENV = "BGL_SELF_METRICS_INTERVAL"
DEFAULT_SELF_METRICS_INTERVAL = 60.0


def self_metrics_interval(environ: dict | None = None) -> float:
    """BG_SELF_METRICS_INTERVAL's default: $BGL_SELF_METRICS_INTERVAL (seconds; 0 turns the
    self-metrics off), else 60 s, carbon's CARBON_METRIC_INTERVAL."""
    import os

    text = (os.environ if environ is None else environ).get(SELF_METRICS_INTERVAL_ENV, "").strip()
    if not text:
        return DEFAULT_SELF_METRICS_INTERVAL
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"${SELF_METRICS_INTERVAL_ENV}={text!r}: expected seconds between two writes of"
                         " graphite-web's self-metrics (a number >= 0; 0 turns them off)")
    return value


# requests one client address may have in progress in a graphite-web process (0: no limit):
# a browser's connections to one host (HTTP/1.1: Chrome and Firefox open six), so that a page's
# scripts or a dashboard's graphs, loaded six at a time, are never refused; below a worker's
# eight threads, so that one client cannot hold them all
MAX_CLIENT_REQUESTS_ENV = "BGL_MAX_CLIENT_REQUESTS"
BROWSER_CONNECTIONS = 6
DEFAULT_MAX_CLIENT_REQUESTS = BROWSER_CONNECTIONS


def max_client_requests(environ: dict | None = None) -> int:
    """BG_MAX_CLIENT_REQUESTS' default: $BGL_MAX_CLIENT_REQUESTS (`bgl run` writes its
    local_settings.py again at every start: the variable is how its operator changes it),
    else 6."""
    import os

    text = (os.environ if environ is None else environ).get(MAX_CLIENT_REQUESTS_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_CLIENT_REQUESTS
    if not text.isdigit():
        raise ValueError(f"${MAX_CLIENT_REQUESTS_ENV}={text!r}: expected the number of requests one client"
                         " address may have in progress in a graphite-web process (an integer >= 0; 0: no limit)")
    return int(text)
