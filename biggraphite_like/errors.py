"""Exceptions of the accessor layer: each says what was wrong and what to do."""


class BglError(Exception):
    """Base class of every error biggraphite_like raises on purpose."""


class InvalidMetricName(BglError, ValueError):
    """A metric or directory name that cannot be stored."""


class InvalidRetention(BglError, ValueError):
    """A retention definition that is malformed or inconsistent."""


class InvalidAggregation(BglError, ValueError):
    """An aggregation method or xFilesFactor outside whisper's set."""


class InvalidPoint(BglError, ValueError):
    """A datapoint whose value or timestamp cannot be stored."""


class InvalidTimeRange(BglError, ValueError):
    """A read window that makes no sense (from after until, out of range)."""


class InvalidGlob(BglError, ValueError):
    """A glob pattern that cannot be parsed."""


class GlobTooComplex(BglError):
    """A glob pattern that expands to more alternatives than the configured limit."""


class TooManyResults(BglError):
    """A glob that matches more names than the configured limit."""


class MetricNotFound(BglError, KeyError):
    """An operation named a metric that does not exist."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "metric not found"


class InvalidMaintenanceOption(BglError, ValueError):
    """A maintenance job was given an option it cannot work with (shards, ages, jobs)."""


class InvalidShard(InvalidMaintenanceOption):
    """A scan was asked for shard k of n with k outside 0..n-1 (or n < 1)."""


class InvalidStoreURL(BglError, ValueError):
    """A store URL that names no known store or has bad options."""


class MissingDependency(BglError, ImportError):
    """An optional package a feature needs is not installed (the message names the extra)."""


class StoreError(BglError):
    """The store failed an operation (I/O, corruption, schema missing)."""


class CorruptChunk(StoreError):
    """Stored points (a chunk, biggraphite_like.chunks) cannot be decoded: the row was damaged
    or written by another format."""


class StoreUnavailable(StoreError):
    """The store cannot be reached (file not writable, server down)."""


class StoreLocked(StoreUnavailable):
    """Another process held the store's write lock past the timeout: the same write passes
    once it lets go (a smaller one would wait as long)."""


class StoreFull(StoreError):
    """The disk holding the store is full: the transaction was rolled back, nothing of it
    stored, earlier ones kept. Free space and write again."""


class SchemaMissing(StoreError):
    """The store has no schema yet: run `bgl syncdb`."""


class UnreadableMetadata(StoreError):
    """A metric row whose stored metadata cannot be parsed (hand edit, foreign tool, partial
    write). Stores leave such rows out of lookups (logged) and scans report them apart;
    `bgl repair` removes them."""


class StackError(BglError):
    """`bgl run` cannot start or keep the local stack running (port taken, a part missing,
    a process that exited)."""


class InvalidTag(BglError, ValueError):
    """A tagged series name (`name;tag=value`) that graphite's tag rules refuse."""


class InvalidTagExpression(BglError, ValueError):
    """A tag expression (`tag=value`, `tag!=~regex`...) that cannot be parsed or is refused
    (no term requiring a value, or a regex outside the safe subset)."""


class ReceiverConfigError(BglError, ValueError):
    """The receiver (`bgl receive`) cannot start with its configuration: an unreadable
    storage-schemas.conf or storage-aggregation.conf, a bad option, a port in use."""
