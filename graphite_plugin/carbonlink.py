"""Points carbon-cache holds but has not written yet, asked for once per render.

graphite-web's `merge_with_carbonlink` asks CarbonLink once per series (`cache-query`):
a render of 1,000 series made 1,000 round trips. carbon-cache also answers
`cache-query-bulk` (many metrics in one request, `{'datapointsByMetric': {...}}`), so
`cached_points` sends one such request per carbon-cache instance the names hash to, over
graphite-web's own CarbonLink pool (its hosts, hashing, replication, timeouts and pooled
connections). The points are then merged by graphite's own `merge_with_cache`, exactly
as `merge_with_carbonlink` would. A failed instance is logged and marked failed in the
pool (as graphite does) and its series go without cached points; an instance that
refuses the bulk request (older carbon) is asked series by series.

`bgl receive` is first asked its compact form of the bulk query (NAMES_QUERY: the names
in one string, answered with only the names holding points): graphite's bulk request of
20,000 names and its answer of 20,000 mostly empty lists, each read by a pure-Python
unpickler, cost more than a wide render's sum. An instance that does not know that form
(carbon-cache: `Invalid request type`) is remembered and asked `cache-query-bulk` (for
BULK_ONLY_SECONDS, then asked the compact form again).

Answers are read with the receiver's bounded, restricted unpickler (never graphite's
unpickle.loads, which builds whatever the answer describes), and each series' points are
checked to be (timestamp, value) pairs of numbers: an answer that is not one is logged and
its series go without cached points, a malformed point is dropped and logged; nothing an
instance answers can make a render fail.
"""
from __future__ import annotations

import collections
import logging
import math
import pickle
import struct
import time
from typing import Sequence

from django.conf import settings
from graphite.carbonlink import CarbonLink

from biggraphite_like.ingest.pickles import as_float
from biggraphite_like.ingest.points import describe
from biggraphite_like.ingest.unpickler import restricted_loads
from biggraphite_like.receiver.carbonlink import NAMES_QUERY

_log = logging.getLogger(__name__)

CachedPoints = list[tuple[int, float]]
# instance -> monotonic time until which it is asked cache-query-bulk: it answered NAMES_QUERY
# `Invalid request type` (carbon-cache); asked again after a while (another may listen there then)
_BULK_ONLY: dict[tuple, float] = {}
BULK_ONLY_SECONDS = 600.0


def cached_points(names: Sequence[str]) -> dict[str, CachedPoints]:
    """{name: [(timestamp, value), ...]} carbon-cache holds for the names, in one
    `cache-query-bulk` request per instance (names of carbon's own metrics are asked of
    every instance, one by one, as graphite does)."""
    pool = CarbonLink()
    found: dict[str, CachedPoints] = {}
    by_host: dict[tuple, list[str]] = collections.defaultdict(list)
    # one instance: every name hashes to it (graphite's select_host, a ring lookup a name)
    select_host = (lambda name, host=pool.hosts[0]: host) if len(pool.hosts) == 1 else pool.select_host
    for name in names:
        if name.startswith(settings.CARBON_METRIC_PREFIX):
            found[name] = _query_one(pool, name)
        elif pool.hosts:
            by_host[select_host(name)].append(name)
    for host, metrics in by_host.items():
        found.update(_query_bulk(pool, host, metrics))
    return found


def _query_one(pool, name: str) -> CachedPoints:
    """`cache-query` of one series, of every instance for carbon's own metrics (as graphite asks)."""
    hosts = pool.hosts if name.startswith(settings.CARBON_METRIC_PREFIX) else [pool.select_host(name)]
    found: dict[int, float] = {}
    for host in hosts:
        result = _ask(pool, host, {"type": "cache-query", "metric": name}, f"the cache query of {name}", 1)
        if result is not None and "error" not in result:
            found.update(_points(result.get("datapoints"), name, host))
    return sorted(found.items())


def _query_bulk(pool, host: tuple, metrics: list[str]) -> dict[str, CachedPoints]:
    joined = "\n".join(metrics)
    if _BULK_ONLY.get(host, 0.0) < time.monotonic() and joined.count("\n") == len(metrics) - 1:  # no newline in a name
        result = _ask(pool, host, {"type": NAMES_QUERY, "names": joined}, f"{len(metrics)} series", len(metrics))
        if result is None or "error" not in result:
            return {} if result is None else _by_metric(result, host, len(metrics))
        if str(result["error"]).startswith("Invalid request type"):
            _log.info("CarbonLink %s does not answer %s: asking it cache-query-bulk", host, NAMES_QUERY)
            _BULK_ONLY[host] = time.monotonic() + BULK_ONLY_SECONDS
    result = _ask(pool, host, {"type": "cache-query-bulk", "metrics": metrics}, f"{len(metrics)} series",
                  len(metrics))
    if result is None:
        return {}
    if "error" in result:  # an older carbon-cache: one query per series, as graphite asks
        _log.warning("CarbonLink %s refused a bulk query (%s): asking for %d series one by one",
                     host, describe(result["error"]), len(metrics))
        return {name: _query_one(pool, name) for name in metrics}
    return _by_metric(result, host, len(metrics))


def _by_metric(result: dict, host: tuple, series: int) -> dict[str, CachedPoints]:
    """The points by name of a bulk answer (checked, as _points checks them)."""
    by_metric = result.get("datapointsByMetric", {})
    if type(by_metric) is not dict:
        _log.warning("CarbonLink %s answered %s, not points by metric: %d series without cached points",
                     host, describe(by_metric), series)
        return {}
    return {name: _points(points, name, host) for name, points in by_metric.items() if type(name) is str}


def _ask(pool, host: tuple, request: dict, what: str, series: int) -> dict | None:
    """Send one request to host over the pool's connections and read its answer (a dict),
    or None when the instance failed or answered something else (logged; the host is
    marked failed in the pool as graphite marks it)."""
    payload = pickle.dumps(request, protocol=settings.CARBONLINK_PICKLE_PROTOCOL)
    try:
        conn = pool.get_connection(host)
    except OSError as exc:
        _log.warning("CarbonLink %s unreachable, %s without cached points: %s", host, what, exc)
        return None
    try:
        conn.sendall(struct.pack("!L", len(payload)) + payload)
        (size,) = struct.unpack("!L", pool.recv_exactly(conn, 4))
        # an answer holds at most a dict per series: allow that many items in a dict
        result = restricted_loads(pool.recv_exactly(conn, size), max_dict=series + 8)
        if type(result) is not dict:
            raise ValueError(f"the answer is {describe(result)}, not a dict")
    except Exception as exc:  # noqa: BLE001 - graphite's merge_with_carbonlink goes on without cached points too
        pool.last_failure[host] = time.time()
        conn.close()
        _log.warning("CarbonLink %s failed, %s without cached points: %s", host, what, exc)
        return None
    pool.connections[host].add(conn)
    return result


def _points(points: object, name: str, host: tuple) -> CachedPoints:
    """The (timestamp, value) pairs of an answer's series; anything else is dropped and logged."""
    if type(points) is dict:  # graphite's send_request_to_all merges them into a dict
        points = list(points.items())
    if type(points) not in (list, tuple):
        _log.warning("CarbonLink %s answered %s for %s, not points: ignored", host, describe(points), name)
        return []
    good: CachedPoints = []
    for point in points:
        if type(point) in (list, tuple) and len(point) == 2:
            timestamp, why = as_float(point[0], "timestamp")
            value, why = (None, why) if why else as_float(point[1], "value")
            if why is None and math.isfinite(timestamp):
                good.append((int(timestamp), value))
                continue
        _log.warning("CarbonLink %s answered %s among the points of %s: dropped", host, describe(point), name)
    return good
