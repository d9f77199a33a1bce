"""CarbonLink's get-metadata and set-metadata, for both ingest paths: which keys exist,
what a key's value is, and a metric's metadata with one key changed (graphite-web's
`set-metadata`; whisper's setAggregationMethod / setXFilesFactor)."""
from __future__ import annotations

import dataclasses
from typing import Any

from biggraphite_like.aggregation import Aggregator, parse_xfilesfactor
from biggraphite_like.metric import MetricMetadata

METADATA_KEYS = ("aggregationMethod", "xFilesFactor")


def check_key(key: str) -> None:
    """ValueError (answered to the client) for a key CarbonLink does not know."""
    if key not in METADATA_KEYS:
        raise ValueError(f"Unsupported metadata key {key!r}: use one of {', '.join(METADATA_KEYS)}")


def metadata_value(metadata: MetricMetadata, key: str) -> Any:
    """The value of a (checked) key, as carbon answers it."""
    return metadata.aggregator.value if key == "aggregationMethod" else metadata.xfilesfactor


def changed(metadata: MetricMetadata, key: str, value: Any) -> tuple[Any, MetricMetadata]:
    """(the key's old value, the metadata with the key set to `value`); ValueError (a
    BglError) for a value the key cannot take."""
    old = metadata_value(metadata, key)
    if key == "aggregationMethod":
        return old, dataclasses.replace(metadata, aggregator=Aggregator.parse(value))
    return old, dataclasses.replace(metadata, xfilesfactor=parse_xfilesfactor(value))
