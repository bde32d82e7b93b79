"""What the gateway reads in client requests: headers, Produce acks, partition mutations.

* ``parse_request_header``: every request's header, for all of Kafka 4.4.0's API keys
  (``proto.api_table``), not only the ones ``proto`` has message modules for: the header is
  v2 (a tagged-field section after the client id) from the API's first flexible version.
* ``produce_acks``: acks=0 means the upstream sends no response; the gateway must not wait
  for one (and must not count a correlation id as in flight).
* Partition mutations, counted as Kafka's controller charges ``controller_mutation_rate``
  (KIP-599; ``ReplicationControlManager.createTopic``, ``createPartitions`` and
  ``deleteTopic`` call ``ControllerRequestContext.applyPartitionChangeQuota`` once per topic,
  after the topic has passed every other check):

  =================  ===============================================  =================
  request            charged per topic                                strict from (v)
  =================  ===============================================  =================
  CreateTopics       len(Assignments) if any, else NumPartitions,     6
                     else (-1) the broker's num.partitions
  CreatePartitions   Count - the topic's current partition count      3
  DeleteTopics       the topic's current partition count              5
  =================  ===============================================  =================

  (``ControllerApis``: ``newQuotaFor(request, strictSinceVersion = 6 / 3 / 5)``; older
  versions get the permissive quota, which admits the request and throttles after.) Topics
  Kafka rejects before charging are not counted: a name that appears twice in the request
  (INVALID_REQUEST), NumPartitions 0 or below -1 without assignments (INVALID_PARTITIONS),
  Assignments with NumPartitions != -1 (INVALID_REQUEST), a Count that is no increase
  (INVALID_PARTITIONS), a topic the metadata does not have (UNKNOWN_TOPIC_OR_PARTITION).

  CreatePartitions and DeleteTopics need each topic's current partition count, which the
  request does not carry: the caller passes ``partition_count(name or topic id)``, from
  what the gateway has seen in Metadata responses (``metadata_partition_counts``) or from
  its own Metadata request to the upstream before it decides. CreateTopics needs the
  broker's ``num.partitions`` for topics that leave it to the broker (-1; Kafka's default 1).

* ``quota_exceeded_response``: the strict-mode answer without forwarding: the request's
  own ``getErrorResponse(throttleTimeMs, ThrottlingQuotaExceededException)``, every topic with
  THROTTLING_QUOTA_EXCEEDED (89).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from types import ModuleType
from typing import Any

from collector.gateway.wire import WALK_ERRORS, MalformedResponseError, skip_string
from proto.api_keys import ApiKeys
from proto.api_table import API_TABLE
from proto.connection import RequestFrame, encode_response
from proto.errors import Errors, FramingError, KafkaError, UnknownApiKey
from proto.messages import create_partitions_request as cp_req
from proto.messages import create_partitions_response as cp_resp
from proto.messages import create_topics_request as ct_req
from proto.messages import create_topics_response as ct_resp
from proto.messages import delete_topics_request as dt_req
from proto.messages import delete_topics_response as dt_resp
from proto.messages import metadata_response
from proto.primitives import INT16, BytesLike, MalformedError, skip_tagged_fields

__all__ = [
    "STRICT_MUTATION_QUOTA_FROM",
    "create_partitions_mutations",
    "create_topics_mutations",
    "decode_mutation_request",
    "delete_topics_mutations",
    "metadata_partition_counts",
    "partition_counts",
    "parse_request_header",
    "produce_acks",
    "quota_exceeded_response",
]

# ControllerApis: quotas.controllerMutation.newQuotaFor(request, strictSinceVersion = N)
STRICT_MUTATION_QUOTA_FROM: dict[int, int] = {
    ApiKeys.CREATE_TOPICS: 6,
    ApiKeys.CREATE_PARTITIONS: 3,
    ApiKeys.DELETE_TOPICS: 5,
}

_HEADER_FIXED = 10  # api key, api version, correlation id, client id length


def parse_request_header(raw: bytes) -> RequestFrame:
    """The header of one request frame (``raw``: header + body, no size prefix), for any API
    key Kafka 4.4.0 has. ``frame.body`` is the body; ``frame.header_size`` is where it starts.

    Raises FramingError for a header that cannot be parsed and UnknownApiKey for a key Kafka
    does not have (Kafka closes the connection for both; so does the gateway). A version
    outside the API's valid range is parsed by the same rule (flexible from the first
    flexible version) and left to the caller to refuse.
    """
    if len(raw) < _HEADER_FIXED:
        raise FramingError(f"Malformed request header: {len(raw)} bytes")
    api_key = int.from_bytes(raw[0:2], "big", signed=True)
    api_version = int.from_bytes(raw[2:4], "big", signed=True)
    correlation_id = int.from_bytes(raw[4:8], "big", signed=True)
    info = API_TABLE.get(api_key)
    if info is None:
        raise UnknownApiKey(api_key)
    (length,) = INT16.unpack_from(raw, 8)
    pos = _HEADER_FIXED
    if length >= 0:
        if pos + length > len(raw):
            raise FramingError(f"Malformed request header: client id of {length} bytes")
        client_id = str(raw[pos : pos + length], "utf-8", "replace")
        pos += length
    elif length == -1:
        client_id = ""  # RequestHeader.parse: a null client id is ""
    else:
        raise FramingError(f"Malformed request header: client id length {length}")
    if info.is_flexible(api_version):
        try:
            pos = skip_tagged_fields(raw, pos)
        except MalformedError as exc:
            raise FramingError(f"Malformed request header: {exc}") from None
    return RequestFrame(api_key, api_version, correlation_id, client_id, pos, raw)


def produce_acks(version: int, body: BytesLike) -> int:
    """A Produce request's acks (v3+: after TransactionalId; compact from v9).
    Raises MalformedError when the body is too short to hold it."""
    try:
        pos = skip_string(body, 0, version >= 9)  # TransactionalId, nullable
        return int(INT16.unpack_from(body, pos)[0])
    except KafkaError:
        raise
    except (MalformedResponseError, *WALK_ERRORS) as exc:
        raise MalformedError(f"Malformed Produce v{version} request: {exc}") from None


# ---- partition mutations -------------------------------------------------------------------

_MUTATION_MODULES: dict[int, tuple[ModuleType, ModuleType]] = {
    ApiKeys.CREATE_TOPICS: (ct_req, ct_resp),
    ApiKeys.CREATE_PARTITIONS: (cp_req, cp_resp),
    ApiKeys.DELETE_TOPICS: (dt_req, dt_resp),
}


def decode_mutation_request(frame: RequestFrame) -> Any:
    """The CreateTopics / CreatePartitions / DeleteTopics request of ``frame``, decoded."""
    modules = _MUTATION_MODULES.get(frame.api_key)
    if modules is None:
        raise ValueError(f"API key {frame.api_key} is not a partition mutation")
    reader = modules[0].READERS.get(frame.api_version)
    if reader is None:
        raise KafkaError(f"No schema for API {frame.api_key} v{frame.api_version}")
    try:
        message, _ = reader(memoryview(frame.raw), frame.header_size)
    except KafkaError:
        raise
    except WALK_ERRORS as exc:
        raise MalformedError(f"Malformed request: {exc}") from None
    return message


def _duplicates(names: list[Any]) -> set[Any]:
    """Names given more than once: Kafka answers each with INVALID_REQUEST, uncharged."""
    return {name for name, count in Counter(names).items() if count > 1}


def create_topics_mutations(
    request: ct_req.CreateTopicsRequest, default_num_partitions: int = 1
) -> int:
    """Partitions a CreateTopics request charges (ReplicationControlManager.createTopic; a
    validateOnly request is charged too: the charge comes before the records are dropped)."""
    duplicates = _duplicates([topic.name for topic in request.topics])
    total = 0
    for topic in request.topics:
        if topic.name in duplicates:
            continue
        if topic.assignments:
            # Manual assignments: NumPartitions and ReplicationFactor must be -1, and the
            # partition indexes 0..n-1, each once (else INVALID_REQUEST or
            # INVALID_REPLICA_ASSIGNMENT, uncharged).
            indexes = [a.partition_index for a in topic.assignments]
            if (
                topic.num_partitions == -1
                and topic.replication_factor == -1
                and sorted(indexes) == list(range(len(indexes)))
            ):
                total += len(indexes)
        elif topic.num_partitions == -1:
            total += default_num_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def create_partitions_mutations(
    request: cp_req.CreatePartitionsRequest,
    partition_count: Callable[[str], int | None],
) -> int:
    """Partitions a CreatePartitions request adds (ReplicationControlManager.createPartitions:
    Count minus the current count, for a topic that exists and grows)."""
    duplicates = _duplicates([topic.name for topic in request.topics])
    total = 0
    for topic in request.topics:
        current = None if topic.name in duplicates else partition_count(topic.name)
        if (
            current is not None
            and topic.count > current
            and (
                topic.assignments is None
                or len(topic.assignments) == topic.count - current
            )
        ):
            total += topic.count - current
    return total


def delete_topics_mutations(
    request: dt_req.DeleteTopicsRequest,
    partition_count: Callable[[str | uuid.UUID], int | None],
) -> int:
    """Partitions a DeleteTopics request deletes (ReplicationControlManager.deleteTopic: every
    partition of each topic that exists). v6 names topics by name or by id."""
    keys: list[str | uuid.UUID] = list(request.topic_names)
    for state in request.topics:
        keys.append(state.name if state.name is not None else state.topic_id)
    total = 0
    for key in set(keys):
        total += partition_count(key) or 0
    return total


def metadata_partition_counts(
    version: int, body: BytesLike
) -> dict[str | uuid.UUID, int]:
    """Topic name and topic id -> partition count, from a Metadata response body (for the
    counts CreatePartitions and DeleteTopics need). Topics with an error are left out."""
    message, _ = metadata_response.READERS[version](body, 0)
    return partition_counts(message)


def partition_counts(
    message: metadata_response.MetadataResponse,
) -> dict[str | uuid.UUID, int]:
    """Topic name and topic id -> partition count, from a decoded Metadata response."""
    counts: dict[str | uuid.UUID, int] = {}
    for topic in message.topics:
        if topic.error_code != Errors.NONE:
            continue
        if topic.name is not None:
            counts[topic.name] = len(topic.partitions)
        if topic.topic_id.int:
            counts[topic.topic_id] = len(topic.partitions)
    return counts


# ---- the strict-mode answer ------------------------------------------------------------------


def _error_response(api_key: int, request: Any, throttle_ms: int) -> Any:
    """Kafka's ``<Request>.getErrorResponse(throttleTimeMs, e)`` for the
    ThrottlingQuotaExceededException StrictControllerMutationQuota throws: every topic of the
    request with the error. The message is null: ``ApiError.fromThrowable`` drops a message
    that is the error's default one ("The throttling quota has been exceeded.")."""
    code, message = Errors.THROTTLING_QUOTA_EXCEEDED, None

    def every_topic(result: Callable[..., Any]) -> tuple[Any, ...]:
        return tuple(
            result(name=topic.name, error_code=code, error_message=message)
            for topic in request.topics
        )

    if api_key == ApiKeys.CREATE_TOPICS:
        return ct_resp.CreateTopicsResponse(
            throttle_time_ms=throttle_ms,
            topics=every_topic(ct_resp.CreatableTopicResult),
        )
    if api_key == ApiKeys.CREATE_PARTITIONS:
        return cp_resp.CreatePartitionsResponse(
            throttle_time_ms=throttle_ms,
            results=every_topic(cp_resp.CreatePartitionsTopicResult),
        )
    results = [
        dt_resp.DeletableTopicResult(name=name, error_code=code, error_message=message)
        for name in request.topic_names
    ]
    results.extend(
        dt_resp.DeletableTopicResult(
            name=state.name,
            topic_id=state.topic_id,
            error_code=code,
            error_message=message,
        )
        for state in request.topics
    )
    return dt_resp.DeleteTopicsResponse(
        throttle_time_ms=throttle_ms, responses=tuple(results)
    )


def quota_exceeded_response(frame: RequestFrame, throttle_ms: int) -> bytes:
    """The whole response frame (size prefix and header included) answering a CreateTopics,
    CreatePartitions or DeleteTopics request with THROTTLING_QUOTA_EXCEEDED for every topic
    and ``throttle_ms``, as Kafka does when the strict mutation quota is already exhausted."""
    request = decode_mutation_request(frame)
    response = _error_response(frame.api_key, request, throttle_ms)
    return encode_response(
        frame.api_key, frame.api_version, frame.correlation_id, response
    )
