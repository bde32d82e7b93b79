"""The asyncio side of one Kafka connection: a thin ``asyncio.Protocol`` over
``proto.ServerConnection``.

Bytes arrive in ``data_received``; the sans-IO codec cuts them into request frames; each
frame goes to the host's :class:`~collector.core.handler.RequestHandler` (the dispatcher
when serving), with the connection's :class:`~collector.core.session.Session` and this
object as its :class:`~collector.core.channel.Channel`; the handler answers synchronously
with the response bytes (or ``None`` when the request has no response).  What this class
adds is transport policy:

* **Order.** Responses leave in request order.  All responses produced from one read are
  joined and written with a single ``transport.write`` (per-request Python overhead, not
  I/O, dominates; see the Performance section of docs/collector.md).  When the server asks
  for a durability barrier (pushes staged for the landing log's once-per-loop-turn write,
  collector/net/flush.py, or
  an fsync under ``fsync: always``), the batch waits for it, and later batches queue
  behind it, so order still holds.
* **Backpressure.** Reading pauses while the transport's write buffer is above its high
  water mark, while more than ``max_inflight_requests`` responses wait for a barrier, and
  while the connection is muted.  Reasons are tracked separately so one resuming does not
  undo another.
* **Throttling.** :meth:`mute` pauses reading after the response carrying
  ``throttle_time_ms`` is sent, as Kafka mutes a throttled channel (KIP-219), until the
  quota pipeline calls :meth:`unmute`; frames already buffered are held until then.
* **Malformed input.** A framing error (a size over ``socket.request.max.bytes`` or over
  its API's own limit, ``proto.request_limits``, checked before the body is read) or a
  request the dispatcher cannot parse closes this connection with one log line; earlier
  responses are still flushed; other connections are unaffected.
* **Memory.** The bytes of requests this connection holds (a request in progress at its
  announced size, requests read and not yet handled) are counted in the node's
  ``queued.max.request.bytes`` budget (collector/net/request_memory.py); while the budget
  is used up, reading pauses unless this connection is finishing a request it was admitted.
* **Idleness.** ``activity`` counts reads and writes, and ``busy`` says an answer is owed
  or a throttle holds the connection, for the idle sweep (collector/net/idle.py).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from collector.core.context import CloseConnection
from collector.core.handler import RequestHandler
from collector.core.session import Session
from collector.net.flush import FlushBarrier, PendingResponse
from collector.net.tls import ssl_principal
from collector.security.ssl_principal_mapper import NoMatchingRule
from proto import FramingError, ServerConnection
from subscriptions.matching import java_host_address

if TYPE_CHECKING:
    from collector.net.flush import DurabilityGate
    from collector.net.request_memory import RequestMemory
    from collector.security.ssl_principal_mapper import SslPrincipalMapper
    from proto.request_limits import RequestSizeLimits

__all__ = ["ConnectionHost", "KafkaProtocol"]

log = logging.getLogger(__name__)

# Pause-reading reasons.
_WRITE_BUFFER_FULL = 1
_TOO_MANY_INFLIGHT = 2
_MUTED = 4
_UPSTREAM_FULL = 8  # gateway: the upstream broker is not draining what we forward
_NO_MEMORY = 16  # queued.max.request.bytes is used up


class ConnectionHost(Protocol):
    """What a connection needs from the server that owns it."""

    handler: RequestHandler
    max_request_size: int
    max_inflight_requests: int
    # What answers wait for before they are written (None: nothing, write at once).
    durability: DurabilityGate | None

    def connection_opened(self, protocol: KafkaProtocol) -> bool: ...

    def connection_closed(self, protocol: KafkaProtocol) -> None: ...

    def protocol_error(self, protocol: KafkaProtocol) -> None: ...


class KafkaProtocol(asyncio.Protocol):
    """One connection: its :class:`Session` (identity) and the :class:`Channel` its
    handlers and the quota pipeline mute, unmute and close."""

    __slots__ = (
        "activity",
        "_closing",
        "_codec",
        "_durability",
        "_handler",
        "_host",
        "_max_inflight_requests",
        "_memory",
        "_memory_granted",
        "_held_bytes",
        "on_write_congested",
        "_paused",
        "_reading_paused",
        "_transport",
        "_waiting",
        "_waiting_requests",
        "session",
        "_ssl_principal_mapper",
    )

    def __init__(
        self,
        host: ConnectionHost,
        connection_id: int,
        listener_name: str,
        security_protocol: str,
        handler: RequestHandler | None = None,
        *,
        size_limits: RequestSizeLimits | None = None,
        memory: RequestMemory | None = None,
        ssl_principal_mapper: SslPrincipalMapper | None = None,
    ) -> None:
        self.session = Session(connection_id, listener_name, security_protocol)
        # The listener's ssl.principal.mapping.rules (None: the subject as it is).
        self._ssl_principal_mapper = ssl_principal_mapper
        self._host = host
        self._codec = ServerConnection(
            max_request_size=host.max_request_size, limits=size_limits
        )
        # The node's request-bytes budget, what this connection holds of it, and whether
        # the request in progress was admitted while the budget had room.
        self._memory = memory
        self._held_bytes = 0
        self._memory_granted = False
        # Reads and writes so far (the idle sweep compares it between its looks).
        self.activity = 0
        # The handler (this connection's own, or the host's shared one) and the host's
        # settings, read once (asked on every read otherwise).
        self._handler: RequestHandler = handler if handler is not None else host.handler
        # Told when the client stops (True) or resumes (False) draining our answers (a
        # gateway then stops reading from the upstream broker).
        self.on_write_congested: Callable[[bool], None] | None = None
        self._durability: DurabilityGate | None = host.durability
        self._max_inflight_requests = host.max_inflight_requests
        self._transport: asyncio.Transport | None = None
        self._paused = 0  # bit set of pause reasons
        self._reading_paused = False
        # Batches of response bytes waiting for a barrier (a durability flush, or an answer
        # still to come), oldest first, with the number of requests each answers.
        self._waiting: collections.deque[tuple[FlushBarrier, list[bytes], int]] = (
            collections.deque()
        )
        self._waiting_requests = 0
        self._closing = False

    # ------------------------------------------------------------------ asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        session = self.session
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            session.peer_ip = str(peer[0])
            session.client_source_address = java_host_address(session.peer_ip)
            # The real peer port on every listener kind (KAFKA-15811, Kafka 3.8+).
            session.client_source_port = int(peer[1])
        unmapped: str | None = None
        if session.security_protocol == "SSL":
            # The handshake is done by now; Kafka's DefaultKafkaPrincipalBuilder.
            try:
                session.set_principal(
                    ssl_principal(
                        transport.get_extra_info("peercert"), self._ssl_principal_mapper
                    )
                )
            except NoMatchingRule as exc:
                unmapped = str(exc)
        if not self._host.connection_opened(self):
            self._closing = True
            self._transport.abort()
            return
        if unmapped is not None:
            # Kafka fails the authentication: the connection closes before any request.
            self.close_for(
                f"failed authentication: ssl.principal.mapping.rules: {unmapped}"
            )
            return
        memory = self._memory
        if memory is not None:
            memory.register(session.connection_id, self)
            if memory.exhausted:
                memory.hold(session.connection_id)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        memory = self._memory
        if memory is not None:
            memory.unregister(self.session.connection_id)
            if self._held_bytes:
                held = self._held_bytes
                self._held_bytes = 0
                memory.adjust(-held)
        self._host.connection_closed(self)

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self.activity += 1
        codec = self._codec
        memory = self._memory
        started = codec.partial_frames
        try:
            codec.receive_data(data)
        except FramingError as exc:
            self._host.protocol_error(self)
            self.close_for(f"framing error: {exc}")
            return
        if (
            memory is not None
            and codec.frame_in_progress
            and (codec.partial_frames != started or not self._memory_granted)
        ):
            # A request is arriving that was not admitted yet: admitted now (it may finish
            # even if the budget runs out meanwhile) unless the budget was used up when this
            # read came, as Kafka's pool refuses a buffer then.
            self._memory_granted = not memory.exhausted
        self._process()

    def pause_writing(self) -> None:
        self._pause(_WRITE_BUFFER_FULL)
        if self.on_write_congested is not None:
            self.on_write_congested(True)

    def resume_writing(self) -> None:
        if self.on_write_congested is not None:
            self.on_write_congested(False)
        self._resume(_WRITE_BUFFER_FULL)

    # ------------------------------------------------------------------ control
    def mute(self) -> None:
        """Stop reading (a throttled channel); frames already buffered wait too."""
        if not self._closing:
            self._pause(_MUTED)

    def unmute(self) -> None:
        self._resume(_MUTED)

    def hold_reading(self, held: bool) -> None:
        """Stop (True) or resume (False) reading because the gateway's upstream connection
        is not draining what this client sends."""
        if held:
            if not self._closing:
                self._pause(_UPSTREAM_FULL)
        else:
            self._resume(_UPSTREAM_FULL)

    def close_for(self, reason: str, quiet: bool = False) -> None:
        """Close the connection after flushing what is already answered; ``reason`` is
        logged at INFO, or at DEBUG when ``quiet`` (the caller logged the cause once for
        many connections: a gateway's upstream broker that died)."""
        if self._closing:
            return
        session = self.session
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "closing connection %d from %s:%d on %s: %s",
            session.connection_id,
            session.client_source_address,
            session.client_source_port,
            session.listener_name,
            reason,
        )
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def close_when_idle(self) -> None:
        """Graceful shutdown: stop reading; close once waiting responses are written."""
        self._pause(_MUTED)
        if not self._waiting:
            self._closing = True
            if self._transport is not None:
                self._transport.close()
        else:
            self._closing = True  # _write_ready closes when the queue drains

    def hold_for_memory(self, held: bool) -> None:
        """Stop (True) or resume (False) reading because ``queued.max.request.bytes`` is
        used up (called by the node's RequestMemory)."""
        if held:
            if not self._closing:
                self._pause(_NO_MEMORY)
        else:
            self._resume(_NO_MEMORY)

    @property
    def memory_granted(self) -> bool:
        """In the middle of a request admitted while the request budget had room."""
        return self._memory_granted

    @property
    def held_bytes(self) -> int:
        """What this connection's requests count in the node's request budget."""
        return self._held_bytes

    @property
    def idle(self) -> bool:
        return not self._waiting

    @property
    def busy(self) -> bool:
        """An answer is owed to the client, or a throttle holds the connection: not idle,
        however long it has been quiet."""
        return bool(self._waiting) or bool(self._paused & _MUTED)

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def reading_paused(self) -> bool:
        """Reading is paused, for any reason (backpressure, a throttle, shutdown)."""
        return self._reading_paused

    @property
    def muted(self) -> bool:
        """Reads are stopped by a throttle (or by a graceful shutdown)."""
        return bool(self._paused & _MUTED)

    # ------------------------------------------------------------------ internals
    def _process(self) -> None:
        handler = self._handler
        session = self.session
        responses: list[bytes] = []
        codec = self._codec
        try:
            while not self._paused & _MUTED and not self._closing:
                frame = codec.next_request()
                if frame is None:
                    break
                response = handler.handle(frame, session, self)
                if response is None:
                    continue
                if type(response) is bytes:
                    responses.append(response)
                else:  # answered later, after whatever is answered already
                    self._send(responses)
                    responses = []
                    self._wait(cast(PendingResponse, response), 1)
        except (FramingError, CloseConnection) as exc:
            self._send(responses)
            self._host.protocol_error(self)
            reason = (
                f"framing error: {exc}" if isinstance(exc, FramingError) else str(exc)
            )
            self.close_for(reason)
            return
        if responses:
            self._send(responses)
        if self._memory is not None:
            self._account()

    def _account(self) -> None:
        """Tell the request budget what this connection holds now; stop reading while the
        budget is used up, unless a request admitted earlier is still arriving."""
        memory = self._memory
        assert memory is not None
        codec = self._codec
        # An admitted request counts at its announced size; one not admitted only with the
        # bytes it has (it is not read on until it is admitted).
        held = codec.reserved_bytes if self._memory_granted else codec.buffered_bytes
        if held != self._held_bytes:
            delta = held - self._held_bytes
            self._held_bytes = held
            memory.adjust(delta)
        if not codec.frame_in_progress:
            self._memory_granted = False
        if memory.exhausted and not self._memory_granted and not self._closing:
            memory.hold(self.session.connection_id)

    def _send(self, responses: list[bytes]) -> None:
        if not responses or self._transport is None:
            return
        durability = self._durability
        barrier = durability.barrier() if durability is not None else None
        self.activity += 1
        if barrier is None:
            if not self._waiting:
                self._transport.write(
                    b"".join(responses) if len(responses) > 1 else responses[0]
                )
                return
            barrier = FlushBarrier()  # queue behind earlier batches, ready at once
            barrier.resolve()
        self._waiting.append((barrier, responses, len(responses)))
        self._waiting_requests += len(responses)
        if self._waiting_requests >= self._max_inflight_requests:
            self._pause(_TOO_MANY_INFLIGHT)
        barrier.add_done_callback(self._write_ready)

    def _wait(self, pending: PendingResponse, requests: int) -> None:
        self._waiting.append((pending, pending.responses, requests))
        self._waiting_requests += requests
        if self._waiting_requests >= self._max_inflight_requests:
            self._pause(_TOO_MANY_INFLIGHT)
        pending.add_done_callback(self._write_ready)

    def _write_ready(self, _: FlushBarrier) -> None:
        # Write every leading batch whose barrier is done, preserving order.
        waiting = self._waiting
        while waiting and waiting[0][0].done():
            barrier, responses, requests = waiting.popleft()
            self._waiting_requests -= requests
            if self._transport is None or self._transport.is_closing():
                continue
            error = barrier.exception()
            if error is not None:
                # The landing log could not write (or fsync) this batch's records: answering
                # "accepted" would lie, so its pushes are answered 89 and the client pushes
                # again one interval later (flush.py: refuse_pushes); the rest still go.
                durability = self._durability
                refused = (
                    durability.refuse_pushes(responses, self.session, error)
                    if durability is not None and type(barrier) is not PendingResponse
                    else None
                )
                if refused is None:
                    # Any other failure, or the upstream broker of a gateway's forwarded
                    # request is gone.
                    self.close_for(f"answer failed: {error}")
                    continue
                responses = refused
            self.activity += 1
            if len(responses) == 1:
                self._transport.write(responses[0])
            elif responses:
                self._transport.writelines(responses)
        if self._closing and not waiting and self._transport is not None:
            self._transport.close()
            return
        if self._waiting_requests < self._max_inflight_requests:
            self._resume(_TOO_MANY_INFLIGHT)

    def _pause(self, reason: int) -> None:
        self._paused |= reason
        if (
            not self._reading_paused
            and self._transport is not None
            and not self._closing
        ):
            self._reading_paused = True
            self._transport.pause_reading()

    def _resume(self, reason: int) -> None:
        if not self._paused & reason:
            return
        self._paused &= ~reason
        if self._paused or self._closing:
            return
        if self._reading_paused and self._transport is not None:
            self._reading_paused = False
            self._transport.resume_reading()
        # Frames may have been buffered while paused (muted mid-batch).
        self._process()
