-- biggraphite_like: schema of the embedded SQLite store.
-- `bgl syncdb` creates exactly this (`bgl syncdb --dry-run` prints it); a test keeps them equal.
-- Apply by hand to a new file with: sqlite3 FILE.db < schema/sqlite.sql  (then: PRAGMA journal_mode = WAL;)
-- Free pages go back to the file system as writes free them (stores.sqlite.free_pages);
-- only takes effect before the first table is created (or with a VACUUM).
PRAGMA auto_vacuum = INCREMENTAL;
-- Interned strings of names (biggraphite_like.stores.sqlite.name_strings): every component once;
-- directories.component and metrics.leaf hold their ids.
CREATE TABLE IF NOT EXISTS name_strings (
  id INTEGER PRIMARY KEY,
  value TEXT NOT NULL UNIQUE
);
INSERT OR IGNORE INTO name_strings (id, value) VALUES (0, '__END__');
-- Metric metadata, interned: metrics.metadata is the id of its (retention, aggregator,
-- xfilesfactor) row; rows are never deleted nor changed.
CREATE TABLE IF NOT EXISTS metadatas (
  id INTEGER PRIMARY KEY,
  retention TEXT NOT NULL,
  aggregator TEXT NOT NULL,
  xfilesfactor REAL NOT NULL,
  UNIQUE (retention, aggregator, xfilesfactor)
);
-- The name tree (biggraphite_like.stores.sqlite.name_tree): a directory is a node under its
-- parent directory (key 0: the root), named by one interned component; hidden = 1: deleted
-- while it still had children (skipped by directory globs and reads). No full name is stored.
CREATE TABLE IF NOT EXISTS directories (
  key INTEGER PRIMARY KEY AUTOINCREMENT,
  parent INTEGER NOT NULL,
  component INTEGER NOT NULL,
  hidden INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS directories_child ON directories (parent, component);
-- the inverted index of components: globs with `**` or leading wildcards start from a literal
CREATE INDEX IF NOT EXISTS directories_component ON directories (component);
CREATE INDEX IF NOT EXISTS directories_hidden ON directories (key) WHERE hidden;
-- A metric is a leaf of the tree: its parent directory's key and its last component's id.
CREATE TABLE IF NOT EXISTS metrics (
  key INTEGER PRIMARY KEY AUTOINCREMENT,
  parent INTEGER NOT NULL,
  leaf INTEGER NOT NULL,
  metadata INTEGER NOT NULL,
  created_on INTEGER NOT NULL DEFAULT 0,
  updated_on INTEGER NOT NULL DEFAULT 0,
  read_on INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS metrics_child ON metrics (parent, leaf);
CREATE INDEX IF NOT EXISTS metrics_leaf ON metrics (leaf);
-- Full names for people and scripts (sqlite3 FILE.db 'SELECT name FROM named_metrics'): views,
-- no bytes; each query rebuilds the whole tree (the store itself caches paths instead).
CREATE VIEW IF NOT EXISTS named_directories (key, name, hidden) AS
  WITH RECURSIVE tree (key, name, hidden) AS (
    SELECT d.key, s.value, d.hidden FROM directories AS d JOIN name_strings AS s ON s.id = d.component WHERE d.parent = 0
    UNION ALL
    SELECT d.key, tree.name || '.' || s.value, d.hidden FROM tree JOIN directories AS d ON d.parent = tree.key
    JOIN name_strings AS s ON s.id = d.component)
  SELECT key, name, hidden FROM tree;
CREATE VIEW IF NOT EXISTS named_metrics (key, name, retention, aggregator, xfilesfactor, created_on, updated_on, read_on) AS
  SELECT m.key, CASE WHEN m.parent = 0 THEN s.value ELSE p.name || '.' || s.value END, d.retention, d.aggregator,
    d.xfilesfactor, m.created_on, m.updated_on, m.read_on FROM metrics AS m
    JOIN name_strings AS s ON s.id = m.leaf LEFT JOIN named_directories AS p ON p.key = m.parent
    LEFT JOIN metadatas AS d ON d.id = m.metadata;
-- Shared by every process using the file: deletions counts metric deletions (see
-- SQLiteStore._check_deletions); points changes with every transaction that changes points
-- (see SQLiteStore.change_token); directory_deletions counts directory deletions, hidings and
-- showings (see SQLiteStore.names_token and name_tree).
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
