"""Where the store is and what new metrics get, from flags, environment and defaults."""
from __future__ import annotations

import os

STORE_ENV = "BGL_STORE"
DATA_DIR_ENV = "BGL_DATA_DIR"
DEFAULT_RETENTION = "60s:8d,1h:2y"  # ~11,500 + 17,520 points: a week and a day of minutes, two years of hours
DEFAULT_AGGREGATION = "average"
DEFAULT_XFILESFACTOR = 0.5
DB_FILE_NAME = "bgl.db"


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
