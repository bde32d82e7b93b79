"""Request-side reads: headers of every API key, Produce acks, partition-mutation counts, and
the strict THROTTLING_QUOTA_EXCEEDED answer, against Kafka-serialized requests (golden/)."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.gateway.requests import (
    STRICT_MUTATION_QUOTA_FROM,
    create_partitions_mutations,
    create_topics_mutations,
    decode_mutation_request,
    delete_topics_mutations,
    metadata_partition_counts,
    parse_request_header,
    produce_acks,
    quota_exceeded_response,
)
from proto.api_keys import ApiKeys
from proto.api_table import API_TABLE, request_header_version
from proto.connection import ServerConnection
from proto.errors import FramingError, UnknownApiKey
from proto.messages import create_topics_request as ct
from proto.messages import metadata_response as md
from proto.primitives import MalformedError
from tests.gateway.golden import GoldenRequest, requests

TOPIC_ID = uuid.UUID("01234567-89ab-cdef-0fed-cba987654321")


def request_frame(
    api_key: int, version: int, body: bytes, client_id: str | None = "app"
) -> bytes:
    """raw = header + body, the header as Kafka's client writes it (v2 with tags if flexible)."""
    header = struct.pack(">hhi", api_key, version, 77)
    if client_id is None:
        header += b"\xff\xff"
    else:
        encoded = client_id.encode()
        header += struct.pack(">h", len(encoded)) + encoded
    if request_header_version(api_key, version) == 2:
        header += b"\x00"
    return header + body


@pytest.mark.parametrize("api_key", sorted(API_TABLE))
def test_header_of_every_api_key_and_version(api_key: int) -> None:
    info = API_TABLE[api_key]
    if info.min_version is None or info.max_version is None:
        return
    for version in range(info.min_version, info.max_version + 1):
        raw = request_frame(api_key, version, b"BODY")
        frame = parse_request_header(raw)
        assert (frame.api_key, frame.api_version, frame.correlation_id) == (
            api_key,
            version,
            77,
        )
        assert frame.client_id == "app" and bytes(frame.body) == b"BODY"


def test_header_with_tagged_fields_null_client_id_and_bad_input() -> None:
    raw = struct.pack(">hhih", ApiKeys.FETCH, 17, 5, -1) + b"\x01\x00\x02ab" + b"BODY"
    frame = parse_request_header(raw)
    assert frame.client_id == "" and bytes(frame.body) == b"BODY"
    with pytest.raises(UnknownApiKey):
        parse_request_header(struct.pack(">hhih", 1234, 0, 1, -1))
    for bad in (
        b"\x00\x01",
        struct.pack(">hhih", 1, 17, 1, 50),
        struct.pack(">hhih", 1, 4, 1, -2),
    ):
        with pytest.raises(FramingError):
            parse_request_header(bad)
    with pytest.raises(FramingError):  # tagged section runs past the end
        parse_request_header(
            struct.pack(">hhih", ApiKeys.FETCH, 17, 5, -1) + b"\x01\x00\x09"
        )


def test_header_matches_server_connection_where_proto_has_the_module() -> None:
    """proto's ServerConnection and this parser agree wherever proto knows the API."""
    for api_key in (
        ApiKeys.PRODUCE,
        ApiKeys.METADATA,
        ApiKeys.CREATE_TOPICS,
        ApiKeys.SASL_HANDSHAKE,
    ):
        info = API_TABLE[api_key]
        assert info.min_version is not None and info.max_version is not None
        for version in range(info.min_version, info.max_version + 1):
            raw = request_frame(api_key, version, b"xyz")
            conn = ServerConnection()
            conn.receive_data(struct.pack(">i", len(raw)) + raw)
            theirs = conn.next_request()
            assert theirs is not None
            ours = parse_request_header(raw)
            assert (ours.header_size, ours.client_id) == (
                theirs.header_size,
                theirs.client_id,
            )


PRODUCE = requests("produce")


@pytest.mark.parametrize(
    "g", PRODUCE, ids=[f"{g.id}-acks{g.fields[1]}" for g in PRODUCE]
)
def test_produce_acks(g: GoldenRequest) -> None:
    assert produce_acks(g.version, g.body) == int(g.fields[1])
    frame = parse_request_header(request_frame(g.api_key, g.version, g.body))
    assert produce_acks(g.version, frame.body) == int(g.fields[1])


def test_produce_acks_of_a_truncated_body() -> None:
    body = PRODUCE[0].body
    for size in range(9):  # TransactionalId "txn-1" (2 + 5) then acks (2)
        with pytest.raises(MalformedError):
            produce_acks(3, body[:size])


MUTATIONS = (
    requests("create_topics")
    + requests("create_partitions")
    + requests("delete_topics")
)


@pytest.mark.parametrize("g", MUTATIONS, ids=[g.id for g in MUTATIONS])
def test_quota_exceeded_response_is_kafkas(g: GoldenRequest) -> None:
    """Byte for byte what Kafka's getErrorResponse(1234, ThrottlingQuotaExceededException)
    serializes, in a frame with our header."""
    frame = parse_request_header(request_frame(g.api_key, g.version, g.body))
    response = quota_exceeded_response(frame, 1234)
    (size,) = struct.unpack_from(">i", response, 0)
    assert size == len(response) - 4
    assert struct.unpack_from(">i", response, 4)[0] == 77  # correlation id
    header = 9 if request_header_version(g.api_key, g.version) == 2 else 8
    assert response[header:] == bytes.fromhex(g.fields[1])


def _frame(g: GoldenRequest) -> object:
    return decode_mutation_request(
        parse_request_header(request_frame(g.api_key, g.version, g.body))
    )


@pytest.mark.parametrize("g", requests("create_topics"), ids=lambda g: g.id)
def test_create_topics_mutations(g: GoldenRequest) -> None:
    # "three": 3, "manual": 2 assignments, "zero": rejected, "default" (v4+): num.partitions
    request = _frame(g)
    default = 1 if g.version >= 4 else 0
    assert create_topics_mutations(request, default_num_partitions=1) == 5 + default  # type: ignore[arg-type]
    assert create_topics_mutations(request, default_num_partitions=6) == 5 + 6 * default  # type: ignore[arg-type]


@pytest.mark.parametrize("g", requests("create_partitions"), ids=lambda g: g.id)
def test_create_partitions_mutations(g: GoldenRequest) -> None:
    request = _frame(g)
    counts = {"grow": 3, "assigned": 2}
    # grow 3 -> 6: 3; assigned 2 -> 4 with 2 assignments: 2
    assert create_partitions_mutations(request, counts.get) == 5  # type: ignore[arg-type]
    # a topic the metadata does not know, or one that would not grow, is not charged
    assert create_partitions_mutations(request, {"grow": 6}.get) == 0  # type: ignore[arg-type]
    # assignments that do not match the increase: INVALID_REPLICA_ASSIGNMENT, uncharged
    assert create_partitions_mutations(request, {"assigned": 1}.get) == 0  # type: ignore[arg-type]


@pytest.mark.parametrize("g", requests("delete_topics"), ids=lambda g: g.id)
def test_delete_topics_mutations(g: GoldenRequest) -> None:
    request = _frame(g)
    counts: dict[str | uuid.UUID, int] = {"three": 3, "manual": 2, TOPIC_ID: 7}
    want = 10 if g.version >= 6 else 5  # v6: "three" by name, the other by id
    assert delete_topics_mutations(request, counts.get) == want  # type: ignore[arg-type]


def test_strict_versions() -> None:
    assert STRICT_MUTATION_QUOTA_FROM == {19: 6, 37: 3, 20: 5}


def test_duplicate_and_invalid_topics_are_not_charged() -> None:
    topic = ct.CreatableTopic
    request = ct.CreateTopicsRequest(
        topics=(
            topic(name="a", num_partitions=4, replication_factor=1),
            topic(name="a", num_partitions=4, replication_factor=1),
            topic(name="b", num_partitions=-2, replication_factor=1),
            topic(
                name="c",
                num_partitions=3,  # assignments with NumPartitions set: INVALID_REQUEST
                replication_factor=-1,
                assignments=(ct.CreatableReplicaAssignment(0, (1,)),),
            ),
            topic(
                name="d",
                num_partitions=-1,
                replication_factor=-1,  # indexes 0 and 2: not consecutive
                assignments=(
                    ct.CreatableReplicaAssignment(0, (1,)),
                    ct.CreatableReplicaAssignment(2, (1,)),
                ),
            ),
            topic(name="e", num_partitions=2, replication_factor=3),
        )
    )
    assert create_topics_mutations(request) == 2


def test_metadata_partition_counts() -> None:
    message = md.MetadataResponse(
        topics=(
            md.MetadataResponseTopic(
                name="a",
                topic_id=TOPIC_ID,
                partitions=(md.MetadataResponsePartition(),) * 3,
            ),
            md.MetadataResponseTopic(error_code=3, name="gone"),
        )
    )
    out = bytearray()
    md.WRITERS[12](message, out)
    assert metadata_partition_counts(12, bytes(out)) == {"a": 3, TOPIC_ID: 3}


@settings(max_examples=100, deadline=None)
@given(
    transactional_id=st.none() | st.text(max_size=40),
    acks=st.sampled_from([-1, 0, 1]),
    version=st.integers(3, 13),
)
def test_produce_acks_any_transactional_id(
    transactional_id: str | None, acks: int, version: int
) -> None:
    from proto.messages import produce_request as pr

    out = bytearray()
    pr.WRITERS[version](
        pr.ProduceRequest(transactional_id=transactional_id, acks=acks), out
    )
    assert produce_acks(version, bytes(out)) == acks
