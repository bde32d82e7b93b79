"""The gateway's own question to the cluster: which brokers are there, at which addresses?

Clients normally tell the gateway (every Metadata answer passing through reveals the
brokers), but a client may connect straight to a node's port before any answer passed: the
client cached its metadata before this gateway replica started, or another replica behind
the same address served its Metadata.  Kroxylicious answers that case with an out-of-band
Metadata request; so does the gateway: one MetadataRequest (v12, no topics) to the first
bootstrap server that answers.  An upstream that requires SASL before Metadata refuses it
(the gateway holds no credentials of its own), and the client's connection is then closed,
as it would be without this question.

The same question tells whether the cluster lets a client in that never authenticated
(:func:`ask_authentication`, ``authentication.py``): a SASL listener closes the connection
on a Metadata request sent before the SASL exchange, any other listener answers it.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections.abc import Sequence

from proto import ApiKeys, KafkaError, decode_response, encode_request
from proto.connection import ResponseFramer
from proto.messages.metadata_request import MetadataRequest

__all__ = ["Discovered", "ask_authentication", "discover_brokers"]

log = logging.getLogger(__name__)

_METADATA_VERSION = 12
_CLIENT_ID = "ktc-gateway"
_SIZE = struct.Struct(">i")

Discovered = tuple[str | None, dict[int, tuple[str, int]]]
"""(cluster id, node id -> upstream (host, port))."""


# A server that could not be asked, or answered what cannot be read: the next one is asked.
_ASK_ERRORS = (TimeoutError, OSError, EOFError, ValueError, KafkaError)


class ClosedAfterRequest(EOFError):
    """The server closed the connection after the request, without answering it."""


async def ask_authentication(
    bootstrap: Sequence[tuple[str, int]],
    *,
    ssl_context: ssl.SSLContext | None,
    timeout_s: float,
    max_response_size: int,
) -> tuple[bool | None, Discovered | None]:
    """(whether the cluster requires authentication, its brokers when it answered): the
    discovery question without credentials, to each bootstrap server in turn until one
    answers it (False) or closes the connection on it (True); (None, None) when none could
    be asked."""
    request = _metadata_request()
    for host, port in bootstrap:
        try:
            discovered = await asyncio.wait_for(
                _ask(host, port, request, ssl_context, max_response_size), timeout_s
            )
        except ClosedAfterRequest:
            return True, None
        except _ASK_ERRORS as exc:
            _log_failed(
                "asking %s:%d whether it requires authentication failed: %s",
                host,
                port,
                exc,
            )
            continue
        return False, discovered
    return None, None


def _metadata_request() -> bytes:
    return encode_request(
        ApiKeys.METADATA, _METADATA_VERSION, 1, _CLIENT_ID, MetadataRequest(topics=())
    )


async def discover_brokers(
    bootstrap: Sequence[tuple[str, int]],
    *,
    ssl_context: ssl.SSLContext | None,
    timeout_s: float,
    max_response_size: int,
) -> Discovered | None:
    """Ask each bootstrap server in turn; None when none answered."""
    request = _metadata_request()
    for host, port in bootstrap:
        try:
            return await asyncio.wait_for(
                _ask(host, port, request, ssl_context, max_response_size), timeout_s
            )
        except _ASK_ERRORS as exc:
            _log_failed("broker discovery at %s:%d failed: %s", host, port, exc)
    return None


def _log_failed(message: str, host: str, port: int, exc: Exception) -> None:
    """Log ``message`` with the server asked and the exception that failed the asking."""
    log.info(message, host, port, exc or type(exc).__name__)


async def _ask(
    host: str,
    port: int,
    request: bytes,
    ssl_context: ssl.SSLContext | None,
    max_response_size: int,
) -> Discovered:
    reader, writer = await asyncio.open_connection(
        host,
        port,
        ssl=ssl_context,
        server_hostname=host if ssl_context is not None else None,
    )
    try:
        writer.write(request)
        await writer.drain()
        try:
            (size,) = _SIZE.unpack(await reader.readexactly(4))
        except (asyncio.IncompleteReadError, ConnectionResetError):
            raise ClosedAfterRequest("closed without an answer") from None
        framer = ResponseFramer(max_response_size)
        framer.receive_data(_SIZE.pack(size))  # checks the size before reading the body
        framer.receive_data(await reader.readexactly(size))
        payload = framer.next_frame()
        assert payload is not None
        message = decode_response(ApiKeys.METADATA, _METADATA_VERSION, payload).message
        brokers = {
            broker.node_id: (broker.host, broker.port) for broker in message.brokers
        }
        return message.cluster_id, brokers
    finally:
        writer.close()
