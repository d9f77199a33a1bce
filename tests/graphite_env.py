"""Make graphite-web usable in tests without a Django project, and build whisper trees.

graphite-web reads `django.conf.settings` at import time (its logger, readers, finders).
`configure()` gives Django graphite's own defaults (graphite.settings) with test-friendly
overrides, unless settings are already configured (or DJANGO_SETTINGS_MODULE is set), so
that `from graphite.finders.standard import StandardFinder` works anywhere.

    from graphite_env import standard_find, make_whisper_tree
    make_whisper_tree(tmp_path, ["a.b", "a.b.c"])
    leaves, branches = standard_find(tmp_path, "a.*")
"""
from __future__ import annotations

import contextlib
import io
import os
import tempfile
import warnings
from typing import Iterable, Iterator

# Retention of the whisper files make_whisper_tree creates: 10 points of one minute.
DEFAULT_RETENTIONS = [(60, 10)]

_TEST_OVERRIDES = {
    "SECRET_KEY": "graphite-env-tests",
    "DEBUG": False,
    "STANDARD_DIRS": [],
    "CARBONLINK_HOSTS": [],  # never ask a carbon-cache for points not yet written
    "LOG_FILE_INFO": "-",
    "LOG_FILE_EXCEPTION": "-",
    "LOG_FILE_CACHE": "-",
    "LOG_FILE_RENDERING": "-",
    "LOG_INFO_PERFORMANCE": False,
    "LOG_CACHE_PERFORMANCE": False,
    "LOG_RENDERING_PERFORMANCE": False,
}


def configure(**overrides: object) -> None:
    """Configure Django settings for graphite-web once; no-op when already configured.

    The values are graphite-web's defaults (graphite/settings.py, imported quietly: it
    prints a notice when there is no local_settings and warns about SECRET_KEY), then
    `_TEST_OVERRIDES`, then `overrides`.
    """
    from django.conf import settings

    if settings.configured or os.environ.get("DJANGO_SETTINGS_MODULE"):
        return
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        import graphite.settings as graphite_defaults
    values = {name: getattr(graphite_defaults, name)
              for name in dir(graphite_defaults) if name.isupper()}
    values.update(_TEST_OVERRIDES)
    # a file, not ":memory:": every thread (a live server's too) must see the same tables
    database = os.path.join(tempfile.mkdtemp(prefix="graphite-env-"), "graphite.db")
    values["DATABASES"] = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": database}}
    values.update(overrides)
    settings.configure(**values)


_app_ready = False


def setup_graphite_app() -> None:
    """Make graphite-web's whole Django app usable in this process: settings, apps, and
    its database tables (user profiles, tags), created once."""
    global _app_ready
    if _app_ready:
        return
    configure()
    import django
    from django.core.management import call_command

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        django.setup()
        call_command("migrate", verbosity=0, interactive=False)
    _app_ready = True


def names_store(directory: str | os.PathLike[str], names: Iterable[str]) -> str:
    """The URL of a new SQLite store in directory holding these metrics (60s:1d, no point),
    with graphite-web's app ready: the store the finder tests read through graphite."""
    from biggraphite_like.accessor import Accessor
    from biggraphite_like.metric import MetricMetadata

    setup_graphite_app()
    url = f"sqlite://{os.path.join(directory, 'bgl.db')}"
    accessor = Accessor.from_url(url)
    accessor.syncdb()
    accessor.create_metrics([(name, MetricMetadata.create("60s:1d", "average", 0.5)) for name in names])
    accessor.close()
    return url


@contextlib.contextmanager
def use_finders(finders: list[str], **overrides: object) -> Iterator[object]:
    """Run the block with graphite-web's STORE using these finders (dotted paths) and
    settings overrides, e.g. STANDARD_DIRS or BG_STORE.

    graphite.storage.STORE is built once at import and the views hold references to it:
    it is rebuilt in place from the overridden settings, then from the original ones.
    """
    from django.test import override_settings
    from graphite.storage import STORE

    try:
        with override_settings(STORAGE_FINDERS=finders, **overrides):
            STORE.__init__()
            forget_carbonlink()
            yield STORE
    finally:
        STORE.__init__()
        forget_carbonlink()


def forget_carbonlink() -> None:
    """Drop graphite-web's CarbonLink pool: the next query builds it from CARBONLINK_HOSTS
    as they are then (graphite keeps one pool per process, built on first use)."""
    from graphite.carbonlink import GlobalCarbonLinkPool

    GlobalCarbonLinkPool._ThreadSafeSingleton__instance = None


def standard_find(root_dir: str | os.PathLike[str], pattern: str) -> tuple[list[str], list[str]]:
    """Run graphite-web's StandardFinder over root_dir: (sorted leaf paths, sorted branch
    paths), each deduplicated (StandardFinder may yield a path once per route to it)."""
    configure()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # graphite.util imports `imp`
        from graphite.finders.standard import StandardFinder
        from graphite.finders.utils import FindQuery

    finder = StandardFinder(directories=[os.fspath(root_dir)])
    leaves: set[str] = set()
    branches: set[str] = set()
    for node in finder.find_nodes(FindQuery(pattern, None, None)):
        (leaves if node.is_leaf else branches).add(node.path)
    return sorted(leaves), sorted(branches)


def whisper_path(root_dir: str | os.PathLike[str], name: str) -> str:
    """The file carbon would use for a metric: `root/a/b/c.wsp` for `a.b.c`."""
    return os.path.join(os.fspath(root_dir), *name.split(".")) + ".wsp"


def make_whisper_tree(
    root_dir: str | os.PathLike[str],
    names: Iterable[str],
    retentions: list[tuple[int, int]] | None = None,
) -> list[str]:
    """Create an empty whisper file per metric name under root_dir (existing files are
    kept); returns the paths."""
    import whisper

    paths = []
    for name in names:
        path = whisper_path(root_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if not os.path.exists(path):
            whisper.create(path, retentions or DEFAULT_RETENTIONS)
        paths.append(path)
    return paths


def directories_of(names: Iterable[str]) -> list[str]:
    """Every proper ancestor path of every name, sorted (the branches of the tree)."""
    result: set[str] = set()
    for name in names:
        parts = name.split(".")
        for end in range(1, len(parts)):
            result.add(".".join(parts[:end]))
    return sorted(result)


def serve(host: str = "127.0.0.1", port: int = 0) -> None:
    """Run graphite-web's WSGI application (graphite.wsgi) on host:port, as an operator's
    web server would, after creating its database tables; prints one JSON line with the
    port and the settings in effect, then serves until killed.

    Settings come from the environment (DJANGO_SETTINGS_MODULE=graphite.settings,
    GRAPHITE_SETTINGS_MODULE naming a local_settings module).
    """
    import json
    import socketserver
    import sys
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from django.conf import settings
    from django.core.management import call_command
    from graphite.wsgi import application

    call_command("migrate", verbosity=0, interactive=False)

    class ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = make_server(host, port, application, server_class=ThreadingServer, handler_class=QuietHandler)
    facts = {name: getattr(settings, name, None) for name in
             ("STORAGE_FINDERS", "BG_STORE", "STATIC_ROOT", "MIDDLEWARE", "BG_MAX_GLOB_RESULTS")}
    print(json.dumps({"port": server.server_port, **facts}, default=list), flush=True)
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] != ["serve"]:
        raise SystemExit("usage: python -m tests.graphite_env serve")
    serve()
