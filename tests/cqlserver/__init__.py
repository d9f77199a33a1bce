"""A CQL native protocol v4 server for tests: a TEST TOOL, never a production store.

The Cassandra store's fast test path (a real Cassandra 5.0 node, tests/cassandra_node,
runs the same suites when Java and Maven are there): the real cassandra-driver talks
to it over TCP, and it applies the CQL subset the store uses with Cassandra's
rules (ALLOW FILTERING, SASI/SAI indexes, clustering slices, TTL, tombstones,
last-write-wins, LWT, batches, paging, token-range scans).

    from tests.cqlserver import CQLTestServer
    server = CQLTestServer(port=0).start()
    ...  # Cluster(["127.0.0.1"], port=server.port, protocol_version=4)
    server.stop()

By hand: ``python -m tests.cqlserver --port 9042 [--state FILE]``.
"""
from .server import CQLTestServer

__all__ = ["CQLTestServer"]
