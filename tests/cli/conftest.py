"""Fixtures of the CLI tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def url(tmp_path) -> str:
    """An SQLite store URL in tmp_path (the file is not created)."""
    return f"sqlite://{tmp_path / 'bgl.db'}"
