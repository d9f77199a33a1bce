-- biggraphite_like: schema of the embedded SQLite store.
-- `bgl syncdb` creates exactly this (`bgl syncdb --dry-run` prints it); a test keeps them equal.
-- Apply by hand to a new file with: sqlite3 FILE.db < schema/sqlite.sql  (then: PRAGMA journal_mode = WAL;)
-- Free pages go back to the file system as writes free them (stores.sqlite.free_pages);
-- only takes effect before the first table is created (or with a VACUUM).
PRAGMA auto_vacuum = INCREMENTAL;
-- Interned strings of names (biggraphite_like.stores.sqlite.name_strings): every component and
-- parent path once; the parent and component_N columns of metrics and directories hold their ids.
CREATE TABLE IF NOT EXISTS name_strings (
  id INTEGER PRIMARY KEY,
  value TEXT NOT NULL UNIQUE
);
INSERT OR IGNORE INTO name_strings (id, value) VALUES (0, '__END__');
CREATE TABLE IF NOT EXISTS metrics (
  key INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  parent INTEGER NOT NULL,
  component_0 INTEGER,
  component_1 INTEGER,
  component_2 INTEGER,
  component_3 INTEGER,
  component_4 INTEGER,
  component_5 INTEGER,
  component_6 INTEGER,
  component_7 INTEGER,
  component_8 INTEGER,
  component_9 INTEGER,
  component_10 INTEGER,
  component_11 INTEGER,
  component_12 INTEGER,
  component_13 INTEGER,
  component_14 INTEGER,
  component_15 INTEGER,
  component_16 INTEGER,
  component_17 INTEGER,
  component_18 INTEGER,
  component_19 INTEGER,
  component_20 INTEGER,
  component_21 INTEGER,
  component_22 INTEGER,
  component_23 INTEGER,
  component_24 INTEGER,
  component_25 INTEGER,
  component_26 INTEGER,
  component_27 INTEGER,
  component_28 INTEGER,
  component_29 INTEGER,
  component_30 INTEGER,
  component_31 INTEGER,
  component_32 INTEGER,
  component_33 INTEGER,
  component_34 INTEGER,
  component_35 INTEGER,
  component_36 INTEGER,
  component_37 INTEGER,
  component_38 INTEGER,
  component_39 INTEGER,
  component_40 INTEGER,
  component_41 INTEGER,
  component_42 INTEGER,
  component_43 INTEGER,
  component_44 INTEGER,
  component_45 INTEGER,
  component_46 INTEGER,
  component_47 INTEGER,
  component_48 INTEGER,
  component_49 INTEGER,
  component_50 INTEGER,
  component_51 INTEGER,
  component_52 INTEGER,
  component_53 INTEGER,
  component_54 INTEGER,
  component_55 INTEGER,
  component_56 INTEGER,
  component_57 INTEGER,
  component_58 INTEGER,
  component_59 INTEGER,
  component_60 INTEGER,
  component_61 INTEGER,
  component_62 INTEGER,
  component_63 INTEGER,
  retention TEXT NOT NULL,
  aggregator TEXT NOT NULL,
  xfilesfactor REAL NOT NULL,
  created_on INTEGER NOT NULL DEFAULT 0,
  updated_on INTEGER NOT NULL DEFAULT 0,
  read_on INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS metrics_parent ON metrics (parent);
CREATE TABLE IF NOT EXISTS directories (
  key INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  parent INTEGER NOT NULL,
  component_0 INTEGER,
  component_1 INTEGER,
  component_2 INTEGER,
  component_3 INTEGER,
  component_4 INTEGER,
  component_5 INTEGER,
  component_6 INTEGER,
  component_7 INTEGER,
  component_8 INTEGER,
  component_9 INTEGER,
  component_10 INTEGER,
  component_11 INTEGER,
  component_12 INTEGER,
  component_13 INTEGER,
  component_14 INTEGER,
  component_15 INTEGER,
  component_16 INTEGER,
  component_17 INTEGER,
  component_18 INTEGER,
  component_19 INTEGER,
  component_20 INTEGER,
  component_21 INTEGER,
  component_22 INTEGER,
  component_23 INTEGER,
  component_24 INTEGER,
  component_25 INTEGER,
  component_26 INTEGER,
  component_27 INTEGER,
  component_28 INTEGER,
  component_29 INTEGER,
  component_30 INTEGER,
  component_31 INTEGER,
  component_32 INTEGER,
  component_33 INTEGER,
  component_34 INTEGER,
  component_35 INTEGER,
  component_36 INTEGER,
  component_37 INTEGER,
  component_38 INTEGER,
  component_39 INTEGER,
  component_40 INTEGER,
  component_41 INTEGER,
  component_42 INTEGER,
  component_43 INTEGER,
  component_44 INTEGER,
  component_45 INTEGER,
  component_46 INTEGER,
  component_47 INTEGER,
  component_48 INTEGER,
  component_49 INTEGER,
  component_50 INTEGER,
  component_51 INTEGER,
  component_52 INTEGER,
  component_53 INTEGER,
  component_54 INTEGER,
  component_55 INTEGER,
  component_56 INTEGER,
  component_57 INTEGER,
  component_58 INTEGER,
  component_59 INTEGER,
  component_60 INTEGER,
  component_61 INTEGER,
  component_62 INTEGER,
  component_63 INTEGER
);
CREATE INDEX IF NOT EXISTS directories_parent ON directories (parent);
-- The index of component_N of metrics (and of directories) is created with the first name of
-- the table that has that column (N parts or more: `__END__` follows the last one), in the same
-- transaction: an empty index would still take a page, and 120 of them were most of a small
-- store. No such index: no name of the table is that deep (the glob planner relies on it).
-- Stores made before keep all 64 of each. For N = 0 .. 63:
-- CREATE INDEX IF NOT EXISTS metrics_component_N ON metrics (component_N) WHERE component_N IS NOT NULL;
-- Shared by every process using the file: deletions counts metric deletions (see
-- SQLiteStore._check_deletions); points changes with every transaction that changes points
-- (see SQLiteStore.change_token); directory_deletions counts directory deletions (see
-- SQLiteStore.names_token).
CREATE TABLE IF NOT EXISTS store_state (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT OR IGNORE INTO store_state (name, value) VALUES ('deletions', 0);
INSERT OR IGNORE INTO store_state (name, value) VALUES ('points', 0);
INSERT OR IGNORE INTO store_state (name, value) VALUES ('directory_deletions', 0);
-- Graphite tags (biggraphite_like.stores.sqlite.tags): interned tag names and tag=value
-- pairs, series counts per pair, postings per pair, tagged series by canonical path.
CREATE TABLE IF NOT EXISTS tag_names (
  id INTEGER PRIMARY KEY,
  tag TEXT NOT NULL UNIQUE,
  series INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS tag_values (
  id INTEGER PRIMARY KEY,
  tag_id INTEGER NOT NULL,
  value TEXT NOT NULL,
  UNIQUE (tag_id, value)
);
-- Series count of each tag=value pair (tag_values.id), narrow: a batch updates thousands.
CREATE TABLE IF NOT EXISTS tag_value_counts (
  id INTEGER PRIMARY KEY,
  series INTEGER NOT NULL
);
-- Postings, packed: up to 256 series of one tag=value pair in one chunk of 32,768 series
-- ids (chunk = id >> 15), as offsets in the chunk (uint16 little-endian, ascending); first
-- is the lowest id of the row, and the rows of a pair in a chunk hold disjoint ranges of ids.
CREATE TABLE IF NOT EXISTS tag_postings (
  chunk INTEGER NOT NULL,
  value_id INTEGER NOT NULL,
  first INTEGER NOT NULL,
  offsets BLOB NOT NULL,
  PRIMARY KEY (chunk, value_id, first)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tagged_series (
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL UNIQUE,
  updated_on INTEGER NOT NULL
);
-- The width of the windows of each stage table, recorded once when the table is created:
-- window = ((timestamp / precision) mod points) / window_slots.
CREATE TABLE IF NOT EXISTS point_windows (
  stage_table TEXT PRIMARY KEY,
  window_slots INTEGER NOT NULL
);
-- One datapoints table per stage, created with the first metric that uses it:
-- datapoints_<points>p_<precision>s_0 (stage 0, raw values) or ..._aggr (coarser stages,
-- with the count of finer points aggregated). Whisper's ring of `points` slots per metric,
-- slot = (ts / precision) % points, is cut into windows of point_windows.window_slots slots;
-- a window is a compressed chunk, sealed once the window's last slot is written (row id below
-- 2^62) or open, and an open tail of points appended since (row id odd; the last record of a
-- slot wins), merged into the chunk as it fills. Ids are ordered window first. Example:
-- CREATE TABLE IF NOT EXISTS datapoints_1440p_60s_aggr (
--   id INTEGER PRIMARY KEY,  -- window * 2^32 + metric key * 2 (sealed chunk); + 2^62 (open chunk); + 1 (open tail)
--   newest INTEGER NOT NULL,  -- >= every timestamp of the row (expiry)
--   points BLOB NOT NULL  -- chunk: biggraphite_like.chunks; tail: (timestamp uint32, value float64, count uint32) records, little-endian
-- );
