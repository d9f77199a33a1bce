-- biggraphite_like: schema of the embedded SQLite store.
-- `bgl syncdb` creates exactly this (`bgl syncdb --dry-run` prints it); a test keeps them equal.
-- Apply by hand with: sqlite3 FILE.db < schema/sqlite.sql  (then: PRAGMA journal_mode = WAL;)
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
CREATE INDEX IF NOT EXISTS metrics_component_0 ON metrics (component_0) WHERE component_0 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_1 ON metrics (component_1) WHERE component_1 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_2 ON metrics (component_2) WHERE component_2 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_3 ON metrics (component_3) WHERE component_3 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_4 ON metrics (component_4) WHERE component_4 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_5 ON metrics (component_5) WHERE component_5 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_6 ON metrics (component_6) WHERE component_6 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_7 ON metrics (component_7) WHERE component_7 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_8 ON metrics (component_8) WHERE component_8 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_9 ON metrics (component_9) WHERE component_9 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_10 ON metrics (component_10) WHERE component_10 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_11 ON metrics (component_11) WHERE component_11 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_12 ON metrics (component_12) WHERE component_12 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_13 ON metrics (component_13) WHERE component_13 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_14 ON metrics (component_14) WHERE component_14 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_15 ON metrics (component_15) WHERE component_15 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_16 ON metrics (component_16) WHERE component_16 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_17 ON metrics (component_17) WHERE component_17 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_18 ON metrics (component_18) WHERE component_18 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_19 ON metrics (component_19) WHERE component_19 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_20 ON metrics (component_20) WHERE component_20 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_21 ON metrics (component_21) WHERE component_21 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_22 ON metrics (component_22) WHERE component_22 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_23 ON metrics (component_23) WHERE component_23 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_24 ON metrics (component_24) WHERE component_24 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_25 ON metrics (component_25) WHERE component_25 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_26 ON metrics (component_26) WHERE component_26 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_27 ON metrics (component_27) WHERE component_27 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_28 ON metrics (component_28) WHERE component_28 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_29 ON metrics (component_29) WHERE component_29 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_30 ON metrics (component_30) WHERE component_30 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_31 ON metrics (component_31) WHERE component_31 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_32 ON metrics (component_32) WHERE component_32 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_33 ON metrics (component_33) WHERE component_33 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_34 ON metrics (component_34) WHERE component_34 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_35 ON metrics (component_35) WHERE component_35 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_36 ON metrics (component_36) WHERE component_36 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_37 ON metrics (component_37) WHERE component_37 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_38 ON metrics (component_38) WHERE component_38 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_39 ON metrics (component_39) WHERE component_39 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_40 ON metrics (component_40) WHERE component_40 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_41 ON metrics (component_41) WHERE component_41 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_42 ON metrics (component_42) WHERE component_42 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_43 ON metrics (component_43) WHERE component_43 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_44 ON metrics (component_44) WHERE component_44 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_45 ON metrics (component_45) WHERE component_45 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_46 ON metrics (component_46) WHERE component_46 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_47 ON metrics (component_47) WHERE component_47 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_48 ON metrics (component_48) WHERE component_48 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_49 ON metrics (component_49) WHERE component_49 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_50 ON metrics (component_50) WHERE component_50 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_51 ON metrics (component_51) WHERE component_51 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_52 ON metrics (component_52) WHERE component_52 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_53 ON metrics (component_53) WHERE component_53 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_54 ON metrics (component_54) WHERE component_54 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_55 ON metrics (component_55) WHERE component_55 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_56 ON metrics (component_56) WHERE component_56 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_57 ON metrics (component_57) WHERE component_57 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_58 ON metrics (component_58) WHERE component_58 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_59 ON metrics (component_59) WHERE component_59 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_60 ON metrics (component_60) WHERE component_60 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_61 ON metrics (component_61) WHERE component_61 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_62 ON metrics (component_62) WHERE component_62 IS NOT NULL;
CREATE INDEX IF NOT EXISTS metrics_component_63 ON metrics (component_63) WHERE component_63 IS NOT NULL;
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
CREATE INDEX IF NOT EXISTS directories_component_0 ON directories (component_0) WHERE component_0 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_1 ON directories (component_1) WHERE component_1 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_2 ON directories (component_2) WHERE component_2 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_3 ON directories (component_3) WHERE component_3 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_4 ON directories (component_4) WHERE component_4 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_5 ON directories (component_5) WHERE component_5 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_6 ON directories (component_6) WHERE component_6 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_7 ON directories (component_7) WHERE component_7 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_8 ON directories (component_8) WHERE component_8 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_9 ON directories (component_9) WHERE component_9 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_10 ON directories (component_10) WHERE component_10 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_11 ON directories (component_11) WHERE component_11 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_12 ON directories (component_12) WHERE component_12 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_13 ON directories (component_13) WHERE component_13 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_14 ON directories (component_14) WHERE component_14 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_15 ON directories (component_15) WHERE component_15 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_16 ON directories (component_16) WHERE component_16 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_17 ON directories (component_17) WHERE component_17 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_18 ON directories (component_18) WHERE component_18 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_19 ON directories (component_19) WHERE component_19 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_20 ON directories (component_20) WHERE component_20 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_21 ON directories (component_21) WHERE component_21 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_22 ON directories (component_22) WHERE component_22 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_23 ON directories (component_23) WHERE component_23 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_24 ON directories (component_24) WHERE component_24 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_25 ON directories (component_25) WHERE component_25 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_26 ON directories (component_26) WHERE component_26 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_27 ON directories (component_27) WHERE component_27 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_28 ON directories (component_28) WHERE component_28 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_29 ON directories (component_29) WHERE component_29 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_30 ON directories (component_30) WHERE component_30 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_31 ON directories (component_31) WHERE component_31 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_32 ON directories (component_32) WHERE component_32 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_33 ON directories (component_33) WHERE component_33 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_34 ON directories (component_34) WHERE component_34 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_35 ON directories (component_35) WHERE component_35 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_36 ON directories (component_36) WHERE component_36 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_37 ON directories (component_37) WHERE component_37 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_38 ON directories (component_38) WHERE component_38 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_39 ON directories (component_39) WHERE component_39 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_40 ON directories (component_40) WHERE component_40 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_41 ON directories (component_41) WHERE component_41 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_42 ON directories (component_42) WHERE component_42 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_43 ON directories (component_43) WHERE component_43 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_44 ON directories (component_44) WHERE component_44 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_45 ON directories (component_45) WHERE component_45 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_46 ON directories (component_46) WHERE component_46 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_47 ON directories (component_47) WHERE component_47 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_48 ON directories (component_48) WHERE component_48 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_49 ON directories (component_49) WHERE component_49 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_50 ON directories (component_50) WHERE component_50 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_51 ON directories (component_51) WHERE component_51 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_52 ON directories (component_52) WHERE component_52 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_53 ON directories (component_53) WHERE component_53 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_54 ON directories (component_54) WHERE component_54 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_55 ON directories (component_55) WHERE component_55 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_56 ON directories (component_56) WHERE component_56 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_57 ON directories (component_57) WHERE component_57 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_58 ON directories (component_58) WHERE component_58 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_59 ON directories (component_59) WHERE component_59 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_60 ON directories (component_60) WHERE component_60 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_61 ON directories (component_61) WHERE component_61 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_62 ON directories (component_62) WHERE component_62 IS NOT NULL;
CREATE INDEX IF NOT EXISTS directories_component_63 ON directories (component_63) WHERE component_63 IS NOT NULL;
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
-- pairs with their series counts, postings per pair, tagged series by canonical path.
CREATE TABLE IF NOT EXISTS tag_names (
  id INTEGER PRIMARY KEY,
  tag TEXT NOT NULL UNIQUE,
  series INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS tag_values (
  id INTEGER PRIMARY KEY,
  tag_id INTEGER NOT NULL,
  value TEXT NOT NULL,
  series INTEGER NOT NULL DEFAULT 0,
  UNIQUE (tag_id, value)
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
