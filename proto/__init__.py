"""The Kafka wire protocol, sans-IO: framing, headers, generated message codecs, error codes,
payload compression. Imports nothing else of the project; no sockets, no asyncio, no clock."""

from proto.api_keys import ApiKeys, api_name
from proto.compression import CompressionType, compress, decompress
from proto.connection import (
    DEFAULT_MAX_REQUEST_SIZE,
    SUPPORTED_VERSIONS,
    ClientConnection,
    RequestFrame,
    ResponseFrame,
    ServerConnection,
    api_versions_unsupported_response,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from proto.errors import Errors, FramingError, KafkaError, error_for
from proto.primitives import ZERO_UUID

__all__ = [
    "DEFAULT_MAX_REQUEST_SIZE",
    "SUPPORTED_VERSIONS",
    "ZERO_UUID",
    "ApiKeys",
    "ClientConnection",
    "CompressionType",
    "Errors",
    "FramingError",
    "KafkaError",
    "RequestFrame",
    "ResponseFrame",
    "ServerConnection",
    "api_name",
    "api_versions_unsupported_response",
    "compress",
    "decode_request",
    "decode_response",
    "decompress",
    "encode_request",
    "encode_response",
    "error_for",
]
