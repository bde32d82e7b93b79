"""Which gateway port stands for which upstream broker, and where each broker really is.

A client must keep talking through the gateway, so every broker address a response carries
is replaced by the gateway listener that stands for that broker's node id.  Ports are
deterministic, as Conduktor's and kafka-proxy's ``--deterministic-listeners`` are: node
``n`` gets ``broker_port_start + n - min_node_id``, so a client that reconnects after a
gateway restart, or to another gateway replica with the same settings, finds the same
broker behind the same port.  ``broker_port_start = 0`` lets the OS pick (tests).

With fixed ports the whole range is bound at start; with OS-chosen ports a node's listener is
bound the first time a response reveals the node.  Responses (Metadata, DescribeCluster,
FindCoordinator, a KIP-951 NodeEndpoints) also say where each node is upstream; what was
learned is remembered in ``gateway-topology.json`` in the data directory, so that after a
restart a client connecting straight to a node's port is served before any Metadata passed
(a node still unknown is asked of the cluster, ``discovery.py``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["Topology", "TopologyError"]

log = logging.getLogger(__name__)

_STATE_FILE = "gateway-topology.json"


class TopologyError(RuntimeError):
    """A node id the port range cannot hold, or a port that cannot be bound."""


class Topology:
    def __init__(
        self,
        *,
        bootstrap: Sequence[tuple[str, int]],
        broker_port_start: int,
        min_node_id: int,
        max_nodes: int,
        advertised_host: str,
        bind_node: Callable[[int, int], int],
        state_dir: Path | None,
    ) -> None:
        """``bind_node(node_id, port)`` binds the node's listener (port 0: any) and returns
        the bound port; it raises ``OSError`` when it cannot."""
        if not bootstrap:
            raise TopologyError("gateway.upstream.bootstrap.servers is empty")
        self.bootstrap = list(bootstrap)
        self._port_start = broker_port_start
        self._min_node_id = min_node_id
        self._max_nodes = max_nodes
        self.advertised_host = advertised_host
        self._bind_node = bind_node
        self._state_path = state_dir / _STATE_FILE if state_dir is not None else None
        self.upstream: dict[int, tuple[str, int]] = {}
        self.ports: dict[int, int] = {}

    def load(self) -> None:
        """Bind the listeners of the nodes a previous run learned."""
        if self._state_path is None or not self._state_path.exists():
            return
        try:
            saved = json.loads(self._state_path.read_text())
            nodes = {
                int(k): (str(v[0]), int(v[1])) for k, v in saved["upstream"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            log.warning("ignoring %s: %s", self._state_path, exc)
            return
        for node_id, (host, port) in sorted(nodes.items()):
            self.learn(node_id, host, port, persist=False)

    def bind_range(self) -> None:
        """Bind every node port of the configured range now (fixed ports only), so that a
        client connecting straight to a node's port is accepted before this gateway learned
        the node (a replica behind a shared address; the node's upstream address is then
        asked of the cluster, ``discovery.py``)."""
        if self._port_start == 0:
            return
        for node_id in range(self._min_node_id, self._min_node_id + self._max_nodes):
            if node_id not in self.ports:
                self.ports[node_id] = self._bind(node_id)

    def learn(
        self, node_id: int, host: str, port: int, *, persist: bool = True
    ) -> None:
        """A response said node ``node_id`` is at ``host:port`` upstream."""
        if node_id < 0:
            return
        known = self.upstream.get(node_id)
        if known == (host, port) and node_id in self.ports:
            return
        if node_id not in self.ports:
            self.ports[node_id] = self._bind(node_id)  # raises for a node out of range
        self.upstream[node_id] = (host, port)
        if known is None:
            log.info(
                "upstream node %d (%s:%d) is served on %s:%d",
                node_id,
                host,
                port,
                self.advertised_host,
                self.ports[node_id],
            )
        else:
            log.info(
                "upstream node %d moved from %s:%d to %s:%d",
                node_id,
                *known,
                host,
                port,
            )
        if persist:
            self._save()

    def address_for(self, node_id: int) -> tuple[str, int]:
        """The gateway address that stands for node ``node_id`` (learned before)."""
        return self.advertised_host, self.ports[node_id]

    def upstream_candidates(self, node_id: int | None) -> list[tuple[str, int]]:
        """Where to connect for a client of ``node_id``'s listener (None: bootstrap)."""
        if node_id is None:
            return list(self.bootstrap)
        address = self.upstream.get(node_id)
        return [address] if address is not None else []

    def _bind(self, node_id: int) -> int:
        if self._port_start == 0:
            wanted = 0
        else:
            offset = node_id - self._min_node_id
            if not 0 <= offset < self._max_nodes:
                raise TopologyError(
                    f"upstream node id {node_id} is outside gateway.min.node.id "
                    f"{self._min_node_id} .. {self._min_node_id + self._max_nodes - 1}"
                )
            wanted = self._port_start + offset
        try:
            return self._bind_node(node_id, wanted)
        except OSError as exc:
            raise TopologyError(
                f"cannot bind port {wanted} for upstream node {node_id}: {exc}"
            ) from exc

    def _save(self) -> None:
        if self._state_path is None:
            return
        tmp = self._state_path.with_suffix(".tmp")
        data = {"upstream": {str(k): list(v) for k, v in sorted(self.upstream.items())}}
        try:
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, self._state_path)
        except OSError as exc:
            log.warning("cannot save %s: %s", self._state_path, exc)
