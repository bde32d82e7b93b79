"""Upstream responses as frames: cut the byte stream, find each body after its header.

The gateway reads responses from the upstream the way a Kafka client does: an int32 size,
then that many bytes of correlation id, header tagged fields (response header v1, from the
API's first flexible version; never for ApiVersions, KIP-511) and body. Which API a response
answers is known only from the request with the same correlation id, so the header is
parsed by the caller, with the API key and version it remembered:

    framer = ResponseFramer()
    framer.receive_data(data)                     # FramingError on a bad size: close the pair
    while (payload := framer.next_frame()) is not None:
        correlation_id = response_correlation_id(payload)
        api_key, api_version = in_flight.pop(correlation_id)
        at = response_body_offset(api_key, api_version, payload)
        body = memoryview(payload)[at:]           # what addresses/throttle/api_versions read
"""

from __future__ import annotations

from proto.api_table import response_header_version
from proto.connection import ResponseFramer
from proto.errors import FramingError
from proto.primitives import INT32, BytesLike, MalformedError, skip_tagged_fields

__all__ = [
    "DEFAULT_MAX_RESPONSE_SIZE",
    "ResponseFramer",
    "response_body_offset",
    "response_correlation_id",
]

# A bound on one response, checked when its size prefix arrives, before its bytes are
# buffered. Kafka's client has none (fetch.max.bytes is a soft target: one record batch
# larger than it is still returned whole); 1 GiB stops only a corrupt or hostile prefix.
DEFAULT_MAX_RESPONSE_SIZE = 1 << 30


def response_correlation_id(payload: BytesLike) -> int:
    if len(payload) < 4:
        raise FramingError(f"Response of {len(payload)} bytes has no correlation id")
    return int(INT32.unpack_from(payload, 0)[0])


def response_body_offset(api_key: int, api_version: int, payload: BytesLike) -> int:
    """Where the body starts in a response payload: after the correlation id, and after the
    header's tagged-field section when the response header is v1."""
    if response_header_version(api_key, api_version) == 0:
        return 4
    try:
        return skip_tagged_fields(payload, 4)
    except MalformedError as exc:
        raise FramingError(f"Malformed response header: {exc}") from None
