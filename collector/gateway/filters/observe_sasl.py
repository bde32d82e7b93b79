"""SASL passes through the gateway to the upstream broker; the gateway reads who the client
says it is (PLAIN and SCRAM name the user, never the password: ``collector.gateway.sasl``)
and, once the broker accepts the whole exchange, makes that user the session's principal
(the quota ``user`` entity, the telemetry context)."""

from __future__ import annotations

import logging
from typing import Final

from collector.core.context import CloseConnection
from collector.gateway.filters.base import CONTINUE, Body, Exchange, Filter
from proto import ApiKeys, KafkaError, api_name
from proto.errors import Errors

__all__ = ["ObserveSasl"]

log = logging.getLogger(__name__)

# SaslHandshake answers only a SASL listener gives: accepted, or the mechanism not enabled.
_SASL_LISTENER: Final = frozenset({0, int(Errors.UNSUPPORTED_SASL_MECHANISM)})


class ObserveSasl(Filter):
    __slots__ = ()

    def on_request(self, exchange: Exchange) -> object:
        try:
            exchange.sasl.on_request(exchange.frame)
        except KafkaError as exc:
            name = api_name(exchange.frame.api_key)
            raise CloseConnection(f"malformed {name} request: {exc}") from None
        return CONTINUE

    def on_response(self, exchange: Exchange, body: Body) -> Body:
        capture = exchange.sasl
        session = exchange.session
        named = capture.principal
        api_key = exchange.frame.api_key
        if api_key == ApiKeys.SASL_HANDSHAKE and _error_code(body) in _SASL_LISTENER:
            # Only a SASL listener serves the handshake (any other answers 34).
            self.services.authentication.learned_required(
                "it served a client's SaslHandshake"
            )
        principal = capture.on_response(api_key, body)
        if principal is not None:
            session.set_principal(principal)
        elif capture.authenticating and named is not None and capture.principal is None:
            # Refused upstream (as a broker logs a failed authentication; the name the
            # client gave and the error, never a token).
            error = _error_code(body)
            log.info(
                "SASL %s authentication of %s refused upstream (error %d) for the client "
                "at %s:%s",
                capture.mechanism,
                named,
                error,
                session.client_source_address,
                session.client_source_port,
            )
        return body


def _error_code(body: Body) -> int:
    return int.from_bytes(body[:2], "big", signed=True)
