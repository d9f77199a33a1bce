"""Metrics: a normalised name, its stable id, and the metadata that shapes its data."""
from __future__ import annotations

import dataclasses
import functools
import uuid
from typing import Callable, TypeVar

from biggraphite_like import names
from biggraphite_like.aggregation import Aggregator, parse_xfilesfactor
from biggraphite_like.errors import BglError, UnreadableMetadata
from biggraphite_like.retention import Retention

# Namespace of the name-derived ids: the same name gives the same id in every store.
METRIC_ID_NAMESPACE = uuid.UUID("4b1f4f16-3c0f-5d1e-9a6e-62c1f3d2a7b0")


def metric_id(name: str) -> uuid.UUID:
    """Stable id of a normalised metric name (uuid5, as in BigGraphite's design)."""
    return uuid.uuid5(METRIC_ID_NAMESPACE, name)


@dataclasses.dataclass(frozen=True)
class MetricMetadata:
    """What a metric's data looks like: stages, how they aggregate, how many points they need."""

    retention: Retention
    aggregator: Aggregator = Aggregator.AVERAGE
    xfilesfactor: float = 0.5

    @classmethod
    def create(
        cls,
        retention: "str | Retention | list",
        aggregator: "str | Aggregator | None" = None,
        xfilesfactor: "float | str | None" = None,
    ) -> "MetricMetadata":
        """Build metadata from any accepted spellings; None means whisper's defaults."""
        return cls(Retention.parse(retention), Aggregator.parse(aggregator), parse_xfilesfactor(xfilesfactor))

    def as_dict(self) -> dict:
        return {
            "retention": str(self.retention),
            "aggregator": self.aggregator.value,
            "xfilesfactor": self.xfilesfactor,
        }


@dataclasses.dataclass(frozen=True, slots=True)  # slots: a receiver keeps one a known metric
class Metric:
    """A stored metric. Times are epoch seconds; 0 means never."""

    name: str
    metadata: MetricMetadata
    created_on: int = 0
    updated_on: int = 0
    read_on: int = 0

    @property
    def id(self) -> uuid.UUID:
        return metric_id(self.name)

    @property
    def retention(self) -> Retention:
        return self.metadata.retention

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "id": str(self.id),
            **self.metadata.as_dict(),
            "created_on": self.created_on,
            "updated_on": self.updated_on,
            "read_on": self.read_on,
        }


_Derived = TypeVar("_Derived")


def per_retention(derive: Callable[[Metric], _Derived]) -> Callable[[Metric], _Derived]:
    """derive(metric), computed once per retention object (derive must depend on the
    metric's retention alone): a read of many series derives each retention's read window
    once, as metrics share few retentions. Keyed by identity: hashing a retention's stages
    would cost about what derive saves."""
    known: dict[int, tuple[Retention, _Derived]] = {}

    def derived(metric: Metric) -> _Derived:
        retention = metric.retention
        hit = known.get(id(retention))
        if hit is None:  # kept with the retention, so that its id stays its own
            hit = known[id(retention)] = (retention, derive(metric))
        return hit[1]

    return derived


def make_metric(name: str, metadata: MetricMetadata, now: int = 0) -> Metric:
    """A new metric with a validated name."""
    return Metric(names.normalize(name), metadata, created_on=now, updated_on=now)


@functools.lru_cache(maxsize=1024)
def _stored_metadata(retention: str, aggregator: str, xfilesfactor: float) -> MetricMetadata:
    return MetricMetadata.create(retention, aggregator, xfilesfactor)  # a store holds few distinct ones


def stored_metric(name: str, retention: str | None, aggregator: str | None, xfilesfactor: float | None,
                  created_on: int | None, updated_on: int | None, read_on: int | None) -> Metric:
    """A metric from a store's row; a row whose metadata is missing or cannot be parsed
    raises UnreadableMetadata (never a default guessed in its place)."""
    missing = [field for field, value in (("retention", retention), ("aggregator", aggregator),
                                          ("xfilesfactor", xfilesfactor)) if value is None]
    try:
        if missing:
            raise UnreadableMetadata(f"no {', '.join(missing)} (a partial row)")
        metadata = _stored_metadata(retention, aggregator, xfilesfactor)
    except (BglError, ValueError, TypeError) as exc:
        raise UnreadableMetadata(
            f"metric {name!r} has unreadable metadata in the store ({exc}): it is treated as missing"
            " (reads find no series; a write creates it again with the current rules); `bgl repair`"
            " removes the row and its points"
        ) from exc
    return Metric(name, metadata, created_on or 0, updated_on or 0, read_on or 0)
