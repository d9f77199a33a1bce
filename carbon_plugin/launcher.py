"""`bgl-carbon-cache`: carbon-cache with the biggraphite_like database plugins registered.

It takes carbon-cache's own arguments (`--config=carbon.conf --debug start`, `stop`,
`status`, `--instance`, `--pidfile`, `--logdir`, `--nodaemon`...) and runs carbon's twistd
plugin exactly as carbon's `bin/carbon-cache.py` does. Carbon derives GRAPHITE_ROOT from
the script's directory: here the environment's prefix (the virtualenv), unless
$GRAPHITE_ROOT is set; `--config` sets the configuration directory, and STORAGE_DIR,
PID_DIR, LOG_DIR and LOCAL_DATA_DIR in carbon.conf place the rest.
"""
from __future__ import annotations

import importlib
import os
import sys


def main(argv: list[str] | None = None) -> int:
    """Run carbon-cache (argv: carbon-cache's arguments, default sys.argv[1:])."""
    importlib.import_module("carbon_plugin")  # registers the database plugins with carbon
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


if __name__ == "__main__":
    sys.exit(main())
