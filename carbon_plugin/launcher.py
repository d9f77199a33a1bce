"""`bgl-carbon-cache`: carbon-cache with the biggraphite_like database plugins registered.

It takes carbon-cache's own arguments (`--config=carbon.conf --debug start`, `stop`,
`status`, `--instance`, `--pidfile`, `--logdir`, `--nodaemon`...) and runs carbon's twistd
plugin exactly as carbon's `bin/carbon-cache.py` does. Carbon derives GRAPHITE_ROOT from
the script's directory: here the environment's prefix (the virtualenv), unless
$GRAPHITE_ROOT is set; `--config` sets the configuration directory, and STORAGE_DIR,
PID_DIR, LOG_DIR and LOCAL_DATA_DIR in carbon.conf place the rest.

Before carbon builds its services, the launcher puts the guarded plaintext and pickle
receivers in place of carbon's (receivers.py: a bad line is refused and counted, the
connection goes on), puts a `write` processor that stores plain names without parsing
them as tagged series in place of carbon's (pipeline.py), a writer loop that takes many
metrics from carbon's cache at once in place of carbon's (writer_loop.py), and adds the shutdown drain
(connection_drain.py: on SIGTERM, bytes clients already sent are read and stored before the exit).
The `write` processor and the writer loop replace carbon's internals: they are installed
only on the carbon release they are tested against (TESTED_CARBON); on another, carbon's
own code runs and the log says so.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys

TESTED_CARBON = ("1.1.10",)  # carbon releases whose pipeline and writer loop ours replace


def main(argv: list[str] | None = None) -> int:
    """Run carbon-cache (argv: carbon-cache's arguments, default sys.argv[1:])."""
    importlib.import_module("carbon_plugin")  # registers the database plugins with carbon
    _guard_receivers()
    from carbon.exceptions import CarbonConfigException
    from carbon.util import run_twistd_plugin

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    # carbon names the program after this file ("carbon-cache") and sets GRAPHITE_ROOT
    # (if unset) to the parent of its directory.
    script = os.path.join(sys.prefix, "bin", "carbon-cache.py")
    try:
        run_twistd_plugin(script)
    except CarbonConfigException as exc:
        print(f"bgl-carbon-cache: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _guard_receivers() -> None:
    """Wrap carbon-cache's twistd service maker: once twistd has installed its reactor (carbon's
    protocols module must not be imported before), register the guarded receivers and the
    drain, then build carbon's services as usual."""
    from twisted.plugins.carbon_cache_plugin import serviceMaker

    make_service = type(serviceMaker).makeService

    def guarded_make_service(options):
        from carbon import log
        from carbon.conf import settings

        from carbon_plugin import connection_drain, pipeline, receivers, writer_loop

        receivers.register()
        replace = carbon_release() in TESTED_CARBON
        if replace:
            pipeline.register()
        service = make_service(serviceMaker, options)
        if replace:
            writer_loop.install()
        else:
            log.msg(f"biggraphite_like: carbon {carbon_release()} is not one of {', '.join(TESTED_CARBON)}:"
                    " carbon's own write processor and writer loop run (slower, same points)")
        connection_drain.install(settings)
        _record_refusals(settings)
        return service

    serviceMaker.makeService = guarded_make_service


def carbon_release() -> str:
    """The installed carbon's version ("" when its metadata is missing)."""
    try:
        return importlib.metadata.version("carbon")
    except importlib.metadata.PackageNotFoundError:
        return ""


def _record_refusals(settings) -> None:
    """Record the receivers' counters among carbon's self-metrics, every CARBON_METRIC_INTERVAL."""
    interval = float(settings.get("CARBON_METRIC_INTERVAL", 60) or 0)
    if interval <= 0:
        return
    from twisted.internet import reactor
    from twisted.internet.task import LoopingCall

    from carbon_plugin.receivers import record_refusals

    reactor.callWhenRunning(lambda: LoopingCall(record_refusals).start(interval, now=False))


if __name__ == "__main__":
    sys.exit(main())
