"""One client connection of the gateway and the upstream connection paired with it: the
chain runner of the gateway's filters.

Every request the client sends runs its API's chain (``collector.gateway.filters.FILTERS``;
what a filter is: ``filters/base.py``): a filter may answer it here (telemetry, client-metrics
administration, an ApiVersions request newer than the gateway speaks, a strict mutation over
its quota), else it is forwarded, as the bytes the client sent with its own correlation id
(or what a filter put in their place), on the client's own upstream connection.  Responses
come back in request order (a broker answers one connection in order), so the requests in
flight are a FIFO: the head must carry the correlation id of the response that arrived, or
the broker broke the protocol and the pair is closed.  Each response runs the chain's
response filters, then gets the gateway's throttle.

What the runner does for every API, as a Kafka broker does for every request
(``SaslServerAuthenticator``, ``KafkaApis``, ``RequestChannel``):

| step | what |
|---|---|
| before authentication | the gateway's :class:`AuthenticationPolicy` (``authentication.py``) decides whether a request of a client that has not authenticated is served at all: where the cluster requires SASL, nothing but ApiVersions and the SASL exchange is, as on the cluster's own listener; the connection of a client that sends anything else is closed |
| unknown API key | the connection closes (Kafka closes a connection whose header names an API it does not know) |
| ``request_percentage`` | the gateway's own handling time of the pair, recorded when the response is in |
| throttle | the client sees the larger of the broker's and the gateway's ``throttle_time_ms`` (patched in place, never by re-encoding a possibly large response); its channel is held while a request its own recording throttled is forwarded, then muted for the gateway's part after the response is queued (KIP-219) |
"""

from __future__ import annotations

import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, Protocol, cast

from collector.core.context import CloseConnection
from collector.gateway.authentication import (
    BEFORE_AUTHENTICATION,
    AuthenticationPolicy,
    UpstreamAuthentication,
)
from collector.gateway.filters.base import CONTINUE, Body, Chain, Exchange
from collector.gateway.forwarded_quotas import GatewayQuotas
from collector.gateway.frames import response_body_offset
from collector.gateway.sasl import SaslCapture
from collector.gateway.throttle import read_throttle_ms, with_throttle_ms
from collector.net.flush import PendingResponse
from proto import RequestFrame, api_name

if TYPE_CHECKING:
    from collector.core.channel import Channel
    from collector.core.session import Session
    from collector.net.upstream import Upstream

__all__ = ["ClientPair", "PairHost"]

log = logging.getLogger(__name__)

_CORRELATION_ID: Final = struct.Struct(">i")
_SIZE_PREFIX: Final = struct.Struct(">i")


class PairHost(Protocol):
    """What a pair needs of the gateway it belongs to (``service.Gateway``)."""

    @property
    def chains(self) -> Mapping[int, Chain]:
        """api key -> its filter chain, for every API the gateway accepts."""

    @property
    def quotas(self) -> GatewayQuotas: ...

    @property
    def now_ms(self) -> Callable[[], int]: ...

    @property
    def authentication(self) -> AuthenticationPolicy: ...

    def connect_upstream(self, pair: ClientPair) -> None: ...

    def upstream_answered(self, pair: ClientPair) -> None: ...

    def upstream_lost(self, pair: ClientPair, reason: str, in_flight: int) -> None: ...

    def upstream_broken(self, pair: ClientPair, reason: str) -> None: ...

    def refused_unauthenticated(self, api_key: int) -> None: ...


class ClientPair:
    """The handler of one client connection: answers locally or forwards, and owns the
    upstream connection that carries this client's forwarded requests."""

    def __init__(self, gateway: PairHost, node_id: int | None) -> None:
        self._gateway = gateway
        self._chains = gateway.chains
        self._quotas = gateway.quotas
        self._now_ms = gateway.now_ms
        self._authentication = gateway.authentication
        # The upstream node this client's listener stands for (None: the bootstrap listener).
        self.node_id = node_id
        # The broker address the upstream connection was opened to (outage reporting).
        self.upstream_address: tuple[str, int] | None = None
        # The client connection (mute, close_for, hold_reading) and its identity.
        self.channel: Channel | None = None
        self.session: Session | None = None
        self._upstream: Upstream | None = None
        # Until the first response arrives the upstream is only connected, not known alive:
        # a broker being killed can still complete a TCP handshake (outages.py).
        self._upstream_answered = False
        self._outbox: list[bytes] = []  # frames written before the upstream connected
        self._in_flight: deque[Exchange] = deque()
        self._closed = False
        # SASL passthrough: who the client says it is, the session's principal once the
        # broker accepts the exchange.
        self._sasl = SaslCapture()
        # After a SASL exchange, the cluster answered a request other than ApiVersions/SASL.
        self._admitted_upstream = False
        # The client's listener is one of the gateway's SASL listeners: its authenticator
        # lets nothing but ApiVersions reach this pair before the client logged in there.
        self.listener_authenticates = False

    @property
    def authenticated(self) -> bool:
        """The client's SASL exchange was accepted: by the gateway's own SASL listener, or
        by the cluster (passed through: a PLAIN or SCRAM exchange the cluster accepted in
        full, or any mechanism's exchange after which the cluster answered a request other
        than ApiVersions and SASL, which a SASL listener never does before it)."""
        return (
            self.listener_authenticates
            or self._sasl.authenticated is not None
            or self._admitted_upstream
        )

    # -- the client connection's handler interface ---------------------------------------
    def opened(self, channel: Channel, session: Session) -> None:
        self.channel = channel
        self.session = session
        self._gateway.connect_upstream(self)

    def handle(self, frame: RequestFrame, session: Session, channel: Channel) -> object:
        api_key = frame.api_key
        chain = self._chains.get(api_key)
        if chain is None:
            # Kafka closes a connection whose header names an API it does not know.
            raise CloseConnection(f"unknown api key {api_key}")
        if not self.authenticated and self._authentication.refuses(
            api_key, chain.answered_here
        ):
            # As a SASL listener closes it (SaslServerAuthenticator: "Unexpected Kafka
            # request of type ... during SASL handshake"): nothing written.
            self._gateway.refused_unauthenticated(api_key)
            raise CloseConnection(
                f"unexpected {api_name(api_key)} request before SASL authentication"
            )
        started_ns = time.perf_counter_ns()
        exchange = Exchange(frame, session, channel, self._sasl, frame.raw)
        for request_filter in chain.request:
            answer = request_filter.on_request(exchange)
            if answer is not CONTINUE:
                return answer  # answered here: nothing forwarded
        quotas = self._quotas
        if not exchange.expects_response:
            # Produce acks=0: no response will carry a throttle time, so the request time
            # is recorded now and the channel muted for any throttle (Kafka's handleProduce).
            self._forward(exchange.raw)
            throttle_ms = max(
                exchange.throttle_ms,
                quotas.record_request_time(
                    session.principal_name,
                    frame.client_id,
                    time.perf_counter_ns() - started_ns,
                    self._now_ms(),
                ),
            )
            if throttle_ms > 0:
                quotas.mute(
                    channel, session.principal_name, frame.client_id, throttle_ms
                )
            return None
        if exchange.throttle_ms > 0:
            # Throttled by its own recording: read nothing more from the client until its
            # response is written and the throttle is over (a broker's one request at a time).
            quotas.hold(channel)
        self._forward(exchange.raw)
        pending = exchange.pending = PendingResponse()
        exchange.handling_ns = time.perf_counter_ns() - started_ns
        self._in_flight.append(exchange)
        return pending

    def write_congested(self, congested: bool) -> None:
        """The client stopped (True) or resumed (False) draining our answers."""
        if self._upstream is not None:
            self._upstream.hold(congested)

    def closed(self) -> None:
        """The client connection closed: close its upstream, drop what is in flight."""
        if self._closed:
            return
        self._closed = True
        if self._upstream is not None:
            self._upstream.close()
        self._in_flight.clear()
        self._outbox.clear()

    @property
    def idle(self) -> bool:
        """Nothing forwarded is waiting for the broker (graceful shutdown waits for it)."""
        return not self._in_flight

    @property
    def in_flight(self) -> int:
        """Forwarded requests waiting for the broker's response."""
        return len(self._in_flight)

    # -- the upstream connection's sink --------------------------------------------------
    def upstream_ready(self, upstream: Upstream) -> None:
        if self._closed:
            upstream.close()
            return
        self._upstream = upstream
        outbox, self._outbox = self._outbox, []
        for raw in outbox:
            upstream.send_frame(raw)

    def upstream_response(self, payload: bytes) -> None:
        if not self._in_flight:
            self._break("a response for no request in flight")
            return
        exchange = self._in_flight.popleft()
        frame = exchange.frame
        if (
            len(payload) < 4
            or _CORRELATION_ID.unpack_from(payload, 0)[0] != frame.correlation_id
        ):
            self._break(
                f"a response out of order (expected correlation id {frame.correlation_id})"
            )
            return
        if not self._upstream_answered:
            self._upstream_answered = True
            self._gateway.upstream_answered(self)
        if frame.api_key not in BEFORE_AUTHENTICATION:
            if self._sasl.mechanism is not None:
                # After its SASL exchange (GSSAPI, OAUTHBEARER: mechanisms whose end the
                # gateway does not read): the cluster let this connection in.
                self._admitted_upstream = True
            elif (
                not self.listener_authenticates
                and self._authentication.state is UpstreamAuthentication.UNKNOWN
            ):
                # Answered though this connection never began a SASL exchange.
                self._authentication.learned_not_required(
                    f"{api_name(frame.api_key)} answered to a client that did not "
                    "authenticate"
                )
        try:
            response = self._respond(exchange, payload)
        except Exception as exc:  # a malformed response closes this pair only
            self._break(f"malformed {api_name(frame.api_key)} response: {exc}")
            return
        assert exchange.pending is not None
        exchange.pending.complete(response)

    def _respond(self, exchange: Exchange, payload: bytes) -> list[bytes]:
        """The bytes to write to the client for one upstream response (size prefix
        included, possibly in pieces): the chain's response filters, then the throttle."""
        started_ns = time.perf_counter_ns()
        frame = exchange.frame
        api_key = frame.api_key
        version = frame.api_version
        body_at = response_body_offset(api_key, version, payload)
        body = memoryview(payload)[body_at:]
        exchange.response = payload
        chain = self._chains[api_key]
        new_body: Body = body
        for response_filter in chain.response:
            new_body = response_filter.on_response(exchange, new_body)
        session = exchange.session
        quotas = self._quotas
        throttle_ms = max(exchange.throttle_ms, exchange.response_throttle_ms)
        if quotas.active:
            handling_ns = exchange.handling_ns + time.perf_counter_ns() - started_ns
            throttle_ms = max(
                throttle_ms,
                quotas.record_request_time(
                    session.principal_name, frame.client_id, handling_ns, self._now_ms()
                ),
            )
        if throttle_ms > 0:
            channel = exchange.channel
            for throttled_filter in chain.throttled:
                answer = throttled_filter.on_throttled(exchange, body, throttle_ms)
                if answer is not None:
                    quotas.mute(
                        channel, session.principal_name, frame.client_id, throttle_ms
                    )
                    return [answer]
            # (Also with only a mutation quota configured: the request's own throttle.)
            current = memoryview(new_body)
            if throttle_ms > (read_throttle_ms(api_key, version, current) or 0):
                new_body = with_throttle_ms(api_key, version, current, throttle_ms)
            # A request throttled by its own recording held the channel since; the timed
            # mute takes over (quotas.py).
            quotas.mute(
                channel,
                session.principal_name,
                frame.client_id,
                throttle_ms,
                held=exchange.throttle_ms > 0,
            )
        if new_body is body:
            return [_SIZE_PREFIX.pack(len(payload)), payload]
        # (Any bytes-like piece: the transport's writelines takes views and bytearrays.)
        rewritten = cast(bytes, new_body)
        return [
            _SIZE_PREFIX.pack(body_at + len(new_body)),
            payload[:body_at],
            rewritten,
        ]

    def upstream_lost(self, reason: str) -> None:
        self._gateway.upstream_lost(self, reason, len(self._in_flight))
        self._fail(reason)

    def upstream_malformed(self, reason: str) -> None:
        """The broker sent bytes that are not a response frame: this pair is closed."""
        self._break(reason)

    def upstream_congested(self, congested: bool) -> None:
        if self.channel is not None:
            self.channel.hold_reading(congested)

    def upstream_unreachable(self, reason: str) -> None:
        self._fail(reason)

    # -- internals -----------------------------------------------------------------------
    def _forward(self, raw: bytes) -> None:
        if self._upstream is not None:
            self._upstream.send_frame(raw)
        else:
            self._outbox.append(raw)

    def _break(self, reason: str) -> None:
        self._gateway.upstream_broken(self, reason)
        self._fail(f"upstream protocol error: {reason}")

    def _fail(self, reason: str) -> None:
        """The pair is over: answers already queued are written, then the client's
        connection closes, as a dead broker's would."""
        if self._closed:
            return
        self._closed = True
        # Closed first, quietly: the gateway logged the cause once for every connection of
        # this upstream node (outages.py), and the requests failed below then drop silently.
        if self.channel is not None:
            self.channel.close_for(reason, quiet=True)
        error = ConnectionAbortedError(reason)
        in_flight, self._in_flight = self._in_flight, deque()
        for entry in in_flight:
            if entry.pending is not None:
                entry.pending.fail(error)
        if self._upstream is not None:
            self._upstream.close()
