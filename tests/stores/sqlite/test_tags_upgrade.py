"""In-place upgrade of the SQLite tag postings (`bgl syncdb`).

tests/data/tags_store.sql is the dump of a store whose tag index was written by commit
54a8d8a (postings one row per series and tag=value pair, keyed (chunk, value id, series
id)), and tags_store.json what that code answered on it (see make_tags_store.py). Today's
code refuses to read such postings until `bgl syncdb` packs them, then answers the same,
and indexing, deletion and repair go on working on the converted postings. The layout
before the chunk column, (value id, series id), is converted the same way. Its series
counts, in a column of tag_values then, move to tag_value_counts; a store with packed
postings and those counts (the layout until that move) is upgraded alone the same way.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from biggraphite_like.accessor import Accessor
from biggraphite_like.errors import SchemaMissing
from biggraphite_like.maintenance.delete import delete
from biggraphite_like.maintenance.repair import repair
from tests.paths import DATA

BGL = shutil.which("bgl", path=os.path.dirname(sys.executable)) or shutil.which("bgl")


def _old_store(path: Path, layout: str) -> None:
    conn = sqlite3.connect(path)
    conn.executescript((DATA / "tags_store.sql").read_text())
    if layout == "unchunked":  # the layout before the chunk column
        conn.executescript("""
            CREATE TABLE rows (value_id INTEGER NOT NULL, series_id INTEGER NOT NULL,
                               PRIMARY KEY (value_id, series_id)) WITHOUT ROWID;
            INSERT INTO rows SELECT value_id, series_id FROM tag_postings;
            DROP TABLE tag_postings;
            ALTER TABLE rows RENAME TO tag_postings;""")
    conn.close()


def _answers(accessor: Accessor, queries: list[str]) -> dict:
    tags = accessor.tags
    return {"find": {q: tags.find_series(json.loads(q)) for q in queries},
            "values": {tag: [list(v) for v in tags.list_values(tag)] for tag in tags.list_tags()},
            "counts": tags.index.counts()}


@pytest.mark.parametrize("layout", ["chunked", "unchunked"])
def test_bgl_syncdb_packs_the_postings_of_an_older_store_and_answers_as_it_did(tmp_path, env, layout):
    path = tmp_path / "bgl.db"
    _old_store(path, layout)
    expected = json.loads((DATA / "tags_store.json").read_text())
    postings = sqlite3.connect(path).execute("SELECT count(*) FROM tag_postings").fetchone()[0]
    assert postings == sum(c for values in expected["values"].values() for _, c in values) == 371  # 59 cpu series x 5 pairs, 19 disk.used x 4

    before = Accessor.from_url(f"sqlite://{path}")
    with pytest.raises(SchemaMissing, match=r"(one row per series and tag=value pair|full names).*bgl --store \S+ syncdb"):
        before.tags.find_series(["name=cpu"])
    before.close()

    process = subprocess.run([BGL, "--store", f"sqlite://{path}", "syncdb"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert process.returncode == 0, process.stderr
    conn = sqlite3.connect(path)
    assert [r[1] for r in conn.execute("PRAGMA table_info(tag_postings)")] == ["chunk", "value_id", "first", "offsets"]
    assert conn.execute("SELECT count(*), sum(length(offsets)) / 2 FROM tag_postings").fetchone() == (95, 371)  # a row per pair
    assert conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'tag_postings_%'").fetchall() == []
    assert [r[1] for r in conn.execute("PRAGMA table_info(tag_values)")] == ["id", "tag_id", "value"]  # counts moved
    assert conn.execute("SELECT sum(series) FROM tag_value_counts").fetchone()[0] == 371
    conn.close()

    accessor = Accessor.from_url(f"sqlite://{path}")
    assert _answers(accessor, list(expected["find"])) == expected
    assert accessor.tags.index.repair(dry_run=True) == {"postings_without_series": 0, "series_without_postings": 0,
                                                        "counts_fixed": 0}
    # the converted postings take new series, deletions and repairs
    accessor.tags.tag_series(["cpu;core=9;dc=us;host=new1;rack=r99"], now=1_700_000_100)
    assert delete(accessor, "cpu;core=0;dc=us;host=db4;rack=r4").metrics == ["cpu;core=0;dc=us;host=db4;rack=r4"]
    assert accessor.tags.del_series(["cpu;core=1;dc=us;host=web1;rack=r1"]) == 1
    assert accessor.tags.find_series(["name=cpu", "rack=~r(4|1|99)$"]) == ["cpu;core=9;dc=us;host=new1;rack=r99"]
    assert len(accessor.tags.find_series(["name=cpu"])) == len(expected["find"]['["name=cpu"]']) - 2 + 1
    assert repair(accessor).tag_counts_fixed == 0
    accessor.close()


@pytest.mark.parametrize("layout", ["chunked", "unchunked"])
def test_syncdb_packs_postings_of_many_chunks_and_rows_exactly(tmp_path, monkeypatch, layout):
    """Postings of 700 series in the earlier layouts (old chunks of 8 series), packed into
    chunks of 4 series and rows of at most 3: every pair's series and count as before."""
    from biggraphite_like.stores.sqlite import tags as sqlite_tags

    monkeypatch.setattr(sqlite_tags, "CHUNK_BITS", 2)
    monkeypatch.setattr(sqlite_tags, "ROW_SERIES", 3)
    accessor = Accessor.from_url(f"sqlite://{tmp_path / 'bgl.db'}")
    accessor.syncdb()
    names = [f"m{i % 3};a={i % 2};b={i % 5};c=x;i={i}" for i in range(700)]  # c=x: every series of a chunk
    accessor.tags.tag_series(names[:350])
    accessor.tags.tag_series(names[350:])
    queries = [["a=1"], ["b=3", "name=m2"], ["i=~1"], ["a=0", "b=4"], ["c=x", "a=1", "b=2"]]
    expected = [accessor.tags.find_series(q) for q in queries]
    values = accessor.tags.list_values("b")
    store = accessor.store
    ids = accessor.tags.index._series_of  # the postings rows as (series, value) pairs, written back row by row
    pairs = [(int(s), v) for (v,) in store._conn.execute("SELECT id FROM tag_values") for s in ids([v])]
    assert len(pairs) == 700 * 5
    columns = "chunk INTEGER NOT NULL, " if layout == "chunked" else ""
    key = "chunk, " if layout == "chunked" else ""
    with store.write_batch():
        store._conn.execute("DROP TABLE tag_postings")
        store._conn.execute(f"CREATE TABLE tag_postings ({columns}value_id INTEGER NOT NULL, series_id INTEGER NOT NULL,"
                            f" PRIMARY KEY ({key}value_id, series_id)) WITHOUT ROWID")
        store._conn.executemany(f"INSERT INTO tag_postings VALUES ({'?, ' if key else ''}?, ?)",
                                [((s >> 3, v, s) if key else (v, s)) for s, v in pairs])
    accessor.close()
    accessor = Accessor.from_url(f"sqlite://{tmp_path / 'bgl.db'}")
    accessor.syncdb()
    conn = accessor.store._conn
    assert conn.execute("SELECT count(*), sum(length(offsets)) / 2, max(length(offsets)) FROM tag_postings"
                        ).fetchone()[1:] == (700 * 5, 6)  # c=x's 4 series of a chunk: rows of 3 and 1
    assert [accessor.tags.find_series(q) for q in queries] == expected
    assert accessor.tags.list_values("b") == values
    assert accessor.tags.index.repair(dry_run=True) == {"postings_without_series": 0, "series_without_postings": 0,
                                                        "counts_fixed": 0}
    accessor.close()


def test_syncdb_moves_the_counts_of_a_store_with_packed_postings_out_of_tag_values(tmp_path, env):
    """The layout before tag_value_counts (packed postings, counts in tag_values.series,
    rebuilt here from a store of today's): refused with the command, `bgl syncdb` moves
    the counts, then every answer is the same and indexing and repair go on."""
    path = tmp_path / "bgl.db"
    accessor = Accessor.from_url(f"sqlite://{path}")
    accessor.syncdb()
    accessor.tags.tag_series([f"cpu;core={i % 4};dc={'us' if i % 3 else 'eu'};host=h{i % 7}" for i in range(50)])
    accessor.tags.del_series(["cpu;core=1;dc=eu;host=h3"])  # counts fallen by one
    queries = ['["name=cpu"]', '["dc=eu"]', '["core=1", "host=~h[13]"]']
    expected = _answers(accessor, queries)
    with accessor.store.write_batch():
        conn = accessor.store._conn
        conn.execute("ALTER TABLE tag_values ADD COLUMN series INTEGER NOT NULL DEFAULT 0")
        conn.execute("UPDATE tag_values SET series = coalesce((SELECT c.series FROM tag_value_counts c"
                     " WHERE c.id = tag_values.id), 0)")
        conn.execute("DROP TABLE tag_value_counts")
    accessor.close()

    before = Accessor.from_url(f"sqlite://{path}")
    with pytest.raises(SchemaMissing, match=r"counts .* in tag_values.*bgl --store \S+ syncdb"):
        before.tags.list_values("dc")
    before.close()
    process = subprocess.run([BGL, "--store", f"sqlite://{path}", "syncdb"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert process.returncode == 0, process.stderr
    accessor = Accessor.from_url(f"sqlite://{path}")
    assert _answers(accessor, queries) == expected
    series = accessor.tags.index.counts()["tagged_series"]
    assert sum(c for _, c in accessor.tags.list_values("host")) == series == expected["counts"]["tagged_series"]
    accessor.tags.tag_series(["cpu;core=9;dc=us;host=h3"])
    assert accessor.tags.list_values("core")[-1] == ("9", 1)
    assert repair(accessor).tag_counts_fixed == 0
    accessor.close()
