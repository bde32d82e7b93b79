"""``ktc gateway``: a :class:`~collector.app.node.Node` in
:class:`~collector.app.modes.gateway.GatewayMode` (the mode, what it forwards and what it
answers: collector/app/modes/gateway.py; start, listeners and shutdown:
collector/app/node.py)."""

from __future__ import annotations

from collector.app.modes.gateway import GatewayMode
from collector.app.node import NodeInMode
from collector.gateway.forwarding import ClientPair
from collector.gateway.service import Gateway
from collector.gateway.topology import Topology
from collector.gateway.upstream_cluster import UpstreamCluster

__all__ = ["GatewayMode", "GatewayServer"]


class GatewayServer(NodeInMode):
    """A node in :class:`GatewayMode` (what ``ktc gateway`` runs); ``gateway``,
    ``topology`` and ``upstream`` are its mode's."""

    mode: GatewayMode
    mode_class = staticmethod(GatewayMode)

    @property
    def gateway(self) -> Gateway | None:
        return self.mode.gateway

    @property
    def topology(self) -> Topology | None:
        return self.mode.topology

    @property
    def upstream(self) -> UpstreamCluster | None:
        return self.mode.upstream

    @property
    def _pairs(self) -> dict[int, ClientPair]:
        return self.mode.pairs()
