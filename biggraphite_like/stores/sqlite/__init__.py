"""The embedded store: one SQLite file in WAL mode (one writer, many readers, crash-safe).

Modules: connection (connections, transactions, change marks), schema (tables, syncdb),
free_pages (free pages given back as writes free them; VACUUM of older files),
metadata (metrics and directories rows), name_tree (names as a trie of directories, with
their caches), name_strings (interned components), tree_glob (globs as walks of the tree), points (reads and writes of windows), windows (a window's rows: ids, decoding),
tags.

Layout (schema/sqlite.sql is the readable copy, `bgl syncdb --dry-run` prints it):
- `directories` and `metrics`: the name tree (see name_tree): a directory is a node (parent
  directory key, component id), a metric a leaf (parent directory key, leaf id, interned
  metadata id, times); no row holds a full name. Indexes on (parent, component) and on the
  component alone (the inverted index for `**`); a glob walks the tree level by level.
- one `datapoints_<points>p_<precision>s_0|aggr` table per stage, created with the first
  metric that uses it, holding whisper's ring of `points` slots per metric with
  slot = (timestamp / precision) mod points: a point replaces whatever its slot held, so a
  stage never holds more than `points` points per metric, as in a whisper file. The ring is
  cut into windows of `window_slots` consecutive slots, recorded once per table in
  `point_windows` (at most WINDOW_SLOTS, the same for every window but the ring's last);
  a window is a time window of one turn of the ring while it is written in order. A
  window has up to three rows (windows.py holds their ids): its chunk (the points merged
  so far, biggraphite_like.chunks, a few bytes a point), sealed once the window's last
  slot is written or open before, and its open tail (records (timestamp uint32, value
  float64[, count uint32]) appended inside SQLite by each write, no read back; the last
  record of a slot wins over earlier ones and over the chunk). Ids are ordered window
  first, sealed rows apart from open ones, so no later row splits the pages of sealed chunks. A tail is
  merged into its chunk when the window's last slot is written or the tail reaches
  merge_bytes (schema.py), so the tail stays inside a page and a young metric pays for
  the points it has, not for a whole ring; a window given DIRECT_BYTES of points in one
  write is merged directly (no tail written).
  Reads look up the rows of the windows a batch of requests covers by id in one query and decode
  them with numpy, keeping the points whose timestamp is in the request, as whisper does.
  `newest` (at least the greatest timestamp of a row) lets expiry drop whole rows without
  decoding them. A table's window width never changes once recorded.
"""
from __future__ import annotations

from biggraphite_like.stores.base import Store
from biggraphite_like.stores.sqlite.connection import ConnectionMixin
from biggraphite_like.stores.sqlite.free_pages import FreePagesMixin
from biggraphite_like.stores.sqlite.tree_glob import GlobMixin
from biggraphite_like.stores.sqlite.metadata import MetadataMixin
from biggraphite_like.stores.sqlite.points import PointsMixin
from biggraphite_like.stores.sqlite.schema import (  # noqa: F401 - the store's public constants
    DEFAULT_TIMEOUT,
    WAL_LIMIT_BYTES,
    WINDOW_SLOTS,
    default_window_slots,
    schema_statements,
    SchemaMixin,
)
from biggraphite_like.stores.sqlite.windows import record_dtype  # noqa: F401


class SQLiteStore(MetadataMixin, GlobMixin, PointsMixin, SchemaMixin, FreePagesMixin, ConnectionMixin, Store):
    """Metrics and points in one SQLite file (see the package docstring)."""

    atomic_write_batch = True  # BEGIN IMMEDIATE: one writer at a time, committed at once


__all__ = ["DEFAULT_TIMEOUT", "WAL_LIMIT_BYTES", "WINDOW_SLOTS", "SQLiteStore", "default_window_slots", "record_dtype",
           "schema_statements"]
