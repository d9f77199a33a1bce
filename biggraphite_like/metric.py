"""Metrics: a normalised name, its stable id, and the metadata that shapes its data."""
from __future__ import annotations

import dataclasses
import uuid

from biggraphite_like import names
from biggraphite_like.aggregation import Aggregator, parse_xfilesfactor
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


@dataclasses.dataclass(frozen=True)
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


def make_metric(name: str, metadata: MetricMetadata, now: int = 0) -> Metric:
    """A new metric with a validated name."""
    return Metric(names.normalize(name), metadata, created_on=now, updated_on=now)
