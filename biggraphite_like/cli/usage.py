"""`bgl du` and `bgl stats`: how much is stored, and facts an operator can act on."""
from __future__ import annotations

import argparse
import dataclasses
import json

from biggraphite_like.cli.common import add_format_option, open_accessor
from biggraphite_like.cli.streams import Streams
from biggraphite_like.maintenance.usage import disk_usage, statistics, store_disk_usage


_PART_LABELS = {"points": "the datapoints tables (pages in use)",
                "metadata": "metric and directory tables, indexes (pages in use)",
                "free": "free pages (SQLite's freelist: see `bgl stats` free_pages)"}


def _human_bytes(count: int) -> str:
    for unit in ("B", "K", "M", "G", "T"):
        if count < 1024 or unit == "T":
            return f"{count:.0f}{unit}" if unit == "B" else f"{count:.1f}{unit}"
        count /= 1024
    raise AssertionError


def cmd_du(args: argparse.Namespace, io: Streams) -> int:
    """GLOB's entries and total; without GLOB, the top level and the whole store's bytes on
    disk and tag index (a subtree has no bytes on disk of its own to show)."""
    accessor = open_accessor(args)
    whole = args.glob is None
    rows, total = disk_usage(accessor, "*" if whole else args.glob, progress_stream=io.err)
    if args.format == "json":
        document = {"entries": [dataclasses.asdict(r) for r in rows], "total": dataclasses.asdict(total),
                    "bytes_meaning": "whisper-equivalent: the size whisper files of these retentions would take"}
        if whole:
            document.update(store_on_disk=dataclasses.asdict(store_disk_usage(accessor)),
                            tag_index=accessor.tags.index.counts())
        io.out.write(json.dumps(document, indent=2) + "\n")
        return 0
    io.out.write(f"{'WSP-BYTES':>10} {'METRICS':>9} {'POINTS':>12}  NAME"
                 "    (WSP-BYTES: what whisper files of these retentions would take, not disk)\n")
    for row in [*rows, total]:
        name = row.name + ("/" if row.kind == "directory" else "")
        io.out.write(f"{_human_bytes(row.bytes):>10} {row.metrics:>9} {row.points:>12}  {name}\n")
    if not rows:
        io.err.write(f"bgl du: nothing matches {args.glob!r}\n")
    if whole:
        _write_store_usage(accessor, total, io)
    elif total.tagged:
        io.out.write(f"{'':>10} {total.tagged:>9} {'':>12}    of which tagged series\n")
    return 0


def _write_store_usage(accessor, total, io: Streams) -> None:
    """The whole store: its tag index, its bytes on disk, per part and per table."""
    on_disk = store_disk_usage(accessor)
    tags = accessor.tags.index.counts()
    if tags["tagged_series"] or total.tagged:
        io.out.write(f"{'':>10} {total.tagged:>9} {'':>12}    of which tagged series; the store's tag index:"
                     f" {tags['tagged_series']} series, {tags['tags']} tags, {tags['tag_values']} tag values\n")
    size = "unknown" if on_disk.bytes is None else _human_bytes(on_disk.bytes)
    io.out.write(f"{size:>10} {'':>9} {'':>12}  on disk: {on_disk.what}\n")
    for part, count in on_disk.parts.items():
        label = _PART_LABELS.get(part, part)
        io.out.write(f"{_human_bytes(count):>10} {'':>9} {'':>12}    of which {label}\n")
    for table, count in on_disk.tables.items():
        io.out.write(f"{_human_bytes(count):>10} {'':>9} {'':>12}      table {table} (with its indexes)\n")
    if on_disk.tables_note:
        io.out.write(f"{'':>10} {'':>9} {'':>12}    per table: {on_disk.tables_note}\n")


def cmd_stats(args: argparse.Namespace, io: Streams) -> int:
    accessor = open_accessor(args)
    facts = statistics(accessor, progress_stream=io.err)
    if args.format == "json":
        io.out.write(json.dumps(facts, indent=2) + "\n")
        return 0
    for key, value in facts.items():
        if isinstance(value, dict):
            io.out.write(f"{key}:\n")
            for inner, count in value.items():
                io.out.write(f"  {inner}: {count}\n")
        else:
            io.out.write(f"{key}: {value}\n")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("du", help="metrics, points capacity and whisper-equivalent bytes per metric or directory;"
                       " the store's bytes on disk")
    add_format_option(p)
    p.add_argument("glob", metavar="GLOB", nargs="?", default=None,
                   help="what to measure: GLOB's metrics and directories only (default: the top level, *, and the"
                        " whole store's bytes on disk)")
    p.set_defaults(handler=cmd_du)

    p = sub.add_parser("stats", help="store facts and counts an operator can act on")
    add_format_option(p)
    p.set_defaults(handler=cmd_stats)
