"""`bgl run`: the whole local stack (our receiver, or carbon-cache with our plugin under
--carbon; graphite-web with our finder behind gunicorn) on one store, configured in one
data directory.

It only writes files and starts programs: nothing here imports carbon, Django or graphite.
"""
from __future__ import annotations

import os
from typing import TextIO

from biggraphite_like.accessor import Accessor
from biggraphite_like.stack.config import ALLOWED_HOSTS_ENV, PRIVATE_UMASK, StackConfig, write_configuration
from biggraphite_like.stack.lock import EXIT_BUSY, DataDirectoryBusy, DataDirectoryLock
from biggraphite_like.stack.processes import Stack, check_ports, check_requirements
from biggraphite_like.urls import redact_url

__all__ = ["EXIT_BUSY", "DataDirectoryBusy", "StackConfig", "run"]


def run(config: StackConfig, out: TextIO, err: TextIO) -> int:
    """Check, lock the data directory, configure, prepare the store, then run the stack until
    Ctrl-C or SIGTERM."""
    check_requirements(config.carbon)
    os.umask(PRIVATE_UMASK)  # the store, graphite-web's database and the logs: 0600 in 0700 folders
    with DataDirectoryLock(config):  # before any file of the data directory is written
        return _run_locked(config, out, err)


def _run_locked(config: StackConfig, out: TextIO, err: TextIO) -> int:
    check_ports(config)
    write_configuration(config)
    accessor = Accessor.from_url(config.store_url)
    try:
        accessor.syncdb()
    finally:
        accessor.close()
    receiver = "carbon-cache" if config.carbon else "the receiver (bgl receive)"
    out.write(f"bgl run: starting {receiver} and graphite-web on {redact_url(accessor.store.url)}"
              f" (data directory {config.data_dir})\n")
    out.flush()
    return Stack(config, out, err).run(ready=lambda: _announce(config, out))


def _announce(config: StackConfig, out: TextIO) -> None:
    host = config.local_address
    where = "every interface" if config.bind in ("0.0.0.0", "::", "") else config.bind
    out.write(
        f"ready, listening on {where}:\n"
        f"  send metrics   plaintext {host}:{config.line_port}   pickle {host}:{config.pickle_port}\n"
        f"                 e.g. (bash) echo \"test.hello 42 $(date +%s)\" > /dev/tcp/{host}/{config.line_port}\n"
        f"  browse         {config.web_url}\n"
        f"  Grafana        a Graphite data source, URL {config.web_url.rstrip('/')}, version 1.1.x\n"
        f"  configuration  {config.conf_dir}\n"
        f"  logs           {config.log_dir}\n"
        "Ctrl-C stops both (the receiver first: every point it received is written).\n")
    if config.bind not in ("127.0.0.1", "::1", "localhost"):
        out.write("warning: graphite-web has no authentication; anyone who reaches these ports can read and"
                  " write metrics (CarbonLink's port stays on 127.0.0.1; graphite-web answers the Host names"
                  f" {', '.join(config.allowed_hosts())}, more with ${ALLOWED_HOSTS_ENV})\n")
    out.flush()
