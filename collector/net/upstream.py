"""The gateway's side of one upstream broker connection: an ``asyncio.Protocol`` that frames
the broker's responses and hands each one, whole, to the client connection it belongs to.

A gateway pairs every client connection with one upstream connection (Kroxylicious and
kafka-proxy do the same): requests keep their correlation ids and order, the broker sees
one client, SASL state stays on the right socket, and a dead broker closes exactly the
client connections it served, as a broker's own death would.

This module only moves bytes.  What a response means (address rewriting, throttle time,
merging split requests) is the :class:`UpstreamSink`'s business; it lives in
``collector.gateway`` and plugs in structurally, so the network layer imports nothing above
``collector.core``.

Backpressure both ways (``asyncio``'s flow-control callbacks):

* the broker reads slower than the client writes: this transport's buffer passes its high
  water mark, :meth:`UpstreamSink.upstream_congested` is told, and the client connection
  stops reading until it drains;
* the client reads slower than the broker answers: the sink calls :meth:`hold` and this
  connection stops reading from the broker until the client's buffer drains.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
from typing import Protocol, cast

from proto import FramingError
from proto.connection import ResponseFramer

__all__ = ["Upstream", "UpstreamSink", "open_upstream"]

log = logging.getLogger(__name__)

_SIZE_PREFIX = struct.Struct(">i")


class UpstreamSink(Protocol):
    """What an upstream connection reports to the client connection that owns it."""

    def upstream_response(self, payload: bytes) -> None:
        """One whole response frame (size prefix removed)."""

    def upstream_lost(self, reason: str) -> None:
        """The broker closed or reset the connection; nothing more will arrive."""

    def upstream_malformed(self, reason: str) -> None:
        """The broker sent bytes that cannot be a response frame (a negative size, one
        over the limit); the connection is aborted and nothing more will arrive."""

    def upstream_congested(self, congested: bool) -> None:
        """The broker stopped (True) or resumed (False) draining what we write."""


class Upstream(asyncio.Protocol):
    """One connection to one upstream broker, owned by one client connection."""

    def __init__(self, sink: UpstreamSink, max_response_size: int) -> None:
        self._sink = sink
        self._frames = ResponseFramer(max_response_size)
        self._transport: asyncio.Transport | None = None
        self._closed = False
        self._held = False

    # -- asyncio callbacks ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._closed:
            return
        frames = self._frames
        sink = self._sink
        try:
            frames.receive_data(data)
            while True:
                payload = frames.next_frame()
                if payload is None:
                    return
                sink.upstream_response(payload)
                if self._closed:
                    return
        except FramingError as exc:
            self._lost(f"malformed response frame: {exc}", malformed=True)

    def eof_received(self) -> bool | None:
        self._lost("the broker closed the connection")
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(
            f"connection to the broker lost: {exc}"
            if exc
            else "the broker closed the connection"
        )

    def pause_writing(self) -> None:
        self._sink.upstream_congested(True)

    def resume_writing(self) -> None:
        self._sink.upstream_congested(False)

    def set_sink(self, sink: UpstreamSink) -> None:
        """Hand the connection to another sink (after the gateway's own login on it)."""
        self._sink = sink

    # -- what the client connection does -------------------------------------------------
    def send_frame(self, raw: bytes) -> None:
        """Write one request: its size prefix, then ``raw`` (header and body) as given."""
        if self._transport is not None and not self._closed:
            self._transport.writelines((_SIZE_PREFIX.pack(len(raw)), raw))

    def hold(self, held: bool) -> None:
        """Stop (True) or resume (False) reading responses: the client is not draining."""
        if self._held == held or self._transport is None or self._closed:
            return
        self._held = held
        if held:
            self._transport.pause_reading()
        else:
            self._transport.resume_reading()

    def close(self) -> None:
        """Close without telling the sink (the client side is going away)."""
        self._closed = True
        if self._transport is not None:
            self._transport.close()

    @property
    def buffered_bytes(self) -> int:
        """Bytes of a response still being received (memory held for this pair)."""
        return self._frames.buffered_bytes

    def _lost(self, reason: str, *, malformed: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        if self._transport is not None:
            self._transport.abort()
        if malformed:
            self._sink.upstream_malformed(reason)
        else:
            self._sink.upstream_lost(reason)


async def open_upstream(
    host: str,
    port: int,
    sink: UpstreamSink,
    *,
    max_response_size: int,
    ssl_context: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    connect_timeout_s: float = 10.0,
) -> Upstream:
    """Connect to a broker; raises ``OSError`` (or ``TimeoutError``) when it cannot."""
    loop = asyncio.get_running_loop()
    transport, protocol = await asyncio.wait_for(
        loop.create_connection(
            lambda: Upstream(sink, max_response_size),
            host,
            port,
            ssl=ssl_context,
            server_hostname=(server_hostname or host)
            if ssl_context is not None
            else None,
        ),
        timeout=connect_timeout_s,
    )
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return protocol
