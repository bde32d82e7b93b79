"""One listener's accept loop, after Kafka's ``SocketServer.Acceptor``: accept a socket,
ask the connection quotas, then hand it to the event loop with a fresh protocol.

asyncio's ``create_server`` accepts and wraps in one step, leaving no place to make a
connection wait; this loop keeps Kafka's decisions (``quota.ConnectionQuotas``):

| decision        | Kafka                                              | here                         |
|-----------------|----------------------------------------------------|------------------------------|
| Accept          | register the channel                               | wrap the socket              |
| Delay(ms)       | the acceptor sleeps (broker/listener creation rate)| this listener's loop sleeps, |
|                 |                                                    | then asks again              |
| WaitForSlot     | the acceptor blocks until a connection closes      | waits for a close, asks again|
| Reject          | per-IP limit or rate: close (after the throttle)   | close after ``close_delay_ms``|

While the node's request budget (``queued.max.request.bytes``) is used up, the loop does
not accept: new connections wait in the kernel's backlog until it has room
(collector/net/request_memory.py says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from clock import SYSTEM_CLOCK, Clock
from collector.net.listeners import EndPoint
from collector.net.request_memory import RequestMemory
from quota import Accept, ConnectionDecision, Delay, Reject, WaitForSlot

__all__ = ["Acceptor", "bind_listener"]

log = logging.getLogger(__name__)

BACKLOG = 1024
HANDSHAKE_TIMEOUT_S = 10.0


def bind_listener(endpoint: EndPoint) -> socket.socket:
    """A listening, non-blocking socket.  An empty host binds every interface, IPv6
    included where the machine has it (as Kafka's wildcard bind does)."""
    if not endpoint.host and socket.has_dualstack_ipv6():
        sock = socket.create_server(
            ("", endpoint.port),
            family=socket.AF_INET6,
            dualstack_ipv6=True,
            backlog=BACKLOG,
            reuse_port=False,
        )
    else:
        host = endpoint.host or "0.0.0.0"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server(
            (host, endpoint.port), family=family, backlog=BACKLOG
        )
    sock.setblocking(False)
    return sock


def _no_setup_hook(listener: str, ip: str) -> None:
    pass


@dataclass(slots=True, eq=False)
class Acceptor:
    """The accept loop of one bound listener: each socket admitted by ``decide`` (the
    connection quotas) becomes a connection of ``protocol_factory`` (over TLS with
    ``ssl_context``)."""

    endpoint: EndPoint
    sock: socket.socket
    _: KW_ONLY
    protocol_factory: Callable[[], asyncio.Protocol]
    decide: Callable[[str, str], ConnectionDecision]
    slot_freed: asyncio.Event
    ssl_context: ssl.SSLContext | None = None
    clock: Clock = SYSTEM_CLOCK
    memory: RequestMemory | None = None
    # Sockets refused by ``decide``.
    rejected: int = field(default=0, init=False)
    # Called when an admitted socket never became a connection, so the connection
    # quotas can release it (set by the server).
    on_failed_setup: Callable[[str, str], None] = field(
        default=_no_setup_hook, init=False
    )
    _serving: bool = field(default=False, init=False)

    @property
    def serving(self) -> bool:
        return self._serving

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        self._serving = True
        try:
            while True:
                if self.memory is not None and self.memory.exhausted:
                    await self.memory.room.wait()
                conn, address = await loop.sock_accept(self.sock)
                ip = str(address[0])
                try:
                    admitted = await self._admit(ip, conn)
                except asyncio.CancelledError:
                    # Shut down while this socket waited for a slot or a rate delay: it
                    # was never counted, so just close it (the client sees the server go).
                    conn.close()
                    raise
                if admitted:
                    if self.ssl_context is None:
                        await self._wrap(conn, ip)
                    else:
                        # A TLS handshake takes round trips: never hold the accept loop.
                        loop.create_task(self._wrap(conn, ip))
        finally:
            self._serving = False

    async def _wrap(self, conn: socket.socket, ip: str) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                self.protocol_factory,
                conn,
                ssl=self.ssl_context,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if self.ssl_context else None,
            )
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            # The peer went away, or its TLS handshake failed (no or untrusted client
            # certificate, wrong protocol): Kafka logs and drops such a connection.
            log.info(
                "connection from %s on %s failed before it was set up: %s",
                ip,
                self.endpoint.listener_name,
                exc,
            )
            self.on_failed_setup(self.endpoint.listener_name, ip)
            conn.close()

    async def _admit(self, ip: str, conn: socket.socket) -> bool:
        listener = self.endpoint.listener_name
        while True:
            decision = self.decide(listener, ip)
            if isinstance(decision, Accept):
                return True
            if isinstance(decision, Delay):
                await self.clock.sleep(decision.delay_ms)
            elif isinstance(decision, WaitForSlot):
                self.slot_freed.clear()
                await self.slot_freed.wait()
            elif isinstance(decision, Reject):
                self.rejected += 1
                log.info(
                    "refusing connection from %s on %s: %s",
                    ip,
                    listener,
                    decision.reason.value,
                )
                # Kafka closes an IP-throttled connection only after the throttle time, so
                # a client does not reconnect in a tight loop.
                self.clock.call_later(decision.close_delay_ms, conn.close)
                return False
            else:  # pragma: no cover - the decision type is closed
                raise TypeError(f"unknown connection decision {decision!r}")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
