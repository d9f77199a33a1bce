"""What a test node runs with: its cassandra.yaml, logback.xml and JVM options.

Sized for tests on a small shared machine: a small heap and memtables, one token per node
(num_tokens), no JMX, no auto snapshot (TRUNCATE and DROP stay fast), SASI enabled (the
store's SASI index mode needs it; Cassandra 5.0 disables it by default), and Java 17's
module flags from Cassandra 5.0's conf/jvm17-server.options.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

# conf/jvm17-server.options of Cassandra 5.0 (JPMS and Netty parts)
JVM17_FLAGS = (
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports", "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
)
MAIN_CLASS = "org.apache.cassandra.service.CassandraDaemon"
NODETOOL_CLASS = "org.apache.cassandra.tools.NodeTool"


@dataclasses.dataclass(frozen=True)
class NodeConfig:
    """One node: its address, ports (shared by every node of a cluster), folder and seeds."""

    address: str
    native_port: int
    storage_port: int
    directory: Path
    seeds: tuple[str, ...] = ()
    heap: str = "512M"
    cluster_name: str = "bgl_test"
    num_tokens: int = 1
    initial_token: int | None = None
    ring_delay_ms: int = 1000  # Cassandra waits this long (30 s by default) before choosing its tokens
    jmx_port: int | None = None  # local-only JMX (for nodetool flush); None: no JMX

    @property
    def yaml_path(self) -> Path:
        return self.directory / "conf" / "cassandra.yaml"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"


def cassandra_yaml(config: NodeConfig) -> str:
    data = config.directory / "data"
    seeds = ",".join(f"{seed}:{config.storage_port}" for seed in (config.seeds or (config.address,)))
    token = f"initial_token: {config.initial_token}\n" if config.initial_token is not None else ""
    return f"""\
cluster_name: {config.cluster_name}
num_tokens: {config.num_tokens}
{token}allocate_tokens_for_local_replication_factor: 3
auto_bootstrap: false
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{seeds}"
listen_address: {config.address}
rpc_address: {config.address}
storage_port: {config.storage_port}
native_transport_port: {config.native_port}
start_native_transport: true
data_file_directories:
  - {data / 'data'}
commitlog_directory: {data / 'commitlog'}
saved_caches_directory: {data / 'saved_caches'}
hints_directory: {data / 'hints'}
cdc_raw_directory: {data / 'cdc_raw'}
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_segment_size: 8MiB
storage_compatibility_mode: NONE
sasi_indexes_enabled: true
auto_snapshot: false
snapshot_before_compaction: false
memtable_heap_space: 64MiB
memtable_offheap_space: 64MiB
key_cache_size: 8MiB
file_cache_size: 32MiB
concurrent_reads: 8
concurrent_writes: 8
concurrent_compactors: 1
compaction_throughput: 0MiB/s
hinted_handoff_enabled: true
max_hint_window: 1h
read_request_timeout: 10000ms
write_request_timeout: 10000ms
range_request_timeout: 20000ms
request_timeout: 20000ms
dynamic_snitch: false
"""


def logback_xml(config: NodeConfig) -> str:
    """INFO and up to logs/system.log; warnings also to the console (the node's stdout file)."""
    return f"""\
<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{config.log_dir / 'system.log'}</file>
    <encoder><pattern>%-5level [%thread] %date{{ISO8601}} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <filter class="ch.qos.logback.classic.filter.ThresholdFilter"><level>WARN</level></filter>
    <encoder><pattern>%-5level %date{{HH:mm:ss}} %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/><appender-ref ref="STDOUT"/></root>
</configuration>
"""


def write_files(config: NodeConfig) -> None:
    """Creates the node's folder, its cassandra.yaml and logback.xml."""
    config.yaml_path.parent.mkdir(parents=True, exist_ok=True)
    config.log_dir.mkdir(parents=True, exist_ok=True)
    config.yaml_path.write_text(cassandra_yaml(config))
    (config.yaml_path.parent / "logback.xml").write_text(logback_xml(config))


def java_command(java: str, lib: Path, config: NodeConfig) -> list[str]:
    """The command line of one node in the foreground (JMX off unless config.jmx_port: it is
    stopped by SIGTERM)."""
    jars = sorted(lib.glob("*.jar"))
    jamm = [f"-javaagent:{jar}" for jar in jars if jar.name.startswith("jamm-")][:1]
    return [
        java, f"-Xms{config.heap}", f"-Xmx{config.heap}", "-XX:+UseG1GC", "-XX:+ParallelRefProcEnabled",
        "-XX:MaxGCPauseMillis=300", "-XX:+ExitOnOutOfMemoryError", "-Djava.net.preferIPv4Stack=true",
        *JVM17_FLAGS, *jamm,
        "-Dcassandra-foreground=yes",
        f"-Dcassandra.config=file://{config.yaml_path}",
        f"-Dcassandra.storagedir={config.directory / 'data'}",
        f"-Dcassandra.logdir={config.log_dir}",
        f"-Dlogback.configurationFile={config.yaml_path.parent / 'logback.xml'}",
        "-Dcassandra.skip_wait_for_gossip_to_settle=0",
        f"-Dcassandra.ring_delay_ms={config.ring_delay_ms}",
        "-Dcassandra.superuser_setup_delay_ms=0",
        *([f"-Dcassandra.jmx.local.port={config.jmx_port}"] if config.jmx_port else []),
        "-cp", ":".join([str(config.yaml_path.parent)] + [str(jar) for jar in jars]),
        MAIN_CLASS,
    ]


def nodetool_command(java: str, lib: Path, config: NodeConfig, *arguments: str) -> list[str]:
    """`nodetool ARGUMENTS` against the node's local JMX port (config.jmx_port), from the same jars."""
    classpath = ":".join(str(jar) for jar in sorted(lib.glob("*.jar")))
    return [java, "-Xmx128m", *JVM17_FLAGS, "-cp", classpath, NODETOOL_CLASS,
            "-h", "127.0.0.1", "-p", str(config.jmx_port), *arguments]
