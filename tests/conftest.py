"""Fixtures shared by the suite: one accessor per store kind, for the conformance tests."""
from __future__ import annotations


import pytest

from biggraphite_like.accessor import Accessor

STORE_KINDS = ["sqlite"]


def make_store_url(kind: str, tmp_path) -> str:
    if kind == "sqlite":
        return f"sqlite://{tmp_path / 'bgl.db'}"
    raise ValueError(kind)


@pytest.fixture(params=STORE_KINDS)
def store_url(request, tmp_path) -> str:
    """The URL of an empty store of each kind."""
    return make_store_url(request.param, tmp_path)


@pytest.fixture
def accessor(store_url):
    """An accessor on an empty store with its schema created."""
    acc = Accessor.from_url(store_url)
    acc.syncdb()
    yield acc
    acc.close()


@pytest.fixture
def sqlite_accessor(tmp_path):
    acc = Accessor.from_url(f"sqlite://{tmp_path / 'bgl.db'}")
    acc.syncdb()
    yield acc
    acc.close()


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch, tmp_path):
    """Tests never touch the operator's default store."""
    monkeypatch.setenv("BGL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("BGL_STORE", raising=False)
    yield
