"""Conformance of the tag index on every store (SQLite file, CQL test server): the same
series give the same answers, counts follow writes and deletions, the planner's limits
name their settings, repair fixes postings without series and the reverse."""
from __future__ import annotations

import pytest

from biggraphite_like.errors import InvalidMetricName, InvalidTagExpression, TooManyResults
from biggraphite_like.metric import MetricMetadata
from biggraphite_like.tags import queries
from biggraphite_like.tags.series import tags_of_path

META = MetricMetadata.create("60s:1d", "average", 0.5)
SERIES = [
    "disk.used;host=web1;dc=us", "disk.used;host=web2;dc=us", "disk.used;host=db1;dc=eu",
    "cpu;host=web1;dc=us;core=0", "cpu;host=web1;dc=us;core=1", "cpu;host=db1;dc=eu;core=0",
    "net.rx;host=web1;iface=eth0", "name.only;x=1",
]


@pytest.fixture
def tagged(accessor):
    accessor.create_metrics([(s, META) for s in SERIES], now=1000)
    return accessor


def test_find_series_by_every_kind_of_term(tagged):
    find = tagged.tags.find_series
    assert find(["host=web1"]) == ["cpu;core=0;dc=us;host=web1", "cpu;core=1;dc=us;host=web1",
                                   "disk.used;dc=us;host=web1", "net.rx;host=web1;iface=eth0"]
    assert find(["name=cpu", "core!=0"]) == ["cpu;core=1;dc=us;host=web1"]
    assert find(["name=~disk", "dc!=us"]) == ["disk.used;dc=eu;host=db1"]
    assert find(["host=~^db", "name!=~cp"]) == ["disk.used;dc=eu;host=db1"]
    assert find(["host=~.*1"]) == [p for p in find(["host!="]) if ";host=" in p and p.split("host=")[1][:4] in
                                  ("web1", "db1")]
    assert find(["dc=", "x=1"]) == ["name.only;x=1"]  # dc= matches series without dc
    assert find(["iface=eth0", "dc="]) == ["net.rx;host=web1;iface=eth0"]
    assert find(["host=nosuch"]) == []
    assert find(["nosuchtag=~a.*"]) == []


def test_list_tags_values_counts_and_autocomplete(tagged):
    tags = tagged.tags
    assert tags.list_tags() == ["core", "dc", "host", "iface", "name", "x"]
    assert tags.list_tags("^(d)") == ["dc"]
    assert tags.list_values("host") == [("db1", 2), ("web1", 4), ("web2", 1)]
    assert tags.list_values("host", "^(w)", limit=1) == [("web1", 4)]
    assert tags.auto_complete_tags([], "c") == ["core"]
    assert tags.auto_complete_tags(["name=cpu"]) == ["core", "dc", "host"]
    assert tags.auto_complete_values(["name=cpu"], "host") == ["db1", "web1"]
    assert tags.auto_complete_values([], "dc", "e") == ["eu"]


def test_counts_follow_deletions_and_a_metric_written_again(tagged):
    tagged.delete_metrics(["disk.used;dc=eu;host=db1", "cpu;core=0;dc=eu;host=db1"])
    tags = tagged.tags
    assert tags.list_values("host") == [("web1", 4), ("web2", 1)]
    assert tags.list_values("dc") == [("us", 4)]
    assert tags.find_series(["host=db1"]) == []
    assert tags.index.counts() == {"tagged_series": 6, "tags": 6, "tag_values": 11}
    tagged.delete_metrics(["name.only;x=1"])
    assert "x" not in tags.list_tags()
    tagged.create_metric("name.only;x=1", META)
    assert tags.find_series(["x=1"]) == ["name.only;x=1"]


def test_series_get_their_time_of_last_write_and_canonical_names(tagged):
    tagged.tags.tag_series(["disk.used;dc=us;host=web1"], now=2000)
    assert tagged.tags.index.series_times(["disk.used;dc=us;host=web1", "cpu;host=db1"]) == {
        "disk.used;dc=us;host=web1": 2000}
    assert tagged.get_metric("cpu;host=db1;core=0;dc=eu").name == "cpu;core=0;dc=eu;host=db1"
    assert tagged.tags.get_series("cpu;dc=eu;core=0;host=db1").tags["core"] == "0"
    assert tagged.tags.get_series("cpu;host=nobody") is None


def test_get_metrics_parses_only_the_tagged_names_the_store_lacks(tagged, monkeypatch):
    """Cold (empty metric cache): tagged names the store holds are canonical and found
    without being parsed; a tagged name in another order is normalised and found under its
    canonical name; a new one is parsed and not found; an invalid one is refused as before."""
    from biggraphite_like import names as names_mod

    parsed = []
    normalize = names_mod.normalize
    monkeypatch.setattr(names_mod, "normalize", lambda name: parsed.append(name) or normalize(name))
    tagged._cache.clear()
    found = tagged.get_metrics(["cpu;core=0;dc=us;host=web1", "disk.used;dc=eu;host=db1", "cpu;host=db1;dc=eu;core=0",
                                "cpu;core=9;dc=us", "plain.name"])
    assert sorted(found) == ["cpu;core=0;dc=eu;host=db1", "cpu;core=0;dc=us;host=web1", "disk.used;dc=eu;host=db1"]
    assert found["cpu;core=0;dc=eu;host=db1"].name == "cpu;core=0;dc=eu;host=db1"
    assert sorted(parsed) == ["cpu;core=9;dc=us", "cpu;host=db1;dc=eu;core=0", "plain.name"]
    with pytest.raises(InvalidMetricName, match="may not start with '~'"):
        tagged.get_metrics(["cpu;core=0;dc=us;host=web1", "m;a=~b"])
    with pytest.raises(InvalidMetricName, match="control character"):
        tagged.get_metrics(["m;a=\ud800", "m;a=b\x00"])
    assert tagged.get_metrics(["cpu;core=0;dc=us;host=web1"]) == {
        "cpu;core=0;dc=us;host=web1": found["cpu;core=0;dc=us;host=web1"]}


def test_bad_input_is_refused_with_the_reason_and_the_rest_is_kept(accessor):
    with pytest.raises(InvalidMetricName, match="may not start with '~'"):
        accessor.create_metric("m;a=~b", META)
    paths, refused = accessor.tags.tag_valid(["ok;a=b", "bad;a=", "bad;^x=1"])
    assert paths == ["ok;a=b"]
    assert refused == {"bad;a=": "value of tag 'a' may not be empty",
                       "bad;^x=1": "character '^' is not allowed in tag '^x'"}
    assert accessor.tags.find_series(["a=b"]) == ["ok;a=b"]
    with pytest.raises(InvalidTagExpression, match="at least one expression"):
        accessor.tags.find_series(["a!=b"])
    with pytest.raises(InvalidTagExpression, match="repetition inside a repetition"):
        accessor.tags.find_series(["a=~(b+)+c"])


def test_limits_name_their_setting(tagged):
    tagged.tags.max_series = 3
    with pytest.raises(TooManyResults, match="BG_MAX_TAG_SERIES"):
        tagged.tags.find_series(["host=web1"])
    assert tagged.tags.find_series(["host=web1", "name=disk.used"]) == ["disk.used;dc=us;host=web1"]
    tagged.tags.max_values = 2
    with pytest.raises(TooManyResults, match="BG_MAX_TAG_VALUES"):
        tagged.tags.find_series(["host=~.*1"])


def test_planner_drives_from_the_equality_term(tagged, monkeypatch):
    """With an = term, no other tag's values are read (a regex term only filters)."""
    read = []
    original = tagged.tags.index.values
    monkeypatch.setattr(tagged.tags.index, "values", lambda tag, *a, **k: read.append(tag) or original(tag, *a, **k))
    assert tagged.tags.find_series(["host=~.*", "name=net.rx"]) == ["net.rx;host=web1;iface=eth0"]
    assert read == []
    assert tagged.tags.find_series(["host=~w", "name=~n"]) == ["net.rx;host=web1;iface=eth0"]
    assert read == ["host"]  # it matches at most SMALL_DRIVER series: filtered on their paths, no other term sized
    monkeypatch.setattr(queries, "SMALL_DRIVER", 0)
    read.clear()
    assert tagged.tags.find_series(["host=~w", "name=~n"]) == ["net.rx;host=web1;iface=eth0"]
    assert read == ["host", "name"]  # both prefix terms are sized, the smaller drives


def test_repair_fixes_postings_without_series_and_series_without_postings(tagged):
    index = tagged.tags.index
    # break the index: a series row without postings, postings without a series row
    index.remove_series(["net.rx;host=web1;iface=eth0"])
    ghost = "ghost;host=web1"
    index.add_series([ghost], now=5)
    _drop_series_row(tagged, ghost)
    _drop_postings(tagged, "disk.used;dc=us;host=web2")
    assert tagged.tags.find_series(["host=web2"]) == []
    found = index.repair(dry_run=True)
    assert found["postings_without_series"] == 2 and found["series_without_postings"] == 1
    index.repair()
    assert tagged.tags.find_series(["host=web2"]) == ["disk.used;dc=us;host=web2"]
    assert tagged.tags.find_series(["name=ghost"]) == []
    assert index.repair() == {"postings_without_series": 0, "series_without_postings": 0, "counts_fixed": 0}
    assert tagged.tags.list_values("host") == [("db1", 2), ("web1", 3), ("web2", 1)]


def _drop_series_row(accessor, path):
    store = accessor.store
    if accessor.store.url.startswith("sqlite"):
        with store.write_batch():
            store._conn.execute("DELETE FROM tagged_series WHERE path = ?", (path,))
    else:
        store._execute(f"DELETE FROM {store.metadata_keyspace}.tagged_series WHERE path = ?", (path,),
                       "metadata_write", "test")


def _drop_postings(accessor, path):
    store = accessor.store
    if accessor.store.url.startswith("sqlite"):
        index = accessor.tags.index
        with store.write_batch():
            (series_id,), = store._conn.execute("SELECT id FROM tagged_series WHERE path = ?", (path,))
            for value_id, _ in index._value_ids_of(path):
                assert index._remove_posting(store._conn, value_id, series_id)
    else:
        from biggraphite_like.stores.cassandra.tags import bucket_of
        from biggraphite_like.tags.series import tags_of_path

        for tag, value in tags_of_path(path).items():
            store._execute(f"DELETE FROM {store.metadata_keyspace}.tag_postings WHERE tag = ? AND value = ?"
                           " AND bucket = ? AND path = ?", (tag, value, bucket_of(path), path), "metadata_write", "t")


def test_concurrent_writers_count_every_series_once(accessor, store_url):
    """Writers adding series with a shared tag value, some series written by several of
    them, at once: every series counted exactly once (compare-and-set on Cassandra)."""
    import threading

    from biggraphite_like.accessor import Accessor

    def work(worker: int) -> None:
        own = Accessor.from_url(store_url)
        try:
            for batch in range(5):
                names = [f"c;shared=x;w=w{worker};i=i{batch}_{k}" for k in range(10)]
                names += [f"c;shared=x;common=y;i=i{batch}_{k}" for k in range(5)]  # written by every worker
                own.tags.tag_series(names)
        finally:
            own.close()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert accessor.tags.index.value_count("shared", "x") == 4 * 50 + 25
    assert accessor.tags.list_values("common") == [("y", 25)]
    assert len(accessor.tags.find_series(["shared=x"])) == 225


def test_bulk_indexing_counts_new_series_once_across_batches(accessor, monkeypatch):
    from biggraphite_like.stores.sqlite import tags as sqlite_tags

    monkeypatch.setattr(sqlite_tags, "_BATCH", 7)  # several bulk rounds in one call on SQLite
    tags = accessor.tags
    assert tags.index.add_series([], 1) == 0
    tags.tag_series(["m;h=h0;k=a", "m;h=h1;k=a"], now=100)
    names = [f"m;h=h{i % 10};k={'ab'[i % 2]};new{i % 3}=x" if i >= 10 else f"m;h=h{i};k=a" for i in range(30)]
    paths = tags.tag_series(names + names[:5], now=200)  # duplicates in the call and already indexed series
    expected = sorted(set(paths) | {"m;h=h0;k=a", "m;h=h1;k=a"})
    assert tags.find_series(["name=m"]) == expected
    assert tags.index.series_times(["m;h=h0;k=a", "m;h=h2;k=a"]) == {"m;h=h0;k=a": 200, "m;h=h2;k=a": 200}
    counted: dict[tuple[str, str], int] = {}
    for path in expected:
        for tag, value in tags_of_path(path).items():
            counted[(tag, value)] = counted.get((tag, value), 0) + 1
    for tag in ("h", "k", "new0", "name"):
        assert tags.list_values(tag) == sorted((v, c) for (t, v), c in counted.items() if t == tag)
    assert tags.index.counts() == {"tagged_series": len(expected), "tags": 6, "tag_values": len(counted)}
    assert tags.index.add_series(expected[:3], 300) == 0


def test_postings_of_all_intersects_on_every_store_and_never_loses_a_series(tagged):
    index = tagged.tags.index
    exact = ["cpu;core=0;dc=us;host=web1", "cpu;core=1;dc=us;host=web1"]
    assert sorted(index.postings_of_all([("name", "cpu"), ("dc", "us"), ("host", "web1")])) == exact
    assert index.postings_of_all([("name", "cpu"), ("dc", "nosuch")]) == []
    assert tagged.tags.find_series(["dc=us", "name=cpu", "host=web1"]) == exact


def test_cassandra_intersection_probes_only_the_candidates_in_bounded_statements(accessor, monkeypatch):
    """Several = terms on Cassandra: the rarest list is read, then each other pair is probed
    one partition (its bucket) and at most PROBE_PATHS candidates per statement; the common
    value's posting list is never read whole."""
    from biggraphite_like.stores.cassandra import tags as cassandra_tags

    index = accessor.tags.index
    if not isinstance(index, cassandra_tags.CassandraTagIndex):
        pytest.skip("Cassandra's intersection (SQLite's is a join: tested above)")
    monkeypatch.setattr(cassandra_tags, "PROBE_PATHS", 7)
    names = [f"m;common=x;id={i:03};mid={i % 3};rare={i % 5}" for i in range(300)]
    accessor.tags.tag_series(names)
    statements: list[tuple[str, tuple]] = []
    run = index._run
    monkeypatch.setattr(index, "_run", lambda requests, what: statements.extend(
        (r[0].query_string, r[1]) for r in requests) or run(requests, what))
    found = accessor.tags.find_series(["common=x", "mid=1", "rare=2"])
    assert found == sorted(n for i, n in enumerate(names) if i % 3 == 1 and i % 5 == 2)
    assert len(found) == 20
    probes = [params for query, params in statements if "path IN" in query]
    assert probes and all(len(params[3]) <= 7 for params in probes)
    # rare=2 drives (60 series); mid=1 then common=x probe the 60, then the 20, candidates left
    assert {(p[0], p[1]) for p in probes} == {("mid", "1"), ("common", "x")}
    assert sum(len(p[3]) for p in probes if p[0] == "mid") == 60
    assert sum(len(p[3]) for p in probes if p[0] == "common") == 20
    assert len([p for p in probes if p[0] == "mid"]) <= 60 // 7 + cassandra_tags.POSTING_BUCKETS
    assert not [q for q, params in statements if "bucket IN" in q and params[:2] != ("rare", "2")]


def test_names_with_json_and_unicode_special_characters_index_once(accessor):
    names = ["m;é=ü", 'm;a=b"c\\d', "m;k=😀;z=\u2028x", "m2;a=1=2"]
    tags = accessor.tags
    assert tags.tag_series(names) == names
    assert tags.tag_series(names) == names  # again: already indexed, nothing counted twice
    assert tags.find_series(["name=m"]) == sorted(names[:3])
    assert tags.find_series(["a=1=2"]) == ["m2;a=1=2"] and tags.find_series(['a=b"c\\d']) == [names[1]]
    assert tags.list_values("k") == [("😀", 1)] and tags.list_values("z") == [("\u2028x", 1)]
    assert tags.index.counts() == {"tagged_series": 4, "tags": 5, "tag_values": 7}


def test_sqlite_pair_ids_a_process_keeps_stay_right_across_writers_and_rollbacks(tmp_path):
    """Each process keeps the ids of the tag=value pairs it has committed. A pair made in a
    caller's transaction that rolls back is not kept: another writer then gives its id to
    another pair, and the first process must still index exactly."""
    from biggraphite_like.accessor import Accessor

    url = f"sqlite://{tmp_path / 'tags.db'}"
    first, second = Accessor.from_url(url), Accessor.from_url(url)
    first.syncdb()
    first.tags.tag_series(["m;a=1;b=1"], now=1)
    with pytest.raises(RuntimeError):
        with first.store.write_batch():
            first.tags.tag_series(["m;a=2;b=9"], now=2)
            raise RuntimeError("the caller's transaction fails")
    second.tags.tag_series(["m;c=3;d=4", "m;a=1;c=3"], now=3)  # takes the ids the rollback freed
    first.tags.tag_series(["m;a=2;b=9", "m;a=1;b=1;d=4"], now=4)
    fresh = Accessor.from_url(url)
    expected = {"a=2": ["m;a=2;b=9"], "b=9": ["m;a=2;b=9"], "c=3": ["m;a=1;c=3", "m;c=3;d=4"],
                "d=4": ["m;a=1;b=1;d=4", "m;c=3;d=4"], "a=1": ["m;a=1;b=1", "m;a=1;b=1;d=4", "m;a=1;c=3"]}
    for accessor in (first, second, fresh):
        assert {e: accessor.tags.find_series([e]) for e in expected} == expected
        assert accessor.tags.list_values("a") == [("1", 3), ("2", 1)]
    assert fresh.tags.index.repair() == {"postings_without_series": 0, "series_without_postings": 0,
                                         "counts_fixed": 0}
    for accessor in (first, second, fresh):
        accessor.close()


def test_sqlite_equal_query_reads_in_one_statement_and_stays_right_across_writes(tmp_path):
    """findSeries with `=` terms whose rarest covers at most SMALL_DRIVER series: one
    statement (the pairs' counts, which keep their ids, and the rarest one's postings with
    the chunks in use counted, decoded and joined to their paths); series added after the
    id was kept (a new chunk among them) and a pair interned by a rolled-back batch are
    answered right."""
    from biggraphite_like.accessor import Accessor
    from biggraphite_like.stores.sqlite import tags as sqlite_tags

    url = f"sqlite://{tmp_path / 'tags.db'}"
    accessor, writer = Accessor.from_url(url), Accessor.from_url(url)
    accessor.syncdb()
    writer.tags.tag_series([f"m;a={i % 3};i={i}" for i in range(30)])
    assert accessor.tags.find_series(["a=2"])  # the layout checks, once a process
    statements = []
    accessor.store._conn.set_trace_callback(statements.append)
    assert accessor.tags.find_series(["a=1"]) == sorted(f"m;a=1;i={i}" for i in range(1, 30, 3))
    assert accessor.tags.find_series(["name=m", "i=4", "a=1"]) == ["m;a=1;i=4"]
    assert accessor.tags.find_series(["i=4", "a=2"]) == [] and accessor.tags.find_series(["a=1", "i=nosuch"]) == []
    accessor.store._conn.set_trace_callback(None)
    assert len(statements) == 4, statements
    first = 1 << sqlite_tags.CHUNK_BITS  # the next series in a chunk of their own
    writer.store._conn.execute("INSERT INTO tagged_series (id, path, updated_on) VALUES (?, 'm;a=9;i=x', 0)",
                               (first - 1,))  # a filler row: the next ids start a new chunk
    writer.tags.tag_series(["m;a=1;i=late"])
    assert accessor.tags.find_series(["a=1"])[-1] == "m;a=1;i=late"
    assert accessor.tags.find_series(["a=1", "name=m"])[-1] == "m;a=1;i=late"
    with pytest.raises(RuntimeError), accessor.store.write_batch():
        accessor.tags.tag_series(["m;a=new;i=0"])
        assert accessor.tags.find_series(["a=new"]) == ["m;a=new;i=0"]  # its id, kept, then taken back
        raise RuntimeError("roll back")
    writer.tags.tag_series(["m;b=other;i=1"])  # may take the id the rolled-back pair had
    assert accessor.tags.find_series(["a=new"]) == [] and accessor.tags.find_series(["b=other"]) == ["m;b=other;i=1"]
    accessor.close()
    writer.close()


@pytest.mark.parametrize("read_whole", [0, 10**9])
def test_sqlite_packed_postings_across_many_chunks_stay_exact(tmp_path, monkeypatch, read_whole):
    """Chunks of 4 series (so a batch spans more chunks than one sort key holds), rows of
    at most 3 series, pairs whose rows are cut by chunks, batches and the row size: every query, removal and repair agrees with
    the series themselves, intersections probing (read_whole 0) or reading whole."""
    from biggraphite_like.accessor import Accessor
    from biggraphite_like.stores.sqlite import tags as sqlite_tags

    monkeypatch.setattr(sqlite_tags, "CHUNK_BITS", 2)
    monkeypatch.setattr(sqlite_tags, "ROW_SERIES", 3)  # a pair's 4 series of a chunk take two rows
    monkeypatch.setattr(sqlite_tags, "_READ_WHOLE", read_whole)
    accessor = Accessor.from_url(f"sqlite://{tmp_path / 'tags.db'}")
    accessor.syncdb()
    names = [f"m{i % 3};a={i % 2};b={i % 5};c={i % 7};i={i}" for i in range(700)]
    for start in (0, 1, 3, 400):  # batches of 1, 2, 397 and 300 series
        accessor.tags.tag_series(names[start:{0: 1, 1: 3, 3: 400, 400: 700}[start]])
    gone = {f"m{i % 3};a={i % 2};b={i % 5};c={i % 7};i={i}" for i in range(5, 700, 9)}
    accessor.tags.del_series(sorted(gone))
    live = [n for n in names if n not in gone]
    rows = accessor.store._conn.execute("SELECT count(*), max(chunk) FROM tag_postings").fetchone()
    assert rows[1] == 700 >> 2 and rows[0] > 600  # series ids 1..700: rows cut by 176 chunks and 4 batches

    def expect(name=None, **wanted):
        return sorted(n for n in live if all(f";{t}={v};" in n + ";" for t, v in wanted.items())
                      and name in (None, n.split(";")[0]))
    assert accessor.tags.find_series(["a=1", "b=3", "c=2"]) == expect(a=1, b=3, c=2)
    assert accessor.tags.find_series(["c=2", "a=0"]) == expect(a=0, c=2)
    assert accessor.tags.find_series(["b=~[34]", "name=m1"]) == sorted(expect("m1", b=3) + expect("m1", b=4))
    assert accessor.tags.list_values("b") == [(str(v), len(expect(b=v))) for v in range(5)]
    store = accessor.store
    with store.write_batch():  # damage: a series without postings, a posting without series
        victim = live[100]
        (series_id,), = store._conn.execute("SELECT id FROM tagged_series WHERE path = ?", (victim,))
        for value_id, _ in accessor.tags.index._value_ids_of(victim):
            assert accessor.tags.index._remove_posting(store._conn, value_id, series_id)
        store._conn.execute("DELETE FROM tagged_series WHERE path = ?", (live[200],))
    found = accessor.tags.index.repair()
    assert found["series_without_postings"] == 1 and found["postings_without_series"] == 5  # its 5 pairs
    live.remove(live[200])
    assert accessor.tags.find_series(["a=1", "b=3"]) == expect(a=1, b=3)
    assert accessor.tags.list_values("c") == [(str(v), len(expect(c=v))) for v in range(7)]
    assert accessor.tags.index.repair() == {"postings_without_series": 0, "series_without_postings": 0,
                                            "counts_fixed": 0}
    accessor.close()


def test_sqlite_batch_with_more_tags_than_pair_ids_can_code_is_refused_whole(tmp_path, monkeypatch):
    """The pair ids a process keeps carry a slot of their tag (TAG_SLOT_BITS): a batch with
    more distinct tags than slots is refused with what to do, indexes nothing, and smaller
    batches then index exactly."""
    from biggraphite_like.accessor import Accessor
    from biggraphite_like.errors import StoreError
    from biggraphite_like.stores.sqlite import tags as sqlite_tags

    monkeypatch.setattr(sqlite_tags, "TAG_SLOT_BITS", 2)  # 4 tags, the name among them
    monkeypatch.setattr(sqlite_tags._PairIds, "limit", 4)  # pairs kept: below the slots, as 1,000,000 < 2**20
    accessor = Accessor.from_url(f"sqlite://{tmp_path / 'tags.db'}")
    accessor.syncdb()
    with pytest.raises(StoreError, match="more than 4 distinct tags: index it in smaller batches"):
        accessor.tags.tag_series(["m;a=1;b=1", "m;c=1;d=1"])
    assert accessor.tags.index.counts() == {"tagged_series": 0, "tags": 0, "tag_values": 0}
    accessor.tags.tag_series(["m;a=1;b=1"])
    accessor.tags.tag_series(["m;c=1;d=1"])  # the slots start again with the cache: its limit is 4 pairs
    assert accessor.tags.find_series(["name=m"]) == ["m;a=1;b=1", "m;c=1;d=1"]
    assert accessor.tags.list_values("d") == [("1", 1)] and accessor.tags.list_values("name") == [("m", 2)]
    accessor.close()


def test_sqlite_bulk_indexing_defers_checkpoints_within_its_bound(tmp_path, monkeypatch):
    """A batch indexing BULK_SERIES new series or more commits without a checkpoint until
    the WAL passes BULK_WAL_BYTES; then a background pass checkpoints while the writer goes
    on, the writer's next commit after it restarts the WAL (written again from its start:
    its header's salt changes) without truncating the file, and the
    WAL never passes twice BULK_WAL_BYTES plus a batch; smaller batches and the next
    ordinary commit keep the store's own limit (and truncate); a reader sees every batch."""
    from biggraphite_like.accessor import Accessor
    from biggraphite_like.stores.sqlite import tags as sqlite_tags

    monkeypatch.setattr(sqlite_tags, "BULK_SERIES", 500)
    monkeypatch.setattr(sqlite_tags, "BULK_WAL_BYTES", 1 << 20)
    url = f"sqlite://{tmp_path / 'tags.db'}"
    writer, reader = Accessor.from_url(url), Accessor.from_url(url)
    writer.store.wal_limit = 128 << 10
    writer.syncdb()
    wal = tmp_path / "tags.db-wal"
    sizes, salts = [], []
    for batch in range(20):  # about 150 KiB of WAL each
        writer.tags.tag_series([f"m;b={batch};i={i};j={i % 7}" for i in range(600)])
        sizes.append(wal.stat().st_size)
        salts.append(wal.read_bytes()[16:24])  # the WAL header's salts: new at each restart
        assert len(reader.tags.find_series([f"b={batch}"])) == 600
    assert all(size <= (2 << 20) + (256 << 10) for size in sizes), sizes
    # grew, and never truncated but to the deferred commits' journal_size_limit (twice
    # BULK_WAL_BYTES), which SQLite applies when it restarts a WAL a last batch took past it
    limit = 2 << 20
    assert max(sizes) > 1 << 20 and all(b >= a or b == limit for a, b in zip(sizes, sizes[1:])), sizes
    past = sizes.index(next(size for size in sizes if size > 1 << 20))
    assert len(set(salts[past:])) >= 2, salts  # restarted
    assert writer.store._bulk_checkpoint.passes >= 1 and writer.store._bulk_checkpoint.error is None
    writer.tags.tag_series([f"m;b=small;i={i}" for i in range(499)])  # below BULK_SERIES: the store's limit
    assert wal.stat().st_size <= 128 << 10
    for batch in range(2):
        writer.tags.tag_series([f"m;c={batch};i={i}" for i in range(600)])
    assert wal.stat().st_size > 128 << 10
    writer.create_metrics([("plain.metric", META)], now=1000)  # an ordinary commit checkpoints again
    assert wal.stat().st_size <= 128 << 10
    assert writer.store._conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000
    assert writer.store._conn.execute("PRAGMA journal_size_limit").fetchone()[0] == 128 << 10
    assert reader.tags.index.counts()["tagged_series"] == 20 * 600 + 499 + 2 * 600
    writer.close()
    reader.close()


_INDEXER = """
import sys
from biggraphite_like.accessor import Accessor
from biggraphite_like.stores.sqlite import tags as sqlite_tags
sqlite_tags.BULK_SERIES, sqlite_tags.BULK_WAL_BYTES = 100, 256 << 10
accessor = Accessor.from_url(sys.argv[1])
for batch in range(100_000):
    accessor.tags.tag_series([f"m;b={batch};i={i};j={i % 7}" for i in range(300)])
    print(batch, accessor.store._bulk_checkpoint.passes, flush=True)
"""


def test_sqlite_background_checkpoint_loses_no_committed_batch_when_killed(tmp_path):
    """A bulk indexer killed (SIGKILL) just as its commit started a background checkpoint
    pass: every batch it reported committed is there, whole, and the index is consistent."""
    import signal
    import subprocess
    import sys

    from biggraphite_like.accessor import Accessor

    url = f"sqlite://{tmp_path / 'tags.db'}"
    Accessor.from_url(url).syncdb()
    process = subprocess.Popen([sys.executable, "-c", _INDEXER, url], stdout=subprocess.PIPE, text=True)
    try:
        passes_seen, last = 0, -1
        for line in process.stdout:
            batch, passes = map(int, line.split())
            last = batch
            if passes > passes_seen:  # this commit started a pass: kill the process while it runs
                passes_seen = passes
                if passes == 3:
                    process.send_signal(signal.SIGKILL)
                    break
    finally:
        process.kill()
        process.wait(timeout=30)
    assert passes_seen == 3, "the indexer never started three background checkpoints"
    accessor = Accessor.from_url(url)
    assert accessor.store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    for batch in range(last + 1):
        assert len(accessor.tags.find_series([f"b={batch}"])) == 300, batch
    total = accessor.tags.index.counts()["tagged_series"]
    assert total % 300 == 0 and total >= 300 * (last + 1)  # a batch is there whole or not at all
    assert accessor.tags.index.repair() == {"postings_without_series": 0, "series_without_postings": 0,
                                                        "counts_fixed": 0}
    assert accessor.tags.list_values("j")[0] == ("0", total // 300 * 43)  # counts: 43 of 300 have j=0
    accessor.close()
