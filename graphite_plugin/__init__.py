"""graphite-web plugin: a storage finder (`graphite_plugin.Finder`) over a biggraphite_like
store, and a settings module for local_settings.py (`graphite_plugin.settings`).

Nothing graphite-web or Django is imported here: `graphite_plugin.settings` is imported
while Django's settings are being built, before graphite's modules can be.
"""
from __future__ import annotations

__all__ = ["Finder"]


def __getattr__(name: str):
    if name == "Finder":  # STORAGE_FINDERS = ['graphite_plugin.Finder']
        from graphite_plugin.finder import Finder

        return Finder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
