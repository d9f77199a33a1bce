"""Store URLs as they may be shown (the password masked), and options added to them.

A store URL can carry a Cassandra password (`cassandra://user:password@host/keyspace`).
Every place that prints or logs a store URL (stores' errors, the CLI, `bgl run`, the carbon
and graphite-web plugins) shows `redact_url(url)` instead, so the password never reaches a
log or a terminal.
"""
from __future__ import annotations

import re
from urllib.parse import parse_qsl

MASK = "***"
_PASSWORD = re.compile(r"(//[^:/@]*:)[^@/]*@")


def redact_url(url: str) -> str:
    """The URL with any password after `user:` masked: cassandra://user:***@host/keyspace."""
    return _PASSWORD.sub(rf"\g<1>{MASK}@", url)


def with_default_option(url: str, name: str, value: object) -> str:
    """The URL with `name=value` added to its query unless it has `name` already (a
    program's own default for a store option the operator may still set in the URL)."""
    if "?" not in url:  # no query (the rule: graphite-web asks it at every request)
        return f"{url}?{name}={value}"
    query = url.split("?", 1)[1]
    if name in dict(parse_qsl(query)):
        return url
    return f"{url}{'&' if query else '?' if '?' not in url else ''}{name}={value}"
