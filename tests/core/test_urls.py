"""biggraphite_like.urls.redact_url: the one way a store URL is shown."""
from __future__ import annotations

import pytest

from biggraphite_like.errors import InvalidStoreURL
from biggraphite_like.stores.cassandra.options import parse_url
from biggraphite_like.urls import redact_url


@pytest.mark.parametrize("url, shown", [
    ("cassandra://bgl:s3cret@h1,h2:9042/ks", "cassandra://bgl:***@h1,h2:9042/ks"),
    ("cassandra://bgl:p%40ss%2Fw:rd@[::1]:9042/ks?timeout=5", "cassandra://bgl:***@[::1]:9042/ks?timeout=5"),
    ("cassandra://bgl:@h/ks", "cassandra://bgl:***@h/ks"),
    ("cassandra://bgl@h/ks", "cassandra://bgl@h/ks"),  # user only: the password comes from the environment
    ("cassandra://h1:9042/ks", "cassandra://h1:9042/ks"),
    ("sqlite:///var/lib/bgl/bgl.db?timeout=30", "sqlite:///var/lib/bgl/bgl.db?timeout=30"),
])
def test_redact_url_masks_the_password_only(url, shown):
    assert redact_url(url) == shown


def test_store_url_errors_never_show_the_password():
    with pytest.raises(InvalidStoreURL) as error:
        parse_url("cassandra://bgl:s3cret@h1/ks?no_such_option=1", environ={})
    assert "s3cret" not in str(error.value) and "cassandra://bgl:***@h1/ks" in str(error.value)
