"""graphite_plugin.Finder reuses the nodes of a cached tree find (graphite_plugin.finder.NodeTrees):
the same answer gives the same nodes, a changed answer new ones, big answers are not kept,
and the readers' metadata is read again once older than the accessor's cache (BG_CACHE_TTL),
so a reused node's intervals follow the store."""
from __future__ import annotations

import time

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.metric import MetricMetadata
from tests.graphite_env import setup_graphite_app, use_finders

META = MetricMetadata.create("60s:1d", "average", 0.5)
CACHED = {"BG_FIND_CACHE_TTL": 600, "BG_FIND_CACHE_CHECK_INTERVAL": 3600, "BG_CACHE_TTL": 0.5}


@pytest.fixture
def store_url(tmp_path):
    setup_graphite_app()
    url = f"sqlite://{tmp_path / 'bgl.db'}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    accessor.create_metrics([(f"srv.web{i}.cpu", META) for i in range(5)] + [("srv.db", META)], now=1_000)
    accessor.close()
    return url


def find(pattern: str) -> list:
    from graphite.finders.utils import FindQuery

    from graphite_plugin.finder import Finder

    return Finder().find_nodes(FindQuery(pattern, None, None))


def test_a_cached_find_reuses_its_nodes_until_the_answer_changes(store_url):
    from graphite_plugin.finder import shared_backend

    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        first, second = find("srv.*"), find("srv.*")
        assert [(n.path, n.is_leaf) for n in first] == [("srv.db", True)] + [(f"srv.web{i}", False) for i in range(5)]
        assert first is not second and all(a is b for a, b in zip(first, second))
        second.pop()  # a caller's list is its own
        assert len(find("srv.*")) == 6
        accessor = Accessor.from_url(store_url)
        accessor.create_metrics([("srv.web9.cpu", META)])
        accessor.close()
        shared_backend().globs.clear()  # what the names token does within BG_FIND_CACHE_CHECK_INTERVAL
        third = find("srv.*")
        assert [n.path for n in third][-1] == "srv.web9" and third[0] is not first[0]


def test_big_answers_are_not_kept(store_url, monkeypatch):
    from graphite_plugin.finder import NodeTrees

    monkeypatch.setattr(NodeTrees, "MAX_NODES_PER_FIND", 3)
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        assert find("srv.*")[0] is not find("srv.*")[0]  # 6 nodes: built each time
        assert find("srv.web1.*")[0] is find("srv.web1.*")[0]  # 1 node: kept


def test_a_reused_nodes_intervals_follow_the_store(store_url):
    with use_finders(["graphite_plugin.Finder"], BG_STORE=store_url, **CACHED):
        [node] = find("srv.db")
        last_written_on_creation = node.intervals.intervals[-1].end  # long ago: the retention's start
        assert last_written_on_creation < time.time() - 3600
        accessor = Accessor.from_url(store_url)
        accessor.touch(["srv.db"], now=int(time.time()), force=True)  # written just now
        accessor.close()
        time.sleep(0.6)  # past BG_CACHE_TTL: the batch is read again
        [again] = find("srv.db")
        assert again is node
        assert again.intervals.intervals[-1].end >= time.time() - 5  # data up to now
