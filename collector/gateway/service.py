"""The gateway's shared state and the per-API work on forwarded traffic.

:class:`ClientPair` (``forwarding.py``) decides *whether* a request is answered here or
forwarded and keeps requests and responses in order; this class does *what* each route
asks: ApiVersions capping, broker-address rewriting and node discovery, SASL principal
capture, controller-mutation checks, client-metrics resources split from the rest, and
every quota record and throttle.  It knows nothing of sockets: the application wires in
how to open an upstream connection and how to bind a node's listener.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from collector.core.context import CloseConnection
from collector.gateway import addresses, api_versions, requests
from collector.gateway.admin_split import AdminSplitter
from collector.gateway.authentication import AuthenticationPolicy
from collector.gateway.discovery import Discovered
from collector.gateway.forwarding import ClientPair, _InFlight
from collector.gateway.frames import response_body_offset
from collector.gateway.outages import UpstreamHealth
from collector.gateway.quotas import GatewayQuotas
from collector.gateway.throttle import read_throttle_ms, with_throttle_ms
from collector.gateway.topology import Topology
from proto import ApiKeys, KafkaError, RequestFrame, decode_request
from proto.api_table import API_TABLE
from proto.messages import describe_cluster_response, metadata_response

__all__ = ["Gateway", "GatewayStats"]

log = logging.getLogger(__name__)

_SIZE_PREFIX: Final = struct.Struct(">i")
# At most one out-of-band Metadata request per interval: clients retrying a node port the
# cluster does not have must not turn into a request storm upstream.
_DISCOVERY_INTERVAL_MS: Final = 5000

# Opens a connection to an upstream broker for a pair; raises OSError when it cannot.
OpenUpstream = Callable[[str, int, ClientPair], Awaitable[Any]]
# Asks the cluster for its brokers (discovery.discover_brokers with the app's settings).
Discover = Callable[[], Awaitable[Discovered | None]]


class GatewayStats:
    """Counters the gateway's /metrics exports (labels: upstream node, reason)."""

    def __init__(self) -> None:
        # Upstream failures by (node, reason) and the nodes down now, logged once per
        # outage (outages.py).
        self.health = UpstreamHealth()
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
        dispatcher: Any,
        topology: Topology,
        quotas: GatewayQuotas,
        admin: AdminSplitter,
        open_upstream: OpenUpstream,
        discover: Discover,
        local_api_versions: Mapping[int, tuple[int, int]],
        clock_ms: Callable[[], int],
        authentication: AuthenticationPolicy,
        answers_acls: bool = False,
        answers_scram: bool = False,
    ) -> None:
        self.dispatcher = dispatcher
        # Whether clients must authenticate before they are served (authentication.py).
        self.authentication = authentication
        # The ACL APIs are answered here (the gateway has an authorizer): forwarding.Route.
        self.answers_acls = answers_acls
        # ... and the SCRAM credential APIs (the gateway has SASL listeners).
        self.answers_scram = answers_scram
        self.topology = topology
        self.quotas = quotas
        self.admin = admin
        self._open_upstream = open_upstream
        self._discover = discover
        self._discovering: asyncio.Future[None] | None = None
        self._discovered_at_ms = -_DISCOVERY_INTERVAL_MS
        self._local_api_versions = dict(local_api_versions)
        self.now_ms = clock_ms
        self.known_api_keys = frozenset(
            key for key, info in API_TABLE.items() if info.min_version is not None
        )
        self.stats = GatewayStats()
        # The upstream cluster's id, from the Metadata/DescribeCluster responses passing by.
        self.cluster_id: str | None = None
        # Topic name or id -> partition count, from the Metadata responses passing by (what
        # CreatePartitions and DeleteTopics charge to the mutation quota).
        self.partition_counts: dict[Any, int] = {}
        self.pairs: set[ClientPair] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.draining = False
        # The bootstrap server the last bootstrap connection reached.
        self._bootstrap_first: tuple[str, int] | None = None

    # -- upstream connections ------------------------------------------------------------
    def new_pair(self, node_id: int | None) -> ClientPair:
        pair = ClientPair(self, node_id)
        self.pairs.add(pair)
        return pair

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
                self._learn_cluster_id(cluster_id)
                for node_id, (host, port) in brokers.items():
                    self.topology.learn(node_id, host, port)
        except Exception:
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

    # -- request side --------------------------------------------------------------------
    def api_versions_request(self, frame: RequestFrame, session: Any) -> bytes | None:
        """A local answer for an ApiVersions request newer than the gateway speaks (Kafka's
        v0 UNSUPPORTED_VERSION), else None (forward it); records the client's software
        (KIP-511), as the broker's ApiVersions handler does in serve."""
        if frame.api_version > api_versions.API_VERSIONS_RANGE[1]:
            return api_versions.unsupported_version_response(frame.correlation_id)
        if frame.api_version >= 3:
            try:
                request = decode_request(frame)
            except KafkaError as exc:
                raise _malformed(frame, exc) from None
            session.client_software_name = request.client_software_name
            session.client_software_version = request.client_software_version
        return None

    @staticmethod
    def produce_acks(frame: RequestFrame) -> int:
        try:
            return requests.produce_acks(frame.api_version, frame.body)
        except KafkaError as exc:
            raise _malformed(frame, exc) from None

    def mutation_check(
        self, frame: RequestFrame, session: Any, channel: Any
    ) -> bytes | int:
        try:
            return self.quotas.mutation_check(
                frame, session, channel, self.now_ms(), self.partition_counts.get
            )
        except KafkaError as exc:
            raise _malformed(frame, exc) from None

    def admin_split(self, frame: RequestFrame, session: Any, channel: Any) -> Any:
        try:
            return self.admin.split(frame, session, channel)
        except KafkaError as exc:
            raise _malformed(frame, exc) from None

    # -- response side -------------------------------------------------------------------
    def response(
        self, entry: _InFlight, payload: bytes, pair: ClientPair
    ) -> list[bytes]:
        """The bytes to write to the client for one upstream response (size prefix
        included, possibly in pieces)."""
        started_ns = time.perf_counter_ns()
        frame = entry.frame
        route = entry.route
        api_key = frame.api_key
        version = frame.api_version
        body_at = response_body_offset(api_key, version, payload)
        body = memoryview(payload)[body_at:]
        new_body: Any = None
        if route.api_versions:
            new_body = api_versions.cap_api_versions(
                version, body, self._local_api_versions
            )
            self.admin.upstream_api_versions(version, body)
        elif route.addresses:
            new_body = self._rewrite(api_key, version, body)
        elif route.sasl:
            pair.sasl_response(api_key, body)
        elif route.admin_split and entry.state is not None:
            new_body = self.admin.merge(entry.state, frame, payload)
        session = pair.session
        quotas = self.quotas
        throttle_ms = entry.throttle_ms
        if quotas.active:
            user = session.principal_name
            client_id = frame.client_id
            now_ms = self.now_ms()
            if route.quota == "fetch":
                throttle_ms = max(
                    throttle_ms,
                    quotas.record_fetch_bytes(
                        user, client_id, len(payload) + 4, now_ms
                    ),
                )
            handling_ns = entry.handling_ns + time.perf_counter_ns() - started_ns
            throttle_ms = max(
                throttle_ms,
                quotas.record_request_time(user, client_id, handling_ns, now_ms),
            )
        if throttle_ms > 0:
            if route.quota == "fetch":
                # Kafka answers a fetch it throttles empty, un-recorded (quotas.py).
                empty = quotas.throttled_fetch_response(
                    frame,
                    body,
                    len(payload) + 4,
                    session.principal_name,
                    throttle_ms,
                    self.now_ms(),
                )
                if empty is not None:
                    quotas.mute(
                        pair.channel,
                        session.principal_name,
                        frame.client_id,
                        throttle_ms,
                    )
                    return [empty]
            # (Also with only a mutation quota configured: the request's own throttle.)
            current = memoryview(new_body) if new_body is not None else body
            if throttle_ms > (read_throttle_ms(api_key, version, current) or 0):
                new_body = with_throttle_ms(api_key, version, current, throttle_ms)
            # A request throttled by its own recording held the channel since; the timed
            # mute takes over (quotas.py).
            quotas.mute(
                pair.channel,
                session.principal_name,
                frame.client_id,
                throttle_ms,
                held=entry.throttle_ms > 0,
            )
        if new_body is None:
            return [_SIZE_PREFIX.pack(len(payload)), payload]
        return [_SIZE_PREFIX.pack(body_at + len(new_body)), payload[:body_at], new_body]

    def _rewrite(self, api_key: int, version: int, body: memoryview) -> bytes | None:
        scan = addresses.scan_addresses(api_key, version, body)
        if scan is None:
            return None
        if api_key == ApiKeys.METADATA:
            message, _ = metadata_response.READERS[version](body, 0)
            self._learn_cluster_id(message.cluster_id)
            self.partition_counts.update(
                requests.metadata_partition_counts(version, body)
            )
        elif api_key == ApiKeys.DESCRIBE_CLUSTER:
            message, _ = describe_cluster_response.READERS[version](body, 0)
            self._learn_cluster_id(message.cluster_id)
        topology = self.topology
        for node_id, (host, port) in scan.nodes().items():
            topology.learn(node_id, host, port)
        for endpoint in scan.endpoints:
            # A controller endpoint (DescribeQuorum, DescribeCluster type 2) of a node no
            # broker endpoint named gets a port of its own; a combined node keeps its broker's.
            if endpoint.node_id not in topology.upstream:
                topology.learn(endpoint.node_id, endpoint.host, endpoint.port)
        return scan.rewrite(topology.address_for)

    def _learn_cluster_id(self, cluster_id: str | None) -> None:
        if not cluster_id or cluster_id == self.cluster_id:
            return
        if self.cluster_id is not None:
            log.warning(
                "upstream cluster id changed from %s to %s", self.cluster_id, cluster_id
            )
        self.cluster_id = cluster_id
        for pair in self.pairs:
            if pair.session is not None:
                pair.session.upstream_cluster_id = cluster_id

    # -- shutdown ------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        return all(pair.idle for pair in self.pairs)


def _malformed(frame: RequestFrame, exc: Exception) -> CloseConnection:
    """A request the gateway must read and cannot: only this client's connection closes
    (the network layer logs the reason once and counts it as a protocol error)."""
    try:
        name = ApiKeys(frame.api_key).name
    except ValueError:
        name = f"api key {frame.api_key}"
    return CloseConnection(f"malformed {name} v{frame.api_version} request: {exc}")


def _node(node_id: int | None) -> str:
    return "bootstrap servers" if node_id is None else f"node {node_id}"
