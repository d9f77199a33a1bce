"""One real Cassandra process: started in its own process group, ready once CQL answers, stopped by SIGTERM.

    node = CassandraNode.single(tmp_dir)   # 127.0.0.1, free ports
    node.start(); node.wait_ready()        # progress on stderr
    ...  # cassandra://127.0.0.1:<node.native_port>/keyspace
    node.stop()

Nothing is fetched at run time but the jars, by Maven (fetch.py). SIGTERM runs Cassandra's
shutdown hook (drain: memtables flushed, commit log closed); a node that has not exited
after STOP_TIMEOUT is killed with its whole group.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.cassandra_node import config as config_mod
from tests.cassandra_node import fetch
from tests.cassandra_node.fetch import progress
from tests.ports import free_port

START_TIMEOUT = 240.0  # seconds: a JVM starting on a busy 2-core machine
STOP_TIMEOUT = 60.0


class NodeFailed(RuntimeError):
    """The node exited, or did not answer CQL in time; the message ends with its log's last lines."""


class CassandraNode:
    """A real Cassandra node of the version pom.xml names."""

    def __init__(self, node_config: config_mod.NodeConfig):
        self.config = node_config
        self.process: subprocess.Popen | None = None
        self.version: str | None = None
        self.start_seconds: float | None = None  # from launch to the first CQL answer

    @classmethod
    def single(cls, directory: Path, heap: str = "512M", jmx: bool = False) -> "CassandraNode":
        """One node on 127.0.0.1 free ports; with jmx, local JMX too (flush())."""
        return cls(config_mod.NodeConfig(address="127.0.0.1", native_port=free_port(), storage_port=free_port(),
                                          directory=Path(directory), heap=heap,
                                          jmx_port=free_port() if jmx else None))

    @property
    def address(self) -> str:
        """host:port of the node's native (CQL) transport."""
        return f"{self.config.address}:{self.config.native_port}"

    @property
    def stdout_path(self) -> Path:
        return self.config.log_dir / "stdout.log"

    def start(self) -> "CassandraNode":
        """Launches the JVM (in the background, its own process group); see wait_ready."""
        java = fetch.java_binary()
        lib = fetch.fetch()
        config_mod.write_files(self.config)
        command = config_mod.java_command(java, lib, self.config)
        progress(f"starting Cassandra {fetch.cassandra_version()} on {self.address}"
                 f" (storage port {self.config.storage_port}, heap {self.config.heap}, folder {self.config.directory})")
        with open(self.stdout_path, "ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, cwd=self.config.directory)
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _log_tail(self, lines: int = 25) -> str:
        texts = []
        for path in (self.stdout_path, self.config.log_dir / "system.log"):
            if path.is_file():
                texts.append(f"--- {path}:\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(texts)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> str:
        """Waits until the native port answers `SELECT release_version`; returns the version."""
        started = time.monotonic()
        deadline, next_report = started + timeout, started + 15
        while True:
            if not self.running():
                code = self.process.returncode if self.process else None
                raise NodeFailed(f"Cassandra on {self.address} exited (code {code}) before answering CQL\n"
                                 + self._log_tail())
            if time.monotonic() > deadline:
                self.stop()
                raise NodeFailed(f"Cassandra on {self.address} did not answer CQL within {timeout:.0f} s\n"
                                 + self._log_tail())
            if self._port_open():
                version = self._query_version()
                if version:
                    self.version, self.start_seconds = version, time.monotonic() - started
                    progress(f"Cassandra {version} answers on {self.address} after"
                             f" {time.monotonic() - started:.0f} s")
                    return version
            if time.monotonic() > next_report:
                progress(f"waiting for Cassandra on {self.address} ({time.monotonic() - started:.0f} s)")
                next_report += 15
            time.sleep(0.5)

    def _port_open(self) -> bool:
        try:
            with socket.create_connection((self.config.address, self.config.native_port), timeout=1):
                return True
        except OSError:
            return False

    def _query_version(self) -> str | None:
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import WhiteListRoundRobinPolicy

        profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([self.config.address]))
        cluster = Cluster([self.config.address], port=self.config.native_port, protocol_version=4,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                          connect_timeout=10, control_connection_timeout=10)
        try:
            session = cluster.connect()
            row = session.execute("SELECT release_version FROM system.local", timeout=20).one()
            return row[0]
        except Exception:  # not ready yet: tried again until the deadline
            return None
        finally:
            cluster.shutdown()

    def flush(self, timeout: float = 120.0) -> None:
        """`nodetool flush`: every memtable written to SSTables (needs the node started with JMX)."""
        if self.config.jmx_port is None:
            raise NodeFailed(f"flush needs JMX: start the node on {self.address} with jmx=True")
        command = config_mod.nodetool_command(fetch.java_binary(), fetch.fetch(), self.config, "flush")
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise NodeFailed(f"nodetool flush on {self.address} failed ({done.returncode}): {done.stderr[-2000:]}")

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM (Cassandra drains), then SIGKILL of the whole group after `timeout` seconds."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                progress(f"Cassandra on {self.address} still running {timeout:.0f} s after SIGTERM: killing it")
        try:
            os.killpg(process.pid, signal.SIGKILL)  # anything left in the group
        except ProcessLookupError:
            pass
        process.wait()

    def kill(self) -> None:
        """SIGKILL at once, as a crashed machine: no drain (tests of a node going away)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
