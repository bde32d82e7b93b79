"""The ApiVersions answer a client gets through the gateway: the upstream's, capped.

A client picks, per API, the highest version both it and the broker list. Through a gateway
that version must also be one the gateway can handle, or the first new Kafka release breaks
the gateway (kafka-proxy #85, #97, #177: "Unsupported response schema version"). For each
API key the upstream lists (Kroxylicious' ``ApiVersionsServiceImpl`` does the same):

* a key the gateway does not know (not in Kafka 4.4.0's ``proto.api_table``) is dropped;
* min = max(upstream min, 4.4.0's min[, the gateway codec's min]),
  max = min(upstream max, 4.4.0's max[, the gateway codec's max]), the codec's range counting
  only for the APIs the gateway decodes (``DECODED_VERSIONS``); a key whose range becomes
  empty is dropped;
* then the APIs the gateway answers itself (``local``: GetTelemetrySubscriptions and
  PushTelemetry, which a KIP-714 client looks for on every broker) are set to the gateway's
  ranges, added where the upstream lacks them, in API key order.

Every other byte is the upstream's: ErrorCode, ThrottleTimeMs, SupportedFeatures,
FinalizedFeaturesEpoch, FinalizedFeatures, ZkMigrationReady, unknown tagged fields, and each
kept entry's own tagged fields. An upstream that answers with UNSUPPORTED_VERSION in the v0
layout (it does not know the requested version) is read as v0, as Kafka's client does, and
its entries are capped the same way (nothing is added: the client retries lower).

An ApiVersions request newer than the gateway speaks (``API_VERSIONS_RANGE``) is answered by
the gateway itself, without asking the upstream: ``unsupported_version_response``, Kafka's v0
UNSUPPORTED_VERSION answer listing only the ApiVersions range (KIP-511).
"""

from __future__ import annotations

from collections.abc import Mapping

from collector.gateway.addresses import ADDRESS_VERSIONS
from collector.gateway.wire import (
    WALK_ERRORS,
    MalformedResponseError,
    array_length,
    check_end,
    malformed,
)
from proto.api_keys import ApiKeys
from proto.api_table import API_TABLE
from proto.connection import SUPPORTED_VERSIONS, api_versions_unsupported_response
from proto.messages import REQUEST_MODULES, RESPONSE_MODULES
from proto.primitives import INT16, INT32, BytesLike, skip_tagged_fields, write_uvarint

__all__ = [
    "API_VERSIONS_RANGE",
    "DECODED_VERSIONS",
    "cap_api_versions",
    "capped_range",
    "unsupported_version_response",
]

API_VERSIONS_RANGE: tuple[int, int] = (0, 4)
"""The ApiVersions versions the gateway speaks: v5's ClusterId/NodeId checks (KIP-1242) are the
upstream's to make, and a gateway that keeps node ids has nothing to add to them."""


def _codec(api_key: int) -> tuple[int, int]:
    """Versions both the request and response modules of ``api_key`` read and write."""
    request, response = REQUEST_MODULES[api_key], RESPONSE_MODULES[api_key]
    low = max(request.VALID_VERSIONS[0], response.VALID_VERSIONS[0])
    high = min(request.VALID_VERSIONS[1], response.VALID_VERSIONS[1])
    return low, high


def _intersect(*ranges: tuple[int, int]) -> tuple[int, int]:
    return max(r[0] for r in ranges), min(r[1] for r in ranges)


# The APIs the gateway decodes, and the versions it can: the address-bearing responses
# (addresses.py), Produce requests (acks) and responses (throttle), SASL (the principal),
# the partition mutations (counted; answered when a strict quota is exhausted), and the
# config APIs whose CLIENT_METRICS resources the gateway answers itself.
DECODED_VERSIONS: dict[int, tuple[int, int]] = {
    **ADDRESS_VERSIONS,
    ApiKeys.PRODUCE: _intersect(
        ADDRESS_VERSIONS[ApiKeys.PRODUCE], _codec(ApiKeys.PRODUCE)
    ),
    ApiKeys.API_VERSIONS: API_VERSIONS_RANGE,
    ApiKeys.SASL_HANDSHAKE: _codec(ApiKeys.SASL_HANDSHAKE),
    ApiKeys.SASL_AUTHENTICATE: _codec(ApiKeys.SASL_AUTHENTICATE),
    ApiKeys.CREATE_TOPICS: _codec(ApiKeys.CREATE_TOPICS),
    ApiKeys.CREATE_PARTITIONS: _codec(ApiKeys.CREATE_PARTITIONS),
    ApiKeys.DELETE_TOPICS: _codec(ApiKeys.DELETE_TOPICS),
    ApiKeys.DESCRIBE_CONFIGS: _intersect(
        _codec(ApiKeys.DESCRIBE_CONFIGS), SUPPORTED_VERSIONS[ApiKeys.DESCRIBE_CONFIGS]
    ),
    ApiKeys.INCREMENTAL_ALTER_CONFIGS: _intersect(
        _codec(ApiKeys.INCREMENTAL_ALTER_CONFIGS),
        SUPPORTED_VERSIONS[ApiKeys.INCREMENTAL_ALTER_CONFIGS],
    ),
    ApiKeys.LIST_CONFIG_RESOURCES: _intersect(
        _codec(ApiKeys.LIST_CONFIG_RESOURCES),
        SUPPORTED_VERSIONS[ApiKeys.LIST_CONFIG_RESOURCES],
    ),
}


def capped_range(
    api_key: int, upstream_min: int, upstream_max: int
) -> tuple[int, int] | None:
    """The range the gateway advertises for an API the upstream lists, or None to drop it."""
    info = API_TABLE.get(api_key)
    if info is None or info.min_version is None or info.max_version is None:
        return None
    low, high = _intersect(
        (upstream_min, upstream_max), (info.min_version, info.max_version)
    )
    decoded = DECODED_VERSIONS.get(api_key)
    if decoded is not None:
        low, high = _intersect((low, high), decoded)
    return (low, high) if low <= high else None


def _cap(
    body: BytesLike, version: int, local: Mapping[int, tuple[int, int]], add_local: bool
) -> bytes:
    flexible = version >= 3
    count, pos = array_length(body, 2, flexible)  # after ErrorCode
    entries: list[
        tuple[int, bytes]
    ] = []  # (api key, the entry's bytes as the gateway sends it)
    for _ in range(count):
        start = pos
        api_key, low, high = (
            int(INT16.unpack_from(body, pos)[0]),
            int(INT16.unpack_from(body, pos + 2)[0]),
            int(INT16.unpack_from(body, pos + 4)[0]),
        )
        pos += 6
        if flexible:
            pos = skip_tagged_fields(body, pos)
        if api_key in local:
            low, high = local[api_key]
        else:
            capped = capped_range(api_key, low, high)
            if capped is None:
                continue
            low, high = capped
        entry = bytearray(body[start:pos])
        INT16.pack_into(entry, 2, low)
        INT16.pack_into(entry, 4, high)
        entries.append((api_key, bytes(entry)))
    rest = pos
    if version >= 1:
        pos += 4  # ThrottleTimeMs
        if pos > len(body):
            raise MalformedResponseError(
                "ApiVersionsResponse: truncated before ThrottleTimeMs"
            )
    if flexible:
        pos = skip_tagged_fields(body, pos)
    check_end(body, pos, "ApiVersionsResponse")
    if add_local:
        listed = {api_key for api_key, _ in entries}
        for api_key, (low, high) in sorted(local.items()):
            if api_key in listed:
                continue
            added = INT16.pack(api_key) + INT16.pack(low) + INT16.pack(high)
            added += b"\x00" if flexible else b""  # an empty tagged-field section
            at = next(
                (i for i, (key, _) in enumerate(entries) if key > api_key), len(entries)
            )
            entries.insert(at, (api_key, added))
    out = bytearray(body[:2])
    if flexible:
        write_uvarint(out, len(entries) + 1)
    else:
        out += INT32.pack(len(entries))
    for _, encoded in entries:
        out += encoded
    out += body[rest:]
    return bytes(out)


def cap_api_versions(
    api_version: int, body: BytesLike, local: Mapping[int, tuple[int, int]]
) -> bytes:
    """The upstream's ApiVersionsResponse body (after the response header, which is always
    v0 for ApiVersions), capped to what the gateway handles, with ``local``'s APIs set.

    Raises MalformedResponseError when the body is neither a valid ``api_version`` response
    nor Kafka's v0 UNSUPPORTED_VERSION fallback."""
    try:
        error_code = int(INT16.unpack_from(body, 0)[0])
        return _cap(body, api_version, local, add_local=error_code == 0)
    except (MalformedResponseError, *WALK_ERRORS) as exc:
        if api_version == 0:
            raise malformed("ApiVersionsResponse v0", exc) from None
    try:  # ApiVersionsResponse.parse: an older broker answers in v0 (KIP-511)
        return _cap(body, 0, local, add_local=False)
    except (MalformedResponseError, *WALK_ERRORS) as exc:
        raise malformed(f"ApiVersionsResponse v{api_version} (or v0)", exc) from None


def unsupported_version_response(correlation_id: int) -> bytes:
    """The whole frame answering an ApiVersions request newer than API_VERSIONS_RANGE."""
    return api_versions_unsupported_response(correlation_id, API_VERSIONS_RANGE)
