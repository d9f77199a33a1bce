"""Tagged series names, parsed and normalised exactly as graphite-web's `TaggedSeries`.

`disk.used;host=web1;dc=us` and `disk.used{host="web1",dc="us"}` both become the series
`disk.used` with tags {dc: us, host: web1, name: disk.used}, whose canonical path is the
`name` tag then the other tags sorted: `disk.used;dc=us;host=web1`. The `name` tag is the
metric name without leading `~`, and overrides a `name=` sent among the tags. Tag names
may not be empty nor hold `;`, `!`, `^` or `=`; values may not be empty, hold `;` or start
with `~`. A name without `;` (and not in the `{...}` form) is not tagged.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from typing import Iterable, Mapping

from biggraphite_like.errors import InvalidTag

PROHIBITED_TAG_CHARACTERS = ";!^="
NAME_TAG = "name"
_OPENMETRICS_SEGMENT = re.compile(r'([^=]+)="((?:[\\]["\\]|[^"\\])+)"(:?,|$)')
# A name whose metric does not start with '~' and whose every tag is valid (what
# validate_tag checks), is not `name` and differs from the next one's: when its tags are
# also sorted (then a repeated tag would be the next one), it is canonical. One regex
# (possessive: no backtracking) and one sort instead of a parse: ~1.5 us a name, not ~5.
_CANONICAL_TAGGED = re.compile(r"[^;~][^;]*+(?:;(?!name=)([^;!^=]++)=[^;~][^;]*+(?!;\1=))++")


def is_tagged(name: str) -> bool:
    """Whether a metric name is a tagged series (graphite's test: `;` in it, or `{...}`)."""
    return ";" in name or (name.endswith('"}') and "{" in name)


def validate_tag(tag: str, value: str) -> None:
    """Raise InvalidTag with the reason when graphite would refuse tag=value."""
    if not tag:
        raise InvalidTag("tag may not be empty")
    if not value:
        raise InvalidTag(f"value of tag {tag!r} may not be empty")
    for char in PROHIBITED_TAG_CHARACTERS:
        if char in tag:
            raise InvalidTag(f"character {char!r} is not allowed in tag {tag!r}")
    if ";" in value:
        raise InvalidTag(f"character ';' is not allowed in value {value!r} of tag {tag!r}")
    if value[0] == "~":
        raise InvalidTag(f"value {value!r} of tag {tag!r} may not start with '~'")


def _name_as_value(metric: str) -> str:
    sanitized = metric.lstrip("~")
    if not sanitized:
        raise InvalidTag(f"metric name {metric!r} is empty once its leading '~' are removed")
    return sanitized


@dataclasses.dataclass(frozen=True)
class TaggedSeries:
    """A series: its metric name and its tags (the `name` tag included)."""

    metric: str
    tags: Mapping[str, str]

    @functools.cached_property
    def path(self) -> str:
        """The canonical path: `name` then `;tag=value` sorted (graphite's TaggedSeries.format)."""
        return format_path(self.tags)

    @classmethod
    def parse(cls, path: str) -> "TaggedSeries":
        """Parse `name;k=v;...` or `name{k="v",...}`; InvalidTag says what is wrong."""
        if not isinstance(path, str):
            raise InvalidTag(f"series name must be a string, got {type(path).__name__}")
        if path[-2:] == '"}' and "{" in path:
            return cls._parse_openmetrics(path)
        canonical = _parse_canonical(path)
        if canonical is not None:
            return canonical
        segments = path.split(";")
        metric = segments[0]
        if not metric:
            raise InvalidTag(f"cannot parse {path!r}: no metric name before the first ';'")
        tags: dict[str, str] = {}
        for segment in segments[1:]:
            tag = segment.split("=", 1)
            if len(tag) != 2 or not tag[0]:
                raise InvalidTag(f"cannot parse {path!r}: segment {segment!r} is not tag=value")
            validate_tag(tag[0], tag[1])
            tags[tag[0]] = tag[1]
        tags[NAME_TAG] = _name_as_value(metric)
        return cls(metric, tags)

    @classmethod
    def _parse_openmetrics(cls, path: str) -> "TaggedSeries":
        parts = path[0:-1].split("{", 2)
        if len(parts) != 2:
            raise InvalidTag(f"cannot parse {path!r}: more than one '{{'")
        metric, rawtags = parts
        if not metric:
            raise InvalidTag(f"cannot parse {path!r}: no metric name before '{{'")
        tags: dict[str, str] = {}
        while rawtags:
            match = _OPENMETRICS_SEGMENT.match(rawtags)
            if not match:
                raise InvalidTag(f"cannot parse {path!r}: invalid segment {rawtags!r}")
            tag, value = match.group(1), match.group(2).replace(r"\"", '"').replace(r"\\", "\\")
            validate_tag(tag, value)
            tags[tag] = value
            rawtags = rawtags[len(match.group(0)):]
        tags[NAME_TAG] = _name_as_value(metric)
        return cls(metric, tags)


def _parse_canonical(path: str) -> TaggedSeries | None:
    """The series of an already canonical, valid path (what the stores hold and carbon
    sends), parsed without per-tag validation; None for any other name (the full parser
    then says what is wrong or normalises it)."""
    if not is_canonical(path):
        return None
    tags = tags_of_path(path)
    series = TaggedSeries(tags[NAME_TAG], tags)
    series.__dict__["path"] = path  # the cached_property's slot: the path is already canonical
    return series


def format_path(tags: Mapping[str, str]) -> str:
    """The canonical path of tags (graphite's TaggedSeries.format)."""
    return tags.get(NAME_TAG, "") + "".join(sorted(f";{t}={v}" for t, v in tags.items() if t != NAME_TAG))


def canonical_path(name: str) -> str:
    """The canonical path of a tagged series name (InvalidTag if graphite refuses it).
    A name already canonical (what carbon sends and the stores hold) is only checked."""
    if is_canonical(name):
        return name
    return TaggedSeries.parse(name).path


def canonical_paths(names: Iterable[str]) -> list[str]:
    """canonical_path of each name (InvalidTag for the first one graphite refuses), with
    is_canonical's test inlined: a batch of names already canonical (what carbon and the
    benchmark send) costs ~1.8 us a name, not ~3 (no call a name)."""
    fullmatch = _CANONICAL_TAGGED.fullmatch
    paths: list[str] = []
    append = paths.append
    for name in names:
        if type(name) is str and fullmatch(name) is not None and name[-2:] != '"}':
            pairs = name.split(";")
            del pairs[0]
            if pairs == sorted(pairs):
                append(name)
                continue
        append(canonical_path(name))
    return paths


def is_canonical(path: str) -> bool:
    """Whether path is a valid tagged series name in canonical form: valid tags sorted,
    each once, no `name` tag, a metric not starting with '~' (nor in the `{...}` form)."""
    if _CANONICAL_TAGGED.fullmatch(path) is None or path[-2:] == '"}':
        return False
    pairs = path.split(";")
    del pairs[0]
    return pairs == sorted(pairs)


def tags_of_path(path: str) -> dict[str, str]:
    """Tags of an already canonical path, cheaply (no validation): the index stores only
    canonical paths, so this is what filters run on."""
    segments = path.split(";")
    tags = dict(segment.split("=", 1) for segment in segments[1:])
    tags[NAME_TAG] = segments[0]
    return tags


def tag_of_path(path: str, tag: str) -> str:
    """The value of one tag of an already canonical path, '' when it has none (what a tag
    expression is evaluated on): its `;tag=` segment (values hold no ';', tags no '='),
    the metric for `name`."""
    if tag == NAME_TAG:
        return path.partition(";")[0]
    start = path.find(f";{tag}=")
    if start < 0:
        return ""
    start += len(tag) + 2
    end = path.find(";", start)
    return path[start:] if end < 0 else path[start:end]
