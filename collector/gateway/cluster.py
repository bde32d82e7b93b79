"""What the gateway knows of the upstream cluster, learned from the traffic passing by: its
nodes and their gateway ports (the :class:`~collector.gateway.topology.Topology`), its
cluster id, and each topic's partition count (what CreatePartitions and DeleteTopics charge
to the mutation quota)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from collector.gateway.topology import Topology

__all__ = ["ClusterView"]

log = logging.getLogger(__name__)


class ClusterView:
    def __init__(self, on_cluster_id: Callable[[str], None]) -> None:
        # Set once the bootstrap listener is bound (the topology needs its advertised host).
        self._topology: Topology | None = None
        # The upstream cluster's id, from the Metadata/DescribeCluster responses.
        self.cluster_id: str | None = None
        # Topic name or id -> partition count, from the Metadata responses.
        self.partition_counts: dict[str | uuid.UUID, int] = {}
        self._on_cluster_id = on_cluster_id

    @property
    def topology(self) -> Topology:
        assert self._topology is not None, "the topology is bound before any connection"
        return self._topology

    @topology.setter
    def topology(self, topology: Topology) -> None:
        self._topology = topology

    @property
    def bound_topology(self) -> Topology | None:
        """The topology, or None before the bootstrap listener is bound."""
        return self._topology

    def learn_cluster_id(self, cluster_id: str | None) -> None:
        if not cluster_id or cluster_id == self.cluster_id:
            return
        if self.cluster_id is not None:
            log.warning(
                "upstream cluster id changed from %s to %s", self.cluster_id, cluster_id
            )
        self.cluster_id = cluster_id
        self._on_cluster_id(cluster_id)
