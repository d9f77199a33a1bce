"""The Cassandra schema: keyspaces, metadata tables, indexes and one datapoints table per stage.

schema/cassandra.cql is `bgl --store cassandra://localhost/biggraphite syncdb --dry-run`
(keyspace `biggraphite`, default options); a test keeps the two equal. Every table, key,
index and invariant: docs/format/cassandra.md.

Data keyspace `<ks>`, one table per stage, created with the first metric using it. A
stage is a ring of `points` slots, as a whisper archive: slot = (ts / precision) % points,
and a point replaces whatever its slot held (the Store contract: a stage never holds more
than `points` values per metric, and a later write into a slot wins even with an older
timestamp, as whisper's). So a row is keyed by its slot, not its timestamp:
- `datapoints_<points>p_<precision>s_0` (stage 0, raw values): partition (metric,
  slot_start), ROW_POINTS consecutive slots (slot_start = slot - slot % ROW_POINTS), so
  partitions are bounded and a metric has ceil(points / ROW_POINTS) of them per stage;
  clustering `offset` (slot - slot_start) DESC; columns ts (the point's timestamp,
  checked by readers as whisper does) and value.
- `..._aggr` (coarser stages): the same plus `shard` in the clustering key and the count
  of finer points each value aggregates. A shard is (replica id << 14 | writer id), so two
  writers (replicas, or a restarted process with another writer id) never overwrite each
  other's rows. Reads keep, per timestamp, the row with the largest count, ties going to
  the latest write time: every write of an aggregated row is the complete recomputation
  of its interval from the finer stage (see downsampling.py), finer points only accumulate
  until they expire, so the row that saw the most points is the most complete one, and
  between equally complete rows the latest saw the latest values.
- default_time_to_live = stage duration + TTL slack (one hour plus one step: clock skew
  between writers and the read window's alignment): a slot nobody rewrites expires
  without a job; time-window compaction in about TWCS_WINDOWS windows per TTL, so
  SSTables whose cells all expired are dropped whole.
- `chunks_<points>p_<precision>s_<0|aggr>` (one per stage table, FiloDB's layout): sealed
  windows. A window is `window_steps(stage)` consecutive steps of absolute time
  (CHUNK_WINDOW_STEPS, recorded once per store in store_settings `chunk_window`, capped
  at the stage's points so a window never spans two turns of the ring); partition
  (metric, window_start), clustering `chunk` (the sealing time in microseconds, newest
  first), column `data` (biggraphite_like.chunks bytes: every point of the window).
  `bgl seal` encodes windows whose end is past into one chunk and then deletes their
  per-point rows; a point written later into a sealed window is a per-point row again and
  shadows the chunk's slot on reads until the window is sealed again. Each chunk is
  written with the TTL its window's last point would have had (window end + stage TTL -
  now), TWCS as the stage table. store_settings `sealed` is the horizon: windows ending at
  or before it may have chunks; readers look for chunks only there (see points.py).
Metric `metric` uuids are the metric's data id: uuid5 of its name, or of name and
generation after a deletion (connection.data_id, metadata.py), so a metric written again
starts empty.

Metadata keyspace `<ks>_metadata`: `metrics` and `directories` (name, parent,
component_0..63 with `__END__` after the last component; SASI or SAI indexes on every
component and on parent), `metric_generations` (deletions), `store_settings` (the index
kind syncdb chose).
"""
from __future__ import annotations

import math

from biggraphite_like import names as names_mod
from biggraphite_like.retention import Stage
from biggraphite_like.stores.base import StageTable
from biggraphite_like.stores.cassandra import tags as cassandra_tags
from biggraphite_like.stores.cassandra.options import CassandraOptions

COMPONENTS = names_mod.MAX_COMPONENTS
END = names_mod.END_MARKER
COMPONENT_COLUMNS = tuple(f"component_{i}" for i in range(COMPONENTS))
ROW_POINTS = 2048  # slots per partition: bounded rows, and a read window spans few partitions
TTL_SLACK = 3600  # seconds kept past a stage's duration (plus one step of the stage)
TWCS_WINDOWS = 30  # time windows per TTL
SASI_CLASS = "org.apache.cassandra.index.sasi.SASIIndex"
METRIC_COLUMNS = ("id", "retention", "aggregator", "xfilesfactor", "created_on", "updated_on", "read_on")
SETTINGS_TABLE = "store_settings"
CHUNK_WINDOW_STEPS = 720  # steps per sealed window (as SQLite's windows): recorded in store_settings


def ttl_seconds(stage: Stage) -> int:
    return stage.duration + TTL_SLACK + stage.precision


def compaction_window(stage: Stage) -> tuple[str, int]:
    """(unit, size) of the time windows: about TWCS_WINDOWS of them per TTL."""
    minutes = max(1, math.ceil(ttl_seconds(stage) / TWCS_WINDOWS / 60))
    if minutes < 24 * 60:
        return "MINUTES", minutes
    return "HOURS", math.ceil(minutes / 60)


def stage_table_cql(keyspace: str, table: StageTable) -> str:
    """DDL of one datapoints table."""
    stage = table.stage
    unit, size = compaction_window(stage)
    if table.aggregated:
        columns = ("  metric uuid,\n  slot_start int,\n  offset smallint,\n  shard smallint,\n  ts bigint,\n"
                   "  value double,\n  count int,\n  PRIMARY KEY ((metric, slot_start), offset, shard)\n")
        order = "offset DESC, shard ASC"
    else:
        columns = ("  metric uuid,\n  slot_start int,\n  offset smallint,\n  ts bigint,\n  value double,\n"
                   "  PRIMARY KEY ((metric, slot_start), offset)\n")
        order = "offset DESC"
    return (
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{table.name} (\n{columns}) WITH CLUSTERING ORDER BY ({order})\n"
        f"  AND default_time_to_live = {ttl_seconds(stage)}\n"
        "  AND compaction = {'class': 'TimeWindowCompactionStrategy',"
        f" 'compaction_window_unit': '{unit}', 'compaction_window_size': '{size}'}};"
    )


def chunk_table_name(table: StageTable) -> str:
    """The chunk table of a stage table: chunks_<points>p_<precision>s_<0|aggr>."""
    return "chunks_" + table.name.removeprefix("datapoints_")


def window_steps(stage: Stage, width: int) -> int:
    """Steps per sealed window of a stage: the store's width, at most the stage's points (one turn)."""
    return max(1, min(width, stage.points))


def chunk_table_cql(keyspace: str, table: StageTable) -> str:
    """DDL of one chunk table (sealed windows of a stage table)."""
    unit, size = compaction_window(table.stage)
    return (
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{chunk_table_name(table)} (\n  metric uuid,\n  window_start bigint,\n"
        "  chunk bigint,\n  data blob,\n  PRIMARY KEY ((metric, window_start), chunk)\n)"
        " WITH CLUSTERING ORDER BY (chunk DESC)\n"
        f"  AND default_time_to_live = {ttl_seconds(table.stage)}\n"
        "  AND compaction = {'class': 'TimeWindowCompactionStrategy',"
        f" 'compaction_window_unit': '{unit}', 'compaction_window_size': '{size}'}};"
    )


def slot_ranges(stage: Stage, start: int, end: int) -> list[tuple[int, int, int]]:
    """(slot_start, first offset, last offset) of the partitions holding [start, end) of a stage."""
    precision, points = stage.precision, stage.points
    first = -(-start // precision)  # index of the first step at or after start
    last = -(-end // precision) - 1
    if last < first:
        return []
    if last - first + 1 >= points:
        spans = [(0, points - 1)]
    else:
        low, high = first % points, last % points
        spans = [(low, high)] if low <= high else [(low, points - 1), (0, high)]
    ranges: dict[int, tuple[int, int]] = {}
    for low, high in spans:
        block = low - low % ROW_POINTS
        while block <= high:
            first_offset, last_offset = max(low, block) - block, min(high, block + ROW_POINTS - 1) - block
            if block in ranges:  # the window wraps around the ring inside one partition: one query
                first_offset, last_offset = 0, max(last_offset, ranges[block][1])
            ranges[block] = (first_offset, last_offset)
            block += ROW_POINTS
    return [(block, low, high) for block, (low, high) in ranges.items()]


def _metadata_table(keyspace: str, table: str, metrics: bool) -> str:
    columns = ["  name text PRIMARY KEY", "  parent text"] + [f"  {c} text" for c in COMPONENT_COLUMNS]
    if metrics:
        columns += ["  id uuid", "  retention text", "  aggregator text", "  xfilesfactor double",
                    "  created_on bigint", "  updated_on bigint", "  read_on bigint"]
    return (f"CREATE TABLE IF NOT EXISTS {keyspace}.{table} (\n" + ",\n".join(columns)
            + "\n) WITH compaction = {'class': 'LeveledCompactionStrategy'};")


def index_cql(keyspace: str, table: str, column: str, kind: str) -> str:
    """One metadata index: SASI in PREFIX mode (equality and LIKE 'p%'), or SAI (equality)."""
    name = f"{table}_{column}_idx"
    if kind == "sasi":
        return (f"CREATE CUSTOM INDEX IF NOT EXISTS {name} ON {keyspace}.{table} ({column})"
                f" USING '{SASI_CLASS}' WITH OPTIONS = {{'mode': 'PREFIX'}};")
    return f"CREATE INDEX IF NOT EXISTS {name} ON {keyspace}.{table} ({column}) USING 'sai';"


def index_statements(keyspace: str, kind: str) -> list[str]:
    return [index_cql(keyspace, table, column, kind)
            for table in ("metrics", "directories") for column in ("parent",) + COMPONENT_COLUMNS]


def header(options: CassandraOptions, kind: str) -> str:
    return (
        "-- biggraphite_like: schema of the Cassandra store (keyspace `biggraphite`, default options).\n"
        "-- `bgl --store cassandra://HOST/KEYSPACE syncdb` creates exactly this for KEYSPACE; `--dry-run` prints it.\n"
        "-- For another keyspace, replace `biggraphite` (and `biggraphite_metadata`) with it.\n"
        f"-- Indexes: {kind.upper()}"
        + (" (index=auto falls back to SAI, `USING 'sai'`, when the cluster refuses SASI)." if options.index == "auto"
           else ".")
    )


def stage_table_comment(keyspace: str) -> str:
    example = [stage_table_cql(keyspace, StageTable(Stage(60, 1440), False)),
               stage_table_cql(keyspace, StageTable(Stage(3600, 17520), True)),
               chunk_table_cql(keyspace, StageTable(Stage(60, 1440), False))]
    return (
        "-- One datapoints table per stage, created with the first metric that uses it. A stage is a ring of\n"
        f"-- `points` slots (slot = ts / precision % points); a partition holds {ROW_POINTS} consecutive slots;\n"
        "-- TTL: the stage's duration + 3600 s + one step. Each has a chunk table for its sealed windows\n"
        f"-- ({CHUNK_WINDOW_STEPS} steps, at most the stage's points; `bgl seal`). Examples (1440*60s, 17520*3600s,\n"
        "-- the chunks of 1440*60s):\n"
        + "\n".join("-- " + line for text in example for line in text.splitlines())
    )


def schema_statements(options: CassandraOptions, kind: str) -> list[str]:
    """Every statement syncdb runs, in order (comments are shown, not sent)."""
    ks, meta = options.keyspace, options.metadata_keyspace
    replication = options.replication_map()
    return (
        [header(options, kind),
         f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {replication} AND durable_writes = true;",
         f"CREATE KEYSPACE IF NOT EXISTS {meta} WITH replication = {replication} AND durable_writes = true;",
         _metadata_table(meta, "metrics", True),
         _metadata_table(meta, "directories", False),
         "-- A deleted metric's name -> generation: the data id of the metric created again\n"
         "-- (biggraphite_like.stores.cassandra.metadata).",
         f"CREATE TABLE IF NOT EXISTS {meta}.metric_generations (\n  name text PRIMARY KEY,\n  generation bigint\n);",
         f"CREATE TABLE IF NOT EXISTS {meta}.{SETTINGS_TABLE} (\n  name text PRIMARY KEY,\n  value text\n);"]
        + index_statements(meta, kind)
        + cassandra_tags.schema_statements(meta)
        + [f"INSERT INTO {meta}.{SETTINGS_TABLE} (name, value) VALUES ('index', '{kind}');",
           f"INSERT INTO {meta}.{SETTINGS_TABLE} (name, value) VALUES ('chunk_window', '{CHUNK_WINDOW_STEPS}')"
           " IF NOT EXISTS;",
           stage_table_comment(ks)]
    )


def is_comment(statement: str) -> bool:
    return statement.startswith("--")
