"""A reader's pages of the file mapped through mmap: SQLite maps the file once per
connection and a page counts in the process's RSS once per mapping that touched it, so the
globs of every thread go through the process's shared readers (connection.SHARED_READERS);
pages given back (Store.release_mapped_pages). Real SQLite files, the process's own
/proc/self/smaps."""
from __future__ import annotations

import threading

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.glob import GlobPattern
from biggraphite_like.metric import Metric, MetricMetadata
from biggraphite_like.stores.registry import open_store
from biggraphite_like.stores.sqlite import connection, tree_glob

NAMES = [f"big.h{h:03d}.m{m:02d}" for h in range(400) for m in range(30)]  # 12,000 metrics, 400 directories
MMAP = "?mmap_size=1073741824"


def mappings_kib(path: str) -> list[int]:
    """Resident KiB of each of this process's mappings of the file at path."""
    found, current = [], None
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if fields and not fields[0].endswith(":"):  # a mapping's first line: range, perms, ..., path
                current = fields[5] if len(fields) > 5 else None
            elif fields and fields[0] == "Rss:" and current == path:
                found.append(int(fields[1]))
    return found


def mapped_kib(path: str) -> int:
    """Resident KiB of this process's mappings of the file at path."""
    return sum(mappings_kib(path))


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    url = f"sqlite://{tmp_path_factory.mktemp('mapped')}/bgl.db"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    metadata = MetricMetadata.create("60s:1d", "average", 0.5)
    accessor.create_metrics([(name, metadata) for name in NAMES])
    accessor.close()
    return url


@pytest.fixture
def store(store_url):
    opened = open_store(store_url + MMAP)
    yield opened
    opened.close()


def test_release_gives_back_the_pages_a_read_mapped(store):
    assert store._conn.execute("SELECT count(*) FROM (SELECT * FROM metrics)").fetchone()[0] == len(NAMES)
    assert mapped_kib(store.path) > 200, "the read's pages are resident through the mapping"
    assert store.release_mapped_pages()
    assert mapped_kib(store.path) == 0
    assert store._conn.execute("PRAGMA mmap_size").fetchone()[0] == 1 << 30, "still read through mmap"
    small = store.glob_nodes(GlobPattern("big.h001.*"), 100_000)
    assert small == (sorted(n for n in NAMES if n.startswith("big.h001.")), [])
    assert mapped_kib(store.path) > 0, "a small glob's pages stay mapped (the next finds reuse them)"


def test_nothing_to_release_without_mmap_or_inside_a_transaction(store_url, store):
    plain = open_store(store_url)
    try:
        plain.glob_nodes(GlobPattern("big.*.*"), 100_000)
        assert not plain.release_mapped_pages(), "no mmap: nothing mapped"
    finally:
        plain.close()
    store.glob_nodes(GlobPattern("big.h002.*"), 100_000)
    held = mapped_kib(store.path)
    store._conn.execute("BEGIN")
    try:
        assert not store.release_mapped_pages(), "a transaction may be reading the mapped pages"
        assert mapped_kib(store.path) == held
    finally:
        store._conn.execute("COMMIT")


@pytest.mark.parametrize("spans", [False, True])
def test_a_glob_of_many_names_gives_back_its_walks_pages(store, spans, monkeypatch):
    """Store.glob_nodes and glob_node_spans (json's intervals) of RELEASE_NAMES names or
    more leave the file unmapped; their answers are whole."""
    monkeypatch.setattr(tree_glob, "RELEASE_NAMES", 10_000)
    assert len(NAMES) >= tree_glob.RELEASE_NAMES
    glob = store.glob_node_spans if spans else store.glob_nodes
    answer = glob(GlobPattern("big.*.*"), 100_000)
    assert list(answer[0]) == sorted(NAMES) and list(answer[1]) == []
    if spans:
        assert len(answer[2]) == len(NAMES) and {span[0] for span in answer[2].values()} == {86400}
    assert mapped_kib(store.path) == 0
    below = glob(GlobPattern("big.h0[0-2]*.*"), 100_000)  # 900 names: pages kept
    assert len(below[0]) == 900 and mapped_kib(store.path) > 0


def test_a_walk_statement_of_many_rows_gives_back_its_pages_before_its_names(store, monkeypatch):
    """A statement of a walk that read RELEASE_ROWS rows or more (here the inverted
    index's rows of a trailing literal) gives its pages back before the names are built,
    even when the answer is small: nothing is left mapped once the paths are cached."""
    monkeypatch.setattr(tree_glob, "RELEASE_ROWS", 300)  # the leaf m01 has 400 rows
    assert len(store.glob_metrics(GlobPattern("big.**.m00"), 100_000)) == 400  # caches every directory's path
    answer = store.glob_metrics(GlobPattern("big.h00[0-4].**.m01"), 100_000)
    assert answer == [f"big.h00{h}.m01" for h in range(5)]
    assert mapped_kib(store.path) == 0
    monkeypatch.setattr(tree_glob, "RELEASE_ROWS", 500)
    assert store.glob_metrics(GlobPattern("big.h00[0-4].**.m02"), 100_000) == [f"big.h00{h}.m02" for h in range(5)]
    assert mapped_kib(store.path) > 0, "fewer rows: kept mapped for the next finds"


def test_a_literal_of_many_rows_is_read_a_page_at_a_time_each_given_back(store, monkeypatch):
    """The inverted index's rows of a trailing literal are read _PAGE at a time and each
    page's file pages leave before the next page is read (SQLite's own statement trace on
    the shared reader): the walk never holds all of them. The answer is whole."""
    monkeypatch.setattr(tree_glob, "_PAGE", 100)
    monkeypatch.setattr(tree_glob, "RELEASE_ROWS", 100)
    statements: list[str] = []
    with store.shared_reads():
        reader = store._conn
    reader.set_trace_callback(statements.append)
    try:
        answer = store.glob_metrics(GlobPattern("big.**.m07"), 100_000)  # 400 rows of the leaf m07
    finally:
        reader.set_trace_callback(None)
    assert answer == sorted(n for n in NAMES if n.endswith(".m07"))
    steps = ["read" if "LIMIT 100" in s and "metrics AS t" in s else "release" if s == "PRAGMA mmap_size = 0" else None
             for s in statements]
    steps = [step for step in steps if step]
    assert steps[:8] == ["read", "release"] * 4, statements
    metrics, directories, spans = store.glob_node_spans(GlobPattern("big.**.m07"), 100_000)
    assert (metrics, directories, sorted(spans)) == (answer, [], answer)


def test_the_globs_of_many_threads_map_the_file_through_the_shared_readers(store, monkeypatch):
    """Four threads each glob every name and stay alive (their own connections open): the
    file's pages are resident in at most SHARED_READERS mappings, not one per thread, and
    stay mapped for the next glob (through the thread's own connections: four). The
    threads wait for their turn however long it takes (SHARED_READER_WAIT)."""
    monkeypatch.setattr(tree_glob, "RELEASE_NAMES", 1 << 30)
    monkeypatch.setattr(connection, "SHARED_READER_WAIT", 600.0)
    walked, done = threading.Barrier(5), threading.Event()
    answers = []

    def glob() -> None:
        answers.append(store.glob_node_spans(GlobPattern("big.*.*"), 100_000)[0])
        walked.wait()
        done.wait()

    threads = [threading.Thread(target=glob) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        walked.wait()
        resident = [kib for kib in mappings_kib(store.path) if kib]
        assert answers == [sorted(NAMES)] * 4
        assert 0 < len(resident) <= connection.SHARED_READERS, resident
        assert resident[0] > 200, "the walk's pages stay mapped for the next glob"
    finally:
        done.set()
        for thread in threads:
            thread.join()


def test_a_glob_inside_a_transaction_reads_through_the_threads_own_connection(tmp_path):
    """Inside a read snapshot a glob sees the snapshot (not a name created since), inside
    a write batch the batch's own new names: both through the thread's own connection."""
    url = f"sqlite://{tmp_path}/bgl.db"
    Accessor.from_url(url).syncdb()
    store, other = open_store(url + MMAP), open_store(url)
    metadata = MetricMetadata.create("60s:1d", "average", 0.5)
    try:
        with store.read_snapshot():
            other.create_metrics([Metric("a.later", metadata)])
            assert store.glob_metrics(GlobPattern("a.*"), 100) == []
        assert store.glob_metrics(GlobPattern("a.*"), 100) == ["a.later"]
        with store.write_batch():
            store.create_metrics([Metric("b.batch", metadata)])
            assert store.glob_nodes(GlobPattern("b.*"), 100) == (["b.batch"], [])
            assert other.glob_metrics(GlobPattern("b.*"), 100) == [], "not committed yet"
    finally:
        store.close()
        other.close()


def test_close_closes_the_shared_readers_and_a_later_glob_opens_them_again(store):
    assert store.glob_metrics(GlobPattern("big.h001.*"), 100_000)
    assert mapped_kib(store.path) > 0
    store.close()
    assert mappings_kib(store.path) == [], "no connection left open"
    assert len(store.glob_metrics(GlobPattern("big.h001.*"), 100_000)) == 30


def test_a_glob_is_not_held_up_by_a_long_one_holding_the_shared_reader(store):
    """While another thread holds the only shared reader (a long glob), a glob reads
    through its thread's own connection after SHARED_READER_WAIT: it answers before the
    reader is given back."""
    held, give_back = threading.Event(), threading.Event()

    def hold() -> None:
        with store.shared_reads():
            held.set()
            give_back.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(60)
        answers: list = []
        asker = threading.Thread(target=lambda: answers.append(store.glob_metrics(GlobPattern("big.h001.*"), 100_000)))
        asker.start()
        asker.join(30)
        assert not give_back.is_set() and holder.is_alive(), "the reader was held all along"
        assert len(answers) == 1 and len(answers[0]) == 30, "the glob answered while the reader was held"
    finally:
        give_back.set()
        holder.join()


def test_threads_globbing_at_once_through_the_shared_readers_get_the_glob_engines_answers(tmp_path, monkeypatch):
    """The conformance suite's patterns on a random tree, asked by four threads at once of
    a store read through mmap (so through the shared readers, checked out in turn: they
    wait for their turn however long it takes): every answer is the glob engine's."""
    monkeypatch.setattr(connection, "SHARED_READER_WAIT", 600.0)
    from tests.stores.glob_cases import PATTERNS, expected_directories, random_tree

    url = f"sqlite://{tmp_path}/bgl.db"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    metric_names = random_tree(3, 400)
    accessor.create_metrics([(name, MetricMetadata.create("60s:1d", "average", 0.5)) for name in metric_names])
    accessor.close()
    directories = expected_directories(metric_names)
    store = open_store(url + MMAP)
    wrong: list[str] = []

    def ask(patterns: list[str]) -> None:
        for pattern in patterns * 5:
            glob = GlobPattern(pattern)
            expected = (glob.filter(metric_names), glob.filter(directories))
            if store.glob_nodes(glob, 100_000) != expected or store.glob_node_spans(glob, 100_000)[:2] != expected \
                    or store.glob_metrics(glob, 100_000) != expected[0]:
                wrong.append(pattern)

    threads = [threading.Thread(target=ask, args=(PATTERNS[i::4],)) for i in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert wrong == []
        assert len([kib for kib in mappings_kib(store.path) if kib]) <= connection.SHARED_READERS
    finally:
        store.close()
