"""Broker addresses in responses: find them, report them, rewrite them by node id.

Every response that tells a client where a broker is must name a gateway listener instead,
or the client connects around the gateway (the most reported proxy bug: a client that
reaches a broker's advertised address directly bypasses the gateway's quotas and its
telemetry). The responses, per Kafka 4.4.0's message specs
(``clients/src/main/resources/common/message/*Response.json``):

===================  ===============================================  ========  ===========
API (key)            where                                            versions  decodable
===================  ===============================================  ========  ===========
Metadata (3)         Brokers[].{NodeId, Host, Port}                   all       0-13
FindCoordinator (10) top-level {NodeId, Host, Port}                   0-3       0-6
                     Coordinators[].{NodeId, Host, Port}              4+
DescribeCluster (60) Brokers[].{BrokerId, Host, Port}                 all       0-2
Produce (0)          NodeEndpoints[] (top-level tagged field, tag 0)  10+       3-13
Fetch (1)            NodeEndpoints[] (top-level tagged field, tag 0)  16+       4-18
ShareFetch (78)      NodeEndpoints[]                                  all       1-2
ShareAcknowledge     NodeEndpoints[]                                  all       1-2
(79)
DescribeQuorum (55)  Nodes[].Listeners[].{Host, Port (uint16)}        2+        0-2
===================  ===============================================  ========  ===========

How: a per-API walker steps over the body's bytes (``wire.py``) and notes each address site:
the node id and where its Host and Port are (they are adjacent in every one of these
structs). A rewrite splices new Host/Port bytes into a copy of the body; every other byte,
unknown tagged fields included, stays exactly as the upstream sent it. A Host/Port inside a
tagged field (Produce's and Fetch's NodeEndpoints) also gets that field's size rewritten.
Nothing is re-encoded, and when every site already holds its target address nothing is
copied either (``rewrite`` returns None).

Decisions:

* A negative node id is "no node" (FindCoordinator's -1 when the coordinator is not
  available, with host "" and port -1): left as it is and not reported.
* DescribeCluster with EndpointType 2 lists KRaft controllers (KIP-919). A broker answers
  that request with UNSUPPORTED_ENDPOINT_TYPE and no entries, so through a gateway that fronts
  brokers the list is empty; if an upstream did list controllers, they are left as they are
  and not reported: a controller is not a broker, and a broker listener of the gateway for
  its node id would be the wrong place to send a client.
* DescribeQuorum's Nodes[].Listeners[] are controller endpoints too. They are rewritten by
  node id (no upstream address reaches a client) but not reported as brokers.
* The walk covers the whole body wherever it walks, and bytes left after the body are
  malformed (``MalformedResponseError``: the gateway closes the pair). Produce before v10 and
  Fetch before v16 carry no address and are not walked at all.
* The walk checks structure (lengths and counts within the body, the body ends where the
  schema does), not values (a null where the schema has no nullable version passes).

Cost, measured (tests/gateway/test_wire_perf.py, interpreted CPython 3.11): see
docs/protocol.md, "What the gateway decodes".
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from collector.gateway.wire import (
    WALK_ERRORS,
    MalformedResponseError,
    array_length,
    check_end,
    malformed,
    read_string,
    skip_bytes,
    skip_int32_array,
    skip_string,
    tagged_fields,
)
from proto.api_keys import ApiKeys, api_name
from proto.errors import UnsupportedVersionError
from proto.primitives import (
    INT32,
    UINT16,
    BytesLike,
    read_uvarint,
    skip_tagged_fields,
    write_uvarint,
)

__all__ = [
    "ADDRESS_VERSIONS",
    "SCANNERS",
    "AddressFor",
    "AddressScan",
    "Endpoint",
    "MalformedResponseError",
    "revealed_nodes",
    "rewrite_addresses",
    "scan_addresses",
]

AddressFor = Callable[[int], tuple[str, int]]
"""node id -> the (host, port) a client must use for that node (the gateway's listener)."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One address site in a response: the node, and the address the upstream gave."""

    node_id: int
    host: str
    port: int
    broker: bool
    """False for controller endpoints (DescribeQuorum listeners, DescribeCluster type 2)."""


@dataclass(frozen=True, slots=True)
class _Site:
    endpoint: Endpoint
    start: int  # the Host's length prefix
    end: int  # after the Port
    compact: bool  # compact (flexible) string encoding of the Host
    port: struct.Struct  # INT32, or UINT16 for DescribeQuorum listeners


@dataclass(slots=True, eq=False)
class AddressScan:
    """What a walk over one response body found: its address sites, in wire order."""

    body: BytesLike
    sites: list[_Site]
    # Set when the sites sit inside a tagged field (Produce/Fetch NodeEndpoints): (offset of
    # the field's size varint, value start, value end).
    tagged: tuple[int, int, int] | None = None
    # Offset of ThrottleTimeMs where the walk passed it (Produce), else None.
    throttle_at: int | None = None

    @property
    def empty(self) -> bool:
        """The walk found no address (a Produce or Fetch response without NodeEndpoints)."""
        return not self.sites

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        return tuple(site.endpoint for site in self.sites)

    def nodes(self) -> dict[int, tuple[str, int]]:
        """Every broker the response revealed: node id -> upstream (host, port)."""
        return {
            s.endpoint.node_id: (s.endpoint.host, s.endpoint.port)
            for s in self.sites
            if s.endpoint.broker
        }

    def rewrite(self, address_for: AddressFor) -> bytes | None:
        """The body with every site's address replaced by ``address_for(node_id)``; None when
        every site already holds its address (nothing to change, nothing copied)."""
        if not self.sites:
            return None
        body = memoryview(self.body)  # slices below are views: only the join copies
        if self.tagged is None:
            return _splice(body, self.sites, address_for, 0, len(body))
        size_at, start, end = self.tagged
        value = _splice(body, self.sites, address_for, start, end)
        if value is None:
            return None
        size = bytearray()
        write_uvarint(size, len(value))
        return b"".join((body[:size_at], size, value, body[end:]))


def _splice(
    body: BytesLike, sites: list[_Site], address_for: AddressFor, start: int, end: int
) -> bytes | None:
    pieces: list[BytesLike] = []
    last = start
    for site in sites:
        host, port = address_for(site.endpoint.node_id)
        if host == site.endpoint.host and port == site.endpoint.port:
            continue
        encoded = host.encode()
        pieces.append(body[last : site.start])
        prefix = bytearray()
        if site.compact:
            write_uvarint(prefix, len(encoded) + 1)
        else:
            if len(encoded) > 0x7FFF:
                raise ValueError(f"host of {len(encoded)} bytes")
            prefix += struct.pack(">h", len(encoded))
        pieces.append(bytes(prefix) + encoded + site.port.pack(port))
        last = site.end
    if not pieces:
        return None
    pieces.append(body[last:end])
    return b"".join(pieces)


def _site(
    buf: BytesLike,
    pos: int,
    node_id: int,
    flexible: bool,
    broker: bool,
    port: struct.Struct,
) -> tuple[_Site, int]:
    """The Host (at ``pos``) and Port right after it."""
    host, after_host = read_string(buf, pos, flexible)
    if host is None:
        raise MalformedResponseError(f"Null host for node {node_id} at offset {pos}")
    (port_value,) = port.unpack_from(buf, after_host)
    end = after_host + port.size
    return _Site(
        Endpoint(node_id, host, port_value, broker), pos, end, flexible, port
    ), end


# ---- walkers, one per API: (body, version) -> AddressScan -----------------------------------


def _metadata(buf: BytesLike, v: int) -> AddressScan:
    flex = v >= 9
    pos = 4 if v >= 3 else 0  # ThrottleTimeMs
    sites: list[_Site] = []
    pos = _brokers(buf, pos, sites, flex, v >= 1)
    # The rest is walked only to check that the body ends where the schema says.
    if v >= 2:
        pos = skip_string(buf, pos, flex)  # ClusterId
    if v >= 1:
        pos += 4  # ControllerId
    count, pos = array_length(buf, pos, flex)
    fixed = (
        14 if v >= 7 else 10
    )  # ErrorCode, PartitionIndex, LeaderId, LeaderEpoch (v7+)
    arrays = 3 if v >= 5 else 2  # ReplicaNodes, IsrNodes, OfflineReplicas (v5+)
    for _ in range(count):
        pos = skip_string(buf, pos + 2, flex)  # ErrorCode, Name
        if v >= 10:
            pos += 16  # TopicId
        if v >= 1:
            pos += 1  # IsInternal
        partitions, pos = array_length(buf, pos, flex)
        if flex:
            pos = _skip_flexible_partitions(buf, pos, partitions, fixed, arrays)
        else:
            for _ in range(partitions):
                pos += fixed
                for _ in range(arrays):
                    pos = skip_int32_array(buf, pos, False)
        if v >= 8:
            pos += 4  # TopicAuthorizedOperations
        if flex:
            pos = skip_tagged_fields(buf, pos)
    if 8 <= v <= 10:
        pos += 4  # ClusterAuthorizedOperations
    if v >= 13:
        pos += 2  # ErrorCode
    if flex:
        pos = skip_tagged_fields(buf, pos)
    check_end(buf, pos, "MetadataResponse")
    return AddressScan(buf, sites)


def _skip_flexible_partitions(
    buf: BytesLike, pos: int, partitions: int, fixed: int, arrays: int
) -> int:
    """Metadata v9+ partitions, the hot part of a large Metadata response (thousands of
    partitions): one-byte compact lengths and empty tag sections are read inline."""
    for _ in range(partitions):
        pos += fixed
        for _ in range(arrays):
            length = buf[pos]
            if length < 0x80:  # fewer than 127 replicas: the one-byte count
                pos += 1 + 4 * (length - 1) if length else 1
            else:
                pos = skip_int32_array(buf, pos, True)
        pos = pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)
    if pos > len(buf):
        raise MalformedResponseError(
            f"MetadataResponse: partitions run past the end ({pos})"
        )
    return pos


def _find_coordinator(buf: BytesLike, v: int) -> AddressScan:
    flex = v >= 3
    pos = 4 if v >= 1 else 0  # ThrottleTimeMs
    sites = []
    if v <= 3:
        pos += 2  # ErrorCode
        if v >= 1:
            pos = skip_string(buf, pos, flex)  # ErrorMessage
        (node_id,) = INT32.unpack_from(buf, pos)
        site, pos = _site(buf, pos + 4, node_id, flex, True, INT32)
        if node_id >= 0:
            sites.append(site)
    else:
        count, pos = array_length(buf, pos, flex)
        for _ in range(count):
            pos = skip_string(buf, pos, flex)  # Key
            (node_id,) = INT32.unpack_from(buf, pos)
            site, pos = _site(buf, pos + 4, node_id, flex, True, INT32)
            if node_id >= 0:
                sites.append(site)
            pos = skip_string(buf, pos + 2, flex)  # ErrorCode, ErrorMessage
            pos = skip_tagged_fields(buf, pos)
    if flex:
        pos = skip_tagged_fields(buf, pos)
    check_end(buf, pos, "FindCoordinatorResponse")
    return AddressScan(buf, sites)


_BROKERS_ENDPOINT_TYPE = 1


def _describe_cluster(buf: BytesLike, v: int) -> AddressScan:
    pos = skip_string(buf, 6, True)  # ThrottleTimeMs, ErrorCode, ErrorMessage
    endpoint_type = _BROKERS_ENDPOINT_TYPE
    if v >= 1:
        endpoint_type = buf[pos]
        pos += 1
    pos = skip_string(buf, pos, True) + 4  # ClusterId, ControllerId
    sites = []
    count, pos = array_length(buf, pos, True)
    for _ in range(count):
        (node_id,) = INT32.unpack_from(buf, pos)
        site, pos = _site(buf, pos + 4, node_id, True, True, INT32)
        if node_id >= 0 and endpoint_type == _BROKERS_ENDPOINT_TYPE:
            sites.append(site)
        pos = skip_string(buf, pos, True)  # Rack
        if v >= 2:
            pos += 1  # IsFenced
        pos = skip_tagged_fields(buf, pos)
    pos = skip_tagged_fields(buf, pos + 4)  # ClusterAuthorizedOperations
    check_end(buf, pos, "DescribeClusterResponse")
    return AddressScan(buf, sites)


def _brokers(
    buf: BytesLike, pos: int, sites: list[_Site], flex: bool, rack: bool
) -> int:
    """Metadata's Brokers[] or NodeEndpoints[]: NodeId, Host, Port, Rack (when ``rack``);
    the sites of the nodes (not of a negative id) go to ``sites``."""
    count, pos = array_length(buf, pos, flex)
    for _ in range(count):
        (node_id,) = INT32.unpack_from(buf, pos)
        site, pos = _site(buf, pos + 4, node_id, flex, True, INT32)
        if node_id >= 0:
            sites.append(site)
        if rack:
            pos = skip_string(buf, pos, flex)  # Rack
        if flex:
            pos = skip_tagged_fields(buf, pos)
    return pos


def _node_endpoints(buf: BytesLike, pos: int, sites: list[_Site]) -> int:
    """NodeEndpoints[] (flexible in every version that has it): NodeId, Host, Port, Rack."""
    return _brokers(buf, pos, sites, True, True)


def _top_level_tags(buf: BytesLike, pos: int, what: str) -> AddressScan:
    """The top-level tagged section of Produce v10+ / Fetch v16+: tag 0 is NodeEndpoints."""
    if buf[pos] == 0:  # the common case: no tagged field at all
        check_end(buf, pos + 1, what)
        return AddressScan(buf, [])
    fields, end = tagged_fields(buf, pos)
    check_end(buf, end, what)
    for tag, size_at, start, value_end in fields:
        if tag == 0:
            sites: list[_Site] = []
            # The value is walked inside its own bounds: it must use exactly its size.
            if _node_endpoints(memoryview(buf)[:value_end], start, sites) != value_end:
                raise MalformedResponseError(
                    f"{what}: NodeEndpoints shorter than its field"
                )
            return AddressScan(buf, sites, (size_at, start, value_end))
    return AddressScan(buf, [])


def walk_produce_responses(buf: BytesLike, v: int) -> tuple[int, int]:
    """Walks Responses[]; returns (offset of ThrottleTimeMs, position after it)."""
    flex = v >= 9
    count, pos = array_length(buf, 0, flex)
    for _ in range(count):
        pos = pos + 16 if v >= 13 else skip_string(buf, pos, flex)  # TopicId / Name
        partitions, pos = array_length(buf, pos, flex)
        for _ in range(partitions):
            # Index, ErrorCode, BaseOffset, LogAppendTimeMs (v2+), LogStartOffset (v5+)
            pos += 30 if v >= 5 else 22
            if v >= 8:
                errors, pos = array_length(buf, pos, flex)  # RecordErrors
                for _ in range(errors):
                    pos = skip_string(buf, pos + 4, flex)  # BatchIndex, message
                    if flex:
                        pos = skip_tagged_fields(buf, pos)
                pos = skip_string(buf, pos, flex)  # ErrorMessage
            if flex:
                pos = skip_tagged_fields(
                    buf, pos
                )  # CurrentLeader (tag 0) and unknown tags
        if flex:
            pos = skip_tagged_fields(buf, pos)
    if pos + 4 > len(buf):
        raise MalformedResponseError("ProduceResponse: truncated before ThrottleTimeMs")
    return pos, pos + 4


def _produce(buf: BytesLike, v: int) -> AddressScan:
    throttle_at, pos = walk_produce_responses(buf, v)
    scan = _top_level_tags(buf, pos, "ProduceResponse")
    scan.throttle_at = throttle_at
    return scan


# Fetch: PartitionIndex, ErrorCode, HighWatermark, LastStableOffset, LogStartOffset
_FETCH_PARTITION_FIXED = 30


def _fetch(buf: BytesLike, v: int) -> AddressScan:
    """Fetch v16+ (flexible, topic ids): walk to the top-level tagged section. The records are
    skipped by their length, never looked into: a 1 MiB response costs what its partition
    count costs."""
    count, pos = read_uvarint(
        buf, 10
    )  # ThrottleTimeMs, ErrorCode, SessionId; Responses
    count -= 1
    if count > len(buf) - pos:
        raise MalformedResponseError(
            f"FetchResponse: {count} topics in {len(buf)} bytes"
        )
    for _ in range(count):
        partitions, pos = read_uvarint(buf, pos + 16)  # TopicId; Partitions
        for _ in range(partitions - 1):
            pos += _FETCH_PARTITION_FIXED
            aborted, pos = read_uvarint(buf, pos)  # AbortedTransactions, nullable
            for _ in range(aborted - 1):
                pos += 16  # ProducerId, FirstOffset
                pos = pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)
            size, pos = read_uvarint(buf, pos + 4)  # PreferredReadReplica; Records
            if size > 1:
                pos += size - 1
            pos = pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)
        pos = pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)
    return _top_level_tags(buf, pos, "FetchResponse")


def _share(buf: BytesLike, v: int, fetch: bool) -> AddressScan:
    """ShareFetch v1-2 / ShareAcknowledge v1-2 (flexible): NodeEndpoints after Responses."""
    pos = skip_string(buf, 6, True)  # ThrottleTimeMs, ErrorCode, ErrorMessage
    if (fetch and v >= 1) or (not fetch and v >= 2):
        pos += 4  # AcquisitionLockTimeoutMs
    count, pos = array_length(buf, pos, True)
    for _ in range(count):
        partitions, pos = array_length(buf, pos + 16, True)  # TopicId
        for _ in range(partitions):
            pos = skip_string(
                buf, pos + 6, True
            )  # PartitionIndex, ErrorCode, ErrorMessage
            if fetch:
                pos = skip_string(buf, pos + 2, True)  # AcknowledgeErrorCode, message
            pos = skip_tagged_fields(
                buf, pos + 8
            )  # CurrentLeader {LeaderId, LeaderEpoch}
            if fetch:
                pos = skip_bytes(buf, pos, True)  # Records
                acquired, pos = array_length(buf, pos, True)
                for _ in range(acquired):
                    pos = skip_tagged_fields(
                        buf, pos + 18
                    )  # FirstOffset, LastOffset, DeliveryCount
            pos = skip_tagged_fields(buf, pos)
        pos = skip_tagged_fields(buf, pos)
    sites: list[_Site] = []
    pos = skip_tagged_fields(buf, _node_endpoints(buf, pos, sites))
    check_end(buf, pos, "ShareFetchResponse" if fetch else "ShareAcknowledgeResponse")
    return AddressScan(buf, sites)


def _describe_quorum(buf: BytesLike, v: int) -> AddressScan:
    pos = 2  # ErrorCode
    if v >= 2:
        pos = skip_string(buf, pos, True)  # ErrorMessage
    # ReplicaState: ReplicaId, ReplicaDirectoryId (v2+), LogEndOffset, two timestamps (v1+)
    replica = 4 + (16 if v >= 2 else 0) + 8 + (16 if v >= 1 else 0)
    topics, pos = array_length(buf, pos, True)
    for _ in range(topics):
        partitions, pos = array_length(
            buf, skip_string(buf, pos, True), True
        )  # TopicName
        for _ in range(partitions):
            pos += 6  # PartitionIndex, ErrorCode
            if v >= 2:
                pos = skip_string(buf, pos, True)  # ErrorMessage
            pos += 16  # LeaderId, LeaderEpoch, HighWatermark
            for _ in range(2):  # CurrentVoters, Observers
                replicas, pos = array_length(buf, pos, True)
                for _ in range(replicas):
                    pos = skip_tagged_fields(buf, pos + replica)
            pos = skip_tagged_fields(buf, pos)
        pos = skip_tagged_fields(buf, pos)
    sites = []
    if v >= 2:
        nodes, pos = array_length(buf, pos, True)
        for _ in range(nodes):
            (node_id,) = INT32.unpack_from(buf, pos)
            listeners, pos = array_length(buf, pos + 4, True)
            for _ in range(listeners):
                pos = skip_string(buf, pos, True)  # Name
                site, pos = _site(buf, pos, node_id, True, False, UINT16)
                if node_id >= 0:
                    sites.append(site)
                pos = skip_tagged_fields(buf, pos)
            pos = skip_tagged_fields(buf, pos)
    pos = skip_tagged_fields(buf, pos)
    check_end(buf, pos, "DescribeQuorumResponse")
    return AddressScan(buf, sites)


Scanner = Callable[[BytesLike, int], AddressScan]

# api_key -> (versions this module can walk, first version that carries an address, walker)
_TABLE: dict[int, tuple[tuple[int, int], int, Scanner]] = {
    ApiKeys.PRODUCE: ((3, 13), 10, _produce),
    ApiKeys.FETCH: ((4, 18), 16, _fetch),
    ApiKeys.METADATA: ((0, 13), 0, _metadata),
    ApiKeys.FIND_COORDINATOR: ((0, 6), 0, _find_coordinator),
    ApiKeys.DESCRIBE_QUORUM: ((0, 2), 2, _describe_quorum),
    ApiKeys.DESCRIBE_CLUSTER: ((0, 2), 0, _describe_cluster),
    ApiKeys.SHARE_FETCH: ((1, 2), 1, lambda buf, v: _share(buf, v, True)),
    ApiKeys.SHARE_ACKNOWLEDGE: ((1, 2), 1, lambda buf, v: _share(buf, v, False)),
}

SCANNERS: dict[int, Scanner] = {api_key: entry[2] for api_key, entry in _TABLE.items()}
"""api_key -> walker, for every API whose responses can carry a broker address."""
ADDRESS_VERSIONS: dict[int, tuple[int, int]] = {
    k: entry[0] for k, entry in _TABLE.items()
}
"""api_key -> the response versions ``scan_addresses`` walks (Kafka 4.4.0's valid range)."""


def scan_addresses(
    api_key: int, api_version: int, body: BytesLike
) -> AddressScan | None:
    """Walks a response body (the bytes after the response header) and notes its addresses;
    None when this API at this version carries none (nothing walked: Produce < 10, Fetch < 16,
    DescribeQuorum < 2, and every API not in SCANNERS).

    Raises MalformedResponseError (close the pair) and UnsupportedVersionError for a version
    outside ADDRESS_VERSIONS (the gateway's ApiVersions never offers one)."""
    entry = _TABLE.get(api_key)
    if entry is None:
        return None
    (low, high), first, scanner = entry
    if not low <= api_version <= high:
        raise UnsupportedVersionError(f"No address walker for {api_key} v{api_version}")
    if api_version < first:
        return None
    try:
        return scanner(body, api_version)
    except WALK_ERRORS as exc:
        raise malformed(f"{api_name(api_key)} v{api_version} response", exc) from None


def rewrite_addresses(
    api_key: int, api_version: int, body: BytesLike, address_for: AddressFor
) -> bytes | None:
    """The body with every broker address replaced by ``address_for(node_id)``, or None when
    nothing needs to change (no address in it, or all already right): forward it as it is."""
    scan = scan_addresses(api_key, api_version, body)
    return None if scan is None else scan.rewrite(address_for)


def revealed_nodes(
    api_key: int, api_version: int, body: BytesLike
) -> dict[int, tuple[str, int]]:
    """Every broker the response names: node id -> the upstream's (host, port)."""
    scan = scan_addresses(api_key, api_version, body)
    return {} if scan is None else scan.nodes()
