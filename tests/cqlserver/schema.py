"""Keyspaces, tables, columns and indexes of the CQL test server (test tool only).

A ``Table`` holds both its definition and its data: partitions by serialized
partition key, and the ring, a list of ``(token, key)`` kept sorted so that
unrestricted, token-range and index queries return partitions in token order
(Murmur3 of the serialized partition key, as Cassandra's default partitioner).
"""
from __future__ import annotations

import struct
import uuid
from bisect import insort
from typing import Any

from cassandra.murmur3 import murmur3

from .errors import ConfigurationError, CQLSyntaxError, InvalidRequest
from .secondary import ColumnIndex
from .storage import Desc, Partition
from .types import CQLType

MIN_TOKEN = -(1 << 63)
MAX_TOKEN = (1 << 63) - 1

SASI_CLASS = "org.apache.cassandra.index.sasi.SASIIndex"
SAI_CLASS = "org.apache.cassandra.index.sai.StorageAttachedIndex"

TABLE_DEFAULTS: dict[str, Any] = {
    "additional_write_policy": "99p",
    "bloom_filter_fp_chance": 0.01,
    "caching": {"keys": "ALL", "rows_per_partition": "NONE"},
    "cdc": False,
    "comment": "",
    "compaction": {"class": "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy",
                   "max_threshold": "32", "min_threshold": "4"},
    "compression": {"chunk_length_in_kb": "16", "class": "org.apache.cassandra.io.compress.LZ4Compressor"},
    "crc_check_chance": 1.0,
    "default_time_to_live": 0,
    "extensions": {},
    "gc_grace_seconds": 864000,
    "max_index_interval": 2048,
    "memtable_flush_period_in_ms": 0,
    "min_index_interval": 128,
    "read_repair": "BLOCKING",
    "speculative_retry": "99p",
}
_INT_OPTIONS = {"default_time_to_live", "gc_grace_seconds", "max_index_interval",
                "memtable_flush_period_in_ms", "min_index_interval"}
_FLOAT_OPTIONS = {"bloom_filter_fp_chance", "crc_check_chance"}
_MAP_OPTIONS = {"caching", "compaction", "compression", "extensions"}
_COMPACTION_COMMON = {"class", "enabled", "tombstone_threshold", "tombstone_compaction_interval",
                      "unchecked_tombstone_compaction", "only_purge_repaired_tombstones", "log_all",
                      "provide_overlapping_tombstones", "min_threshold", "max_threshold"}
_COMPACTION_OPTIONS = {
    "SizeTieredCompactionStrategy": {"bucket_high", "bucket_low", "min_sstable_size"},
    "LeveledCompactionStrategy": {"sstable_size_in_mb", "fanout_size", "single_sstable_uplevel"},
    "TimeWindowCompactionStrategy": {"compaction_window_unit", "compaction_window_size", "timestamp_resolution",
                                     "expired_sstable_check_frequency_seconds",
                                     "unsafe_aggressive_sstable_expiration", "split_during_flush"},
}
MAX_TTL = 630720000


def token_of(key: bytes) -> int:
    """Murmur3 token of a serialized partition key (Long.MIN_VALUE maps to MAX)."""
    t = murmur3(key)
    return MAX_TOKEN if t == MIN_TOKEN else t


def compose_key(components: tuple) -> bytes:
    """Serialized partition key: the value itself, or a composite of its parts."""
    if len(components) == 1:
        return components[0]
    return b"".join(struct.pack(">H", len(c)) + c + b"\x00" for c in components)


def checked_partition_key(components: tuple) -> bytes:
    """compose_key, refusing an empty key as Cassandra does for every statement naming a
    partition (SELECT and DELETE too, not only INSERT): a one-column key that is ''."""
    key = compose_key(components)
    if not key:
        raise InvalidRequest("Key may not be empty")
    return key


def _option_value(name: str, lit: tuple) -> Any:
    kind, value, text = lit
    if name in _MAP_OPTIONS:
        if kind != "map":
            raise InvalidRequest(f"Invalid value for property '{name}': a map is expected, got {text}")
        return {str(k[1]): _plain(v) for k, v in value}
    if name in _INT_OPTIONS:
        if kind != "int":
            raise InvalidRequest(f"Invalid value for property '{name}': an integer is expected, got {text}")
        return value
    if name in _FLOAT_OPTIONS:
        if kind not in ("int", "float"):
            raise InvalidRequest(f"Invalid value for property '{name}': a number is expected, got {text}")
        return float(value)
    if name == "cdc":
        if kind != "bool":
            raise InvalidRequest(f"Invalid value for property 'cdc': a boolean is expected, got {text}")
        return value
    if kind not in ("str", "int", "float", "bool"):
        raise InvalidRequest(f"Invalid value for property '{name}': {text}")
    return value if kind == "str" else str(value)


def _plain(lit: tuple) -> str:
    kind, value, text = lit
    if kind == "bool":
        return "true" if value else "false"
    return str(value)


def table_options(raw: dict, base: dict | None = None) -> dict:
    """Validated table options over Cassandra's defaults (or over ``base``)."""
    opts = dict(base) if base is not None else {k: (dict(v) if isinstance(v, dict) else v)
                                                for k, v in TABLE_DEFAULTS.items()}
    for name, lit in raw.items():
        if name not in TABLE_DEFAULTS or name == "extensions":
            raise CQLSyntaxError(f"Unknown property '{name}'")
        value = _option_value(name, lit)
        if name == "compaction":
            cls = value.get("class")
            if not cls:
                raise ConfigurationError("Missing sub-option 'class' for the 'compaction' option.")
            if "." not in cls:
                cls = value["class"] = "org.apache.cassandra.db.compaction." + cls
            _check_compaction(cls, value)
        if name == "compression" and "class" in value and "." not in value["class"]:
            value["class"] = "org.apache.cassandra.io.compress." + value["class"]
        if name == "default_time_to_live":
            if value < 0:
                raise ConfigurationError("default_time_to_live must be greater than or equal to 0 (got %d)" % value)
            if value > MAX_TTL:
                raise ConfigurationError(f"default_time_to_live must be less than or equal to {MAX_TTL} (got {value})")
        if name == "gc_grace_seconds" and value < 0:
            raise ConfigurationError(f"gc_grace_seconds must be non-negative (got {value})")
        opts[name] = value
    return opts


def _check_compaction(cls: str, value: dict) -> None:
    short = cls.rsplit(".", 1)[-1]
    if not cls.startswith("org.apache.cassandra.db.compaction.") or short not in _COMPACTION_OPTIONS:
        raise ConfigurationError(f"Unable to find compaction strategy class '{cls}'")
    unknown = sorted(set(value) - _COMPACTION_COMMON - _COMPACTION_OPTIONS[short])
    if unknown:
        raise ConfigurationError(f"Properties specified {unknown} are not understood by {short}")
    if short == "TimeWindowCompactionStrategy":
        unit = value.get("compaction_window_unit", "DAYS")
        if unit not in ("MINUTES", "HOURS", "DAYS"):
            raise ConfigurationError(f"{unit} is not valid for compaction_window_unit (use MINUTES, HOURS or DAYS)")
        size = value.get("compaction_window_size", "1")
        if not str(size).isdigit() or int(size) < 1:
            raise ConfigurationError(f"{size} must be greater than 1 for compaction_window_size")


class Column:
    __slots__ = ("name", "type", "kind", "position", "order")

    def __init__(self, name: str, ctype: CQLType, kind: str, position: int = -1, order: str = "none"):
        self.name = name
        self.type = ctype
        self.kind = kind  # partition_key, clustering, regular, static
        self.position = position
        self.order = order  # asc, desc, none

    @property
    def is_primary_key(self) -> bool:
        return self.kind in ("partition_key", "clustering")


class Index:
    """A secondary index: ``kind`` is sasi, sai or legacy (CQL 2i)."""

    __slots__ = ("name", "column", "kind", "class_name", "options", "target")

    def __init__(self, name: str, column: str, kind: str, class_name: str | None, options: dict, target: str):
        self.name = name
        self.column = column
        self.kind = kind
        self.class_name = class_name
        self.options = dict(options)
        self.target = target

    @property
    def mode(self) -> str:
        return str(self.options.get("mode", "PREFIX")).upper()

    @property
    def case_sensitive(self) -> bool:
        return str(self.options.get("case_sensitive", "true")).lower() != "false"

    def supports(self, op: str) -> bool:
        if self.kind == "sasi":
            return op in ("=", "LIKE", "<", "<=", ">", ">=")
        if self.kind == "sai":
            return op in ("=", "<", "<=", ">", ">=", "CONTAINS", "CONTAINS_KEY", "IN")
        return op in ("=", "CONTAINS", "CONTAINS_KEY")

    def schema_options(self) -> dict:
        opts = {"target": self.target}
        if self.class_name:
            opts["class_name"] = self.class_name
        opts.update({k: str(v) for k, v in self.options.items()})
        return opts


class Table:
    """Definition and data of one table."""

    def __init__(self, keyspace: str, name: str, columns: list[Column], options: dict, table_id: uuid.UUID | None = None):
        self.keyspace = keyspace
        self.name = name
        self.id = table_id or uuid.uuid4()
        self.options = options
        self.indexes: dict[str, Index] = {}
        self.version = 0
        self.columns: dict[str, Column] = {}
        self.partition_key: list[Column] = []
        self.clustering: list[Column] = []
        self.regular: list[Column] = []
        self._set_columns(columns)
        self.partitions: dict[bytes, Partition] = {}
        self.ring: list[tuple[int, bytes]] = []
        self.index_data: dict[str, ColumnIndex] = {}

    def _set_columns(self, columns: list[Column]) -> None:
        self.columns = {c.name: c for c in columns}
        self.partition_key = sorted((c for c in columns if c.kind == "partition_key"), key=lambda c: c.position)
        self.clustering = sorted((c for c in columns if c.kind == "clustering"), key=lambda c: c.position)
        self.regular = sorted((c for c in columns if c.kind in ("regular", "static")), key=lambda c: c.name)
        self.all_columns = self.partition_key + self.clustering + self.regular
        self._ck_keys = [(c.type.key_of_bytes, c.order == "desc") for c in self.clustering]
        self._pk_keys = [c.type.key_of_bytes for c in self.partition_key]
        self.version += 1

    def add_column(self, col: Column) -> None:
        self._set_columns(list(self.columns.values()) + [col])

    def drop_column(self, name: str) -> None:
        self._set_columns([c for n, c in self.columns.items() if n != name])
        for part in self.partitions.values():
            for row in part.rows.values():
                row.cells.pop(name, None)

    @property
    def default_ttl(self) -> int:
        return int(self.options.get("default_time_to_live", 0) or 0)

    # -- keys ------------------------------------------------------------------
    def ck_sort_key(self, ck: tuple) -> tuple:
        out = []
        for (fn, desc), raw in zip(self._ck_keys, ck):
            k = fn(raw)
            out.append(Desc(k) if desc else k)
        return tuple(out)

    def ck_component_key(self, i: int, raw: bytes) -> Any:
        fn, desc = self._ck_keys[i]
        k = fn(raw)
        return Desc(k) if desc else k

    def pk_sort_key(self, components: tuple) -> tuple:
        return tuple(fn(raw) for fn, raw in zip(self._pk_keys, components))

    def partition(self, components: tuple, create: bool = True) -> Partition | None:
        key = compose_key(components)
        part = self.partitions.get(key)
        if part is None and create:
            token = token_of(key)
            part = Partition(key, token, components)
            self.partitions[key] = part
            insort(self.ring, (token, key))
        return part

    def truncate(self) -> None:
        self.partitions.clear()
        self.ring.clear()
        for ix in self.index_data.values():
            ix.clear()

    # -- secondary index candidates ------------------------------------------------
    def refresh_index_data(self) -> None:
        """(Re)build the candidate lookup of every indexed non-collection column."""
        wanted = {i.column for i in self.indexes.values()}
        self.index_data = {}
        for name in wanted:
            col = self.columns.get(name)
            if col is None or col.kind == "partition_key" or col.type.is_collection:
                continue
            kinds = {i.kind for i in self.indexes.values() if i.column == name}
            ix = ColumnIndex(col.type.is_text, skip_empty=not (kinds - {"sasi", "sai"}))
            for part in self.partitions.values():
                for ck, row in part.rows.items():
                    if col.kind == "clustering":
                        ix.add(ck[col.position], part.key)
                    else:
                        cell = row.cells.get(name)
                        if cell is not None and cell[0] is not None:
                            ix.add(cell[0], part.key)
            self.index_data[name] = ix

    def index_clustering(self, part: Partition, ck: tuple) -> None:
        for col in self.clustering:
            ix = self.index_data.get(col.name)
            if ix is not None:
                ix.add(ck[col.position], part.key)

    def index_on(self, column: str) -> list[Index]:
        return [i for i in self.indexes.values() if i.column == column]


class Keyspace:
    def __init__(self, name: str, replication: dict, durable_writes: bool = True):
        self.name = name
        self.replication = replication
        self.durable_writes = durable_writes
        self.tables: dict[str, Table] = {}


def normalize_replication(raw: dict) -> dict:
    repl = {str(k): str(v) for k, v in raw.items()}
    cls = repl.get("class")
    if not cls:
        raise ConfigurationError("Missing replication strategy class")
    if "." not in cls:
        cls = "org.apache.cassandra.locator." + cls
    repl["class"] = cls
    short = cls.rsplit(".", 1)[-1]
    if short == "SimpleStrategy":
        if "replication_factor" not in repl:
            raise ConfigurationError("SimpleStrategy requires a replication_factor strategy option.")
        extra = set(repl) - {"class", "replication_factor"}
        if extra:
            raise ConfigurationError(f"Unrecognized strategy option {{{', '.join(sorted(extra))}}} passed to SimpleStrategy")
    elif short not in ("NetworkTopologyStrategy", "LocalStrategy", "EverywhereStrategy"):
        raise ConfigurationError(f"Unable to find replication strategy class '{cls}'")
    for k, v in repl.items():
        if k != "class" and not v.isdigit():
            raise ConfigurationError(f"Replication factor must be non-negative integer; found {v}")
    return repl
