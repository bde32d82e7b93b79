"""How large a request of each API may be before its body is read.

A request's size prefix announces how many bytes follow; ``socket.request.max.bytes``
(100 MiB by default) bounds every request, which lets one connection make the server hold
100 MiB for a request that can never be legitimate (a GetTelemetrySubscriptions is 17 bytes
plus its header).  So the codec looks at the api key, in the first bytes after the size, and
holds the size against that API's own limit before it buffers the body
(``ServerConnection(limits=...)``); a request over it is a framing error, and the
connection closes, as for a size over ``socket.request.max.bytes``.

Limits are sizes of the frame after its 4-byte size prefix: request header plus body.  The
header is counted at its largest, so a client's choice of client id never decides whether
its request passes.  Every limit is capped at ``socket.request.max.bytes``.

Which table applies is the node's choice: ``ktc serve`` takes :func:`request_size_limits`
for the APIs it serves and refuses the rest at the header size (it closes the connection
for them anyway); ``ktc gateway`` takes it for the APIs it answers only itself, and lets
every API it forwards (a Produce can be as large as the cluster accepts) keep
``socket.request.max.bytes``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from proto.api_keys import ApiKeys

__all__ = [
    "REQUEST_HEADER_MAX_BYTES",
    "RequestSizeLimits",
    "push_telemetry_request_max_bytes",
    "request_size_limits",
]

# Kafka's request header v2 at its largest: api key (int16), api version (int16), correlation
# id (int32), client id (an int16-length string even in flexible versions, so at most 32767
# bytes), and an empty tagged-field section (one byte; the clients send no header tags).
MAX_CLIENT_ID_BYTES = 32767
REQUEST_HEADER_MAX_BYTES = 2 + 2 + 4 + (2 + MAX_CLIENT_ID_BYTES) + 1

_KIB = 1024
_MIB = 1024 * 1024
# Kafka's longest topic name and config value (an int16-length string on the wire).
_TOPIC_NAME_MAX = 249
_CONFIG_VALUE_MAX = 32767


def _uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def push_telemetry_request_max_bytes(telemetry_max_bytes: int) -> int:
    """The largest PushTelemetry v0 request whose metrics fit ``telemetry.max.bytes``.

    Its body: client instance id (uuid, 16), subscription id (int32, 4), terminating
    (bool, 1), compression type (int8, 1), metrics (compact bytes: an unsigned varint of
    length + 1, then the bytes) and an empty tagged-field section (1).  ``telemetry.max.bytes``
    bounds the metrics as sent (compressed), exactly what Kafka's
    ``ClientMetricsManager.validateRequest`` compares with it; a push a little over the
    limit still reaches the manager, which answers TELEMETRY_TOO_LARGE as Kafka does, unless
    it is over by more than the header's slack.
    """
    body = (
        16
        + 4
        + 1
        + 1
        + _uvarint_size(telemetry_max_bytes + 1)
        + telemetry_max_bytes
        + 1
    )
    return REQUEST_HEADER_MAX_BYTES + body


# The largest legitimate body of each API the collector answers (besides PushTelemetry,
# which depends on telemetry.max.bytes), with why.
_BODY_LIMITS: dict[int, int] = {
    # Client id is in the header; the body is the instance id (uuid) and a tag section.
    ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS: 16 + 1,
    # Client software name and version (compact strings; Kafka bounds them only by a
    # pattern): each at the int16 string maximum, with its varint length, and tags.
    ApiKeys.API_VERSIONS: 2 * (3 + 32767) + 1,
    # A client asking for its topics by name: 8 MiB holds more than 30,000 topics at the
    # longest name (249) with their ids (16), per-entry tags and the request's flags.
    ApiKeys.METADATA: 8 * _MIB,
    # Admin requests name a handful of resources: 8 MiB holds 64 client-metrics
    # subscriptions each setting its three keys (metrics, interval.ms, match) to Kafka's
    # longest config value (32767 characters).
    ApiKeys.DESCRIBE_CONFIGS: 8 * _MIB,
    ApiKeys.INCREMENTAL_ALTER_CONFIGS: 8 * _MIB,
    # Quota entities are (type, name) pairs and a few float values: 1 MiB holds thousands.
    ApiKeys.DESCRIBE_CLIENT_QUOTAS: 1 * _MIB,
    ApiKeys.ALTER_CLIENT_QUOTAS: 1 * _MIB,
    # An array of resource types (int8 each).
    ApiKeys.LIST_CONFIG_RESOURCES: 64 * _KIB,
    # A mechanism name; SASL tokens at most Kafka's sasl.server.max.receive.size (512 KiB).
    ApiKeys.SASL_HANDSHAKE: 64 * _KIB,
    ApiKeys.SASL_AUTHENTICATE: 512 * _KIB,
    # SCRAM credentials of a few users: a name, a mechanism, a salt and a salted password
    # (64 bytes at SHA-512) each; 1 MiB holds thousands.
    ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS: 1 * _MIB,
    ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: 1 * _MIB,
    # ACLs: a resource name, a principal and a host (int16-length strings) and four int8s
    # each. DescribeAcls is one filter (128 KiB holds three strings at their maximum);
    # 1 MiB holds thousands of ACLs or filters of usual size.
    ApiKeys.DESCRIBE_ACLS: 128 * _KIB,
    ApiKeys.CREATE_ACLS: 1 * _MIB,
    ApiKeys.DELETE_ACLS: 1 * _MIB,
}
assert 30_000 * (16 + 1 + _TOPIC_NAME_MAX + 1) < _BODY_LIMITS[ApiKeys.METADATA]
assert (
    64 * 3 * (3 + _CONFIG_VALUE_MAX) < _BODY_LIMITS[ApiKeys.INCREMENTAL_ALTER_CONFIGS]
)


@dataclass(frozen=True, slots=True)
class RequestSizeLimits:
    """api key -> the largest frame (header + body) accepted for it; ``other`` for every
    api key not in ``per_api``."""

    per_api: dict[int, int] = field(default_factory=dict)
    other: int = 104857600

    def limit(self, api_key: int) -> int:
        return self.per_api.get(api_key, self.other)


def request_size_limits(
    api_keys: Iterable[int], *, telemetry_max_bytes: int, max_request_size: int
) -> dict[int, int]:
    """The frame limit of each of ``api_keys`` (an API with no entry in the table keeps
    ``max_request_size``), each at most ``max_request_size``."""
    limits: dict[int, int] = {}
    for api_key in api_keys:
        if api_key == ApiKeys.PUSH_TELEMETRY:
            limit = push_telemetry_request_max_bytes(telemetry_max_bytes)
        elif api_key in _BODY_LIMITS:
            limit = REQUEST_HEADER_MAX_BYTES + _BODY_LIMITS[api_key]
        else:
            limit = max_request_size
        limits[int(api_key)] = min(limit, max_request_size)
    return limits
