"""The local stack's processes: the receiver (`bgl receive`, or carbon-cache with our
plugin under `bgl run --carbon`) and graphite-web (gunicorn), started, watched and stopped
in order by `bgl run`.

Both run in sessions of their own, so a terminal's Ctrl-C reaches `bgl run` alone, which
then stops the receiver first (it drains its connections and writes what it holds to the
store before exiting) and graphite-web after. Each child also gets SIGTERM from the kernel if `bgl run` dies without
stopping them (PR_SET_PDEATHSIG), so no process is left behind.

A receiver that exits while the stack runs (a crash, the OOM killer, kill -9) is started
again at once, its exit status and log tail written to stderr, so that graphite-web keeps
serving and senders reconnect: at most MAX_RESTARTS times within RESTART_WINDOW seconds.
One more exit in that window and `bgl run` stops graphite-web too and exits 1, saying why.
graphite-web exiting stops the stack, as before.
"""
from __future__ import annotations

import collections
import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, TextIO

from biggraphite_like.errors import StackError
from biggraphite_like.stack.config import StackConfig

_PR_SET_PDEATHSIG = 1
MAX_RESTARTS = 5  # receiver restarts within RESTART_WINDOW before bgl run gives up
RESTART_WINDOW = 300.0  # seconds
# module needed -> what provides it
_REQUIREMENTS = {"graphite": "graphite-web", "django": "Django", "gunicorn": "gunicorn", "whitenoise": "whitenoise"}
_CARBON_REQUIREMENTS = {"carbon": "carbon"}  # only for --carbon


def _die_with_parent() -> None:
    """In the child, before exec: receive SIGTERM when the parent exits (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Child:
    """One supervised process, its output going to a file."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], output: Path, log: Path):
        self.name = name
        self.command = command
        self.env = env
        self.output = output
        self.log = log  # where the process logs what went wrong
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.output, "ab") as output:
            self.process = subprocess.Popen(self.command, env=self.env, stdin=subprocess.DEVNULL, stdout=output,
                                            stderr=subprocess.STDOUT, start_new_session=True,
                                            preexec_fn=_die_with_parent if sys.platform == "linux" else None)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def exit_code(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def stop(self, timeout: float) -> int | None:
        """SIGTERM, then wait up to `timeout` seconds; SIGKILL after that. Returns the exit
        status, None when it had to be killed."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            return None

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of its log and of its output, to say why it failed."""
        parts = []
        for path in dict.fromkeys((self.log, self.output)):
            try:
                text = path.read_text(errors="replace").rstrip().splitlines()[-lines:]
            except OSError:
                continue
            if text:
                parts.append(f"--- {path} (last lines)\n" + "\n".join(text))
        return "\n".join(parts) or "(no output)"


def exit_status(status: int | None) -> str:
    """An exit status as an operator reads it: -9 is "-9 (killed by SIGKILL)"."""
    if status is None or status >= 0:
        return str(status)
    try:
        return f"{status} (killed by {signal.Signals(-status).name})"
    except ValueError:
        return f"{status} (killed by signal {-status})"


def check_requirements(carbon: bool = False) -> None:
    """Refuse early, naming the packages, when graphite-web, the web server or (--carbon)
    carbon is missing."""
    wanted = {**(_CARBON_REQUIREMENTS if carbon else {}), **_REQUIREMENTS}
    missing = [package for module, package in wanted.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise StackError(f"bgl run needs {', '.join(missing)} in this Python environment ({sys.prefix}):"
                         " pip install -c constraints.txt -e '.[run]', then pip install -c constraints.txt --no-deps"
                         " graphite-web (or run scripts/run.sh)")


def check_ports(config: StackConfig) -> None:
    """Refuse early when a port is given twice or something already listens on it."""
    seen: dict[int, str] = {}
    for option, port in config.ports().items():
        if not 0 < port < 65536:
            raise StackError(f"{option} {port} is not a TCP port (1-65535)")
        if port in seen:
            raise StackError(f"{option} and {seen[port]} are both {port}: give each service its own port")
        seen[port] = option
        host = config.interface(option)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                raise StackError(f"cannot listen on {host}:{port} ({option}): {exc.strerror}; stop what"
                                 f" uses it or choose another port with {option}") from None


def prepare_graphite_database(config: StackConfig, env: dict[str, str]) -> None:
    """Create or migrate graphite-web's own database (users, saved graphs, tags)."""
    output = config.log_dir / "webapp" / "migrate.log"
    with open(output, "ab") as log:
        result = subprocess.run([sys.executable, "-m", "django", "migrate", "--noinput", "-v", "1"], env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, timeout=600)
    if result.returncode != 0:
        tail = "\n".join(output.read_text(errors="replace").splitlines()[-15:])
        raise StackError(f"graphite-web's database migration failed (exit {result.returncode}); {output}"
                         f" ends with:\n{tail}")


def _listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def _web_ready(url: str) -> bool:
    """graphite-web answers (any HTTP answer below 500 means Django is up). Not a find: its
    answer would be cached (BG_FIND_CACHE_TTL) and hide the first metrics sent."""
    try:
        with urllib.request.urlopen(url + "version/", timeout=5) as response:
            return response.status < 500
    except urllib.error.HTTPError as error:
        return error.code < 500
    except OSError:
        return False


def receiver_child(config: StackConfig, base: dict[str, str]) -> Child:
    """The receiving process: `bgl receive` (default) or carbon-cache with our plugin (--carbon)."""
    if config.carbon:
        return Child(
            "carbon-cache",
            [sys.executable, "-m", "carbon_plugin.launcher", f"--config={config.carbon_conf}", "--nodaemon", "start"],
            dict(base, GRAPHITE_ROOT=str(config.data_dir)), config.carbon_output,
            config.log_dir / "carbon-cache-a" / "console.log")
    command = [sys.executable, "-m", "biggraphite_like.receiver", "--bind", config.bind,
               "--line-port", str(config.line_port), "--pickle-port", str(config.pickle_port),
               "--carbonlink-port", str(config.carbonlink_port),
               "--storage-schemas", str(config.conf_dir / "storage-schemas.conf"),
               "--storage-aggregation", str(config.conf_dir / "storage-aggregation.conf"),
               "--metrics-file", str(config.receiver_metrics_file),
               "--stats-interval", str(config.receiver_stats_interval)]
    # the store by environment, not on the command line that `ps` shows to every user
    return Child("receiver", command, dict(base, BGL_STORE=config.store_url), config.receiver_output,
                 config.receiver_output)


class Stack:
    """The receiver and graphite-web on one store, from a written configuration."""

    def __init__(self, config: StackConfig, out: TextIO, err: TextIO):
        self.config = config
        self.out = out
        self.err = err
        self.stop_requested: int | None = None  # the signal that asked to stop
        self.restarts: collections.deque[float] = collections.deque()  # when the receiver was restarted
        self.gave_up = ""  # why the receiver was not restarted, when it was not
        base = dict(os.environ, PYTHONUNBUFFERED="1")
        base.pop("BGL_STORE", None)  # the configuration files name the store
        self.web_env = dict(base, **config.environment(),
                            PYTHONPATH=os.pathsep.join(filter(None, [str(config.conf_dir), base.get("PYTHONPATH")])))
        self.receiver = receiver_child(config, base)
        self.web = Child("graphite-web", [sys.executable, "-m", "gunicorn", "-c", str(config.gunicorn_conf)],
                         self.web_env, config.log_dir / "gunicorn.out", config.web_log)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.stop_requested is None:
            self.stop_requested = signum

    def run(self, ready: Callable[[], None] | None = None) -> int:
        """Start both, wait until they serve, call `ready`, run until a signal or a child's
        exit, then stop both. Returns 0 after a requested stop where both exited cleanly,
        1 otherwise."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            prepare_graphite_database(self.config, self.web_env)
            self.receiver.start()
            self.web.start()
            failed = self._wait_until_ready()
            if failed is None and self.stop_requested is None:
                (ready or (lambda: None))()
                failed = self._watch()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            # signals during the shutdown are ignored: the receiver must finish writing what it holds
            ignored = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                stopped_cleanly = self._stop_all()
            finally:
                for sig, handler in ignored.items():
                    signal.signal(sig, handler)
        if failed is not None:
            self.err.write(f"bgl run: error: {failed.name} exited with status {exit_status(failed.exit_code())}"
                           f"{self.gave_up if failed is self.receiver else ''}\n{failed.log_tail()}\n")
        status = 0 if failed is None and stopped_cleanly else 1
        self.out.write(f"bgl run: stopped: {self.receiver.name} and graphite-web have exited (status {status})\n")
        self.out.flush()
        return status

    def _failed_child(self) -> Child | None:
        return next((child for child in (self.receiver, self.web) if child.exit_code() is not None), None)

    def _wait_until_ready(self, timeout: float = 180.0) -> Child | None:
        """Wait until the receiver listens and graphite-web answers; returns the child that
        exited meanwhile, if any."""
        config = self.config
        deadline = time.monotonic() + timeout
        waiting = {self.receiver.name: lambda: all(_listening(config.local_address, port) for port in
                                               (config.line_port, config.pickle_port))
                   and _listening(config.interface("--carbonlink-port"), config.carbonlink_port),
                   "graphite-web": lambda: _web_ready(config.web_url)}
        while waiting and self.stop_requested is None:
            failed = self._failed_child()
            if failed is not None:
                return failed
            waiting = {name: check for name, check in waiting.items() if not check()}
            if waiting and time.monotonic() > deadline:
                raise StackError(f"{' and '.join(waiting)} did not start within {timeout:.0f}s; see"
                                 f" {config.log_dir}")
            if waiting:
                time.sleep(0.2)
        return None

    def _watch(self) -> Child | None:
        """Run until a stop is asked (None), graphite-web exits or the receiver exits once
        too often (that child)."""
        while self.stop_requested is None:
            if self.receiver.exit_code() is not None and not self._restart_receiver():
                return self.receiver
            if self.web.exit_code() is not None:
                return self.web
            time.sleep(0.2)
        return None

    def _restart_receiver(self) -> bool:
        """Start the exited receiver again, saying so on stderr; False (and `gave_up` says
        why) when it was restarted MAX_RESTARTS times within the last RESTART_WINDOW seconds."""
        now = time.monotonic()
        while self.restarts and now - self.restarts[0] > RESTART_WINDOW:
            self.restarts.popleft()
        status = exit_status(self.receiver.exit_code())
        if len(self.restarts) >= MAX_RESTARTS:
            self.gave_up = (f", after {len(self.restarts)} restarts within {RESTART_WINDOW:.0f}s: not restarting it"
                            " again; stopping graphite-web")
            return False
        self.restarts.append(now)
        self.err.write(f"bgl run: {self.receiver.name} exited with status {status} while running; restarting it"
                       f" (restart {len(self.restarts)} of at most {MAX_RESTARTS} within {RESTART_WINDOW:.0f}s)\n"
                       f"{self.receiver.log_tail(5)}\n")
        self.err.flush()
        try:
            self.receiver.start()
        except OSError as exc:
            self.gave_up = f", and could not be started again ({exc}); stopping graphite-web"
            return False
        self.err.write(f"bgl run: {self.receiver.name} restarted (pid {self.receiver.pid})\n")
        self.err.flush()
        return True

    def _stop_all(self) -> bool:
        """The receiver first (what it holds goes to the store), graphite-web after; True
        when both stopped cleanly."""
        clean = True
        for child, timeout in ((self.receiver, 300.0), (self.web, 60.0)):
            if child.exit_code() is not None or child.process is None:
                continue
            self.out.write(f"stopping {child.name}...\n")
            self.out.flush()
            status = child.stop(timeout)
            if status is None:
                self.err.write(f"bgl run: {child.name} did not stop within {timeout:.0f}s and was killed;"
                               f" see {child.log}\n")
            elif status not in (0, -signal.SIGTERM):  # twistd ends by re-raising SIGTERM after a clean stop
                self.err.write(f"bgl run: {child.name} exited with status {status} while stopping; see {child.log}\n")
            clean = clean and status in (0, -signal.SIGTERM)
        return clean
