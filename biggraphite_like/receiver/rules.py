"""carbon's storage-schemas.conf and storage-aggregation.conf, with carbon's rules.

As carbon 1.1.10's carbon.storage reads them: sections in file order; each needs a
`pattern` (a regex searched in the name, not anchored); the first section whose pattern
matches a new metric's name wins; a built-in default comes last (retention
settings.DEFAULT_RETENTION, `60s:8d,1h:2y`, the one `bgl write` and `bgl run` give new
metrics too, where carbon's is `60s:7d`; aggregation None, i.e. whisper's average and
0.5). A schema section without `pattern` or `retentions` is skipped (logged); a retention
whisper would refuse (validateArchiveList) skips its section (logged); a retention that
cannot be parsed is an error, as carbon exits on it. An aggregation section may give `xFilesFactor`,
`aggregationMethod` or both; a missing one takes whisper's default. A missing
storage-aggregation.conf means the defaults. Names are matched as received, after a tagged
series became its canonical path.
"""
from __future__ import annotations

import configparser
import dataclasses
import logging
import re
from pathlib import Path

from biggraphite_like import settings
from biggraphite_like.aggregation import Aggregator, parse_xfilesfactor
from biggraphite_like.errors import BglError, InvalidRetention, ReceiverConfigError
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.retention import Retention

_log = logging.getLogger(__name__)

DEFAULT_RETENTION = Retention.parse(settings.DEFAULT_RETENTION)  # bgl's one default (carbon's is 60s:7d)


@dataclasses.dataclass(frozen=True)
class _Rule:
    section: str
    regex: re.Pattern
    value: object


class StorageRules:
    """The metadata a new metric gets: retention from the schemas, aggregation and
    xFilesFactor from the aggregation rules (first match wins in each)."""

    def __init__(self, schemas: list[_Rule] | None = None, aggregations: list[_Rule] | None = None):
        self._schemas = schemas or []
        self._aggregations = aggregations or []
        self._cache: dict[tuple[Retention, str, float], MetricMetadata] = {}
        self._by_sections: dict[tuple[int, int], MetricMetadata] = {}

    @classmethod
    def load(cls, schemas_path: str | Path | None, aggregation_path: str | Path | None) -> "StorageRules":
        """Read the two files (None: that file's defaults)."""
        schemas = _read_schemas(Path(schemas_path)) if schemas_path else []
        aggregations = _read_aggregations(Path(aggregation_path)) if aggregation_path else []
        return cls(schemas, aggregations)

    def metadata_for(self, name: str) -> MetricMetadata:
        """What carbon would create `name` with (called once per new metric: kept cheap,
        the metadata is looked up by the indexes of the matching sections)."""
        schema = aggregation = -1
        for index, rule in enumerate(self._schemas):
            if rule.regex.search(name):
                schema = index
                break
        for index, rule in enumerate(self._aggregations):
            if rule.regex.search(name):
                aggregation = index
                break
        metadata = self._by_sections.get((schema, aggregation))
        if metadata is None:
            metadata = self._by_sections[(schema, aggregation)] = self._metadata(schema, aggregation)
        return metadata

    def _metadata(self, schema: int, aggregation: int) -> MetricMetadata:
        """The metadata of a (schema, aggregation) pair of sections (-1: the default), one
        object per distinct metadata: shared, so the accessor groups metrics cheaply."""
        retention = self._schemas[schema].value if schema >= 0 else DEFAULT_RETENTION
        xff, method = self._aggregations[aggregation].value if aggregation >= 0 else (None, None)
        key = (retention, method or "", xff if xff is not None else -1.0)
        metadata = self._cache.get(key)
        if metadata is None:
            metadata = self._cache[key] = MetricMetadata(retention, Aggregator.parse(method), parse_xfilesfactor(xff))
        return metadata


def _sections(path: Path) -> list[tuple[str, dict[str, str]]]:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
    except OSError as exc:
        raise ReceiverConfigError(f"cannot read {path}: {exc.strerror}") from None
    except configparser.Error as exc:
        raise ReceiverConfigError(f"{path} is not an ini file carbon can read: {exc}") from None
    return [(section, dict(parser.items(section))) for section in parser.sections()]


def _compile(path: Path, section: str, pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ReceiverConfigError(f"[{section}] in {path}: pattern {pattern!r} is not a regex: {exc}") from None


def _read_schemas(path: Path) -> list[_Rule]:
    rules = []
    for section, options in _sections(path):
        if "retentions" not in options:
            _log.error("schema [%s] in %s has no 'retentions': skipped (as carbon does)", section, path)
            continue
        try:
            stages = [Retention.parse(text.strip()).stages[0] for text in options["retentions"].split(",")]
        except InvalidRetention as exc:
            raise ReceiverConfigError(f"{exc} in section [{section}] in {path}") from None
        if not options.get("pattern"):
            _log.error("schema [%s] in %s has no 'pattern': skipped (as carbon does)", section, path)
            continue
        try:
            retention = Retention(tuple(sorted(stages)))
        except InvalidRetention as exc:
            _log.error("invalid schema [%s] in %s: %s: skipped (as carbon does)", section, path, exc)
            continue
        rules.append(_Rule(section, _compile(path, section, options["pattern"]), retention))
    return rules


def _read_aggregations(path: Path) -> list[_Rule]:
    if not path.exists():
        _log.info("%s not found: every new metric gets whisper's aggregation defaults", path)
        return []
    rules = []
    for section, options in _sections(path):
        xff, method = options.get("xfilesfactor"), options.get("aggregationmethod")
        try:
            if xff is not None:
                xff = parse_xfilesfactor(xff)
            if method is not None:
                method = Aggregator.parse(method).value
        except BglError as exc:
            _log.error("invalid aggregation [%s] in %s: %s: skipped", section, path, exc)
            continue
        if not options.get("pattern"):
            _log.error("aggregation [%s] in %s has no 'pattern': skipped (as carbon does)", section, path)
            continue
        rules.append(_Rule(section, _compile(path, section, options["pattern"]), (xff, method)))
    return rules
