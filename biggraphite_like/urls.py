"""Store URLs as they may be shown: the password masked.

A store URL can carry a Cassandra password (`cassandra://user:password@host/keyspace`).
Every place that prints or logs a store URL (stores' errors, the CLI, `bgl run`, the carbon
and graphite-web plugins) shows `redact_url(url)` instead, so the password never reaches a
log or a terminal.
"""
from __future__ import annotations

import re

MASK = "***"
_PASSWORD = re.compile(r"(//[^:/@]*:)[^@/]*@")


def redact_url(url: str) -> str:
    """The URL with any password after `user:` masked: cassandra://user:***@host/keyspace."""
    return _PASSWORD.sub(rf"\g<1>{MASK}@", url)
