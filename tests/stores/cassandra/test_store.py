"""The Cassandra store beyond the conformance suite: CLI end to end, failures, round trips, options.

Everything runs the real cassandra-driver over TCP against the CQL test server
(tests/cqlserver), in process (the session's server) or as a subprocess
(`python -m tests.cqlserver`) where a test kills or restarts it.
"""
from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from biggraphite_like import names as names_mod
from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import InvalidStoreURL, SchemaMissing, StoreError, StoreUnavailable, TooManyResults
from biggraphite_like.glob import GlobPattern
from biggraphite_like.maintenance.usage import store_disk_usage
from biggraphite_like.metric import MetricMetadata, make_metric, metric_id
from biggraphite_like.retention import Stage
from biggraphite_like.stores.base import StageTable
from biggraphite_like.stores.cassandra import points as points_mod
from biggraphite_like.stores.cassandra.options import OPTIONS, parse_url
from biggraphite_like.stores.registry import open_store

from tests.conftest import new_keyspace
from tests.paths import REPO_ROOT
from tests.ports import free_port
from tests.stores.glob_cases import PATTERNS, expected_directories, random_tree

ROOT = REPO_ROOT
SCHEMA_FILE = ROOT / "schema" / "cassandra.cql"
BGL = shutil.which("bgl", path=os.path.dirname(sys.executable))
META = MetricMetadata.create("10s:10m,60s:1h", "average", 0.0)
ROW = 2048 * 10  # seconds of one partition of the 10s stage


# -- helpers ---------------------------------------------------------------------------------
class ServerProcess:
    """`python -m tests.cqlserver` as a subprocess (killed, restarted on the same port)."""

    def __init__(self, port: int, state: Path | None = None, *extra: str):
        self.port, self.state, self.extra = port, state, extra
        self.process: subprocess.Popen | None = None

    def start(self) -> "ServerProcess":
        command = [sys.executable, "-m", "tests.cqlserver", "--port", str(self.port), *self.extra]
        if self.state is not None:
            command += ["--state", str(self.state)]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        assert f"cqlserver listening on 127.0.0.1:{self.port}" in line, (line, self.process.stderr.read())
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(30)
        self.process = None


def _bgl(env: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    command = [BGL] if BGL else [sys.executable, "-m", "biggraphite_like.cli"]
    return subprocess.run(command + list(args), input=stdin, env=env, capture_output=True, text=True, timeout=120)


def _retry(action, seconds: float = 30.0):
    """action() once it stops raising StoreUnavailable (the driver reconnects every second)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return action()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


# -- 1. the CLI against a server subprocess gives the SQLite store's answers -----------------------
def test_bgl_on_cassandra_answers_as_on_sqlite(tmp_path):
    server = ServerProcess(free_port()).start()
    try:
        env = dict(os.environ, BGL_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path))
        env.pop("BGL_STORE", None)
        now = int(time.time())
        lines = "".join(f"app.host{h}.{m} {h * 10 + k}.5 {now - 30 * k}\n"
                        for h in range(3) for m in ("cpu", "mem") for k in range(12))
        lines += "bad line\n"
        outputs = {}
        for url in (f"sqlite://{tmp_path / 'bgl.db'}", f"cassandra://127.0.0.1:{server.port}/clitest"):
            out = []
            if url.startswith("cassandra"):
                assert _bgl(env, "--store", url, "syncdb").returncode == 0
            written = _bgl(env, "--store", url, "write", "--retention", "10s:10m,60s:1h", "-", stdin=lines)
            out.append((written.returncode, written.stdout, written.stderr.replace(url, "URL")))
            for args in (["list", "*.*.cpu"], ["list", "--directories", "**"], ["list", "app.host{0,2}.*"],
                         ["read", "--from", str(now - 500), "--until", str(now), "--now", str(now), "app.host1.cpu"],
                         ["read", "--from", str(now - 3000), "--until", str(now), "--now", str(now), "app.host2.mem"],
                         ["info", "app.host0.mem"]):
                result = _bgl(env, "--store", url, *args)
                out.append((result.returncode, result.stdout, result.stderr))
            outputs[url.split(":")[0]] = out
        assert outputs["cassandra"][1][1].split() == ["app.host0.cpu", "app.host1.cpu", "app.host2.cpu"]
        assert '"values"' in outputs["cassandra"][4][1]
        info = [o.pop(-1) for o in outputs.values()]  # created times differ by the run; the rest is equal
        assert all(i[0] == 0 and '"aggregator": "average"' in i[1] for i in info)
        assert outputs["cassandra"] == outputs["sqlite"]
    finally:
        server.stop()


def test_schema_file_is_what_syncdb_dry_run_prints(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path))
    result = _bgl(env, "--store", "cassandra://localhost/biggraphite", "syncdb", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert result.stdout == SCHEMA_FILE.read_text()


# -- 2. a server killed mid-write ------------------------------------------------------------------
def test_writes_fail_clearly_when_the_server_dies_and_recover_when_it_is_back(tmp_path):
    port, state = free_port(), tmp_path / "state.json"
    server = ServerProcess(port, state).start()
    url = f"cassandra://127.0.0.1:{port}/killed?timeout=2"
    accessor = Accessor.from_url(url)
    try:
        accessor.syncdb()
        accessor.create_metrics([(f"k.m{i}", META) for i in range(20)])
        server.stop(signal.SIGTERM)  # saves the schema and metrics to the state file
        server = ServerProcess(port, state).start()
        now = int(time.time())
        _retry(lambda: accessor.insert_points({"k.m0": [(now - 5, 1.0)]}, now=now))

        failure: list[BaseException] = []
        writes = [0]

        def write_forever():
            try:
                while True:
                    t = int(time.time())
                    accessor.insert_points({f"k.m{i}": [(t - 5, float(writes[0]))] for i in range(20)}, now=t)
                    writes[0] += 1
            except BaseException as exc:  # the failure the test expects
                failure.append(exc)

        writer = threading.Thread(target=write_forever, daemon=True)
        writer.start()
        while writes[0] < 3 and writer.is_alive():
            time.sleep(0.05)
        server.stop(signal.SIGKILL)
        writer.join(60)  # a hang guard only: the driver fails requests within the 2 s timeout
        assert not writer.is_alive(), "writes kept waiting on a dead server"
        assert len(failure) == 1 and isinstance(failure[0], StoreUnavailable), failure
        message = str(failure[0])
        print("error after SIGKILL:", message)
        assert "127.0.0.1" in message and ("timeout" in message or "connection" in message), message
        assert "write" in message or "read" in message or "set" in message, message

        server = ServerProcess(port, state).start()
        later = int(time.time())
        result = _retry(lambda: accessor.insert_points({"k.m7": [(later - 5, 42.0)]}, now=later))
        assert result.stored == 1
        series = accessor.fetch(["k.m7"], later - 60, later, later)["k.m7"]
        assert 42.0 in series.values_list()
    finally:
        accessor.close()
        server.stop(signal.SIGKILL)


def test_a_server_that_stops_answering_fails_requests_at_the_timeout(tmp_path):
    server = ServerProcess(free_port()).start()
    accessor = Accessor.from_url(f"cassandra://127.0.0.1:{server.port}/frozen?timeout=1")
    try:
        accessor.syncdb()
        accessor.create_metric("f.m", META)
        server.process.send_signal(signal.SIGSTOP)  # connected, but silent
        try:
            now = int(time.time())
            with pytest.raises(StoreUnavailable, match=r"no answer from 127\.0\.0\.1:\d+ within the timeout of 1s"):
                accessor.insert_points({"f.m": [(now - 5, 1.0)]}, now=now)
        finally:
            server.process.send_signal(signal.SIGCONT)
        now = int(time.time())
        assert _retry(lambda: accessor.insert_points({"f.m": [(now - 5, 2.0)]}, now=now)).stored == 1
    finally:
        accessor.close()
        server.stop(signal.SIGKILL)


def test_an_unreachable_cluster_is_a_clear_error():
    port = free_port()
    accessor = Accessor.from_url(f"cassandra://127.0.0.1:{port}/nowhere?timeout=1")
    with pytest.raises(StoreUnavailable, match=rf"127\.0\.0\.1:{port}"):
        accessor.glob_metrics("*")


# -- 3. round trips per operation --------------------------------------------------------------------
def test_statement_counts_per_operation(url_server, cassandra_url):
    cql_server = url_server
    if cql_server is None:
        pytest.skip("statement counts come from the CQL test server")
    accessor = Accessor.from_url(cassandra_url)
    try:
        accessor.syncdb()
        names = [f"svc.host{i:02d}.cpu" for i in range(40)]
        accessor.create_metrics([(n, META) for n in names] + [("svc.other.mem", META)])
        now = ROW * 85_000 + 3600  # a window [now - 300, now) inside one partition of the 10s stage
        minute = now - now % 60 - 120  # five points of one minute per metric

        def write(count):
            return accessor.insert_points({n: [(minute + 10 * k, float(k)) for k in range(count)] for n in names}, now=now)

        write(1), write(5), accessor.fetch(names, now - 300, now, now)  # prepares every statement once
        accessor.glob_metrics("svc.host1*.cpu"), accessor.glob_directories("svc.*"), accessor.glob_metrics("**.cpu")
        counts = {}
        for label, action in [
            ("find svc.host1*.cpu", lambda: accessor.glob_metrics("svc.host1*.cpu")),
            ("find svc.*", lambda: accessor.glob_directories("svc.*")),
            ("find **.cpu", lambda: accessor.glob_metrics("**.cpu")),
            ("fetch 40 series", lambda: accessor.fetch(names, now - 300, now, now)),
            ("write 40 metrics x 1 point", lambda: write(1)),
            ("write 40 metrics x 5 points", lambda: write(5)),
            ("create 10 metrics", lambda: accessor.store.create_metrics(
                [make_metric(f"svc.new{i}.cpu", META) for i in range(10)])),
        ]:
            cql_server.reset_counts()
            action()
            counts[label] = {k: v for k, v in cql_server.statement_counts.items() if v}
        print(counts)
        assert counts["find svc.host1*.cpu"] == {"EXECUTE": 1}
        assert counts["find svc.*"] == {"EXECUTE": 1}
        # no directory of depth 8 (one round trip of 3 probes): the names of depths 1..8, not 1..64
        assert counts["find **.cpu"] == {"EXECUTE": 3 + 8}
        # the deletion marker, one `metric IN ?` query for the 40 series (same window, same partition block)
        assert counts["fetch 40 series"] == {"EXECUTE": 1 + 1}
        # the deletion marker (once a batch), stage 0, then the propagation: read the minute back
        # (one query for the 40 series), write the 60s stage; the rows of 10 partitions a batch
        # (MAX_PARTITIONS: one node holds them all)
        assert counts["write 40 metrics x 1 point"] == {"EXECUTE": 1 + 1, "BATCH": 4 + 4, "batch_statements": 40 + 40}
        assert counts["write 40 metrics x 5 points"] == {"BATCH": 4 + 4, "batch_statements": 200 + 40, "EXECUTE": 1 + 1}
        # (the store's part) the markers, one `name IN ?` read of the rows (no generations: nothing was
        # ever deleted), the 10 new directories (`svc` was written before: not again), the 10 rows,
        # then the names marker (finds' caches in other processes)
        assert counts["create 10 metrics"] == {"EXECUTE": 1 + 1 + 10 + 10 + 1}
        assert accessor.glob_metrics("svc.host1*.cpu") == [f"svc.host{i}.cpu" for i in range(10, 20)]
    finally:
        accessor.close()


# -- 4. options -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("url, words", [
    ("cassandra://h/ks?colour=blue", ["unknown option 'colour'", "known: data_read", "writer_id"]),
    ("cassandra://h/ks?data_write=SOMETIMES", ["data_write='SOMETIMES'", "LOCAL_QUORUM"]),
    ("cassandra://h/ks?data_read=ANY", ["data_read=ANY", "writes only"]),
    ("cassandra://h/ks?writer_id=16384", ["writer_id='16384'", "0..16383"]),
    ("cassandra://h/ks?replica_id=4", ["replica_id='4'", "0..3"]),
    ("cassandra://h/ks?timeout=0", ["timeout='0'", "positive number of seconds"]),
    ("cassandra://h/ks?max_concurrency=lots", ["max_concurrency='lots'", "integer"]),
    ("cassandra://h/ks?index=lucene", ["index='lucene'", "auto, sasi, sai"]),
    ("cassandra://h/ks?ssl_ca=/etc/hostname", ["ssl_ca needs ssl=true"]),
    ("cassandra://h/ks?ssl=true&ssl_ca=/no/such/ca.pem", ["ssl_ca='/no/such/ca.pem'", "no such file"]),
    ("cassandra://h/ks?replication=dc1", ["replication='dc1'", "dc1:3,dc2:3"]),
    ("cassandra://h/ks?replication=dc1:3&replication_factor=2", ["exclude each other"]),
    ("cassandra://h/ks?timeout=1&timeout=2", ["'timeout' given twice"]),
    ("cassandra://h:99999/ks", ["bad port '99999'"]),
    ("cassandra://h1:9042,h2:9043/ks", ["same port"]),
    ("cassandra:///ks", ["names no host"]),
    ("cassandra://h", ["names no keyspace"]),
    ("cassandra://h/Bad-Name", ["keyspace 'Bad-Name'"]),
    ("cassandra://h/" + "k" * 40, ["up to 38"]),
    ("cassandra://bob@h/ks", ["without a password", "BGL_CASSANDRA_PASSWORD"]),
    ("mongodb://h/ks", ["unknown store URL", "cassandra://host1,host2:9042/keyspace"]),
])
def test_bad_urls_name_the_option(url, words, monkeypatch):
    monkeypatch.delenv("BGL_CASSANDRA_PASSWORD", raising=False)
    monkeypatch.delenv("BGL_CASSANDRA_USERNAME", raising=False)
    with pytest.raises(InvalidStoreURL) as info:
        open_store(url)
    for word in words:
        assert word in str(info.value)


def test_url_options_and_credentials(monkeypatch):
    options = parse_url("cassandra://al%40x:p%3Ass@h1,h2:9142/prod?data_read=one&metadata_write=EACH_QUORUM"
                        "&replication=dc1:3,dc2:2&index=sai&max_results=500&max_concurrency=8&timeout=2.5"
                        "&writer_id=16383&replica_id=3&local_dc=dc1", environ={})
    assert (options.hosts, options.port, options.keyspace, options.metadata_keyspace) == (
        ("h1", "h2"), 9142, "prod", "prod_metadata")
    assert (options.username, options.password) == ("al@x", "p:ss")
    assert (options.data_read, options.metadata_write, options.data_write) == ("ONE", "EACH_QUORUM", "LOCAL_QUORUM")
    assert options.replication_map() == "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2}"
    assert (options.index, options.max_results, options.max_concurrency, options.timeout) == ("sai", 500, 8, 2.5)
    assert options.shard == -1 and options.local_dc == "dc1"  # 0xFFFF read as a signed smallint
    assert "p:ss" not in repr(options)
    from_env = parse_url("cassandra://h/ks", environ={"BGL_CASSANDRA_USERNAME": "u", "BGL_CASSANDRA_PASSWORD": "s"})
    assert (from_env.username, from_env.password, from_env.port) == ("u", "s", 9042)
    assert parse_url("cassandra://h/ks?replication_factor=3", environ={}).replication_map() == (
        "{'class': 'SimpleStrategy', 'replication_factor': 3}")
    assert set(OPTIONS) >= {"ssl", "ssl_ca", "ssl_cert", "ssl_key", "ssl_verify", "local_dc"}


def test_consistency_levels_per_kind_of_statement(cassandra_url):
    from cassandra import ConsistencyLevel as CL

    url = cassandra_url + "?metadata_read=LOCAL_QUORUM&metadata_write=QUORUM&data_read=ONE&data_write=LOCAL_ONE"
    accessor = Accessor.from_url(url)
    try:
        accessor.syncdb()
        accessor.create_metric("cl.m", META, now=1_700_000_000)
        accessor.insert_points({"cl.m": [(1_700_000_000 - 5, 1.0)]}, now=1_700_000_000)
        accessor.fetch(["cl.m"], 1_700_000_000 - 600, 1_700_000_000, 1_700_000_000)
        accessor.glob_metrics("cl.*")
        store = accessor.store
        levels = {}
        for query, statement in store._prepared.items():
            # points: the stage tables and their sealed chunks (read once a seal was announced:
            # the real node's store keeps what earlier tests sealed)
            data = f" {store.keyspace}.datapoints_" in query or f" {store.keyspace}.chunks_" in query
            kind = ("data_" if data else "metadata_") + ("read" if query.startswith("SELECT") else "write")
            levels.setdefault(kind, set()).add(statement.consistency_level)
        assert levels == {"metadata_read": {CL.LOCAL_QUORUM}, "metadata_write": {CL.QUORUM},
                          "data_read": {CL.ONE}, "data_write": {CL.LOCAL_ONE}}
    finally:
        accessor.close()


# -- 5. SASI and SAI ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sai_server():
    from tests.cqlserver import CQLTestServer

    server = CQLTestServer(host="127.0.0.1", port=0, sasi=False, sai=True)
    server.start()
    yield server
    server.stop()


def test_index_auto_falls_back_to_sai_and_globs_stay_equal(sai_server):
    url = f"cassandra://127.0.0.1:{sai_server.port}/{new_keyspace()}"
    accessor = Accessor.from_url(url)
    try:
        accessor.syncdb()
        assert accessor.store._check_schema() == "sai"
        assert "USING 'sai'" in "\n".join(accessor.store.schema_statements())
        metric_names = random_tree(5, 300)
        accessor.create_metrics([(n, META) for n in metric_names])
        directories = expected_directories(metric_names)
        for pattern in PATTERNS + ["cpu0*.*", "a.b*", "*.c*.*"]:
            glob = GlobPattern(pattern)
            assert accessor.glob_metrics(pattern) == glob.filter(metric_names), pattern
            assert accessor.glob_directories(pattern) == glob.filter(directories), pattern
        # a store created with SAI refuses a URL that insists on SASI
        with pytest.raises(StoreError, match="created with SAI"):
            Accessor.from_url(url + "?index=sasi").glob_metrics("*")
    finally:
        accessor.close()


def test_index_sasi_on_a_cluster_without_sasi_names_the_setting(sai_server):
    accessor = Accessor.from_url(f"cassandra://127.0.0.1:{sai_server.port}/{new_keyspace()}?index=sasi")
    try:
        with pytest.raises(StoreError, match="sasi_indexes_enabled"):
            accessor.syncdb()
    finally:
        accessor.close()


def test_explicit_sai_on_a_server_with_both(cassandra_kind, cassandra_url):
    if cassandra_kind == "real-sasi":
        pytest.skip("the real node's SASI store was created with index=sasi; its SAI store is the SAI case")
    accessor = Accessor.from_url(cassandra_url + "?index=sai")
    try:
        accessor.syncdb()
        assert accessor.store._check_schema() == "sai"
        accessor.create_metrics([(n, META) for n in ["p.cpu0", "p.cpu1", "p.mem"]])
        assert accessor.glob_metrics("p.cpu*") == ["p.cpu0", "p.cpu1"]
    finally:
        accessor.close()


# -- 6. datapoints -----------------------------------------------------------------------------------
def test_aggregated_rows_merge_by_count_then_latest_write(cassandra_url):
    one, two = (Accessor.from_url(f"{cassandra_url}?writer_id={w}") for w in (1, 2))
    try:
        one.syncdb()
        one.create_metric("agg.m", META, now=1_700_000_000)
        table = StageTable(Stage(60, 60), True)
        at = np.array([1_700_000_000 - 1_700_000_000 % 60], dtype=np.int64)

        def write(accessor, value, count):
            accessor.store.write_points(table, ["agg.m"], at, np.array([value]), np.array([count]))

        def read():
            reads = two.store.read_points(table, ["agg.m"], at, at + 60)
            return reads.values.tolist()

        write(one, 1.0, 3)
        write(two, 2.0, 5)  # another shard: both rows kept, the more complete one wins
        assert read() == [2.0]
        write(one, 7.0, 5)  # as complete, written later
        assert read() == [7.0]
        write(two, 9.0, 4)  # less complete, even if later
        assert read() == [7.0]
        write(one, 8.0, 5)  # the same shard replaces its own row
        assert read() == [8.0]
    finally:
        one.close()
        two.close()


def test_points_expire_by_ttl_and_expire_returns_zero(url_server, cassandra_accessor):
    cql_server = url_server
    if cql_server is None:
        pytest.skip("needs the test server's clock")
    accessor = cassandra_accessor
    now = int(time.time())
    accessor.create_metric("ttl.m", MetricMetadata.create("1s:60s", "average", 0.0), now=now)
    accessor.insert_points({"ttl.m": [(now - k, 1.0) for k in range(10)]}, now=now)
    assert accessor.fetch(["ttl.m"], now - 30, now, now)["ttl.m"].values_list().count(1.0) == 10
    assert accessor.expire(now + 10**6) == 0
    cql_server.advance_clock(60 + 3600 + 1 + 5)  # the stage's TTL: duration + slack + one step
    assert accessor.fetch(["ttl.m"], now - 30, now, now)["ttl.m"].values_list().count(1.0) == 0


def test_a_deleted_metric_gets_a_new_data_id(cassandra_accessor):
    accessor = cassandra_accessor
    store = accessor.store
    accessor.create_metric("gen.m", META, now=1_700_000_000)
    assert store._metric_ids(["gen.m"], False)["gen.m"] == metric_id("gen.m")
    accessor.delete_metrics(["gen.m"])
    accessor.create_metric("gen.m", META, now=1_700_000_000)
    first = store._metric_ids(["gen.m"], False)["gen.m"]
    assert first != metric_id("gen.m")
    other = Accessor.from_url(store.url)  # another process agrees on the id
    try:
        assert other.store._metric_ids(["gen.m"], False)["gen.m"] == first
    finally:
        other.close()


def test_another_process_deleting_a_metric_is_seen_by_reads_and_writes(cassandra_url):
    one, two = Accessor.from_url(cassandra_url), Accessor.from_url(cassandra_url)
    try:
        one.syncdb()
        now = 1_700_000_000
        one.create_metric("del.m", META, now=now)
        one.insert_points({"del.m": [(now - 5, 7.0)]}, now=now)
        assert 7.0 in two.fetch(["del.m"], now - 60, now, now)["del.m"].values_list()  # two caches the metric
        one.delete_metrics(["del.m"])
        one.create_metric("del.m", META, now=now)
        assert 7.0 not in two.fetch(["del.m"], now - 60, now, now)["del.m"].values_list()
        two.insert_points({"del.m": [(now - 15, 8.0)]}, now=now)  # under the new id, not the deleted one
        assert one.fetch(["del.m"], now - 60, now, now)["del.m"].values_list().count(8.0) == 1
    finally:
        one.close()
        two.close()


def test_an_accessor_inherited_through_fork_works_in_the_child(cassandra_accessor):
    accessor = cassandra_accessor
    accessor.create_metric("fork.m", META, now=1_700_000_000)
    assert accessor.glob_metrics("fork.*") == ["fork.m"]  # the parent's session is open
    context = multiprocessing.get_context("fork")
    queue = context.Queue()

    def child():
        try:
            result = accessor.insert_points({"fork.m": [(1_700_000_000 - 5, 3.0)]}, now=1_700_000_000)
            queue.put(("ok", result.stored, os.getpid() == accessor.store._conn.pid))
        except BaseException as exc:  # reported to the parent
            queue.put(("error", repr(exc), False))

    process = context.Process(target=child)
    process.start()
    process.join(60)
    assert queue.get(timeout=5) == ("ok", 1, True)
    series = accessor.fetch(["fork.m"], 1_700_000_000 - 60, 1_700_000_000, 1_700_000_000)["fork.m"]
    assert 3.0 in series.values_list()


def test_stores_of_one_process_share_one_session(cassandra_accessor):
    first = cassandra_accessor.store
    first.glob_metrics(GlobPattern("*"), 10)
    second = open_store(first.url + "?data_read=ONE")  # other consistency levels, same cluster
    try:
        second.glob_metrics(GlobPattern("*"), 10)
        assert second._conn.session is first._conn.session
        assert first.stats()["stores_sharing_the_session"] == 2
    finally:
        second.close()
    assert first.glob_metrics(GlobPattern("*"), 10) == []  # still open for the first store
    other_cluster = open_store(first.url + "?timeout=3")  # other connection options: its own session
    try:
        other_cluster.glob_metrics(GlobPattern("*"), 10)
        assert other_cluster._conn.session is not first._conn.session
    finally:
        other_cluster.close()


# -- 7. scans and schema ----------------------------------------------------------------------------
def test_a_scan_cursor_belongs_to_its_shard(cassandra_accessor):
    accessor = cassandra_accessor
    accessor.create_metrics([(f"cur.m{i}", META) for i in range(30)])
    page = next(accessor.scan_metrics(1, 2, page_size=2))
    assert page.cursor
    with pytest.raises(ValueError, match="shard 0 of 2"):
        next(accessor.scan_metrics(0, 2, cursor=page.cursor))
    with pytest.raises(ValueError):
        next(accessor.scan_metrics(1, 2, cursor="1/2/zz"))


def test_a_keyspace_without_schema_says_to_run_syncdb(cassandra_url):
    # a keyspace nobody created (cassandra_url has a schema on the real node)
    missing = Accessor.from_url(f"{cassandra_url.rsplit('/', 1)[0]}/{new_keyspace()}")
    accessor = Accessor.from_url(cassandra_url)
    try:
        with pytest.raises(SchemaMissing, match="syncdb"):
            missing.get_metric("a.b")
        accessor.syncdb()
        accessor.syncdb()  # idempotent
        assert accessor.get_metric("a.b") is None
    finally:
        missing.close()
        accessor.close()


def test_stats_are_cheap_facts(cassandra_accessor):
    stats = cassandra_accessor.stats() if hasattr(cassandra_accessor, "stats") else cassandra_accessor.store.stats()
    assert stats["store"] == "cassandra" and stats["index"] in ("sasi", "sai")
    assert stats["hosts_up"] >= 1 and stats["keyspace"] == cassandra_accessor.store.keyspace


def test_disk_bytes_per_table_come_from_system_views_or_say_why_not(cassandra_kind, cassandra_accessor):
    """`bgl du` / `bgl stats` on Cassandra: bytes per table of the store's keyspaces from
    system_views.disk_usage on each node (the real node); the CQL test server has no such
    table, and du says the figure is unavailable and why, instead of a guess."""
    store = cassandra_accessor.store
    cassandra_accessor.create_metrics([("du.m", META)], now=1_700_000_000)
    stats = store.stats()
    on_disk = store_disk_usage(cassandra_accessor)
    if cassandra_kind == "cassandra":  # the CQL test server
        assert on_disk.bytes is None and on_disk.tables == {}
        assert "system_views.disk_usage" in stats["disk_bytes.tables"] and on_disk.tables_note == stats["disk_bytes.tables"]
        return
    assert stats["disk_bytes.nodes"] == stats["hosts_up"]
    tables = {k[len("disk_bytes.table."):]: v for k, v in stats.items() if k.startswith("disk_bytes.table.")}
    assert {f"{store.metadata_keyspace}.metrics", f"{store.metadata_keyspace}.directories"} <= set(tables), tables
    assert all(isinstance(v, int) and v % (1 << 20) == 0 for v in tables.values())  # whole MiB per node
    assert on_disk.bytes == sum(tables.values()) and on_disk.tables == tables


# -- 8. driver settings and glob bounds -----------------------------------------------------------------
def test_requests_are_routed_to_the_replicas_of_their_partition(cassandra_accessor):
    accessor = cassandra_accessor
    accessor.create_metric("route.m", META, now=1_700_000_000)
    accessor.insert_points({"route.m": [(1_700_000_000 - 5, 1.0)]}, now=1_700_000_000)
    store = accessor.store
    cluster = store._conn.cluster
    assert cluster.protocol_version == 4
    insert = next(p for q, p in store._prepared.items() if q.startswith(f"INSERT INTO {store.keyspace}.datapoints"))
    assert insert.routing_key_indexes == [0, 1]  # (metric, slot_start): the whole partition key
    bound = insert.bind((metric_id("route.m"), 0, 0, 1_700_000_000, 1.0))
    assert cluster.metadata.get_replicas(store.keyspace, bound.routing_key)  # token-aware routing knows them


def test_the_partition_token_computed_here_is_the_clusters(cassandra_accessor):
    """A read of many series tells its rows apart by token(metric, slot_start): the token
    computed on the client must be the one the cluster gives."""
    accessor = cassandra_accessor
    meta = MetricMetadata.create("1s:1h", "average", 0.0)  # 3,600 slots: partitions 0 and 2048
    accessor.create_metric("token.m", meta, now=1_700_000_000)
    now = 1_700_000_000 - 1_700_000_000 % 3600 + 3000  # slot 3000
    accessor.insert_points({"token.m": [(now - 2000, 1.0), (now - 5, 2.0)]}, now=now)
    store = accessor.store
    table = StageTable(meta.retention.stages[0], False)
    rows = [tuple(r) for r in store._conn.session.execute(
        f"SELECT token(metric, slot_start), slot_start FROM {store.keyspace}.{table.name}")]
    key = metric_id("token.m")
    assert sorted(rows, key=lambda r: r[1]) == [(points_mod.partition_token(key.bytes, block), block)
                                                for block in (0, 2048)]


def test_metrics_whose_partitions_share_a_token_are_never_read_by_one_request():
    groups = points_mod.token_groups(["a", "b", "c", "d", "e"], [5, 5, 7, 5, 8], 2)
    assert groups == [{5: "a", 7: "c"}, {8: "e"}, {5: "b"}, {5: "d"}]


def test_rows_of_a_partition_not_asked_for_fail_the_read_instead_of_going_to_another_series():
    """A read tells its rows apart by the token computed here: a row with any other token (a
    cluster whose partitioner is not Murmur3) is an error, never another series' points."""
    from biggraphite_like.errors import StoreError

    asked = [{11: [0], 22: [1]}]
    rows = [[(11, 60, 1.0), (22, 60, 2.0)]]
    request, timestamps, values = points_mod._flat(rows, asked, 2)
    assert request.tolist() == [0, 1] and values.tolist() == [1.0, 2.0]
    with pytest.raises(StoreError, match="partitioner is not Murmur3Partitioner"):
        points_mod._flat([[(11, 60, 1.0), (15, 60, 2.0)]], asked, 2)


def test_a_series_asked_twice_in_one_read_gets_its_points_twice(cassandra_accessor):
    accessor = cassandra_accessor
    accessor.create_metrics([("twice.a", META), ("twice.b", META)])
    now = 1_700_000_000
    accessor.insert_points({"twice.a": [(now - 30, 1.0), (now - 20, 2.0)], "twice.b": [(now - 30, 3.0)]}, now=now)
    table = StageTable(META.retention.stages[0], False)
    reads = accessor.store.read_points(table, ["twice.a", "twice.b", "twice.a"], np.array([now - 60] * 3),
                                       np.array([now] * 3))
    got = sorted(zip(reads.request.tolist(), reads.timestamps.tolist(), reads.values.tolist()))
    assert got == [(0, now - 30, 1.0), (0, now - 20, 2.0), (1, now - 30, 3.0), (2, now - 30, 1.0), (2, now - 20, 2.0)]


def test_write_batches_hold_the_partitions_of_one_set_of_replicas(cassandra_accessor):
    """Rows of partitions other replicas hold never share a batch (its coordinator, a replica
    of its first row, holds every row of it); at most MAX_PARTITIONS partitions a batch."""
    accessor = cassandra_accessor
    accessor.create_metric("batch.m", META, now=1_700_000_000)
    accessor.insert_points({"batch.m": [(1_700_000_000 - 5, 1.0)]}, now=1_700_000_000)
    store = accessor.store
    insert = next(p for q, p in store._prepared.items() if q.startswith(f"INSERT INTO {store.keyspace}.datapoints"))
    keys = [uuid.UUID(int=k + 1) for k in range(45)]  # row k of partition k
    places = ["b" if k % 3 == 0 else "a" for k in range(45)]
    requests = points_mod.batch_requests(insert, [[k] for k in range(45)], places,
                                         lambda i: (keys[i], 0, i, 0, 0.0),
                                         lambda i: (keys[i].bytes, b"", b"", b"", b""), 1)
    batches = []
    for statement, params in requests:
        assert params is None  # no lone row: 15 and 30 partitions of each place
        batches.append([uuid.UUID(bytes=values[0]).int - 1 for _, _, values in statement._statements_and_parameters])
    assert sorted(k for batch in batches for k in batch) == list(range(45))
    assert all(len({places[k] for k in batch}) == 1 and len(batch) <= points_mod.MAX_PARTITIONS for batch in batches)
    assert len(batches) == 2 + 3


def test_glob_results_larger_than_a_page_are_read_whole(url_server, cassandra_accessor):
    accessor, cql_server = cassandra_accessor, url_server
    wanted = [f"page.m{i:03d}" for i in range(45)]
    accessor.create_metrics([(n, META) for n in wanted])
    session = accessor.store._conn.session
    session.default_fetch_size, saved = 7, session.default_fetch_size
    try:
        accessor.glob_metrics("page.*")
        if cql_server is not None:
            cql_server.reset_counts()
        assert accessor.glob_metrics("page.*") == wanted
        if cql_server is not None:
            assert cql_server.statement_counts["EXECUTE"] == 7  # one query, 7 pages of 7 rows
        assert accessor.glob_metrics("*.m00*") == wanted[:10]
    finally:
        session.default_fetch_size = saved


def test_globstar_finds_names_deeper_than_the_depth_probes(cassandra_accessor):
    """Per-depth queries stop at the first probed depth without directories: names 7, 9, 17
    and 40 components deep are all found (each probe depth, and past the last)."""
    deep = [".".join(["d"] + [f"x{i}" for i in range(depth - 3)] + ["host42", "cpu"]) for depth in (7, 9, 17, 40)]
    metric_names = deep + ["d.host42.cpu", "d.host43.cpu"]
    cassandra_accessor.create_metrics([(n, META) for n in metric_names])
    for pattern in ("d.**.host42.cpu", "**.host42.cpu", "d.x0.**.cpu"):
        found = cassandra_accessor.glob_metrics(pattern)
        assert found == GlobPattern(pattern).filter(metric_names) and set(deep) <= set(found), pattern
    directories = {d for n in deep for d in names_mod.ancestors(n)}
    assert cassandra_accessor.glob_directories("d.**.x13.*") == GlobPattern("d.**.x13.*").filter(directories)
    assert len(cassandra_accessor.glob_directories("d.**.x13.*")) == 2  # ...x13.host42 and ...x13.x14


def test_globs_stay_equal_when_walks_give_way_to_depth_queries(cassandra_accessor, monkeypatch):
    from biggraphite_like.stores.cassandra import globs as module

    monkeypatch.setattr(module, "WALK_LIMIT", 2)
    metric_names = random_tree(7, 200)
    cassandra_accessor.create_metrics([(n, META) for n in metric_names])
    for pattern in ["*.*", "*.*.*", "*b*.*a*", "[!a]*.*", "*", "c?.*"]:
        assert cassandra_accessor.glob_metrics(pattern) == GlobPattern(pattern).filter(metric_names), pattern


def test_max_results_option_and_candidate_bound(cassandra_url):
    accessor = Accessor.from_url(cassandra_url + "?max_results=5")
    try:
        accessor.syncdb()
        accessor.create_metrics([(f"lim.m{i}", META) for i in range(8)] + [(f"lim.x{i}.y", META) for i in range(80)])
        with pytest.raises(TooManyResults, match="max_results=5"):
            accessor.glob_metrics("lim.*")  # exact: LIMIT 6 suffices
        assert accessor.glob_metrics("lim.x1.*") == ["lim.x1.y"]
        # wildcards the index cannot decide: at most 5 x 10 candidates are read, then a clear error
        with pytest.raises(TooManyResults, match="candidate names"):
            accessor.glob_metrics("lim.*[1].y")
    finally:
        accessor.close()


def test_the_sqlite_path_works_without_the_driver(tmp_path):
    """cassandra:// imports the driver lazily: without it, SQLite works and URL errors stay clear."""
    code = (
        "import sys; sys.modules['cassandra'] = None\n"
        "from biggraphite_like.accessor import Accessor\n"
        "from biggraphite_like.errors import InvalidStoreURL\n"
        f"a = Accessor.from_url('sqlite://{tmp_path / 'x.db'}'); a.syncdb(); print(a.glob_metrics('*'))\n"
        "try:\n    Accessor.from_url('cassandra://h/ks?bogus=1')\n"
        "except InvalidStoreURL as exc:\n    print('refused', 'bogus' in str(exc))\n"
        "try:\n    Accessor.from_url('cassandra://h/ks')\n"
        "except ImportError as exc:\n    print('needs', 'cassandra-driver' in str(exc))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.split("\n")[:3] == ["[]", "refused True", "needs True"], result.stderr


def test_requests_in_flight_never_exceed_max_concurrency(cassandra_url):
    accessor = Accessor.from_url(cassandra_url + "?max_concurrency=3")
    try:
        accessor.syncdb()
        names = [f"conc.m{i}" for i in range(30)]
        accessor.create_metrics([(n, META) for n in names], now=1_700_000_000)
        session = accessor.store._conn.session
        original = session.execute_async
        lock = threading.Lock()
        in_flight, peak = [0], [0]

        def counted(*args, **kwargs):
            future = original(*args, **kwargs)
            with lock:
                in_flight[0] += 1
                peak[0] = max(peak[0], in_flight[0])

            def done(*_):
                with lock:
                    in_flight[0] -= 1
            future.add_callbacks(done, done)
            return future

        session.execute_async = counted
        try:
            accessor.fetch(names, 1_700_000_000 - 300, 1_700_000_000, 1_700_000_000)
        finally:
            session.execute_async = original
        assert 1 < peak[0] <= 3
    finally:
        accessor.close()


def test_tls_and_replication_options_shape_the_connection_and_schema():
    ca = "/etc/ssl/certs/ca-certificates.crt"
    verified = open_store(f"cassandra://h/ks?ssl=true&ssl_ca={ca}")._ssl_context()
    assert verified.check_hostname and verified.verify_mode.name == "CERT_REQUIRED"
    unverified = open_store(f"cassandra://h/ks?ssl=true&ssl_ca={ca}&ssl_verify=false")._ssl_context()
    assert not unverified.check_hostname and unverified.verify_mode.name == "CERT_NONE"
    assert open_store("cassandra://h/ks")._ssl_context() is None
    statements = open_store("cassandra://h/ks?replication=dc1:3,dc2:2&index=sai").schema_statements()
    assert ("CREATE KEYSPACE IF NOT EXISTS ks_metadata WITH replication = {'class': 'NetworkTopologyStrategy',"
            " 'dc1': 3, 'dc2': 2} AND durable_writes = true;") in statements
    assert not any("SASI" in s for s in statements) and sum("USING 'sai'" in s for s in statements) == 130


# -- the timeout bounds a whole operation (issue 15 item 9) ------------------------------------------
@pytest.fixture
def slow_server():
    """A CQL test server of its own, to slow down (or stop) without disturbing other tests."""
    from tests.cqlserver import CQLTestServer

    server = CQLTestServer(host="127.0.0.1", port=0).start()
    yield server
    server.slow_down(0)
    server.stop()


def _two_stage_metrics(url: str, prefix: str) -> tuple[Accessor, list[str], int]:
    """150 metrics of two stages, created and their metadata cached (an insert then starts
    with the points), and a time in the middle of a 5-minute interval."""
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    meta = MetricMetadata.create("60s:1d,300s:7d", "average", 0.5)
    names = [f"{prefix}.m{i:03d}" for i in range(150)]
    accessor.create_metrics([(n, meta) for n in names])
    accessor.get_metrics(names)
    return accessor, names, int(time.time()) // 300 * 300 + 150


def test_the_timeout_bounds_a_whole_write_and_the_error_says_what_was_stored(slow_server):
    """timeout=5 gave up after 41 s: each request had the timeout, and one insert runs several
    batches of requests in a row (raw points, aggregated stages, updated_on). With every
    request answered 100 ms late, 150 metrics take ~1.5 s a batch (15 requests: the rows of
    10 metrics a request): the raw points fit in the 2 s timeout, the rest (the read-back,
    a few requests, and the 300 s stage's writes) does not. The insert fails at the
    deadline, naming the raw points as written, and they are stored."""
    url = f"cassandra://127.0.0.1:{slow_server.port}/slow?timeout=2"
    accessor, names, now = _two_stage_metrics(url, "slow")
    slow_server.slow_down(0.1)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        # three of the interval's five minutes: enough (xfilesfactor 0.5) for the 300 s stage to be written
        accessor.insert_points({n: [(now - 150 + 60 * k, float(i)) for k in range(3)] for i, n in enumerate(names)},
                               now=now)
    elapsed = time.monotonic() - started
    slow_server.slow_down(0)
    message = str(info.value)
    print(f"\nfailed after {elapsed:.1f}s: {message}")
    assert elapsed < 2 + 1.5, f"gave up after {elapsed:.1f}s with timeout=2"
    assert "within the timeout of 2s, which bounds the whole operation" in message
    assert "completed before: " in message and "write 450 raw points to slow.datapoints_1440p_60s_0" in message
    reader = Accessor.from_url(url)
    series = reader.fetch(names, now - 600, now, now)
    assert all(series[n] is not None and float(i) in series[n].values_list() for i, n in enumerate(names))
    accessor.close()
    reader.close()


def test_a_server_stopped_mid_write_fails_within_the_timeout_saying_what_was_stored(slow_server):
    accessor, names, now = _two_stage_metrics(f"cassandra://127.0.0.1:{slow_server.port}/stopped?timeout=3", "stop")
    slow_server.slow_down(0.05)  # ~0.75 s a batch of 15 requests (150 metrics, 10 a request)
    stopper = threading.Timer(1.0, slow_server.stop)  # during the second batch of the insert
    started = time.monotonic()
    stopper.start()
    try:
        with pytest.raises(StoreUnavailable) as info:
            accessor.insert_points({n: [(now - 150 + 60 * k, float(i)) for k in range(3)]
                                    for i, n in enumerate(names)}, now=now)  # the 300 s stage written too
    finally:
        stopper.join()
    elapsed = time.monotonic() - started
    message = str(info.value)
    print(f"\nfailed after {elapsed:.1f}s: {message}")
    assert elapsed < 3 + 1.5
    assert "completed before: " in message and "write 450 raw points to stopped.datapoints_1440p_60s_0" in message
    accessor.close()
