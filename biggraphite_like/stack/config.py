"""The configuration files of the local stack (`bgl run`), written into its data directory.

Layout of a data directory:

    bgl.db                          the embedded store (unless --store names another)
    conf/carbon.conf                carbon-cache, with our database plugin (`bgl run --carbon`)
    conf/storage-schemas.conf       retentions of new metrics (written once, yours to edit)
    conf/storage-aggregation.conf   aggregation of new metrics (written once, yours to edit)
    conf/local_settings.py          graphite-web, with our finder
    conf/gunicorn.conf.py           the WSGI server in front of graphite-web
    conf/secret_key                 Django's SECRET_KEY (made once, mode 0600)
    storage/                        graphite-web's own database, carbon's pid file
    log/                            the receiver's (receiver.log, receiver.prom), carbon's and graphite-web's logs
    run/bgl-run.lock                held by the `bgl run` working on this directory (its pid and ports inside)
    run/gunicorn.ctl                gunicorn's control socket (gunicornc -s run/gunicorn.ctl)
    run/prometheus/                 graphite-web's workers' counts, summed by its /metrics (BG_PROMETHEUS_DIR)

carbon.conf, local_settings.py and gunicorn.conf.py follow `bgl run`'s options and are
written again at every start; each says how to run its program by hand.

Nothing in it is world-readable: carbon.conf and local_settings.py hold the store URL (and
so a Cassandra password given in it), the store and logs hold the metrics. `bgl run` works
under umask 077 (PRIVATE_UMASK), so what it and its programs create is 0600 in 0700
folders; the files written here are made 0600 even when an older version left them 0644.
"""
from __future__ import annotations

import dataclasses
import fcntl
import os
import secrets
import socket
import struct
from pathlib import Path

from biggraphite_like import settings

CARBON_INSTANCE = "a"
PRIVATE_UMASK = 0o077  # files 0600, folders 0700
FILE_MODE = 0o600
DIR_MODE = 0o700
ALLOWED_HOSTS_ENV = "BGL_ALLOWED_HOSTS"  # more names graphite-web answers to, comma-separated
_LOOPBACK_BINDS = ("127.0.0.1", "::1", "localhost")
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_SIOCGIFADDR = 0x8915
SETTINGS_MODULE = "local_settings"
_MAX_UNIX_SOCKET_PATH = 107  # bytes in sockaddr_un.sun_path, less its final NUL (Linux)
_MEMORY_TMP_DIR = "/dev/shm"  # tmpfs: the workers' heartbeat files, off the disk's journal

SCHEMAS = f"""\
# Retentions of new metrics, first matching pattern wins (carbon's storage-schemas.conf).
# Written once by `bgl run`: edit freely, it is kept. A metric keeps the retention it was
# created with.

[carbon]
pattern = ^carbon\\.
retentions = 60s:90d

[default]
pattern = .*
retentions = {settings.DEFAULT_RETENTION}
"""

_AGGREGATION = """\
# Aggregation of new metrics into coarser stages, first matching pattern wins
# (carbon's storage-aggregation.conf). Written once by `bgl run`: edit freely, it is kept.

[min]
pattern = \\.min$
xFilesFactor = 0.1
aggregationMethod = min

[max]
pattern = \\.max$
xFilesFactor = 0.1
aggregationMethod = max

[sum]
pattern = \\.count$
xFilesFactor = 0
aggregationMethod = sum

[default_average]
pattern = .*
xFilesFactor = 0.5
aggregationMethod = average
"""


@dataclasses.dataclass(frozen=True)
class StackConfig:
    """Where the stack keeps its files and which addresses it serves."""

    data_dir: Path
    store_url: str
    bind: str = settings.DEFAULT_BIND
    line_port: int = settings.LINE_PORT
    pickle_port: int = settings.PICKLE_PORT
    carbonlink_port: int = settings.CARBONLINK_PORT
    web_port: int = settings.WEB_PORT
    web_workers: int = 2
    carbon: bool = False  # carbon-cache with our plugin instead of `bgl receive`
    self_metrics_interval: float | None = None  # seconds; None: 60 (graphite-web: $BGL_SELF_METRICS_INTERVAL)

    @classmethod
    def create(cls, data_dir: str | os.PathLike[str], store_url: str | None = None, **options: object) -> "StackConfig":
        """A configuration; the store defaults to $BGL_STORE, else bgl.db in the data directory."""
        root = Path(data_dir).expanduser().resolve()
        url = store_url or os.environ.get(settings.STORE_ENV) or f"sqlite://{root / settings.DB_FILE_NAME}"
        return cls(root, url, **options)  # type: ignore[arg-type]

    @property
    def conf_dir(self) -> Path:
        return self.data_dir / "conf"

    @property
    def storage_dir(self) -> Path:
        return self.data_dir / "storage"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "log"

    @property
    def run_dir(self) -> Path:
        """Runtime files: the data directory's lock, gunicorn's control socket."""
        return self.data_dir / "run"

    @property
    def lock_file(self) -> Path:
        return self.run_dir / "bgl-run.lock"

    @property
    def control_socket(self) -> Path:
        return self.run_dir / "gunicorn.ctl"

    @property
    def carbon_conf(self) -> Path:
        return self.conf_dir / "carbon.conf"

    @property
    def gunicorn_conf(self) -> Path:
        return self.conf_dir / "gunicorn.conf.py"

    @property
    def carbon_output(self) -> Path:
        """carbon-cache's standard output and error (its own logs go to log/carbon-cache-a/)."""
        return self.log_dir / "carbon-cache.out"

    @property
    def receiver_output(self) -> Path:
        """`bgl receive`'s log (standard output and error)."""
        return self.log_dir / "receiver.log"

    @property
    def receiver_metrics_file(self) -> Path:
        """The receiver's counters, Prometheus text format."""
        return self.log_dir / "receiver.prom"

    @property
    def web_log(self) -> Path:
        """gunicorn's error log (graphite-web's own logs go to log/webapp/)."""
        return self.log_dir / "gunicorn.log"

    @property
    def local_address(self) -> str:
        """Where this machine reaches the services: the bound address, or loopback when
        bound to every interface."""
        return "127.0.0.1" if self.binds_every_interface else self.bind

    @property
    def web_url(self) -> str:
        host = self.local_address
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.web_port}/"

    def ports(self) -> dict[str, int]:
        """Each listening port by the option that sets it."""
        return {"--line-port": self.line_port, "--pickle-port": self.pickle_port,
                "--carbonlink-port": self.carbonlink_port, "--web-port": self.web_port}

    def interface(self, option: str) -> str:
        """The address the port of `option` listens on: --bind, except CarbonLink's."""
        return settings.CARBONLINK_INTERFACE if option == "--carbonlink-port" else self.bind

    @property
    def binds_every_interface(self) -> bool:
        return self.bind in ("0.0.0.0", "::", "")

    def allowed_hosts(self) -> list[str]:
        """graphite-web's ALLOWED_HOSTS (the Host headers it answers): the bound address,
        the loopback names when bound to loopback, this machine's names and addresses when
        bound to every interface; plus $BGL_ALLOWED_HOSTS."""
        if self.binds_every_interface:
            hosts = [*_LOOPBACK_HOSTS, socket.gethostname(), socket.getfqdn(), *interface_addresses()]
        elif self.bind in _LOOPBACK_BINDS:
            hosts = list(_LOOPBACK_HOSTS)
        else:
            hosts = [f"[{self.bind}]" if ":" in self.bind else self.bind]
        hosts += [h.strip() for h in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if h.strip()]
        return list(dict.fromkeys(hosts))

    @property
    def receiver_stats_interval(self) -> float:
        """Seconds between two records of the receiver's (or carbon-cache's) self-metrics."""
        return settings.DEFAULT_SELF_METRICS_INTERVAL if self.self_metrics_interval is None else self.self_metrics_interval

    def environment(self) -> dict[str, str]:
        """What graphite-web's processes need in their environment to find their settings."""
        return {"DJANGO_SETTINGS_MODULE": "graphite.settings", "GRAPHITE_SETTINGS_MODULE": SETTINGS_MODULE}


def interface_addresses() -> list[str]:
    """IPv4 addresses of this machine's network interfaces (Linux), e.g. docker0's, which a
    Grafana container uses to reach the host."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
            except OSError:  # no IPv4 address
                continue
            found.append(socket.inet_ntoa(answer[20:24]))
    return found


def write_configuration(config: StackConfig) -> list[Path]:
    """Create the data directory's folders and write every configuration file; returns the
    files written this time."""
    if not config.data_dir.exists():
        config.data_dir.mkdir(mode=DIR_MODE, parents=True)
    for folder in (config.conf_dir, config.storage_dir, config.log_dir, config.log_dir / "webapp", config.run_dir):
        folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        folder.chmod(DIR_MODE)
    written = []
    for name, text in (("storage-schemas.conf", SCHEMAS), ("storage-aggregation.conf", _AGGREGATION)):
        path = config.conf_dir / name
        if not path.exists():
            write_private(path, text)
            written.append(path)
    secret = config.conf_dir / "secret_key"
    if not secret.exists():
        write_private(secret, secrets.token_urlsafe(48) + "\n")
        written.append(secret)
    for path, text in ((config.carbon_conf, carbon_conf_text(config)),
                       (config.conf_dir / f"{SETTINGS_MODULE}.py", local_settings_text(config)),
                       (config.gunicorn_conf, gunicorn_conf_text(config))):
        write_private(path, text)
        written.append(path)
    return written


def write_private(path: Path, text: str) -> None:
    """Write a file readable by its owner only (0600, also when it existed with another mode)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(descriptor, "w") as file:
        os.fchmod(descriptor, FILE_MODE)
        file.write(text)


def carbon_conf_text(config: StackConfig) -> str:
    """carbon.conf: carbon-cache writing into the store through our database plugin."""
    values = {
        "DATABASE": "biggraphite_like",
        "BG_STORE": config.store_url,
        "STORAGE_DIR": config.storage_dir,
        "LOCAL_DATA_DIR": config.storage_dir / "whisper",
        "LOG_DIR": config.log_dir,
        "PID_DIR": config.storage_dir,
        "USER": "",
        "LINE_RECEIVER_INTERFACE": config.bind,
        "LINE_RECEIVER_PORT": config.line_port,
        "PICKLE_RECEIVER_INTERFACE": config.bind,
        "PICKLE_RECEIVER_PORT": config.pickle_port,
        "CACHE_QUERY_INTERFACE": settings.CARBONLINK_INTERFACE,
        "CACHE_QUERY_PORT": config.carbonlink_port,
        "ENABLE_UDP_LISTENER": "False",
        "ENABLE_MANHOLE": "False",
        "CARBON_METRIC_INTERVAL": config.receiver_stats_interval,  # carbon.agents.<host>.* (0: none)
        "ENABLE_TAGS": "True",  # tagged series: indexed in the store by the plugin (no HTTP to graphite-web)
        # whisper's limits protect disks from file creation and seeks; the store has neither
        "MAX_CACHE_SIZE": "inf",
        "MAX_UPDATES_PER_SECOND": "inf",
        "MAX_CREATES_PER_MINUTE": "inf",
        # lean logging: carbon's defaults write a line per metric created and per connection
        "LOG_UPDATES": "False",
        "LOG_CREATES": "False",
        "LOG_LISTENER_CONN_SUCCESS": "False",
        "LOG_CACHE_HITS": "False",
        "LOG_CACHE_QUEUE_SORTS": "False",
    }
    lines = [
        "# carbon-cache for the local stack, written by `bgl run` at every start from its options.",
        "# By hand: bgl-carbon-cache --config=" + str(config.carbon_conf) + " --nodaemon start",
        "[cache]",
        *(f"{key} = {value}" for key, value in values.items()),
    ]
    return "\n".join(lines) + "\n"


def local_settings_text(config: StackConfig) -> str:
    """graphite-web's local_settings.py: our finder on the store, files in the data directory."""
    return f"""\
# graphite-web for the local stack, written by `bgl run` at every start from its options.
# By hand: PYTHONPATH={config.conf_dir} DJANGO_SETTINGS_MODULE=graphite.settings \\
#   GRAPHITE_SETTINGS_MODULE={SETTINGS_MODULE} gunicorn graphite_plugin.wsgi:application
import os

from graphite_plugin.settings import *

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "secret_key")) as _secret:
    SECRET_KEY = _secret.read().strip()
BG_STORE = {config.store_url!r}
STORAGE_DIR = {str(config.storage_dir)!r}
LOG_DIR = {str(config.log_dir / 'webapp')!r}
CARBONLINK_HOSTS = [{f'{settings.CARBONLINK_INTERFACE}:{config.carbonlink_port}:{CARBON_INSTANCE}'!r}]
ALLOWED_HOSTS = {config.allowed_hosts()!r}  # follows --bind; add names with ${ALLOWED_HOSTS_ENV}
BG_PROMETHEUS_METRICS = True  # GET /metrics: find and render counters, Prometheus text (graphite_plugin.prometheus)
BG_PROMETHEUS_DIR = {str(config.run_dir / 'prometheus')!r}  # the workers' counts, summed by /metrics
""" + ("" if config.self_metrics_interval is None
       else f"BG_SELF_METRICS_INTERVAL = {config.self_metrics_interval!r}  # --self-metrics-interval\n")


def gunicorn_conf_text(config: StackConfig) -> str:
    """gunicorn.conf.py: graphite-web behind gunicorn, static files served by WhiteNoise."""
    bind = f"[{config.bind}]" if ":" in config.bind else config.bind
    env = [f"{key}={value}" for key, value in config.environment().items()]
    return f"""\
# gunicorn in front of graphite-web for the local stack, written by `bgl run` at every start
# from its options. By hand: gunicorn -c {config.gunicorn_conf}
wsgi_app = "graphite_plugin.wsgi:application"
bind = [{f'{bind}:{config.web_port}'!r}]
workers = {config.web_workers}
# gthread, but a thread only for a request that has arrived (idle connections wait in the poller)
worker_class = "graphite_plugin.gunicorn_worker.RequestFirstWorker"
threads = 8
max_requests = 10000  # a worker is replaced after this many requests (jittered) ...
max_requests_jitter = 1000
timeout = 120
graceful_timeout = 30
pythonpath = {str(config.conf_dir)!r}
raw_env = {env!r}
errorlog = {str(config.web_log)!r}
accesslog = {str(config.log_dir / 'webapp' / 'access.log')!r}
logger_class = "graphite_plugin.gunicorn_worker.AccessLogger"  # gunicorn's lines, built from the atoms they name
proc_name = "bgl-graphite-web"
""" + _worker_tmp_dir_line() + f"""

def post_request(worker, req, environ, resp):  # ... or as soon as it holds more than 1 GiB ($BGL_WEB_MAX_RSS)
    from graphite_plugin.gunicorn_worker import recycle_past

    recycle_past(worker)


""" + _control_socket_lines(config)


def _worker_tmp_dir_line() -> str:
    """gunicorn's worker_tmp_dir on tmpfs when there is one: a worker's heartbeat is a utime
    on a file there, which on a disk file system can wait for the journal (gunicorn's own
    advice); elsewhere gunicorn's default, the temporary directory."""
    if os.path.isdir(_MEMORY_TMP_DIR) and os.access(_MEMORY_TMP_DIR, os.W_OK | os.X_OK):
        return f"worker_tmp_dir = {_MEMORY_TMP_DIR!r}  # the workers' heartbeat files, in memory\n"
    return ""


def _control_socket_lines(config: StackConfig) -> str:
    """gunicorn's control socket in the data directory (its default, ~/.gunicorn/gunicorn.ctl,
    would be shared by every gunicorn of the user); none when the path is too long for a
    Unix socket."""
    path = str(config.control_socket)
    if len(os.fsencode(path)) > _MAX_UNIX_SOCKET_PATH:
        return f"control_socket_disable = True  # {path} is too long for a Unix socket\n"
    return f"control_socket = {path!r}  # gunicornc -s {path}\n"
