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
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from collector.core.context import CloseConnection
from collector.gateway import addresses, api_versions, requests
from collector.gateway.admin_split import AdminSplitter
from collector.gateway.forwarding import ClientPair, _InFlight
from collector.gateway.frames import response_body_offset
from collector.gateway.quotas import GatewayQuotas
from collector.gateway.throttle import read_throttle_ms, with_throttle_ms
from collector.gateway.topology import Topology
from proto import ApiKeys, RequestFrame, decode_request
from proto.api_table import API_TABLE
from proto.messages import describe_cluster_response, metadata_response

__all__ = ["Gateway", "GatewayStats"]

log = logging.getLogger(__name__)

_SIZE_PREFIX: Final = struct.Struct(">i")

# Opens a connection to an upstream broker for a pair; raises OSError when it cannot.
OpenUpstream = Callable[[str, int, ClientPair], Awaitable[Any]]


class GatewayStats:
    """Counters the gateway's /metrics exports (labels: upstream node, api)."""

    def __init__(self) -> None:
        self.upstream_failures: dict[tuple[str, str], int] = {}  # (node, reason) -> count
        self.upstream_open = 0
        self.forwarded: dict[int, int] = {}  # api key -> requests forwarded
        self.answered_locally: dict[int, int] = {}

    def failure(self, node_id: int | None, reason: str) -> None:
        key = ("bootstrap" if node_id is None else str(node_id), reason)
        self.upstream_failures[key] = self.upstream_failures.get(key, 0) + 1


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
        local_api_versions: Mapping[int, tuple[int, int]],
        clock_ms: Callable[[], int],
    ) -> None:
        self.dispatcher = dispatcher
        self.topology = topology
        self.quotas = quotas
        self.admin = admin
        self._open_upstream = open_upstream
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

    @staticmethod
    def close_connection(reason: str) -> CloseConnection:
        return CloseConnection(reason)

    # -- upstream connections ------------------------------------------------------------
    def new_pair(self, node_id: int | None) -> ClientPair:
        pair = ClientPair(self, node_id)
        self.pairs.add(pair)
        return pair

    def pair_closed(self, pair: ClientPair) -> None:
        pair.closed()
        self.pairs.discard(pair)

    def connect_upstream(self, pair: ClientPair) -> None:
        task = asyncio.get_running_loop().create_task(self._connect(pair))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, pair: ClientPair) -> None:
        candidates = self.topology.upstream_candidates(pair.node_id)
        errors = []
        for host, port in candidates:
            try:
                upstream = await self._open_upstream(host, port, pair)
            except (OSError, asyncio.TimeoutError) as exc:
                errors.append(f"{host}:{port}: {exc or type(exc).__name__}")
                continue
            self.stats.upstream_open += 1
            pair.upstream_ready(upstream)
            return
        what = "bootstrap servers" if pair.node_id is None else f"node {pair.node_id}"
        reason = (
            f"upstream {what} unreachable ({'; '.join(errors)})"
            if errors
            else f"upstream node {pair.node_id} is not known yet"
        )
        self.stats.failure(pair.node_id, "unreachable")
        log.warning("%s: closing the client connection", reason)
        pair.upstream_unreachable(reason)

    def upstream_lost(self, pair: ClientPair, reason: str) -> None:
        self.stats.upstream_open -= 1
        self.stats.failure(pair.node_id, "lost")
        log.info("upstream %s: %s", _node(pair.node_id), reason)

    def upstream_broken(self, pair: ClientPair, reason: str) -> None:
        self.stats.failure(pair.node_id, "protocol")
        log.warning("upstream %s broke the protocol: %s", _node(pair.node_id), reason)

    # -- request side --------------------------------------------------------------------
    def api_versions_request(self, frame: RequestFrame, session: Any) -> bytes | None:
        """A local answer for an ApiVersions request newer than the gateway speaks (Kafka's
        v0 UNSUPPORTED_VERSION), else None (forward it); records the client's software
        (KIP-511), as the broker's ApiVersions handler does in serve."""
        if frame.api_version > api_versions.API_VERSIONS_RANGE[1]:
            return api_versions.unsupported_version_response(frame.correlation_id)
        if frame.api_version >= 3:
            request = decode_request(frame)
            session.client_software_name = request.client_software_name
            session.client_software_version = request.client_software_version
        return None

    @staticmethod
    def produce_acks(frame: RequestFrame) -> int:
        return requests.produce_acks(frame.api_version, frame.body)

    def mutation_check(self, frame: RequestFrame, session: Any, channel: Any) -> bytes | int:
        return self.quotas.mutation_check(
            frame, session, channel, self.now_ms(), self.partition_counts.get
        )

    def admin_split(self, frame: RequestFrame, session: Any, channel: Any) -> Any:
        return self.admin.split(frame, session, channel)

    # -- response side -------------------------------------------------------------------
    def response(self, entry: _InFlight, payload: bytes, pair: ClientPair) -> list[bytes]:
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
            new_body = api_versions.cap_api_versions(version, body, self._local_api_versions)
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
                    throttle_ms, quotas.record_fetch_bytes(user, client_id, len(payload) + 4, now_ms)
                )
            handling_ns = entry.handling_ns + time.perf_counter_ns() - started_ns
            throttle_ms = max(
                throttle_ms, quotas.record_request_time(user, client_id, handling_ns, now_ms)
            )
            if throttle_ms > 0:
                current = memoryview(new_body) if new_body is not None else body
                if throttle_ms > (read_throttle_ms(api_key, version, current) or 0):
                    new_body = with_throttle_ms(api_key, version, current, throttle_ms)
                quotas.mute(pair.channel, user, client_id, throttle_ms)
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
            self.partition_counts.update(requests.metadata_partition_counts(version, body))
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
            log.warning("upstream cluster id changed from %s to %s", self.cluster_id, cluster_id)
        self.cluster_id = cluster_id
        for pair in self.pairs:
            if pair.session is not None:
                pair.session.upstream_cluster_id = cluster_id

    # -- shutdown ------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        return all(pair.idle for pair in self.pairs)


def _node(node_id: int | None) -> str:
    return "bootstrap" if node_id is None else f"node {node_id}"
