"""The gateway's answers on the wire against the real Apache Kafka 4.4.0 cluster's own.

Every request here goes to the 3-node KRaft cluster twice: directly, and through a
``ktc gateway`` in front of it (harness/wire.py's ``exchange``: kio encodes the request and
decodes the answer; the raw bytes come back too). The gateway's answer must be the
cluster's, byte for byte, except:

* broker addresses: node n's host and port are the gateway's (127.0.0.1, the port of node n's
  listener), node ids untouched (Metadata v0-v13, FindCoordinator v0-v3 and v4-v6 for groups
  and transactions, DescribeCluster v0-v2, DescribeQuorum v2's controller listeners);
* what a broker picks afresh for every answer: the controller id of Metadata and
  DescribeCluster (KRaft answers a random live broker; checked to be a node id) and
  DescribeQuorum's offsets and fetch timestamps (the metadata log moves on);
* ApiVersions (v0-v4): the cluster's ranges capped to what Kafka 4.4.0's table and the
  gateway's decoders allow, GetTelemetrySubscriptions and PushTelemetry added with the
  collector's versions, on the bootstrap listener and on every per-node listener; every
  other field the cluster's (but the finalized-features epoch, the metadata log's offset
  when the broker answered). An ApiVersions request newer than the gateway speaks gets
  Kafka's own v0 UNSUPPORTED_VERSION answer, naming the gateway's range.

The same requests' direct answers, captured from a cluster of their own whose client
listener advertises the golden files' addresses, are committed in golden/live/*.bin and fed
to the golden tests (test_wire_golden.py) with Kafka's expected rewrites (golden/live.txt).
To capture them again:

    .venv/bin/python tests/gateway/golden/capture_live.py
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.serial import entity_reader

from collector.gateway.api_versions import (
    API_VERSIONS_RANGE,
    DECODED_VERSIONS,
    capped_range,
)
from proto import SUPPORTED_VERSIONS, ApiKeys
from proto.api_table import API_TABLE
from tests.gateway.gateway_harness import RunningGateway
from tests.gateway.golden.capture_live import (
    LiveRequest,
    api_versions,
    describe_cluster,
    describe_quorum,
    encode,
    find_coordinator,
    live_requests,
    metadata,
)
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.harness.wire import exchange
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(600)]

TELEMETRY = (ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, ApiKeys.PUSH_TELEMETRY)
ATTEMPTS = 5  # a leader may move between the two answers; ask both again


@dataclasses.dataclass
class Names:
    topic: str
    group: str
    transactional_id: str


@pytest.fixture(scope="module")
def names(kafka_cluster: KafkaCluster) -> Names:
    suffix = uuid.uuid4().hex[:8]
    chosen = Names(f"live-wire-{suffix}", f"live-group-{suffix}", f"live-txn-{suffix}")
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers()})
    admin.create_topics([NewTopic(chosen.topic, 6, 3)])[chosen.topic].result(timeout=60)
    kafka_cluster.wait_in_sync([chosen.topic])
    # The coordinators exist once their internal topics do (the cluster creates them).
    port = direct_port(kafka_cluster, 1)
    for request in (
        find_coordinator(6, 0, (chosen.group, f"{chosen.group}-b")),
        find_coordinator(
            6, 1, (chosen.transactional_id, f"{chosen.transactional_id}-b")
        ),
    ):

        def available(request: LiveRequest = request) -> bool:
            answer, _ = exchange(port, request.request, request.response_type)
            return not any(c.error_code for c in answer.coordinators)

        eventually_sync(available, timeout_s=90, what=f"{request.case} coordinators")
    return chosen


@pytest.fixture(scope="module")
def gateway(
    kafka_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    data_dir = tmp_path_factory.mktemp("gateway-live-wire") / "data"
    with RunningGateway(data_dir, kafka_cluster.bootstrap_servers()) as running:
        yield running


def direct_port(cluster: KafkaCluster, node_id: int) -> int:
    return cluster.node_ports[node_id]["PLAINTEXT"]


def body(raw: bytes, response_type: Any) -> bytes:
    """The response body (after its header) of an answer exchange returned."""
    _, offset = entity_reader(response_type.__header_schema__)(raw, 0)
    return raw[offset:]


def node_ports(gateway: RunningGateway, kafka_cluster: KafkaCluster) -> dict[int, int]:
    """Each upstream node's gateway port, once a Metadata answer has revealed them all."""
    request = metadata(12, "")
    exchange(
        gateway.port,
        dataclasses.replace(request.request, topics=None),
        request.response_type,
    )
    ports = gateway.node_ports()
    assert set(ports) == set(kafka_cluster.node_ids)
    return ports


# ---- what the gateway must change --------------------------------------------------------


def with_gateway_addresses(message: Any, ports: dict[int, int]) -> Any:
    """``message`` (a direct answer) as the gateway must send it: every broker address
    replaced by node id."""
    replace = dataclasses.replace

    def moved(item: Any, node_id: int) -> Any:
        return (
            replace(item, host="127.0.0.1", port=ports[node_id])
            if node_id >= 0
            else item
        )

    name = type(message).__name__
    if name == "MetadataResponse":
        return replace(
            message, brokers=tuple(moved(b, b.node_id) for b in message.brokers)
        )
    if name == "FindCoordinatorResponse":
        if hasattr(message, "coordinators"):
            return replace(
                message,
                coordinators=tuple(moved(c, c.node_id) for c in message.coordinators),
            )
        return moved(message, message.node_id)
    if name == "DescribeClusterResponse":
        if getattr(message, "endpoint_type", 1) != 1:
            return message
        return replace(
            message, brokers=tuple(moved(b, b.broker_id) for b in message.brokers)
        )
    if name == "DescribeQuorumResponse":
        nodes = tuple(
            replace(n, listeners=tuple(moved(lst, n.node_id) for lst in n.listeners))
            for n in getattr(message, "nodes", ())
        )
        return replace(message, nodes=nodes) if nodes else message
    raise AssertionError(f"not an address-bearing answer: {name}")


def with_fresh_fields(expected: Any, via: Any, node_ids: set[int]) -> Any:
    """Takes the fields a broker picks afresh for each answer from the gateway's answer,
    after checking they are plausible."""
    replace = dataclasses.replace
    if hasattr(expected, "controller_id"):
        assert expected.controller_id in node_ids and via.controller_id in node_ids
        expected = replace(expected, controller_id=via.controller_id)
    if type(expected).__name__ == "DescribeQuorumResponse":

        def steady(topics: Any) -> Any:
            return [
                (
                    p.partition_index,
                    p.error_code,
                    p.leader_id,
                    p.leader_epoch,
                    sorted(v.replica_id for v in p.current_voters),
                )
                for t in topics
                for p in t.partitions
            ]

        assert steady(expected.topics) == steady(via.topics)
        expected = replace(expected, topics=via.topics)
    return expected


def assert_answers_agree(
    request: LiveRequest, via_port: int, direct: int, ports: dict[int, int]
) -> Any:
    """The gateway's answer on ``via_port`` is the cluster's on ``direct``, byte for byte,
    but for the addresses (and what a broker picks afresh). Returns the gateway's answer."""
    node_ids = set(ports)
    problem = ""
    for _ in range(ATTEMPTS):
        via, via_raw = exchange(via_port, request.request, request.response_type)
        kafka, kafka_raw = exchange(direct, request.request, request.response_type)
        # kio writes Kafka's answer back to Kafka's bytes: the comparison below is exact.
        assert encode(kafka) == body(kafka_raw, request.response_type), request.name
        expected = with_fresh_fields(
            with_gateway_addresses(kafka, ports), via, node_ids
        )
        if encode(expected) == body(via_raw, request.response_type):
            return via
        problem = f"through the gateway:\n{via}\nexpected:\n{expected}"
    raise AssertionError(f"{request.name}: {problem}")


def gateway_addresses(message: Any) -> set[tuple[int, str, int]]:
    """(node id, host, port) of every broker address in ``message``."""
    name = type(message).__name__
    if name == "MetadataResponse":
        return {(b.node_id, b.host, b.port) for b in message.brokers}
    if name == "DescribeClusterResponse":
        return {(b.broker_id, b.host, b.port) for b in message.brokers}
    if name == "FindCoordinatorResponse":
        if hasattr(message, "coordinators"):
            return {(c.node_id, c.host, c.port) for c in message.coordinators}
        return {(message.node_id, message.host, message.port)}
    nodes = getattr(message, "nodes", ())
    return {(n.node_id, lst.host, lst.port) for n in nodes for lst in n.listeners}


# ---- address-bearing answers -------------------------------------------------------------


# The catalogue's shape (names only matter when the requests are sent).
CATALOGUE = [request.name for request in live_requests("t", "g", "x")]


@pytest.mark.parametrize("index", range(len(CATALOGUE)), ids=CATALOGUE)
def test_answer_through_the_bootstrap_listener_is_the_clusters(
    index: int, gateway: RunningGateway, kafka_cluster: KafkaCluster, names: Names
) -> None:
    request = live_requests(names.topic, names.group, names.transactional_id)[index]
    ports = node_ports(gateway, kafka_cluster)
    via = assert_answers_agree(
        request, gateway.port, direct_port(kafka_cluster, 1), ports
    )
    found = gateway_addresses(via)
    if (
        request.api_key == ApiKeys.METADATA
        or request.api_key == ApiKeys.DESCRIBE_CLUSTER
    ):
        assert {node for node, _, _ in found} == set(kafka_cluster.node_ids)
    if request.api_key == ApiKeys.DESCRIBE_QUORUM and request.version >= 2:
        assert {node for node, _, _ in found} == set(
            kafka_cluster.node_ids
        )  # the voters
    for node_id, host, port in found:
        assert (host, port) == ("127.0.0.1", ports[node_id])
    cluster_id = getattr(via, "cluster_id", None)
    if cluster_id is not None:
        assert cluster_id == gateway.upstream_cluster_id()


@pytest.mark.parametrize("node_id", [1, 2, 3])
@pytest.mark.parametrize("version", [1, 9, 12, 13])
def test_metadata_through_each_node_listener_is_that_nodes(
    node_id: int,
    version: int,
    gateway: RunningGateway,
    kafka_cluster: KafkaCluster,
    names: Names,
) -> None:
    ports = node_ports(gateway, kafka_cluster)
    request = metadata(version, names.topic)
    assert_answers_agree(
        request, ports[node_id], direct_port(kafka_cluster, node_id), ports
    )


@pytest.mark.parametrize("node_id", [1, 2, 3])
def test_coordinators_and_cluster_through_each_node_listener(
    node_id: int, gateway: RunningGateway, kafka_cluster: KafkaCluster, names: Names
) -> None:
    ports = node_ports(gateway, kafka_cluster)
    direct = direct_port(kafka_cluster, node_id)
    for request in (
        find_coordinator(3, 0, (names.group,)),
        find_coordinator(6, 1, (names.transactional_id, f"{names.transactional_id}-b")),
        describe_cluster(2),
        describe_quorum(2),
    ):
        assert_answers_agree(request, ports[node_id], direct, ports)


# ---- ApiVersions -------------------------------------------------------------------------


def ranges(message: Any) -> dict[int, tuple[int, int]]:
    return {
        int(k.api_key): (int(k.min_version), int(k.max_version))
        for k in message.api_keys
    }


# What the gateway answers itself, with the collector's versions: telemetry and the
# client-metrics administration (CLIENT_METRICS resources; the rest is forwarded).
LOCAL: dict[int, tuple[int, int]] = {
    api_key: SUPPORTED_VERSIONS[api_key]
    for api_key in (
        *TELEMETRY,
        ApiKeys.DESCRIBE_CONFIGS,
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        ApiKeys.LIST_CONFIG_RESOURCES,
    )
}


@pytest.mark.parametrize("version", range(API_VERSIONS_RANGE[1] + 1))
def test_api_versions_on_every_listener(
    version: int, gateway: RunningGateway, kafka_cluster: KafkaCluster
) -> None:
    ports = node_ports(gateway, kafka_cluster)
    local = LOCAL
    request = api_versions(version)
    listeners = [(gateway.port, 1), *((ports[n], n) for n in kafka_cluster.node_ids)]
    for via_port, node_id in listeners:
        via, _ = exchange(via_port, request.request, request.response_type)
        direct = direct_port(kafka_cluster, node_id)
        kafka, _ = exchange(direct, request.request, request.response_type)
        got, upstream = ranges(via), ranges(kafka)
        where = f"ApiVersions v{version} on port {via_port} (node {node_id})"
        # KIP-714's APIs on every listener, with the collector's versions.
        for telemetry_key in TELEMETRY:
            assert got.get(telemetry_key) == SUPPORTED_VERSIONS[telemetry_key], where
        for api_key, (low, high) in got.items():
            info = API_TABLE[api_key]  # KeyError: a key Kafka 4.4.0 does not have
            assert info.min_version is not None and info.max_version is not None
            assert info.min_version <= low <= high <= info.max_version, (where, api_key)
            if api_key in DECODED_VERSIONS and api_key not in local:
                decoded = DECODED_VERSIONS[api_key]
                assert decoded[0] <= low and high <= decoded[1], (where, api_key)
        # Every upstream range capped; only the gateway's own APIs are set or added.
        for api_key in set(got) | set(upstream):
            if api_key in local:
                assert got[api_key] == local[api_key], (where, api_key)
            else:
                capped = (
                    capped_range(api_key, *upstream[api_key])
                    if api_key in upstream
                    else None
                )
                assert got.get(api_key) == capped, (where, api_key)
        # The rest of the answer is the cluster's (the finalized-features epoch is the
        # metadata log's offset at the answer: it moves on between the two).
        fresh: dict[str, Any] = {"api_keys": ()}
        if version >= 3:
            assert (
                via.finalized_features_epoch >= 0
                and kafka.finalized_features_epoch >= 0
            )
            fresh["finalized_features_epoch"] = via.finalized_features_epoch
        assert dataclasses.replace(via, **fresh) == dataclasses.replace(kafka, **fresh)
        assert got[ApiKeys.API_VERSIONS] == API_VERSIONS_RANGE


def raw_exchange(port: int, payload: bytes) -> bytes:
    """Sends one request frame (``payload`` without its size prefix); returns the answer's
    bytes after its size prefix."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        answer = b""
        while len(answer) < 4 or len(answer) < 4 + struct.unpack(">i", answer[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed mid-answer")
            answer += chunk
    return answer[4:]


def api_versions_request(version: int, correlation_id: int) -> bytes:
    client = b"live-wire"
    header = struct.pack(
        ">hhih", ApiKeys.API_VERSIONS, version, correlation_id, len(client)
    )
    # header v2's tagged fields; the body a v3+ client writes (compact strings, no tags)
    return header + client + b"\x00" + b"\x08ktc-live\x041.0\x00"


def test_api_versions_newer_than_the_gateway_speaks_gets_kafkas_answer(
    gateway: RunningGateway, kafka_cluster: KafkaCluster
) -> None:
    """Kafka answers a version it does not speak with a v0 UNSUPPORTED_VERSION answer that
    names its ApiVersions range; the gateway answers every version above its own range the
    same way, naming its range, without asking the cluster."""
    kafka = raw_exchange(direct_port(kafka_cluster, 1), api_versions_request(127, 11))
    error, count, api_key, low, high = struct.unpack_from(">hihhh", kafka, 4)
    assert (error, count, api_key, len(kafka)) == (35, 1, ApiKeys.API_VERSIONS, 16)
    table = API_TABLE[ApiKeys.API_VERSIONS]
    assert (low, high) == (table.min_version, table.max_version)
    expected = kafka[:12] + struct.pack(">hh", *API_VERSIONS_RANGE)
    # Kafka 4.4.0's own newest version included: the gateway does not speak it.
    assert table.max_version is not None and table.max_version > API_VERSIONS_RANGE[1]
    for version in range(API_VERSIONS_RANGE[1] + 1, table.max_version + 2):
        assert raw_exchange(gateway.port, api_versions_request(version, 11)) == expected
    assert raw_exchange(gateway.port, api_versions_request(127, 11)) == expected
