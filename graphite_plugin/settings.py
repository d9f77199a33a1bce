"""Settings for graphite-web on a biggraphite_like store: one line in local_settings.py.

    # local_settings.py (graphite/local_settings.py, or the module $GRAPHITE_SETTINGS_MODULE names)
    from graphite_plugin.settings import *
    SECRET_KEY = '...'                              # your own
    BG_STORE = 'sqlite:///var/lib/bgl/bgl.db'       # optional: default $BGL_STORE, else bgl's default

Importing it:
* sets STORAGE_FINDERS to this plugin's finder only, TAGDB to its tag database
  (graphite_plugin.tagdb.TagDB), BG_STORE from $BGL_STORE or bgl's
  default store, and every BG_* option at its default (override any of them after the
  import);
* makes `/functions` work on Python 3.11 (`graphite_plugin.compat.install()`);
* sets STATIC_ROOT to the virtualenv's `<prefix>/webapp/content` when it exists (where
  pip puts graphite-web's UI files, and where graphite's settings do not look); with
  whitenoise 5.x installed, graphite's app settings then serve them (`bgl run`); adds a
  static files finder for that folder (`graphite_plugin.staticfiles`), so the dashboard
  finds its theme;
* sets ROOT_URLCONF to graphite_plugin.urls (errors answered as a short reason by
  graphite_plugin.error_views, not graphite's traceback page);
* loads graphite's Django app settings (graphite.app_settings, as graphite.settings would)
  and adds `graphite_plugin.middleware`'s ErrorAnswerMiddleware (every error answer a short
  reason), CrossSiteWriteMiddleware (a browser's write from another origin is refused),
  RenderBudgetMiddleware (renders over the budgets refused before anything is built),
  ViewShortcutMiddleware (`/render?format=json` encoded with numpy, wide ones evaluated on
  arrays; treejson, json and completer finds without graphite's worker pool, with the
  default profile kept 10 s; same bytes) and PatternRefusedMiddleware to MIDDLEWARE, and
  `graphite_plugin.self_metrics`' RequestTimingMiddleware first (graphite-web's find and
  render times, written into the store every BG_SELF_METRICS_INTERVAL seconds: default
  $BGL_SELF_METRICS_INTERVAL, else 60; 0 turns them off).

It imports neither Django's settings nor graphite-web's modules that read them.
"""
from __future__ import annotations

import os
import sys

from biggraphite_like.settings import default_store_url as _default_store_url
from graphite_plugin import compat as _compat
from graphite_plugin.options import OPTION_DEFAULTS as _OPTION_DEFAULTS
from graphite_plugin.options import max_client_requests as _max_client_requests
from graphite_plugin.options import self_metrics_interval as _self_metrics_interval

_compat.install()

STORAGE_FINDERS = ("graphite_plugin.Finder",)
TAGDB = "graphite_plugin.tagdb.TagDB"  # /tags/* answered from the store's tag index
BG_STORE = _default_store_url()
globals().update(_OPTION_DEFAULTS)  # BG_MAX_GLOB_EXPANSION, BG_MAX_GLOB_RESULTS, BG_CACHE_TTL, ...
BG_SELF_METRICS_INTERVAL = _self_metrics_interval()  # seconds between writes of bgl.web.* (0: off)
BG_MAX_CLIENT_REQUESTS = _max_client_requests()  # requests in progress per client address and process (0: any)
# the key type of graphite-web's tables (its migrations predate Django 3.2's setting, which
# otherwise warns, models.W042, for every model at each start)
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
# graphite's URLs, with errors answered as a short reason (graphite_plugin.error_views)
ROOT_URLCONF = "graphite_plugin.urls"

__all__ = ["STORAGE_FINDERS", "TAGDB", "BG_STORE", "BG_SELF_METRICS_INTERVAL", "BG_MAX_CLIENT_REQUESTS",
           "DEFAULT_AUTO_FIELD",
           *_OPTION_DEFAULTS]

_content = os.path.join(sys.prefix, "webapp", "content")
if os.path.isdir(_content):
    STATIC_ROOT = _content
    __all__.append("STATIC_ROOT")
# graphite.settings points STATICFILES_DIRS at a missing folder, after local_settings: the
# dashboard's theme lookup (css/dashboard-default.css) needs a finder that knows _content.
STATICFILES_FINDERS = ("django.contrib.staticfiles.finders.FileSystemFinder",
                       "django.contrib.staticfiles.finders.AppDirectoriesFinder",
                       "graphite_plugin.staticfiles.WebappContentFinder")
__all__.append("STATICFILES_FINDERS")


def _app_settings() -> dict:
    """graphite.app_settings' upper-case names, with this plugin's middleware added."""
    import graphite.app_settings as app_settings

    values = {name: getattr(app_settings, name) for name in dir(app_settings) if name.isupper()}
    values["MIDDLEWARE"] = ("graphite_plugin.self_metrics.RequestTimingMiddleware",  # times whole requests
                            "graphite_plugin.middleware.ErrorAnswerMiddleware",  # every error a short reason
                            "graphite_plugin.prometheus.PrometheusMiddleware",  # /metrics (BG_PROMETHEUS_METRICS)
                            *values["MIDDLEWARE"],
                            "graphite_plugin.middleware.CrossSiteWriteMiddleware",
                            "graphite_plugin.middleware.RenderBudgetMiddleware",
                            "graphite_plugin.middleware.ViewShortcutMiddleware",
                            "graphite_plugin.middleware.PatternRefusedMiddleware")
    values["ROOT_URLCONF"] = ROOT_URLCONF
    values["GRAPHITE_WEB_APP_SETTINGS_LOADED"] = True  # graphite.settings must not load them again
    return values


_values = _app_settings()
globals().update(_values)
__all__.extend(sorted(_values))
