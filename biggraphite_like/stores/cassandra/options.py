"""The options of a Cassandra store, parsed from its URL.

    cassandra://[user:password@]host1,host2[:port]/keyspace?option=value&...

Every option is documented in OPTIONS (name -> help); anything else, or a bad value, is
an InvalidStoreURL naming the option and listing the known ones. Credentials may also
come from the environment (BGL_CASSANDRA_USERNAME / BGL_CASSANDRA_PASSWORD), so they
need not appear in carbon.conf or a process list.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Callable
from urllib.parse import parse_qsl, unquote, urlsplit

from biggraphite_like.errors import InvalidStoreURL
from biggraphite_like.urls import redact_url as safe_url

DEFAULT_PORT = 9042
USERNAME_ENV = "BGL_CASSANDRA_USERNAME"
PASSWORD_ENV = "BGL_CASSANDRA_PASSWORD"
CONSISTENCY_LEVELS = ("ANY", "ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM", "EACH_QUORUM", "LOCAL_ONE")
INDEX_KINDS = ("auto", "sasi", "sai")
MAX_WRITER_ID = (1 << 14) - 1
MAX_REPLICA_ID = (1 << 2) - 1
# Cassandra limits keyspace names to 48 characters; the metadata keyspace adds "_metadata".
_KEYSPACE_RE = re.compile(r"^[a-z][a-z0-9_]{0,38}$")
_DC_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")

OPTIONS = {
    "ssl": "true|false: connect with TLS (default false)",
    "ssl_ca": "path of the CA certificate(s) that sign the nodes' certificates",
    "ssl_cert": "path of the client certificate (mutual TLS)",
    "ssl_key": "path of the client certificate's private key",
    "ssl_verify": "true|false: check the nodes' certificates and host names (default true)",
    "metadata_read": "consistency level of metadata reads (default LOCAL_QUORUM)",
    "metadata_write": "consistency level of metadata writes (default LOCAL_QUORUM)",
    "data_read": "consistency level of datapoint reads (default LOCAL_QUORUM)",
    "data_write": "consistency level of datapoint writes (default LOCAL_QUORUM)",
    "replication_factor": "syncdb creates the keyspaces with SimpleStrategy and this factor (default 1)",
    "replication": "syncdb creates the keyspaces with NetworkTopologyStrategy: dc1:3,dc2:3",
    "index": "auto|sasi|sai: metadata indexes syncdb creates (default auto: SASI where enabled, else SAI)",
    "max_results": "most names one glob may return (default: the accessor's max_glob_results)",
    "max_concurrency": "most requests in flight at once per process (default 64)",
    "timeout": "seconds a whole store operation (a write batch, a read of many series, a glob; or a"
               " connection attempt) may take before failing (default 10)",
    "writer_id": "0..16383: this writer's part of the shard of aggregated rows (default 0)",
    "replica_id": "0..3: this replica's part of the shard of aggregated rows (default 0)",
    "local_dc": "the data center to send requests to (DC-aware, token-aware routing)",
}


def _known() -> str:
    return ", ".join(sorted(OPTIONS))


@dataclasses.dataclass(frozen=True)
class CassandraOptions:
    """Everything a Cassandra store URL says (see OPTIONS for the meaning of each field)."""

    hosts: tuple[str, ...]
    port: int
    keyspace: str
    username: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)
    ssl: bool = False
    ssl_ca: str | None = None
    ssl_cert: str | None = None
    ssl_key: str | None = None
    ssl_verify: bool = True
    metadata_read: str = "LOCAL_QUORUM"
    metadata_write: str = "LOCAL_QUORUM"
    data_read: str = "LOCAL_QUORUM"
    data_write: str = "LOCAL_QUORUM"
    replication: tuple[tuple[str, int], ...] = ()  # ((dc, factor), ...): NetworkTopologyStrategy
    replication_factor: int = 1  # SimpleStrategy, when replication is empty
    index: str = "auto"
    max_results: int | None = None
    max_concurrency: int = 64
    timeout: float = 10.0
    writer_id: int = 0
    replica_id: int = 0
    local_dc: str | None = None

    @property
    def metadata_keyspace(self) -> str:
        return f"{self.keyspace}_metadata"

    @property
    def shard(self) -> int:
        """The shard of this writer's aggregated rows: replica id (2 bits) then writer id (14 bits).

        Stored in a smallint: the 16 bits are read as a signed number.
        """
        value = (self.replica_id << 14) | self.writer_id
        return value - (1 << 16) if value >= 1 << 15 else value

    def replication_map(self) -> str:
        """The CQL replication map syncdb gives the keyspaces."""
        if self.replication:
            dcs = ", ".join(f"'{dc}': {factor}" for dc, factor in self.replication)
            return "{'class': 'NetworkTopologyStrategy', " + dcs + "}"
        return "{'class': 'SimpleStrategy', 'replication_factor': " + str(self.replication_factor) + "}"


def _bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise InvalidStoreURL(f"store URL option {name}={text!r}: expected true or false")


def _int(low: int, high: int | None) -> Callable[[str, str], int]:
    def parse(name: str, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            bound = f"{low}..{high}" if high is not None else f">= {low}"
            raise InvalidStoreURL(f"store URL option {name}={text!r}: expected an integer {bound}")
        return value
    return parse


def _seconds(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise InvalidStoreURL(f"store URL option {name}={text!r}: expected a positive number of seconds")
    return value


def _consistency(name: str, text: str) -> str:
    level = text.strip().upper()
    if level not in CONSISTENCY_LEVELS:
        raise InvalidStoreURL(
            f"store URL option {name}={text!r}: unknown consistency level (known: {', '.join(CONSISTENCY_LEVELS)})"
        )
    if level == "ANY" and name.endswith("_read"):
        raise InvalidStoreURL(f"store URL option {name}=ANY: ANY is for writes only")
    return level


def _index(name: str, text: str) -> str:
    kind = text.strip().lower()
    if kind not in INDEX_KINDS:
        raise InvalidStoreURL(f"store URL option {name}={text!r}: expected one of {', '.join(INDEX_KINDS)}")
    return kind


def _path(name: str, text: str) -> str:
    path = os.path.expanduser(text)
    if not os.path.isfile(path):
        raise InvalidStoreURL(f"store URL option {name}={text!r}: no such file")
    return path


def _dc(name: str, text: str) -> str:
    if not _DC_RE.match(text):
        raise InvalidStoreURL(f"store URL option {name}={text!r}: not a data center name")
    return text


def _replication(name: str, text: str) -> tuple[tuple[str, int], ...]:
    pairs = []
    for item in text.split(","):
        dc, sep, factor = item.strip().rpartition(":")
        if not sep or not _DC_RE.match(dc) or not factor.isdigit() or int(factor) < 1:
            raise InvalidStoreURL(
                f"store URL option {name}={text!r}: expected data center:factor pairs such as dc1:3,dc2:3"
            )
        pairs.append((dc, int(factor)))
    return tuple(pairs)


_PARSERS: dict[str, Callable[[str, str], object]] = {
    "ssl": _bool,
    "ssl_ca": _path,
    "ssl_cert": _path,
    "ssl_key": _path,
    "ssl_verify": _bool,
    "metadata_read": _consistency,
    "metadata_write": _consistency,
    "data_read": _consistency,
    "data_write": _consistency,
    "replication_factor": _int(1, None),
    "replication": _replication,
    "index": _index,
    "max_results": _int(1, None),
    "max_concurrency": _int(1, 10_000),
    "timeout": _seconds,
    "writer_id": _int(0, MAX_WRITER_ID),
    "replica_id": _int(0, MAX_REPLICA_ID),
    "local_dc": _dc,
}
assert set(_PARSERS) == set(OPTIONS)


def parse_url(url: str, environ: "dict[str, str] | None" = None) -> CassandraOptions:
    """The options of `cassandra://...`; InvalidStoreURL says what is wrong and what is known."""
    environ = os.environ if environ is None else environ
    if not url.startswith("cassandra://"):
        raise InvalidStoreURL(f"store URL {safe_url(url)!r} is not a cassandra:// URL")
    parts = urlsplit(url)
    if parts.fragment:
        raise InvalidStoreURL(f"store URL {safe_url(url)!r}: unexpected fragment #{parts.fragment}")
    userinfo, _, hostinfo = parts.netloc.rpartition("@")
    hosts, port = _hosts(url, hostinfo)
    keyspace = parts.path.strip("/")
    if not keyspace:
        raise InvalidStoreURL(f"store URL {safe_url(url)!r} names no keyspace: use cassandra://host:9042/keyspace")
    if not _KEYSPACE_RE.match(keyspace):
        raise InvalidStoreURL(
            f"store URL {safe_url(url)!r}: keyspace {keyspace!r} must be a lowercase letter then up to 38"
            " lowercase letters, digits or underscores (the metadata keyspace adds '_metadata')"
        )
    values: dict[str, object] = {}
    for name, text in parse_qsl(parts.query, keep_blank_values=True):
        parser = _PARSERS.get(name)
        if parser is None:
            raise InvalidStoreURL(f"store URL {safe_url(url)!r}: unknown option {name!r} (known: {_known()})")
        if name in values:
            raise InvalidStoreURL(f"store URL {safe_url(url)!r}: option {name!r} given twice")
        values[name] = parser(name, text)
    if "replication" in values and "replication_factor" in values:
        raise InvalidStoreURL("store URL options replication and replication_factor exclude each other:"
                              " replication_factor is for SimpleStrategy, replication for NetworkTopologyStrategy")
    if not values.get("ssl", False):
        for name in ("ssl_ca", "ssl_cert", "ssl_key", "ssl_verify"):
            if name in values:
                raise InvalidStoreURL(f"store URL option {name} needs ssl=true")
    if ("ssl_cert" in values) != ("ssl_key" in values):
        raise InvalidStoreURL("store URL options ssl_cert and ssl_key go together (client certificate and its key)")
    username = password = None
    if userinfo:
        user, colon, secret = userinfo.partition(":")
        username, password = unquote(user), unquote(secret) if colon else None
    username = username or environ.get(USERNAME_ENV) or None
    password = password if password is not None else environ.get(PASSWORD_ENV)
    if username and password is None:
        raise InvalidStoreURL(
            f"store URL {safe_url(url)!r} gives user {username!r} without a password:"
            f" put it in the URL (user:password@host) or in ${PASSWORD_ENV}"
        )
    if password and not username:
        raise InvalidStoreURL(f"a Cassandra password is given without a user name (URL or ${USERNAME_ENV})")
    return CassandraOptions(hosts=hosts, port=port, keyspace=keyspace, username=username, password=password,
                            **values)  # type: ignore[arg-type]


def _hosts(url: str, hostinfo: str) -> tuple[tuple[str, ...], int]:
    """Hosts and the port: host1,host2:9042 (one port for all, as the driver takes it)."""
    port = DEFAULT_PORT
    if not hostinfo:
        raise InvalidStoreURL(f"store URL {safe_url(url)!r} names no host: use cassandra://host1,host2:9042/keyspace")
    hosts = []
    ports = set()
    for item in hostinfo.split(","):
        item = item.strip()
        if item.startswith("["):  # IPv6 literal
            host, _, rest = item[1:].partition("]")
            item_port = rest[1:] if rest.startswith(":") else ""
        else:
            host, _, item_port = item.partition(":")
        if not host:
            raise InvalidStoreURL(f"store URL {safe_url(url)!r}: empty host name in {hostinfo!r}")
        if item_port:
            if not item_port.isdigit() or not 0 < int(item_port) < 65536:
                raise InvalidStoreURL(f"store URL {safe_url(url)!r}: bad port {item_port!r}")
            ports.add(int(item_port))
        hosts.append(host)
    if len(ports) > 1:
        raise InvalidStoreURL(f"store URL {safe_url(url)!r}: every host must use the same port (got {sorted(ports)})")
    if ports:
        port = ports.pop()
    return tuple(hosts), port
