"""The gateway's shared state: what every client pair of one ``ktc gateway`` shares.

:class:`ClientPair` (``forwarding.py``) runs each request's filter chain and keeps requests
and responses in order; the filters (``filters/``) do the per-API work.  This class makes
the filters once (their :class:`~collector.gateway.filters.base.GatewayServices`), holds what the
gateway learned of the upstream cluster (``cluster.py``), opens each pair's upstream
connection (discovering the cluster's brokers when a node is not known yet) and reports
upstream outages.  It knows nothing of sockets: the application wires in how to open an
upstream connection and how to bind a node's listener.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from clock import Clock
from collector.core.handler import RequestHandler
from collector.gateway.admin_split import AdminSplitter
from collector.gateway.authentication import AuthenticationPolicy
from collector.gateway.cluster import ClusterView
from collector.gateway.discovery import Discovered
from collector.gateway.filters import answered_here, build_chains
from collector.gateway.filters.base import GatewayServices
from collector.gateway.forwarded_quotas import GatewayQuotas
from collector.gateway.forwarding import ClientPair
from collector.gateway.outages import UpstreamHealth
from collector.gateway.topology import Topology
from collector.net.upstream import Upstream
from proto import SUPPORTED_VERSIONS, api_name

if TYPE_CHECKING:
    from collector.net.protocol import KafkaProtocol

__all__ = ["Gateway", "GatewayStats"]

log = logging.getLogger(__name__)

# At most one out-of-band Metadata request per interval: clients retrying a node port the
# cluster does not have must not turn into a request storm upstream.
_DISCOVERY_INTERVAL_MS: Final = 5000

# Opens a connection to an upstream broker for a pair; raises OSError when it cannot.
OpenUpstream = Callable[[str, int, ClientPair], Awaitable[Upstream]]
# Asks the cluster for its brokers (discovery.discover_brokers with the app's settings).
Discover = Callable[[], Awaitable[Discovered | None]]


class GatewayStats:
    """Counters the gateway's /metrics exports (labels: upstream node, reason)."""

    def __init__(self, clock: Clock) -> None:
        # Upstream failures by (node, reason) and the nodes down now, logged once per
        # outage (outages.py), timed by the node's clock.
        self.health = UpstreamHealth(clock)
        # Connections closed for a request before authentication, by API name.
        self.refused_unauthenticated: collections.Counter[str] = collections.Counter()

    @property
    def upstream_failures(self) -> dict[tuple[str, str], int]:
        """(node, reason) -> count."""
        return self.health.failures


class Gateway:
    """What every client pair of one ``ktc gateway`` process shares."""

    def __init__(
        self,
        *,
        dispatcher: RequestHandler,
        quotas: GatewayQuotas,
        admin: AdminSplitter,
        open_upstream: OpenUpstream,
        discover: Discover,
        clock: Clock,
        authentication: AuthenticationPolicy,
        answers_acls: bool = False,
        answers_scram: bool = False,
    ) -> None:
        self.quotas = quotas
        self.now_ms = clock.now_ms
        # Whether clients must authenticate before they are served (authentication.py).
        self.authentication = authentication
        self.cluster = ClusterView(self._cluster_id_changed)
        services = GatewayServices(
            dispatcher=dispatcher,
            quotas=quotas,
            admin=admin,
            cluster=self.cluster,
            now_ms=clock.now_ms,
            authentication=authentication,
            answers_acls=answers_acls,
            answers_scram=answers_scram,
        )
        # What the gateway answers itself, from the filter table (filters/__init__.py), at
        # the versions the node speaks.
        self.answered_here = answered_here(services)
        services.local_api_versions = {
            key: SUPPORTED_VERSIONS[key] for key in sorted(self.answered_here)
        }
        # api key -> its filter chain, for every API the gateway accepts.
        self.chains = build_chains(services)
        self._open_upstream = open_upstream
        self._discover = discover
        self._discovering: asyncio.Future[None] | None = None
        self._discovered_at_ms = -_DISCOVERY_INTERVAL_MS
        self.stats = GatewayStats(clock)
        self.pairs: set[ClientPair] = set()
        self.by_connection: dict[int, ClientPair] = {}  # connection id -> its pair
        self._tasks: set[asyncio.Task[None]] = set()
        self.draining = False
        # The bootstrap server the last bootstrap connection reached.
        self._bootstrap_first: tuple[str, int] | None = None

    @property
    def topology(self) -> Topology:
        return self.cluster.topology

    @topology.setter
    def topology(self, topology: Topology) -> None:
        """Set once the bootstrap listener is bound (it needs the advertised host)."""
        self.cluster.topology = topology

    @property
    def cluster_id(self) -> str | None:
        """The upstream cluster's id, from the Metadata/DescribeCluster responses."""
        return self.cluster.cluster_id

    @property
    def partition_counts(self) -> dict[str | uuid.UUID, int]:
        return self.cluster.partition_counts

    def _cluster_id_changed(self, cluster_id: str) -> None:
        for pair in self.pairs:
            if pair.session is not None:
                pair.session.upstream_cluster_id = cluster_id

    # -- upstream connections ------------------------------------------------------------
    def new_pair(
        self, node_id: int | None, connection_id: int | None = None
    ) -> ClientPair:
        """The pair of a new client connection (``node_id``: the upstream node its listener
        stands for, None for the bootstrap listener)."""
        pair = ClientPair(self, node_id)
        self.pairs.add(pair)
        if connection_id is not None:
            self.by_connection[connection_id] = pair
        return pair

    def connection_opened(self, protocol: KafkaProtocol) -> bool:
        """The client connection of a pair is open: its session names the upstream node
        and cluster, and the pair starts (its upstream connection opening)."""
        session = protocol.session
        pair = self.by_connection.get(session.connection_id)
        if pair is None:
            return False
        session.upstream_node_id = pair.node_id
        session.upstream_cluster_id = self.cluster_id
        protocol.on_write_congested = pair.write_congested
        pair.opened(protocol, session)
        return True

    def connection_closed(self, connection_id: int) -> None:
        pair = self.by_connection.pop(connection_id, None)
        if pair is not None:
            self.pair_closed(pair)

    def pair_closed(self, pair: ClientPair) -> None:
        pair.closed()
        self.pairs.discard(pair)
        self.quotas.forget(pair.channel)

    def connect_upstream(self, pair: ClientPair) -> None:
        task = asyncio.get_running_loop().create_task(self._connect(pair))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, pair: ClientPair) -> None:
        candidates = self.topology.upstream_candidates(pair.node_id)
        if not candidates:
            await self._discover_once()
            candidates = self.topology.upstream_candidates(pair.node_id)
        if pair.node_id is None and self._bootstrap_first:
            # The bootstrap server that answered last goes first: a dead one is not
            # retried ahead of it for every client connection.
            first = self._bootstrap_first
            candidates = [first, *(c for c in candidates if c != first)]
        errors = []
        for host, port in candidates:
            try:
                upstream = await self._open_upstream(host, port, pair)
            except (OSError, TimeoutError) as exc:
                errors.append(f"{host}:{port}: {exc or type(exc).__name__}")
                continue
            if pair.node_id is None:
                self._bootstrap_first = (host, port)
            pair.upstream_address = (host, port)
            pair.upstream_ready(upstream)
            return
        detail = (
            f"cannot connect ({'; '.join(errors)})"
            if errors
            else "its address is not known (no response has named it)"
        )
        self.stats.health.failed(pair.node_id, "unreachable", detail)
        pair.upstream_unreachable(f"upstream {_node(pair.node_id)}: {detail}")

    async def _discover_once(self) -> None:
        """Ask the cluster for its brokers; clients arriving meanwhile share the answer."""
        if self._discovering is not None:
            await asyncio.shield(self._discovering)
            return
        now_ms = self.now_ms()
        if now_ms - self._discovered_at_ms < _DISCOVERY_INTERVAL_MS:
            return  # asked a moment ago: a node still unknown is not there
        self._discovered_at_ms = now_ms
        self._discovering = asyncio.get_running_loop().create_future()
        try:
            discovered = await self._discover()
            if discovered is not None:
                cluster_id, brokers = discovered
                self.cluster.learn_cluster_id(cluster_id)
                for node_id, (host, port) in brokers.items():
                    self.topology.learn(node_id, host, port)
        except Exception:  # a failed question leaves the topology as it was
            log.exception("broker discovery failed")
        finally:
            self._discovering.set_result(None)
            self._discovering = None

    def upstream_answered(self, pair: ClientPair) -> None:
        """The first response over a pair's new upstream connection: its node is up (an
        outage ends here, not at the TCP handshake, which a dying broker may still finish)."""
        if pair.upstream_address is not None:
            host, port = pair.upstream_address
            self.stats.health.connected(pair.node_id, host, port)

    def upstream_lost(self, pair: ClientPair, reason: str, in_flight: int) -> None:
        """A pair's upstream connection ended; with requests in flight the broker is taken
        for dead (an outage), with none it may have closed an idle connection or one whose
        authentication failed, and the client's reconnect tells."""
        if in_flight:
            detail = f"{reason} ({in_flight} request{'s' if in_flight > 1 else ''} in flight)"
            self.stats.health.failed(pair.node_id, "lost", detail)
        else:
            self.stats.health.failed(pair.node_id, "closed", reason)

    def upstream_broken(self, pair: ClientPair, reason: str) -> None:
        self.stats.health.failed(pair.node_id, "protocol", reason)

    def refused_unauthenticated(self, api_key: int) -> None:
        """A connection closed for a request before authentication (by API, /metrics)."""
        self.stats.refused_unauthenticated[api_name(api_key)] += 1

    # -- shutdown ------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        return all(pair.idle for pair in self.pairs)


def _node(node_id: int | None) -> str:
    return "bootstrap servers" if node_id is None else f"node {node_id}"
