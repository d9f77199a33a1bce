"""Where the store is, what new metrics get and where the services listen: from flags,
environment and these defaults (their one home: the CLI, the stack's generated
configuration and the docs' tables read them here; the flush policy's are
ingest.policy.FlushPolicy's)."""
from __future__ import annotations

import os

STORE_ENV = "BGL_STORE"
DATA_DIR_ENV = "BGL_DATA_DIR"
DEFAULT_RETENTION = "60s:8d,1h:2y"  # ~11,500 + 17,520 points: a week and a day of minutes, two years of hours
DEFAULT_AGGREGATION = "average"
DEFAULT_XFILESFACTOR = 0.5
DB_FILE_NAME = "bgl.db"

DEFAULT_BIND = "127.0.0.1"  # services listen on loopback unless told otherwise
LINE_PORT = 2003  # carbon's plaintext port
PICKLE_PORT = 2004  # carbon's pickle port
CARBONLINK_PORT = 7002  # carbon's cache query port
CARBONLINK_INTERFACE = "127.0.0.1"  # set-metadata changes stored metrics, unauthenticated: never wider
WEB_PORT = 8080  # graphite-web under `bgl run`
DEFAULT_SELF_METRICS_INTERVAL = 60.0  # seconds between two records of self-metrics, as carbon's CARBON_METRIC_INTERVAL


def default_data_dir() -> str:
    """$BGL_DATA_DIR, else $XDG_DATA_HOME/biggraphite_like, else ~/.local/share/biggraphite_like."""
    explicit = os.environ.get(DATA_DIR_ENV)
    if explicit:
        return os.path.abspath(explicit)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "biggraphite_like")


def default_store_url() -> str:
    """$BGL_STORE, else an SQLite file in the data directory."""
    return os.environ.get(STORE_ENV) or f"sqlite://{os.path.join(default_data_dir(), DB_FILE_NAME)}"
