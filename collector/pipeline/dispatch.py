"""Request dispatch: frame -> decoded request -> handler -> encoded response.

The rules are a table (``api_key -> Api``); a key missing from it closes the connection,
as Kafka closes a connection whose header names an API it does not know.  This is the one
boundary where exceptions become responses, and the one place where the quota engine
meets a request (:class:`~collector.pipeline.quota_enforcer.QuotaEnforcer`): handling time and size are
recorded after the handler ran, and a non-zero throttle goes into the response's
``throttle_time_ms`` and mutes the channel for that long (Kafka's
``sendResponseMaybeThrottle``, KIP-219).

Version handling follows ``RequestContext.parseRequest`` / ``SocketServer``:

| case                                   | what happens                                     |
|----------------------------------------|--------------------------------------------------|
| unknown api key                        | connection closed, one log line                  |
| ApiVersions at a version we don't speak| ApiVersionsResponse v0, UNSUPPORTED_VERSION (35) |
| other API at a version we don't speak  | connection closed, one log line                  |
| body that does not parse               | connection closed, one log line                  |
| handler raises CloseConnection         | connection closed (a request Kafka cannot build) |
| handler raises                         | the API's error response (Kafka's catch-all)     |
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from collector.core.context import CloseConnection, RequestContext
from collector.core.handler import PushTelemetryHandler, RequestHandler
from collector.core.session import Session
from proto import (
    ApiKeys,
    RequestFrame,
    api_versions_unsupported_response,
    decode_request,
    encode_response,
)
from proto.errors import Errors, KafkaError, UnsupportedVersionError

if TYPE_CHECKING:
    # Concrete classes, not protocols: both are compiled, and a call on a compiled class
    # from compiled code is a direct C call (through a protocol it is a method lookup and
    # an argument parse, several times per push).
    from clock import Clock
    from collector.core.channel import Channel
    from collector.pipeline.quota_enforcer import QuotaEnforcer
    from collector.pipeline.request_metrics import RequestMetrics

__all__ = ["Api", "Dispatcher", "push_response_v0"]

log = logging.getLogger(__name__)

_PUSH_TELEMETRY = int(
    ApiKeys.PUSH_TELEMETRY
)  # a plain int: enum attribute access costs
# PushTelemetryResponse v0, the whole frame (the push path's most frequent response): size
# 12, correlation id, response header v1's empty tagged fields, ThrottleTimeMs 0,
# ErrorCode, the body's empty tagged fields. Everything after the correlation id is fixed
# per error code, so it is packed once per code and joined to the packed size and id.
_PUSH_RESPONSE_V0 = struct.Struct(">iiBihB")
_pack_size_and_correlation_id: Final = struct.Struct(">ii").pack
_PUSH_RESPONSE_V0_SIZE = _PUSH_RESPONSE_V0.size - 4
_PUSH_RESPONSE_V0_TAILS: Final = {
    int(code): _PUSH_RESPONSE_V0.pack(0, 0, 0, 0, int(code), 0)[8:] for code in Errors
}
_THROTTLING_QUOTA_EXCEEDED = int(Errors.THROTTLING_QUOTA_EXCEEDED)
# Requests whose THROTTLING_QUOTA_EXCEEDED answer is push-interval gating (an admin API's
# 89 is the strict mutation quota, counted by the enforcer as controller_mutation).
_GATED_APIS: Final = frozenset(
    {int(ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS), int(ApiKeys.PUSH_TELEMETRY)}
)
# decode() found an ApiVersions request at a version we don't speak (answered with v0).
_UNSUPPORTED_API_VERSIONS = object()


@dataclasses.dataclass(frozen=True, slots=True)
class Api:
    """One row of the dispatch table."""

    name: str
    handle: Callable[[Any, RequestContext], Any]
    # Builds the error response for a request (Kafka's AbstractRequest.getErrorResponse).
    error_response: Callable[[Any, Errors], Any]
    # What an unexpected exception in ``handle`` becomes: Kafka's KafkaApis wraps the
    # telemetry handlers in a catch-all answering INVALID_REQUEST; elsewhere
    # Errors.forException gives UNKNOWN_SERVER_ERROR.
    unexpected_error: Errors = Errors.UNKNOWN_SERVER_ERROR
    # PushTelemetry only: the manager whose ``push_telemetry`` answers version 0 without a
    # RequestContext (see Dispatcher._push).
    push_manager: PushTelemetryHandler | None = None


def push_response_v0(correlation_id: int, error_code: int) -> bytes:
    """A whole PushTelemetryResponse v0 frame with no throttle (the push path's answer),
    byte-identical to ``encode_response`` (a test pins every code)."""
    tail = _PUSH_RESPONSE_V0_TAILS.get(error_code)
    if tail is None:  # not one of Errors: pack it whole (struct checks the range)
        return _PUSH_RESPONSE_V0.pack(
            _PUSH_RESPONSE_V0_SIZE, correlation_id, 0, 0, error_code, 0
        )
    return _pack_size_and_correlation_id(_PUSH_RESPONSE_V0_SIZE, correlation_id) + tail


class Dispatcher(RequestHandler):
    """The serving node's :class:`~collector.core.handler.RequestHandler`."""

    def __init__(
        self,
        apis: Mapping[int, Api],
        *,
        clock: Clock,
        quota: QuotaEnforcer | None = None,
        observer: RequestMetrics | None = None,
    ) -> None:
        self._apis = dict(apis)
        # The clock's bound method, read once: one call per request, no attribute lookup.
        self._now_ms: Callable[[], int] = clock.now_ms
        self.quota = quota
        self._observer = observer

    @property
    def api_keys(self) -> frozenset[int]:
        return frozenset(self._apis)

    def handle(
        self, frame: RequestFrame, session: Session, channel: Channel
    ) -> bytes | None:
        api = self._apis.get(frame.api_key)
        if api is None:
            raise CloseConnection(f"unknown api key {frame.api_key}")
        push_manager = api.push_manager
        if push_manager is not None and frame.api_version == 0:
            return self._push(api, push_manager, frame, session, channel)
        request = self._decode(api, frame)
        if request is _UNSUPPORTED_API_VERSIONS:
            return api_versions_unsupported_response(frame.correlation_id)

        quota = self.quota
        started_ns = time.perf_counter_ns() if quota is not None else 0
        context = RequestContext(frame, session, self._now_ms(), channel)
        try:
            response = api.handle(request, context)
        except CloseConnection:
            # A request Kafka's request class refuses to build (the ACL APIs' UNKNOWN
            # elements): Kafka fails the parse and closes the connection.
            raise
        except Exception:  # Kafka's catch-all: the API's error response
            response = self._unexpected(api, frame, session, request)

        error_code = getattr(response, "error_code", 0)
        if quota is not None:
            throttle_ms = quota.record(
                context,
                len(frame.raw) - frame.header_size,
                time.perf_counter_ns() - started_ns,
                response,
            )
            if (
                error_code == _THROTTLING_QUOTA_EXCEEDED
                and frame.api_key in _GATED_APIS
            ):
                quota.count_push_interval_gate(
                    session.principal_name, frame.client_id, context.now_ms
                )
            if throttle_ms > 0 and hasattr(response, "throttle_time_ms"):
                response = dataclasses.replace(response, throttle_time_ms=throttle_ms)
                quota.throttle(context, throttle_ms)
        if self._observer is not None:
            self._observer.observe(frame.api_key, error_code)
        return encode_response(
            frame.api_key, frame.api_version, frame.correlation_id, response
        )

    def _push(
        self,
        api: Api,
        push_manager: PushTelemetryHandler,
        frame: RequestFrame,
        session: Session,
        channel: Channel,
    ) -> bytes:
        """``handle`` for PushTelemetry v0, nearly all of a collector's traffic: the same
        steps with the same results, minus what the generic path builds for every request.
        While the quota engine is idle (no request or produce quota, no mutation pending)
        nothing is timed or recorded, only push-interval gating (89) is counted; otherwise
        the handler time and the push's size go to ``quota.record_push``.  A RequestContext
        is built only for a throttle.  A test pins both ways to the generic path."""
        request = self._decode(api, frame)
        quota = self.quota
        metered = quota is not None and not quota.is_idle()
        now_ms = self._now_ms()
        client_id = frame.client_id
        started_ns = time.perf_counter_ns() if metered else 0
        try:
            response = push_manager.push_telemetry(
                request, session, client_id, frame.correlation_id, now_ms
            )
        except Exception:  # Kafka's catch-all: the API's error response
            response = self._unexpected(api, frame, session, request)
        error_code = response.error_code
        throttle_ms = 0
        if metered:
            throttle_ms = quota.record_push(  # type: ignore[union-attr]
                session.principal_name,
                client_id,
                len(frame.raw),
                time.perf_counter_ns() - started_ns,
                now_ms,
            )
        if error_code == _THROTTLING_QUOTA_EXCEEDED and quota is not None:
            quota.count_push_interval_gate(session.principal_name, client_id, now_ms)
        if self._observer is not None:
            self._observer.observe(_PUSH_TELEMETRY, error_code)
        if throttle_ms > 0:
            response = dataclasses.replace(response, throttle_time_ms=throttle_ms)
            quota.throttle(RequestContext(frame, session, now_ms, channel), throttle_ms)  # type: ignore[union-attr]
            return encode_response(_PUSH_TELEMETRY, 0, frame.correlation_id, response)
        return push_response_v0(frame.correlation_id, error_code)

    @staticmethod
    def _decode(api: Api, frame: RequestFrame) -> Any:
        try:
            return decode_request(frame)
        except UnsupportedVersionError:
            if frame.api_key == ApiKeys.API_VERSIONS:
                return _UNSUPPORTED_API_VERSIONS
            raise CloseConnection(
                f"{api.name} version {frame.api_version} is not supported"
            ) from None
        except KafkaError as exc:
            raise CloseConnection(
                f"malformed {api.name} v{frame.api_version}: {exc}"
            ) from None

    @staticmethod
    def _unexpected(
        api: Api, frame: RequestFrame, session: Session, request: Any
    ) -> Any:
        log.exception(
            "unexpected error handling %s v%d (correlation id %d) from %s",
            api.name,
            frame.api_version,
            frame.correlation_id,
            session.client_source_address,
        )
        return api.error_response(request, api.unexpected_error)
