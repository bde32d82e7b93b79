"""The gateway's per-API work as filters, in the manner of Kroxylicious: one small class per
concern, a table from API key to its filters (``collector.gateway.filters``), and a typed
context, :class:`Exchange`, for one forwarded request and its response.

A filter overrides the hooks it needs; the chain of an API calls them in table order:

| hook | called | returns |
|---|---|---|
| ``on_request(exchange)`` | before the request is forwarded | :data:`CONTINUE`, or the answer itself (the request is not forwarded, the filters after it are not called) |
| ``on_response(exchange, body)`` | for the upstream's response | the body to pass on (``body`` itself: unchanged) |
| ``on_throttled(exchange, body, throttle_ms)`` | when the gateway throttles the response | the whole answer in its place, or None |

What every forwarded request gets whatever its API — the unknown-key check, forwarding in
order on the client's own upstream connection, the request-time quota and the throttle in
the response (KIP-219) — is the chain runner's (``forwarding.ClientPair``), not a filter's.

Filters are made once per gateway with its :class:`GatewayServices` and shared by every
connection; what belongs to one connection is in the exchange (its session, channel, SASL
capture), what belongs to one request too (:attr:`Exchange.state`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, Protocol

from collector.core.context import CloseConnection
from proto import KafkaError, RequestFrame, api_name

if TYPE_CHECKING:
    from collector.core.channel import Channel
    from collector.core.handler import RequestHandler
    from collector.core.session import Session
    from collector.gateway.admin_split import AdminSplitter
    from collector.gateway.authentication import AuthenticationPolicy
    from collector.gateway.cluster import ClusterView
    from collector.gateway.forwarded_quotas import GatewayQuotas
    from collector.gateway.sasl import SaslCapture
    from collector.net.flush import PendingResponse

__all__ = [
    "CONTINUE",
    "Body",
    "Chain",
    "Exchange",
    "Filter",
    "GatewayServices",
    "LocalAnswerSettings",
    "LocalAnswers",
    "malformed",
]


# A response body as filters pass it on: the upstream's bytes (a view), or a rewritten copy.
Body = memoryview | bytes | bytearray


class _Continue:
    __slots__ = ()

    def __repr__(self) -> str:
        return "CONTINUE"


# on_request's "go on": the next filter, then forwarding.
CONTINUE: Final = _Continue()


@dataclasses.dataclass(slots=True)
class Exchange:
    """One request of one client connection, from the header read to the response written."""

    frame: RequestFrame
    session: Session
    channel: Channel
    # The connection's SASL passthrough state (who the client says it is).
    sasl: SaslCapture
    # What goes upstream: the client's bytes (header and body, no size prefix), or what a
    # filter put in their place (a clamped Fetch, the forwarded part of a split request).
    raw: bytes
    # The gateway's throttle decided on the request side (produce bytes, mutations): the
    # channel is held until the response is written, then muted for the rest.
    throttle_ms: int = 0
    # False: the broker sends no response (Produce with acks=0).
    expects_response: bool = True
    # A filter's own state between request and response (the local half of a split request).
    state: object = None
    # The gateway's own handling time (request side, then response side).
    handling_ns: int = 0
    # Where the response goes, once forwarded.
    pending: PendingResponse | None = None
    # The upstream's response (header and body, no size prefix), once it is in.
    response: bytes = b""
    # The throttle response filters decided (fetch bytes).
    response_throttle_ms: int = 0


class Filter:
    """One concern of the gateway's per-API work; override the hooks it needs."""

    __slots__ = ("services",)

    def __init__(self, services: GatewayServices) -> None:
        self.services = services

    @classmethod
    def answers_here(cls, answers: LocalAnswers) -> bool:
        """The filter may answer its requests here, at least in part, on a gateway that
        answers ``answers`` itself: what makes an API one the gateway answers (its versions
        added to ApiVersions, the node's dispatcher over it, and refused to a client that
        has not authenticated where authentication is required: the
        ``AuthenticationPolicy``)."""
        return False

    def on_request(self, exchange: Exchange) -> object:
        return CONTINUE

    def on_response(self, exchange: Exchange, body: Body) -> Body:
        return body

    def on_throttled(
        self, exchange: Exchange, body: memoryview, throttle_ms: int
    ) -> bytes | None:
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class Chain:
    """An API's filters, by hook: only those that override it are called."""

    request: tuple[Filter, ...] = ()
    response: tuple[Filter, ...] = ()
    throttled: tuple[Filter, ...] = ()
    # Some filter may answer the request here (AuthenticationPolicy.refuses' ``local``).
    answered_here: bool = False

    @classmethod
    def of(cls, filters: tuple[Filter, ...], answers: LocalAnswers) -> Chain:
        def overriding(hook: str) -> tuple[Filter, ...]:
            base = getattr(Filter, hook)
            return tuple(f for f in filters if getattr(type(f), hook) is not base)

        return cls(
            overriding("on_request"),
            overriding("on_response"),
            overriding("on_throttled"),
            any(f.answers_here(answers) for f in filters),
        )


class LocalAnswers(Protocol):
    """Which of the APIs that depend on the gateway's setup it answers itself."""

    # The gateway has an authorizer: the ACL APIs are answered here (its ACLs).
    @property
    def answers_acls(self) -> bool: ...

    # The gateway has SASL listeners: the SCRAM credential APIs are answered here (its users).
    @property
    def answers_scram(self) -> bool: ...


@dataclasses.dataclass(frozen=True, slots=True)
class LocalAnswerSettings:
    """:class:`LocalAnswers` as settings, before the gateway's services exist."""

    answers_acls: bool = False
    answers_scram: bool = False


@dataclasses.dataclass(slots=True)
class GatewayServices:
    """What the filters of one gateway share."""

    # Answers what the gateway terminates (telemetry, the client-metrics part of admin
    # requests): the node's dispatcher over its own APIs.
    dispatcher: RequestHandler
    quotas: GatewayQuotas
    admin: AdminSplitter
    cluster: ClusterView
    now_ms: Callable[[], int]
    # Whether the cluster requires clients to authenticate (what teaches it: SaslHandshake
    # answers, among others).
    authentication: AuthenticationPolicy
    # The gateway has an authorizer: the ACL APIs are answered here (its ACLs).
    answers_acls: bool = False
    # The gateway has SASL listeners: the SCRAM credential APIs are answered here (its users).
    answers_scram: bool = False
    # The versions of the APIs the gateway answers itself (added to the upstream's
    # ApiVersions): set from the filter table once the chains are built.
    local_api_versions: Mapping[int, tuple[int, int]] = dataclasses.field(
        default_factory=dict
    )


def malformed(frame: RequestFrame, exc: KafkaError) -> CloseConnection:
    """A request the gateway must read and cannot: only this client's connection closes
    (the network layer logs the reason once and counts it as a protocol error)."""
    return CloseConnection(
        f"malformed {api_name(frame.api_key)} v{frame.api_version} request: {exc}"
    )
