"""``ktc gateway``: a :class:`~collector.app.node.Node` in
:class:`~collector.app.modes.gateway.GatewayMode` (the mode, what it forwards and what it
answers: collector/app/modes/gateway.py; start, listeners and shutdown:
collector/app/node.py)."""

from __future__ import annotations

from clock import SYSTEM_CLOCK, Clock
from collector.app.config import CollectorConfig
from collector.app.modes.gateway import GatewayMode
from collector.app.node import Node
from collector.gateway.forwarding import ClientPair
from collector.gateway.service import Gateway
from collector.gateway.topology import Topology
from collector.gateway.upstream_cluster import UpstreamCluster
from exporters.base import Exporter
from subscriptions.store import ConfigStore

__all__ = ["GatewayMode", "GatewayServer"]


class GatewayServer(Node):
    """A node in :class:`GatewayMode` (what ``ktc gateway`` runs); ``gateway``,
    ``topology`` and ``upstream`` are its mode's."""

    mode: GatewayMode

    def __init__(
        self,
        config: CollectorConfig,
        *,
        exporter: Exporter | None = None,
        store: ConfigStore | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(
            config, GatewayMode(config), exporter=exporter, store=store, clock=clock
        )

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
