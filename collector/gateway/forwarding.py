"""One client connection of the gateway and the upstream connection paired with it.

Every request the client sends is either answered here (telemetry, client-metrics
administration, an ApiVersions request newer than the gateway speaks) or forwarded, as the
bytes the client sent with its own correlation id, on the client's own upstream connection.
Responses come back in request order (a broker answers one connection in order), so the
requests in flight are a FIFO: the head must carry the correlation id of the response that
arrived, or the broker broke the protocol and the pair is closed.

What happens to a forwarded request is a table (:data:`ROUTES`), api key -> route; a route
says what must be read of the request and what must be done to its response.  Everything
not in the table but known to Kafka 4.4 passes as opaque bytes both ways.

Before a client has authenticated, the gateway's :class:`AuthenticationPolicy`
(``authentication.py``) decides whether a request is served at all: where the cluster
requires SASL, nothing but ApiVersions and the SASL exchange is, as on the cluster's own
listener; the connection of a client that sends anything else is closed.

Quotas are recorded as a Kafka broker records them (``KafkaApis``), with the gateway's
engine and config store:

| quota                     | what counts                                   | when                 |
|---------------------------|-----------------------------------------------|----------------------|
| ``producer_byte_rate``    | a Produce request's size, header and body     | request forwarded    |
| ``consumer_byte_rate``    | a Fetch response's size                       | response received    |
| ``request_percentage``    | the gateway's own handling time of the pair   | response received    |
| ``controller_mutation``   | partitions CreateTopics/CreatePartitions/     | before forwarding    |
|                           | DeleteTopics would mutate (strict: rejected)  |                      |

The client sees the larger of the broker's and the gateway's ``throttle_time_ms``; its
channel is muted for the gateway's part after the response is queued (KIP-219).  The
throttle field is patched in place, never by re-encoding a (possibly large) response.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Final

from collector.core.context import CloseConnection
from collector.gateway.authentication import BEFORE_AUTHENTICATION
from collector.gateway.sasl import SaslCapture
from collector.net.flush import PendingResponse
from proto import ApiKeys, KafkaError, RequestFrame
from proto.errors import Errors

if TYPE_CHECKING:
    # The gateway the pair belongs to (``service.Gateway``), as the pair sees it: the
    # service creates pairs, so the pair knows it only by this shape (no import circle).
    Gateway = Any

__all__ = ["ClientPair", "Route", "ROUTES"]

log = logging.getLogger(__name__)

_CORRELATION_ID: Final = struct.Struct(">i")


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
    """What the gateway does with one API's requests and responses."""

    # Answered by the gateway's own dispatcher, never forwarded.
    local: bool = False
    # The response carries broker addresses to rewrite (and nodes to learn).
    addresses: bool = False
    # Quota bookkeeping beyond request time: "produce", "fetch" or "mutation".
    quota: str = ""
    # Read SASL usernames (SaslHandshake / SaslAuthenticate).
    sasl: bool = False
    # ApiVersions: cap the upstream's ranges and add the gateway's own APIs.
    api_versions: bool = False
    # Client-metrics administration: CLIENT_METRICS resources are answered here.
    admin_split: bool = False
    # The ACL APIs: answered here when the gateway has an authorizer (its ACLs are the ones
    # it checks), else forwarded (the cluster's).
    acls: bool = False
    # The SCRAM credential APIs: answered here when the gateway has SASL listeners of its
    # own (their credentials are the gateway's), else forwarded (the cluster's users).
    scram: bool = False


_OPAQUE: Final = Route()

ROUTES: Final[dict[int, Route]] = {
    ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS: Route(local=True),
    ApiKeys.PUSH_TELEMETRY: Route(local=True),
    # The client quotas are the gateway's: the ones its engine enforces on this traffic.
    ApiKeys.DESCRIBE_CLIENT_QUOTAS: Route(local=True),
    ApiKeys.ALTER_CLIENT_QUOTAS: Route(local=True),
    ApiKeys.API_VERSIONS: Route(api_versions=True),
    ApiKeys.METADATA: Route(addresses=True),
    ApiKeys.FIND_COORDINATOR: Route(addresses=True),
    ApiKeys.DESCRIBE_CLUSTER: Route(addresses=True),
    ApiKeys.DESCRIBE_QUORUM: Route(addresses=True),
    ApiKeys.SHARE_FETCH: Route(addresses=True),
    ApiKeys.SHARE_ACKNOWLEDGE: Route(addresses=True),
    ApiKeys.PRODUCE: Route(addresses=True, quota="produce"),
    ApiKeys.FETCH: Route(addresses=True, quota="fetch"),
    ApiKeys.CREATE_TOPICS: Route(quota="mutation"),
    ApiKeys.CREATE_PARTITIONS: Route(quota="mutation"),
    ApiKeys.DELETE_TOPICS: Route(quota="mutation"),
    ApiKeys.SASL_HANDSHAKE: Route(sasl=True),
    ApiKeys.SASL_AUTHENTICATE: Route(sasl=True),
    ApiKeys.DESCRIBE_CONFIGS: Route(admin_split=True),
    ApiKeys.INCREMENTAL_ALTER_CONFIGS: Route(admin_split=True),
    ApiKeys.LIST_CONFIG_RESOURCES: Route(admin_split=True),
    ApiKeys.DESCRIBE_ACLS: Route(acls=True),
    ApiKeys.CREATE_ACLS: Route(acls=True),
    ApiKeys.DELETE_ACLS: Route(acls=True),
    ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS: Route(scram=True),
    ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: Route(scram=True),
}


@dataclasses.dataclass(slots=True)
class _InFlight:
    """A forwarded request waiting for its response."""

    frame: RequestFrame
    route: Route
    pending: PendingResponse
    # The gateway's throttle decided when the request was forwarded (produce bytes).
    throttle_ms: int
    # The gateway's own handling time so far (request side).
    handling_ns: int
    # Per-route state: the SASL username seen, the local half of a split admin request.
    state: Any = None


class ClientPair:
    """The handler of one client connection: answers locally or forwards, and owns the
    upstream connection that carries this client's forwarded requests."""

    def __init__(self, gateway: Gateway, node_id: int | None) -> None:
        self._gateway = gateway
        # The upstream node this client's listener stands for (None: the bootstrap listener).
        self.node_id = node_id
        # The broker address the upstream connection was opened to (outage reporting).
        self.upstream_address: tuple[str, int] | None = None
        # The client connection (a Channel: mute, close_for, hold_reading) and its identity.
        self.channel: Any = None
        self.session: Any = None
        self._upstream: Any = None
        # Until the first response arrives the upstream is only connected, not known alive:
        # a broker being killed can still complete a TCP handshake (outages.py).
        self._upstream_answered = False
        self._outbox: list[bytes] = []  # frames written before the upstream connected
        self._in_flight: deque[_InFlight] = deque()
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
    def opened(self, channel: Any, session: Any) -> None:
        self.channel = channel
        self.session = session
        self._gateway.connect_upstream(self)

    def handle(
        self, frame: RequestFrame, session: Any, channel: Any
    ) -> bytes | PendingResponse | None:
        gateway = self._gateway
        api_key = frame.api_key
        route = ROUTES.get(api_key, _OPAQUE)
        local = (
            route.local
            or (route.acls and gateway.answers_acls)
            or (route.scram and gateway.answers_scram)
        )
        if not self.authenticated and gateway.authentication.refuses(
            api_key, local or route.admin_split
        ):
            # As a SASL listener closes it (SaslServerAuthenticator: "Unexpected Kafka
            # request of type ... during SASL handshake"): nothing written.
            gateway.stats.refused_unauthenticated[_api_name(api_key)] += 1
            raise CloseConnection(
                f"unexpected {_api_name(api_key)} request before SASL authentication"
            )
        if local:
            if self._sasl.authenticating:
                # Not authenticated yet: a broker closes such a connection (SaslCapture).
                raise CloseConnection(
                    f"unexpected {_api_name(api_key)} request during SASL authentication"
                )
            return gateway.dispatcher.handle(frame, session, channel)
        if api_key not in gateway.known_api_keys:
            # Kafka closes a connection whose header names an API it does not know.
            raise CloseConnection(f"unknown api key {api_key}")
        started_ns = time.perf_counter_ns()
        state: Any = None
        throttle_ms = 0
        if route.api_versions:
            local = gateway.api_versions_request(frame, session)
            if local is not None:
                return local
        elif route.quota == "produce":
            throttle_ms = gateway.quotas.record_produce_bytes(
                session.principal_name,
                frame.client_id,
                len(frame.raw),
                gateway.now_ms(),
            )
            if gateway.produce_acks(frame) == 0:
                # acks=0: the broker sends nothing back, so there is no response to carry
                # a throttle time; the channel is muted all the same (Kafka's handleProduce).
                self._forward(frame.raw)
                handling_ns = time.perf_counter_ns() - started_ns
                throttle_ms = max(
                    throttle_ms,
                    gateway.quotas.record_request_time(
                        session.principal_name,
                        frame.client_id,
                        handling_ns,
                        gateway.now_ms(),
                    ),
                )
                if throttle_ms > 0:
                    gateway.quotas.mute(
                        channel, session.principal_name, frame.client_id, throttle_ms
                    )
                return None
        elif route.quota == "fetch":
            # MaxBytes clamped to what the client's fetch quota allows (as KafkaApis does).
            self._forward(
                gateway.quotas.fetch_request(
                    frame, session.principal_name, gateway.now_ms()
                )
            )
            return self._wait(frame, route, throttle_ms, started_ns, state)
        elif route.quota == "mutation":
            decision = gateway.mutation_check(frame, session, channel)
            if isinstance(decision, bytes):
                return decision  # strict quota exceeded: answered here, not forwarded
            throttle_ms = decision
        elif route.sasl:
            try:
                self._sasl.on_request(frame)
            except KafkaError as exc:
                reason = f"malformed {_api_name(api_key)} request: {exc}"
                raise CloseConnection(reason) from None
        elif route.admin_split:
            split = gateway.admin_split(frame, session, channel)
            if isinstance(split, bytes):
                return split  # only CLIENT_METRICS resources: answered here
            if split is not None:
                state, raw = split
                self._forward(raw)
                return self._wait(frame, route, throttle_ms, started_ns, state)
        if throttle_ms > 0:
            # Throttled by its own recording: read nothing more from the client until its
            # response is written and the throttle is over (a broker's one request at a time).
            gateway.quotas.hold(channel)
        self._forward(frame.raw)
        return self._wait(frame, route, throttle_ms, started_ns, state)

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
    def upstream_ready(self, upstream: Any) -> None:
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
        entry = self._in_flight.popleft()
        if (
            len(payload) < 4
            or _CORRELATION_ID.unpack_from(payload, 0)[0] != entry.frame.correlation_id
        ):
            self._break(
                f"a response out of order (expected correlation id {entry.frame.correlation_id})"
            )
            return
        if not self._upstream_answered:
            self._upstream_answered = True
            self._gateway.upstream_answered(self)
        if entry.frame.api_key not in BEFORE_AUTHENTICATION:
            if self._sasl.mechanism is not None:
                # After its SASL exchange (GSSAPI, OAUTHBEARER: mechanisms whose end the
                # gateway does not read): the cluster let this connection in.
                self._admitted_upstream = True
            elif not self.listener_authenticates:
                # Answered though this connection never began a SASL exchange.
                self._gateway.authentication.learned_not_required(
                    f"{_api_name(entry.frame.api_key)} answered to a client that did "
                    "not authenticate"
                )
        try:
            response = self._gateway.response(entry, payload, self)
        except Exception as exc:
            self._break(f"malformed {_api_name(entry.frame.api_key)} response: {exc}")
            return
        entry.pending.complete(response)

    def sasl_response(self, api_key: int, body: Any) -> None:
        """A SaslHandshake/SaslAuthenticate answer: the broker's acceptance of the whole
        exchange (SCRAM: its proof too, not only the first message) makes the captured user
        this connection's principal (quota entity, telemetry context)."""
        capture = self._sasl
        named = capture.principal
        if api_key == ApiKeys.SASL_HANDSHAKE and _error_code(body) in _SASL_LISTENER:
            # Only a SASL listener serves the handshake (any other answers 34).
            self._gateway.authentication.learned_required(
                "it served a client's SaslHandshake"
            )
        principal = capture.on_response(api_key, body)
        if principal is not None and self.session is not None:
            self.session.set_principal(principal)
        elif capture.authenticating and named is not None and capture.principal is None:
            # Refused upstream (as a broker logs a failed authentication; the name the
            # client gave and the error, never a token).
            error = _error_code(body)
            log.info(
                "SASL %s authentication of %s refused upstream (error %d) for the client at %s",
                capture.mechanism,
                named,
                error,
                _peer(self.session),
            )

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

    def _wait(
        self,
        frame: RequestFrame,
        route: Route,
        throttle_ms: int,
        started_ns: int,
        state: Any,
    ) -> PendingResponse:
        pending = PendingResponse()
        self._in_flight.append(
            _InFlight(
                frame,
                route,
                pending,
                throttle_ms,
                time.perf_counter_ns() - started_ns,
                state,
            )
        )
        return pending

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
            entry.pending.fail(error)
        if self._upstream is not None:
            self._upstream.close()


# SaslHandshake answers only a SASL listener gives: accepted, or the mechanism not enabled.
_SASL_LISTENER: Final = frozenset({0, int(Errors.UNSUPPORTED_SASL_MECHANISM)})


def _error_code(body: Any) -> int:
    return int.from_bytes(bytes(body[:2]), "big", signed=True)


def _peer(session: Any) -> str:
    if session is None:
        return "?"
    return f"{session.client_source_address}:{session.client_source_port}"


def _api_name(api_key: int) -> str:
    try:
        return ApiKeys(api_key).name
    except ValueError:
        return f"api key {api_key}"
