"""Results of statements executed by the CQL test server (test tool only)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any



class Unset:
    """The protocol v4 'unset' value (length -2): writes nothing."""

    _instance = None

    def __new__(cls):  # singleton
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


@dataclass
class Options:
    """Per-request query parameters (QUERY, EXECUTE, BATCH)."""

    consistency: int = 1
    page_size: int = -1
    paging_state: bytes | None = None
    serial_consistency: int | None = None
    timestamp: int | None = None
    skip_metadata: bool = False
    names: list | None = None


@dataclass
class Void:
    pass


@dataclass
class Rows:
    keyspace: str
    table: str
    columns: list  # [(name, CQLType)]
    rows: list  # [[bytes | None]]
    paging_state: bytes | None = None


@dataclass
class SetKeyspace:
    keyspace: str


@dataclass
class SchemaChange:
    change: str  # CREATED, UPDATED, DROPPED
    target: str  # KEYSPACE, TABLE
    keyspace: str
    name: str | None = None


@dataclass
class Prepared:
    query_id: bytes
    keyspace: str
    table: str
    binds: list  # [(name, CQLType)]
    pk_indexes: list
    result_columns: list | None  # [(name, CQLType)] or None (no metadata)


@dataclass
class Compiled:
    """A statement ready to run: its plan, bind-marker specs and routing indexes."""

    plan: Any
    specs: list  # [(name, CQLType)]
    pk_indexes: list = field(default_factory=list)
    keyspace: str = ""
    table: str = ""
    result_columns: list | None = None
    schema_version: int = 0
