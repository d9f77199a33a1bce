"""A Django static files finder for graphite-web's UI files where pip installs them.

pip puts graphite-web's `webapp/content` under the virtualenv's prefix, but
graphite.settings sets STATICFILES_DIRS (after reading local_settings, so it cannot be
overridden there) to `<site-packages>/content`, which does not exist. The dashboard looks
its theme up through the finders (`css/dashboard-default.css`) and opened with
"Invalid theme 'default'". This finder, listed in STATICFILES_FINDERS by
`graphite_plugin.settings`, answers from `<prefix>/webapp/content`.
"""
from __future__ import annotations

import os
import sys

from django.contrib.staticfiles.finders import BaseFinder
from django.contrib.staticfiles.utils import get_files
from django.core.files.storage import FileSystemStorage
from django.utils._os import safe_join


def webapp_content_dir() -> str | None:
    """`<prefix>/webapp/content` when it exists."""
    path = os.path.join(sys.prefix, "webapp", "content")
    return path if os.path.isdir(path) else None


class WebappContentFinder(BaseFinder):
    """Finds static files in graphite-web's installed `webapp/content`."""

    def __init__(self, *args, **kwargs) -> None:
        self.root = webapp_content_dir()
        self.storage = FileSystemStorage(location=self.root) if self.root else None

    def find(self, path, all=False):  # noqa: A002 - Django's signature
        if self.root:
            try:
                full = safe_join(self.root, path)
            except ValueError:  # outside the root (SuspiciousFileOperation)
                return []
            if os.path.exists(full):
                return [full] if all else full
        return []

    def list(self, ignore_patterns):
        if self.storage is not None:
            for path in get_files(self.storage, ignore_patterns):
                yield path, self.storage
