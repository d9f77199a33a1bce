"""graphite-web's TagDB over a biggraphite_like store (`TAGDB = 'graphite_plugin.tagdb.TagDB'`,
set by graphite_plugin.settings).

`/tags`, `/tags/<tag>`, `/tags/findSeries`, `/tags/tagSeries`, `/tags/tagMultiSeries` and
`/tags/delSeries` call graphite's STORE.tagdb directly: this class answers them from the
store's tag index, with LocalDatabaseTagDB's shapes (no `id` fields: the index has none to
give). Expressions, planning and limits are the accessor's (biggraphite_like.tags);
refusals (bad names, bad expressions, limits) raise ValueError subclasses with the reason.
"""
from __future__ import annotations

import time

from django.core.cache.backends.dummy import DummyCache
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.connection import ConnectionProxy
from graphite.tags.base import BaseTagDB
from graphite.tags.utils import TaggedSeries

from graphite_plugin.finder import shared_accessor


def _keeps_nothing(cache) -> bool:
    """Whether graphite's cache (Django's, behind a ConnectionProxy) is a DummyCache: found
    once per cache object and CACHES setting (Django's handler looks the proxied cache up
    in a thread-local at every access)."""
    kept = _KEEPS_NOTHING.get(id(cache))
    if kept is not None and kept[0] is cache:
        return kept[1]
    found = cache._connections[cache._alias] if isinstance(cache, ConnectionProxy) else cache
    _KEEPS_NOTHING[id(cache)] = (cache, isinstance(found, DummyCache))
    return _KEEPS_NOTHING[id(cache)][1]


_KEEPS_NOTHING: dict[int, tuple[object, bool]] = {}  # id(cache) -> (cache, whether it keeps nothing)


@receiver(setting_changed)
def _forget_caches(setting, **_) -> None:
    """CACHES changed (override_settings): the proxied caches are others."""
    if setting == "CACHES":
        _KEEPS_NOTHING.clear()


def _limit(limit) -> int | None:
    return int(limit) if limit else None


class TagDB(BaseTagDB):
    """The store's tag index, as graphite-web's TagDB contract asks."""

    @property
    def tags(self):
        return shared_accessor().tags

    def find_series(self, tags, requestContext=None):
        """BaseTagDB.find_series, its log line included, without asking a cache that keeps
        nothing (Django's DummyCache: graphite's CACHES without MEMCACHE_HOSTS, `bgl run`'s),
        whose get and set validate the key character by character for nothing."""
        return self.find_series_logged(tags, requestContext, None)

    def find_series_logged(self, tags, requestContext=None, log_lines: list[str] | None = None):
        """find_series; with a cache that keeps nothing and `log_lines`, its log message is
        added to log_lines instead of logged (the tags front logs it with write_log once
        its answer is sent)."""
        if not _keeps_nothing(self.cache):
            return super().find_series(tags, requestContext)
        started, outcome = time.time(), "completed in"
        try:
            self.find_series_cachekey(tags, requestContext=requestContext)  # its errors are graphite's
            return self._find_series(tags, requestContext)
        except Exception:
            outcome = "failed in"
            raise
        finally:
            message = "{msg} {sec:.6}s".format(msg=outcome, sec=time.time() - started)
            if log_lines is None:
                self.log_info("find_series", message)
            elif self.log:
                log_lines.append(message)

    def write_log(self, messages: list[str]) -> None:
        """Log the find_series messages find_series_logged gave (BaseTagDB.log_info's lines)."""
        for message in messages:
            self.log_info("find_series", message)

    def _find_series(self, tags, requestContext=None):
        return self.tags.find_series(list(tags))

    def get_series(self, path, requestContext=None):
        found = self.tags.get_series(path)
        return None if found is None else TaggedSeries(found.tags["name"], dict(found.tags))

    def list_tags(self, tagFilter=None, limit=None, requestContext=None):
        return [{"tag": tag} for tag in self.tags.list_tags(tagFilter, _limit(limit))]

    def get_tag(self, tag, valueFilter=None, limit=None, requestContext=None):
        if tag not in self.tags.index.tags(tag, None, 1):
            return None
        return {"tag": tag, "values": self.list_values(tag, valueFilter, limit)}

    def list_values(self, tag, valueFilter=None, limit=None, requestContext=None):
        return [{"value": v, "count": c} for v, c in self.tags.list_values(tag, valueFilter, _limit(limit))]

    def tag_series(self, series, requestContext=None):
        return self.tags.tag_series([series])[0]

    def tag_multi_series(self, seriesList, requestContext=None):
        return self.tags.tag_series(list(seriesList))

    def del_series(self, series, requestContext=None):
        self.tags.del_series([series])
        return True

    def del_multi_series(self, seriesList, requestContext=None):
        self.tags.del_series(list(seriesList))
        return True

    def auto_complete_tags(self, exprs, tagPrefix=None, limit=None, requestContext=None):
        return self.tags.auto_complete_tags(list(exprs), tagPrefix, self._autocomplete_limit(limit))

    def auto_complete_values(self, exprs, tag, valuePrefix=None, limit=None, requestContext=None):
        return self.tags.auto_complete_values(list(exprs), tag, valuePrefix, self._autocomplete_limit(limit))

    def _autocomplete_limit(self, limit) -> int:
        return int(limit) if limit is not None else int(self.settings.TAGDB_AUTOCOMPLETE_LIMIT)
