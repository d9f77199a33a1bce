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
"""
from __future__ import annotations

import collections
import logging
import pickle
import struct
import time
from typing import Sequence

from django.conf import settings
from graphite.carbonlink import CarbonLink

_log = logging.getLogger(__name__)

Points = list[tuple[int, float]]


def cached_points(names: Sequence[str]) -> dict[str, Points]:
    """{name: [(timestamp, value), ...]} carbon-cache holds for the names, in one
    `cache-query-bulk` request per instance (names of carbon's own metrics are asked of
    every instance, one by one, as graphite does)."""
    pool = CarbonLink()
    found: dict[str, Points] = {}
    by_host: dict[tuple, list[str]] = collections.defaultdict(list)
    for name in names:
        if name.startswith(settings.CARBON_METRIC_PREFIX):
            found[name] = _query_one(pool, name)
        elif pool.hosts:
            by_host[pool.select_host(name)].append(name)
    for host, metrics in by_host.items():
        found.update(_query_bulk(pool, host, metrics))
    return found


def _query_one(pool, name: str) -> Points:
    try:
        points = pool.query(name)
    except Exception as exc:  # graphite's merge_with_carbonlink goes on without cached points too
        _log.warning("CarbonLink query for %s failed: %s", name, exc)
        return []
    return list(points.items()) if isinstance(points, dict) else list(points)


def _query_bulk(pool, host: tuple, metrics: list[str]) -> dict[str, Points]:
    request = pickle.dumps({"type": "cache-query-bulk", "metrics": metrics},
                           protocol=settings.CARBONLINK_PICKLE_PROTOCOL)
    try:
        conn = pool.get_connection(host)
    except OSError as exc:
        _log.warning("CarbonLink %s unreachable, %d series without cached points: %s", host, len(metrics), exc)
        return {}
    try:
        conn.sendall(struct.pack("!L", len(request)) + request)
        result = pool.recv_response(conn)
    except Exception as exc:
        pool.last_failure[host] = time.time()
        conn.close()
        _log.warning("CarbonLink %s failed, %d series without cached points: %s", host, len(metrics), exc)
        return {}
    pool.connections[host].add(conn)
    if "error" in result:  # an older carbon-cache: one query per series, as graphite asks
        _log.warning("CarbonLink %s refused a bulk query (%s): asking for %d series one by one",
                     host, result["error"], len(metrics))
        return {name: _query_one(pool, name) for name in metrics}
    return {name: list(points) for name, points in result.get("datapointsByMetric", {}).items()}
