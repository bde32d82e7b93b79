"""A response's ThrottleTimeMs: read it, and patch it in place, never re-encoding the body.

The client must see the larger of the upstream's and the gateway's throttle time (KIP-219),
and a 1 MiB Fetch response must not be re-encoded to say so. Where the field is, per Kafka
4.4.0 (``proto.api_table``):

* at a fixed offset of the body, for almost every API: offset 0 (it is the first field:
  Fetch, Metadata v3+, FindCoordinator v1+, ...), or after fixed-size fields only
  (OffsetDelete: 2; Renew/ExpireDelegationToken: 10) -> one ``pack_into``;
* after variable-size fields, found by walking them: Produce (after Responses[]),
  ApiVersions v1+ (after ApiKeys[]), Create/DescribeDelegationToken (last field);
* nowhere (SaslHandshake, SaslAuthenticate, DescribeQuorum, ..., and any API at a version
  before the field was added): ``read_throttle_ms`` gives None and ``with_throttle_ms``
  returns the body unchanged.

A fixed offset is patched without walking the body (the address walk, which the gateway runs
on the same responses, is where a malformed body is caught).
"""

from __future__ import annotations

from collections.abc import Callable

from collector.gateway.addresses import walk_produce_responses
from collector.gateway.wire import (
    WALK_ERRORS,
    MalformedResponseError,
    array_length,
    malformed,
    skip_bytes,
    skip_string,
)
from proto.api_keys import ApiKeys
from proto.api_table import API_TABLE
from proto.primitives import INT32, BytesLike, skip_tagged_fields

__all__ = ["read_throttle_ms", "throttle_offset", "with_throttle_ms"]


def _api_versions(buf: BytesLike, v: int) -> int:
    flexible = v >= 3
    count, pos = array_length(buf, 2, flexible)  # after ErrorCode
    for _ in range(count):
        pos += 6  # ApiKey, MinVersion, MaxVersion
        if flexible:
            pos = skip_tagged_fields(buf, pos)
    return pos


def _token(buf: BytesLike, pos: int, v: int) -> int:
    """A delegation token's fields up to and including Hmac (Create and Describe share them)."""
    flexible = v >= 2
    for _ in range(
        4 if v >= 3 else 2
    ):  # principal type/name (and the requester's, v3+)
        pos = skip_string(buf, pos, flexible)
    pos = skip_string(buf, pos + 24, flexible)  # three timestamps, TokenId
    return skip_bytes(buf, pos, flexible)  # Hmac


def _create_token(buf: BytesLike, v: int) -> int:
    return _token(buf, 2, v)


def _describe_tokens(buf: BytesLike, v: int) -> int:
    flexible = v >= 2
    tokens, pos = array_length(buf, 2, flexible)
    for _ in range(tokens):
        pos = _token(buf, pos, v)
        renewers, pos = array_length(buf, pos, flexible)
        for _ in range(renewers):
            pos = skip_string(buf, skip_string(buf, pos, flexible), flexible)
            if flexible:
                pos = skip_tagged_fields(buf, pos)
        if flexible:
            pos = skip_tagged_fields(buf, pos)
    return pos


# api_key -> walker to the throttle field, for the APIs where it follows variable-size fields
_WALKERS: dict[int, Callable[[BytesLike, int], int]] = {
    ApiKeys.PRODUCE: lambda buf, v: walk_produce_responses(buf, v)[0],
    ApiKeys.API_VERSIONS: _api_versions,
    ApiKeys.CREATE_DELEGATION_TOKEN: _create_token,
    ApiKeys.DESCRIBE_DELEGATION_TOKEN: _describe_tokens,
}


def throttle_offset(api_key: int, api_version: int, body: BytesLike) -> int | None:
    """Where ThrottleTimeMs is in the body, or None if this response has none."""
    info = API_TABLE.get(api_key)
    if info is None or not info.has_throttle(api_version):
        return None
    offset = info.fixed_throttle_offset(api_version)
    if offset is None:
        try:
            offset = _WALKERS[api_key](body, api_version)
        except WALK_ERRORS as exc:
            raise malformed(f"{info.name} v{api_version} response", exc) from None
    if offset + 4 > len(body):
        raise MalformedResponseError(
            f"{info.name} v{api_version} response of {len(body)} bytes has no ThrottleTimeMs"
        )
    return offset


def read_throttle_ms(api_key: int, api_version: int, body: BytesLike) -> int | None:
    """The response's ThrottleTimeMs, or None if it has none."""
    offset = throttle_offset(api_key, api_version, body)
    return None if offset is None else int(INT32.unpack_from(body, offset)[0])


def with_throttle_ms(
    api_key: int, api_version: int, body: BytesLike, throttle_ms: int
) -> BytesLike:
    """The body with ThrottleTimeMs set to ``throttle_ms``, by one ``pack_into``: a bytearray
    (or writable memoryview) body is patched in place and returned; a bytes body is copied
    once into a bytearray (a memcpy, about 50 us per MiB), then patched. The body itself
    (the same object) when the response has no throttle field or already holds the value.

    To patch a whole frame buffer instead, add the size prefix and response header length to
    ``throttle_offset``."""
    offset = throttle_offset(api_key, api_version, body)
    if offset is None or INT32.unpack_from(body, offset)[0] == throttle_ms:
        return body
    if isinstance(body, bytearray) or (
        isinstance(body, memoryview) and not body.readonly
    ):
        INT32.pack_into(body, offset, throttle_ms)
        return body
    patched = bytearray(body)
    INT32.pack_into(patched, offset, throttle_ms)
    return patched
