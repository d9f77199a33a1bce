"""Three real Cassandra nodes on one machine: 127.0.0.1, 127.0.0.2, 127.0.0.3 (Linux routes all of 127/8 to lo).

Each node has its own folder and one token, evenly spaced on the Murmur3 ring, so with
replication factor 3 every node holds every row. The nodes share their ports (one per
address); 127.0.0.1 is the seed. Nodes start one after the other (a node joins a ring that
already has the previous ones); stop() stops them all, also after a failed start.
"""
from __future__ import annotations

from pathlib import Path

from tests.cassandra_node.config import NodeConfig
from tests.cassandra_node.node import CassandraNode, free_port

ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
RING_DELAY_MS = 5000  # time for a joining node to hear of the others by gossip


def even_tokens(count: int) -> list[int]:
    """`count` Murmur3 tokens evenly spaced on the ring."""
    return [-(2**63) + i * (2**64 // count) for i in range(count)]


class CassandraCluster:
    """Nodes of one cluster on loopback addresses."""

    def __init__(self, directory: Path, addresses: tuple[str, ...] = ADDRESSES, heap: str = "512M", jmx: bool = False):
        native, storage = free_port(addresses), free_port(addresses)
        self.nodes = [
            CassandraNode(NodeConfig(address=address, native_port=native, storage_port=storage,
                                     directory=Path(directory) / f"node{i + 1}", seeds=(addresses[0],), heap=heap,
                                     initial_token=token, ring_delay_ms=RING_DELAY_MS,
                                     jmx_port=free_port() if jmx else None))
            for i, (address, token) in enumerate(zip(addresses, even_tokens(len(addresses))))
        ]

    @property
    def native_port(self) -> int:
        return self.nodes[0].config.native_port

    @property
    def contact_points(self) -> str:
        """host1,host2,host3:port, as a store URL names them."""
        return ",".join(node.config.address for node in self.nodes) + f":{self.native_port}"

    def start(self) -> "CassandraCluster":
        try:
            for node in self.nodes:
                node.start()
                node.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
