"""Getting Apache Cassandra's jars: through Maven only, cached in a local folder.

pom.xml (beside this file) names `org.apache.cassandra:cassandra-all`; `mvn
dependency:copy-dependencies` copies it and its runtime dependencies into
`<repo>/.cache/cassandra-<version>/lib`. Maven keeps its own copy in ~/.m2, so a fresh
clone on the same machine copies without the network. The folder is complete once
`complete` is written in it, so an interrupted fetch is done again. $BGL_CASSANDRA_LIB names
another folder: used as it is when it holds a cassandra-all jar, else filled by Maven.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

POM = Path(__file__).with_name("pom.xml")
REPO = Path(__file__).resolve().parents[2]
LIB_ENV = "BGL_CASSANDRA_LIB"
FETCH_TIMEOUT = 900  # seconds: a first fetch downloads about 70 MB


def progress(message: str) -> None:
    print(f"[cassandra] {message}", file=sys.stderr, flush=True)


class CassandraUnavailableHere(RuntimeError):
    """Java or Maven is missing, or the jars could not be fetched: no real node on this machine."""


def cassandra_version() -> str:
    """The cassandra-all version pom.xml names."""
    match = re.search(r"<cassandra.version>([^<]+)</cassandra.version>", POM.read_text())
    assert match, f"{POM} names no <cassandra.version>"
    return match.group(1)


def java_binary() -> str:
    """The `java` to run Cassandra with ($JAVA_HOME/bin/java, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home, "bin", "java") if home else None
    if candidate is not None and candidate.is_file():
        return str(candidate)
    found = shutil.which("java")
    if not found:
        raise CassandraUnavailableHere(
            "no `java` on PATH (nor in $JAVA_HOME): install OpenJDK 17 (Debian: apt-get install openjdk-17-jre-headless)"
            " to run a real Cassandra node")
    return found


def lib_dir() -> Path:
    return Path(os.environ.get(LIB_ENV) or REPO / ".cache" / f"cassandra-{cassandra_version()}" / "lib")


def fetch(quiet: bool = True) -> Path:
    """The folder holding cassandra-all and its dependencies, copied there by Maven if needed."""
    target = lib_dir()
    if (target / "complete").is_file() or (os.environ.get(LIB_ENV) and any(target.glob("cassandra-all-*.jar"))):
        return target
    mvn = shutil.which("mvn")
    if not mvn:
        raise CassandraUnavailableHere(
            "no `mvn` on PATH: install Maven (Debian: apt-get install maven) to fetch Apache Cassandra"
            f" {cassandra_version()} from Maven Central, or set ${LIB_ENV} to a folder holding its jars")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    progress(f"fetching Apache Cassandra {cassandra_version()} and its dependencies through Maven into {target}")
    command = [mvn, "-B", "-f", str(POM), "dependency:copy-dependencies", f"-DoutputDirectory={target}"]
    if quiet:
        command.insert(1, "-q")
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=FETCH_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise CassandraUnavailableHere(f"`{' '.join(command)}` took more than {FETCH_TIMEOUT} s") from exc
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise CassandraUnavailableHere(f"`{' '.join(command)}` failed (exit {result.returncode}):\n{tail}")
    if not any(target.glob("cassandra-all-*.jar")):
        raise CassandraUnavailableHere(f"Maven copied no cassandra-all jar into {target}")
    (target / "complete").write_text(cassandra_version() + "\n")
    return target
