"""What several `bgl` subcommands share: opening the store, times, job summaries, options."""
from __future__ import annotations

import argparse
import json
import os
from typing import TextIO

from biggraphite_like import settings
from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import InvalidMaintenanceOption, InvalidTimeRange
from biggraphite_like.maintenance import metrics_file
from biggraphite_like.maintenance.progress import format_summary
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.retention import Retention, parse_duration

# units a duration is printed in, largest first (parse_duration reads them back)
_DURATION_UNITS = (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("min", 60), ("s", 1))
_PRECISION_UNITS = (("d", 86400), ("h", 3600), ("s", 1))  # carbon writes 60s, not 1min


def parse_time(text: str, now: int) -> int:
    """Epoch seconds from `1700000000`, `now`, or `-3600` / `-1h` / `-7d` (relative to now)."""
    text = text.strip()
    if text == "now":
        return now
    if text.startswith("-"):
        return now - parse_duration(text[1:], "relative time")
    try:
        return int(float(text))
    except ValueError:
        raise InvalidTimeRange(f"invalid time {text!r}: use epoch seconds, 'now' or a relative time like -1h") from None


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
    """The accessor on --store (or the default store, whose data dir is created)."""
    url = args.store or settings.default_store_url()
    if url == f"sqlite://{os.path.join(settings.default_data_dir(), settings.DB_FILE_NAME)}":
        os.makedirs(settings.default_data_dir(), exist_ok=True)
    return Accessor.from_url(url)


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


def check_metrics_file(args: argparse.Namespace) -> None:
    """Refuse an unwritable --metrics-file before the job runs, not after."""
    path = getattr(args, "metrics_file", None)
    if path:
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
            raise InvalidMaintenanceOption(f"--metrics-file {path}: directory {directory} does not exist or is not writable")


def add_shard_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", type=int, default=0, metavar="N", help="which shard to work on, 0..M-1 (default 0)")
    p.add_argument("--nshards", type=int, default=1, metavar="M", help="how many shards the work is split in (default 1)")


def add_metrics_file_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-file", metavar="PATH", help="write the run's counters there (Prometheus text format)")
