"""`bgl tags`: Graphite tags of the store: series by tag expression, tags, values with counts."""
from __future__ import annotations

import argparse
import json

from biggraphite_like.cli.common import add_format_option, open_accessor
from biggraphite_like.cli.streams import Streams


def cmd_find(args: argparse.Namespace, io: Streams) -> int:
    paths = open_accessor(args).tags.find_series(args.expressions)
    if args.format == "json":
        io.out.write(json.dumps(paths) + "\n")
    else:
        io.out.writelines(p + "\n" for p in paths)
    return 0


def cmd_list(args: argparse.Namespace, io: Streams) -> int:
    tags = open_accessor(args).tags
    if args.tag is None:
        rows: list = tags.list_tags(args.filter, args.limit)
        lines = [f"{tag}\n" for tag in rows]
        document: list = [{"tag": t} for t in rows]
    else:
        values = tags.list_values(args.tag, args.filter, args.limit)
        lines = [f"{count:>9}  {value}\n" for value, count in values]
        document = [{"value": v, "count": c} for v, c in values]
    io.out.write(json.dumps(document) + "\n" if args.format == "json" else "".join(lines))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tags", help="Graphite tags: series by tag expression, tags, values with series counts")
    tags_sub = p.add_subparsers(dest="tags_command", required=True, metavar="TAGS_COMMAND")

    f = tags_sub.add_parser("find", help="canonical paths of the series matching every expression (seriesByTag)")
    f.add_argument("expressions", metavar="EXPR", nargs="+",
                   help="tag=value, tag!=value, tag=~regex or tag!=~regex; one must require a non-empty value")
    add_format_option(f)
    f.set_defaults(handler=cmd_find)

    ls = tags_sub.add_parser("list", help="the tags (without TAG), or TAG's values with how many series have each")
    ls.add_argument("tag", metavar="TAG", nargs="?")
    ls.add_argument("--filter", metavar="REGEX", help="only names or values matching REGEX (anchored at the start)")
    ls.add_argument("--limit", type=int, default=None, help="at most this many lines")
    add_format_option(ls)
    ls.set_defaults(handler=cmd_list)
