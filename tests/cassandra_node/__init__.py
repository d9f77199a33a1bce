"""A real Apache Cassandra node for the tests (issue 20): fetched through Maven, started by Python.

    python -m tests.cassandra_node            # one node on 127.0.0.1 free ports, until Ctrl-C

fetch.py gets cassandra-all and its dependencies (pom.xml) into a cached folder; config.py
writes the node's cassandra.yaml and JVM options; node.py runs and stops the process.
"""
from tests.cassandra_node.fetch import CassandraUnavailableHere, cassandra_version
from tests.cassandra_node.node import CassandraNode, NodeFailed

__all__ = ["CassandraNode", "CassandraUnavailableHere", "NodeFailed", "cassandra_version"]
