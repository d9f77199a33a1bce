"""The embedded store: one SQLite file in WAL mode (one writer, many readers, crash-safe).

Modules: connection (connections, transactions, change marks), schema (tables, syncdb),
metadata (metrics and directories rows), name_strings (interned components and parents),
glob_planner, points (blocks of slots), tags.

Layout (schema/sqlite.sql is the readable copy, `bgl syncdb --dry-run` prints it):
- `metrics` and `directories`: name, parent, component_0..component_63 with `__END__`
  after the last component, each component column with a partial index, so a glob turns
  into indexed lookups (parent, name prefix, component equality) before client filtering.
  Parent and components are ids of `name_strings` rows (see name_strings).
- one `datapoints_<points>p_<precision>s_0|aggr` table per stage, created with the first
  metric that uses it, holding whisper's ring of `points` slots per metric with
  slot = (timestamp / precision) mod points: a point replaces whatever its slot held, so a
  stage never holds more than `points` points per metric, as in a whisper file. Slots are
  stored in blocks: a row is `block_slots(table)` consecutive slots of one metric, keyed
  id = metric key * 2**32 + slot // block_slots, its `slots` BLOB packing (timestamp uint32,
  value float64[, count uint32]) little-endian per slot, timestamp 0 for an empty slot.
  A block is sized to stay inside a quarter of a 4 KiB page (no overflow pages, four rows a
  page), so a day at 60 s is 18 rows: reads fetch few rows and decode them with one numpy call and
  keep the slots whose timestamp is in the window, as whisper does. Writes replace one or
  two slots of a block inside SQLite (carbon's case), or read the block, change it with
  numpy and write it back. `newest` (at least the greatest timestamp of the block) lets
  expiry drop whole blocks without decoding them. A table's block size must never change
  for an existing file: reads check it.
"""
from __future__ import annotations

from biggraphite_like.stores.base import Store
from biggraphite_like.stores.sqlite.connection import ConnectionMixin
from biggraphite_like.stores.sqlite.glob_planner import GlobMixin
from biggraphite_like.stores.sqlite.metadata import MetadataMixin
from biggraphite_like.stores.sqlite.points import PointsMixin
from biggraphite_like.stores.sqlite.schema import (  # noqa: F401 - the store's public constants
    _REQUESTS_PER_QUERY,  # read by a test that builds a fetch of more than one query
    DEFAULT_TIMEOUT,
    WAL_LIMIT_BYTES,
    block_slots,
    schema_statements,
    slot_dtype,
    SchemaMixin,
)


class SQLiteStore(MetadataMixin, GlobMixin, PointsMixin, SchemaMixin, ConnectionMixin, Store):
    """Metrics and points in one SQLite file (see the package docstring)."""


__all__ = ["DEFAULT_TIMEOUT", "WAL_LIMIT_BYTES", "SQLiteStore", "block_slots", "schema_statements", "slot_dtype"]
