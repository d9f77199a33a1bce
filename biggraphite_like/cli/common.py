"""What several `bgl` subcommands share: opening the store, times, job summaries, options."""
from __future__ import annotations

import argparse
import datetime
import json
from typing import TextIO

from biggraphite_like import settings
from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import BglError, InvalidTimeRange
from biggraphite_like.stores.registry import store_url
from biggraphite_like.maintenance import metrics_file
from biggraphite_like.maintenance.progress import format_summary
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.retention import Retention, parse_duration

# units a duration is printed in, largest first (parse_duration reads them back)
_DURATION_UNITS = (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
_PRECISION_UNITS = (("d", 86400), ("h", 3600), ("s", 1))  # carbon writes 60s, not 1min


class UsageError(BglError):
    """The command line itself is wrong (a missing argument, arguments that exclude each
    other, an option out of range): exit status 2, as argparse's own usage errors."""

    exit_status = 2


TIME_FORMATS = ("epoch seconds (1767225600), now, a relative time (-3600, -1h, -7d, now-30min, now+1h; units s, min,"
                " h, d, w, mon, y), today, yesterday, a date or date and time in UTC unless an offset is given"
                " (2026-01-01, 2026-01-01T10:00, 2026-01-01T10:00:00+02:00), or Graphite's 10:00_20260101 and 20260101")
_GRAPHITE_DATES = ("%H:%M_%Y%m%d", "%Y%m%d")


def parse_time(text: str, now: int) -> int:
    """Epoch seconds from Graphite's time formats (`from`/`until` of a render): see TIME_FORMATS."""
    text = text.strip()
    lowered = text.lower()
    if lowered == "now":
        return now
    if lowered in ("today", "yesterday"):
        return now - now % 86400 - (86400 if lowered == "yesterday" else 0)
    if lowered.startswith("now") and lowered[3:4] in ("-", "+"):
        lowered = lowered[3:]
    if lowered[:1] in ("-", "+") and len(lowered) > 1:  # -3600 too: seconds before now
        offset = _offset(lowered[1:], text)
        return now - offset if lowered[0] == "-" else now + offset
    if _is_number(text) and not _looks_like_yyyymmdd(text):
        return int(float(text))
    return _absolute(text)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _looks_like_yyyymmdd(text: str) -> bool:
    """Graphite reads 8 digits that make a date as that date, not as an epoch."""
    return len(text) == 8 and text.isdigit() and int(text[:4]) > 1900 and 0 < int(text[4:6]) < 13 \
        and 0 < int(text[6:]) < 32


def _offset(amount: str, text: str) -> int:
    """Seconds in `1h`, `30min`, `2mon` (months of 30 days, as Graphite's)."""
    try:
        if amount.rstrip("s").endswith("mon") or amount.endswith("month"):
            return parse_duration(amount.split("mon")[0], "relative time") * 30 * 86400
        return parse_duration(amount, "relative time")
    except BglError:
        raise InvalidTimeRange(f"invalid time {text!r}: use {TIME_FORMATS}") from None


def _absolute(text: str) -> int:
    for layout in _GRAPHITE_DATES:
        try:
            moment = datetime.datetime.strptime(text, layout)
            break
        except ValueError:
            continue
    else:
        try:
            moment = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidTimeRange(f"invalid time {text!r}: use {TIME_FORMATS}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp())


def format_time(epoch: int) -> str | None:
    """ISO 8601 in UTC (`2026-01-01T10:00:00Z`); None for 0 (never)."""
    if not epoch:
        return None
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_seconds(seconds: int, units: tuple[tuple[str, int], ...] = _DURATION_UNITS) -> str:
    """`8d`, `2y`, `90min`: the largest unit that divides the seconds exactly."""
    unit, size = next((unit, size) for unit, size in units if seconds % size == 0)
    return f"{seconds // size}{unit}"


def format_retention(retention: Retention) -> str:
    """carbon's spelling: `60s:8d,1h:2y` (what --retention takes back)."""
    return ",".join(f"{format_seconds(s.precision, _PRECISION_UNITS)}:{format_seconds(s.duration)}"
                    for s in retention.stages)


def format_metadata(metadata: MetricMetadata) -> str:
    """`60s:8d,1h:2y average xff 0.5`."""
    return f"{format_retention(metadata.retention)} {metadata.aggregator.value} xff {metadata.xfilesfactor:g}"


def new_metric_metadata(args: argparse.Namespace) -> MetricMetadata:
    """The metadata of metrics a command creates (--retention, --aggregation, --xff; the
    defaults for those not given)."""
    return MetricMetadata.create(args.retention or settings.DEFAULT_RETENTION,
                                 args.aggregation or settings.DEFAULT_AGGREGATION,
                                 settings.DEFAULT_XFILESFACTOR if args.xff is None else args.xff)


def open_accessor(args: argparse.Namespace) -> Accessor:
    """The accessor on --store, else $BGL_STORE, else the default store (registry.store_url)."""
    return Accessor.from_url(store_url(getattr(args, "store", None)))


def add_format_option(p: argparse.ArgumentParser, choices: tuple[str, ...] = ("text", "json"),
                      help: str | None = None) -> None:
    """--format: the first choice by default (text for people), json for scripts. The
    default is applied after parsing (`resolve_format`), so that `bgl --format json CMD`
    (before the subcommand) works as well as `bgl CMD --format json`."""
    p.add_argument("--format", choices=list(choices), default=None,
                   help=help or f"output format (default {choices[0]}; json: one JSON document on stdout)")
    p.set_defaults(format_choices=choices)


def resolve_format(args: argparse.Namespace) -> str | None:
    """Settle args.format from the subcommand's --format, else the one given before the
    subcommand, else the subcommand's default; an error message if it does not apply."""
    given_before = getattr(args, "global_format", None)
    choices = getattr(args, "format_choices", None)
    if choices is None:
        return f"--format does not apply to `bgl {args.command}`" if given_before else None
    if args.format is None:
        if given_before is not None and given_before not in choices:
            return f"--format {given_before}: `bgl {args.command}` takes {', '.join(choices)}"
        args.format = given_before or choices[0]
    return None


def wants_json(args: argparse.Namespace) -> bool:
    return getattr(args, "format", None) == "json"


def write_json(out: TextIO, document: object) -> None:
    out.write(json.dumps(document, indent=2) + "\n")


def finish_job(args: argparse.Namespace, job: str, counters: dict, out: TextIO, help_texts: dict | None = None,
               details: dict | None = None) -> None:
    """Print a job's summary (a line, or with --format json a document holding the counters
    and `details`) and write its Prometheus text file if asked."""
    dry_run = getattr(args, "dry_run", False)
    if wants_json(args):
        write_json(out, {"command": job, "dry_run": dry_run, **(details or {}), "counters": counters})
    else:
        out.write(format_summary(job, counters, dry_run) + "\n")
    if getattr(args, "metrics_file", None):
        metrics_file.write(args.metrics_file, job.replace("-", "_"), counters, help_texts)


def add_shard_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=int, default=0, metavar="N", help="which shard to work on, 0..M-1 (default 0)")
    p.add_argument("--nshards", type=int, default=1, metavar="M", help="how many shards the work is split in (default 1)")


def add_metrics_file_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-file", metavar="PATH", help="write the run's counters there (Prometheus text format)")
