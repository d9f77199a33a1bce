#!/usr/bin/env python3
"""Our stack (`bgl run`) side by side with VictoriaMetrics, over the paths a user has.

Both systems run as subprocesses on free 127.0.0.1 ports in a temporary directory: `bgl run`
as started by default (our receiver, `bgl receive`, graphite-web under gunicorn, the SQLite
store bgl.db, retention 60s:8d,1h:2y) and `victoria-metrics` (Debian's package; see
bench/victoria.py). Each system's CPU is its own process tree's over the same windows,
watched with probes that cost it (nearly) nothing (bench/peer/probes.py); every point and
answer is compared with what was sent. The parts, each on fresh stores (bench/peer/):

* ingest (ingest.py): M metrics x P points over plaintext, round `new` then E rounds
  `existing`; also `bgl run --carbon` and carbon-cache + whisper on the same stream;
* day (day.py, renders.py): S series x 1 day: disk bytes per point; then renders of
  `X.*.*` and `sumSeries(X.*.*)` over those and over W series x 1 hour against
  `/api/v1/query_range`, and 4 wide renders at once while finds go on;
* find (cardinality.py, finds.py): N names created over plaintext on both (time, CPU,
  bytes per name, peak RSS), then `/metrics/find` of distinct instances of each pattern
  class (treejson and JSON), beside repeated ones (cache hits);
* tags (tags.py): T tagged series over plaintext: indexing rate, findSeries and
  autocomplete of distinct expressions against VictoriaMetrics' Graphite tags API.

    python bench/peer_bench.py --quick              # small sizes, a few minutes
    python bench/peer_bench.py --only find --names 1000000
"""
from __future__ import annotations

import argparse
import calendar
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.peer.common import compare, log  # noqa: E402,F401 (compare: the tests' too)
from bench.peer.day import day_messages, part_day  # noqa: E402,F401
from bench.peer.finds import part_find  # noqa: E402
from bench.peer.ingest import part_ingest  # noqa: E402
from bench.peer.tags import part_tags  # noqa: E402
from bench.victoria import PeerUnavailable, binary  # noqa: E402

SIZES = {
    "full": {"metrics": 100_000, "points": 5, "existing_rounds": 3, "day_series": 1_000, "wide_series": 20_000,
             "names": 1_000_000, "find_runs": 50, "find_budget": 60.0, "cached_runs": 50, "render_runs": 10,
             "render_budget": 60.0, "tags_series": 100_000, "tags_runs": 50, "idle_seconds": 5.0,
             "idle_timeout": 120.0},
    "quick": {"metrics": 10_000, "points": 5, "existing_rounds": 1, "day_series": 100, "wide_series": 2_000,
              "names": 10_000, "find_runs": 20, "find_budget": 5.0, "cached_runs": 20, "render_runs": 5,
              "render_budget": 10.0, "tags_series": 10_000, "tags_runs": 20, "idle_seconds": 2.0,
              "idle_timeout": 60.0},
}
PARTS = ("ingest", "day", "find", "tags")


def day_end_time(text: str) -> int:
    """--day-end's value: a UTC minute in the past 7 days (stage 0 keeps 8 days), as a timestamp."""
    try:
        end = calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a UTC minute written YYYY-MM-DDTHH:MM") from None
    if not time.time() - 7 * 86400 <= end <= time.time() - 120:
        raise argparse.ArgumentTypeError(f"{text} is not between 7 days and 2 minutes ago (UTC)")
    return end


def run(workdir: Path, sizes: dict, parts: tuple[str, ...] = PARTS, timeout: float = 3600.0,
        day_end: int | None = None) -> dict:
    """Every part asked for; VictoriaMetrics' binary is found (or installed) first."""
    figures: dict = {"victoria_metrics": binary(), "sizes": sizes}
    idle = {"idle_seconds": sizes["idle_seconds"], "idle_timeout": sizes["idle_timeout"]}
    if "ingest" in parts:
        figures["ingest"] = part_ingest(workdir / "ingest", sizes["metrics"], sizes["points"], timeout,
                                        sizes["existing_rounds"], **idle)
    if "day" in parts:
        figures["day"] = part_day(workdir / "day", sizes["day_series"], sizes["wide_series"], sizes["render_runs"],
                                  sizes["render_budget"], timeout, day_end)
    if "find" in parts:
        figures["find"] = part_find(workdir / "find", sizes["names"], sizes["find_runs"], sizes["find_budget"], timeout,
                                    sizes["cached_runs"], **idle)
    if "tags" in parts:
        figures["tags"] = part_tags(workdir / "tags", sizes["tags_series"], sizes["tags_runs"], timeout, **idle)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few minutes)")
    parser.add_argument("--only", action="append", choices=PARTS, help="run this part (repeatable)")
    for key, value in SIZES["full"].items():
        parser.add_argument("--" + key.replace("_", "-"), type=type(value), help=f"default {value:,} (full)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds a load may take")
    parser.add_argument("--tmpdir", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--json", action="store_true", help="print every figure as JSON (the only output)")
    parser.add_argument("--day-end", type=day_end_time, default=None, metavar="YYYY-MM-DDTHH:MM",
                        help="end the day part's day at this UTC minute (past, within the last 7 days) instead of "
                             "2 minutes ago: how much of the day is in the open window depends on the hour")
    args = parser.parse_args(argv)
    sizes = dict(SIZES["quick" if args.quick else "full"])
    sizes.update({key: getattr(args, key) for key in sizes if getattr(args, key) is not None})
    try:
        binary()
    except PeerUnavailable as error:
        log(f"peer section skipped: {error}")
        print(json.dumps({"skipped": str(error)}))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="bgl-peer-", dir=args.tmpdir))
    try:
        figures = run(workdir, sizes, tuple(args.only or PARTS), args.timeout, args.day_end)
    finally:
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(figures, indent=2))  # `python -m bench` makes the table
    return 0


if __name__ == "__main__":
    sys.exit(main())
