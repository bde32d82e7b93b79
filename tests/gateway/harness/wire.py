"""One Kafka request/response exchange over a plain socket, encoded and decoded with kio (a
test dependency). For what librdkafka's admin API cannot ask (DescribeQuorum: which node is the
active KRaft controller) and for capturing a real broker's response bytes.

    response, raw = exchange(port, DescribeQuorumRequest(...), DescribeQuorumResponse)
"""

from __future__ import annotations

import io
import itertools
import socket
import struct
from typing import Any, TypeVar

from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32
from kio.static.protocol import Entity

R = TypeVar("R", bound=Entity)
_correlation = itertools.count(1)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def exchange(
    port: int,
    request: Any,
    response_type: type[R],
    *,
    host: str = "127.0.0.1",
    client_id: str = "ktc-harness",
    timeout: float = 10.0,
) -> tuple[R, bytes]:
    """Sends `request` (a kio request entity) and returns (decoded response, the response's
    bytes after the length prefix, header included)."""
    header_type = request.__header_schema__
    correlation_id = next(_correlation)
    fields: dict[str, Any] = {
        "request_api_key": i16(request.__api_key__),
        "request_api_version": i16(request.__version__),
        "correlation_id": i32(correlation_id),
    }
    if "client_id" in header_type.__dataclass_fields__:
        fields["client_id"] = client_id
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header_type(**fields))
    entity_writer(type(request))(buffer, request)
    payload = buffer.getvalue()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        raw = _recv_exactly(sock, size)
    header, offset = entity_reader(response_type.__header_schema__)(raw, 0)  # type: ignore[attr-defined]
    if header.correlation_id != correlation_id:
        raise ValueError(
            f"correlation id {header.correlation_id}, expected {correlation_id}"
        )
    response, _ = entity_reader(response_type)(raw, offset)
    return response, raw


def describe_quorum(port: int, host: str = "127.0.0.1") -> dict[str, Any]:
    """DescribeQuorum v0 for __cluster_metadata through a broker (which forwards it to the
    active controller): {"leader_id", "leader_epoch", "high_watermark", "voters",
    "observers"} (voters/observers as {replica_id: log_end_offset})."""
    from kio.schema.describe_quorum.v0 import request as rq
    from kio.schema.describe_quorum.v0.response import DescribeQuorumResponse
    from kio.schema.types import TopicName

    request = rq.DescribeQuorumRequest(
        topics=(
            rq.TopicData(
                topic_name=TopicName("__cluster_metadata"),
                partitions=(rq.PartitionData(partition_index=i32(0)),),
            ),
        )
    )
    response, _ = exchange(port, request, DescribeQuorumResponse, host=host)
    if response.error_code:
        raise RuntimeError(f"DescribeQuorum: {response.error_code!r}")
    partition = response.topics[0].partitions[0]
    if partition.error_code:
        raise RuntimeError(f"DescribeQuorum partition: {partition.error_code!r}")
    return {
        "leader_id": int(partition.leader_id),
        "leader_epoch": int(partition.leader_epoch),
        "high_watermark": int(partition.high_watermark),
        "voters": {
            int(v.replica_id): int(v.log_end_offset) for v in partition.current_voters
        },
        "observers": {
            int(v.replica_id): int(v.log_end_offset) for v in partition.observers
        },
    }
