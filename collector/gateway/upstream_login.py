"""The gateway's own login to a cluster that requires SASL (``gateway.upstream.sasl.*``).

Used when clients log in at the gateway's own SASL listeners: each upstream connection the
gateway opens for such a client first completes SaslHandshake (v1) and SaslAuthenticate
(v2) exchanges as the gateway's user, exactly as a Kafka client logs in, and only then
carries the client's requests.  A refusal is a failed connection (the client's is closed,
and the outage logged once, as for an unreachable broker); the message names the user and
the cluster's error, never the password.
"""

from __future__ import annotations

import asyncio
from typing import Any

from collector.net.kafka_cluster import SaslLogin
from collector.security.sasl.client import SaslClientError, new_sasl_client
from proto import ApiKeys, KafkaError, api_name, decode_response, encode_request
from proto.messages import SaslAuthenticateRequest, SaslHandshakeRequest

__all__ = ["LoginSink", "UpstreamLogin", "log_in"]

_CLIENT_ID = "ktc-gateway"


# The login of KafkaClusterSettings, as the gateway and the admin client use it.
UpstreamLogin = SaslLogin


class LoginSink:
    """Where an upstream connection's responses go while the gateway logs in on it."""

    def __init__(self) -> None:
        self._answers: asyncio.Queue[bytes | Exception] = asyncio.Queue()

    def upstream_response(self, payload: bytes) -> None:
        self._answers.put_nowait(payload)

    def upstream_lost(self, reason: str) -> None:
        self._answers.put_nowait(ConnectionError(reason))

    def upstream_malformed(self, reason: str) -> None:
        self._answers.put_nowait(ConnectionError(reason))

    def upstream_congested(self, congested: bool) -> None:
        pass

    async def answer(self) -> bytes:
        answer = await self._answers.get()
        if isinstance(answer, Exception):
            raise answer
        return answer


async def log_in(upstream: Any, sink: LoginSink, login: UpstreamLogin) -> None:
    """Log in on ``upstream`` (its responses going to ``sink``); raises ``OSError``."""
    handshake = await _exchange(
        upstream,
        sink,
        ApiKeys.SASL_HANDSHAKE,
        1,
        1,
        SaslHandshakeRequest(mechanism=login.mechanism),
    )
    if handshake.error_code != 0:
        raise OSError(
            f"the cluster does not take SASL {login.mechanism} here (error "
            f"{handshake.error_code}; enabled: {', '.join(handshake.mechanisms)})"
        )
    client = new_sasl_client(login.mechanism, login.username, login.password)
    token: bytes | None = client.first()
    correlation_id = 2
    while token is not None:
        answer = await _exchange(
            upstream,
            sink,
            ApiKeys.SASL_AUTHENTICATE,
            2,
            correlation_id,
            SaslAuthenticateRequest(auth_bytes=token),
        )
        if answer.error_code != 0:
            raise OSError(
                f"the cluster refused the gateway's login as {login.username} "
                f"(error {answer.error_code}: {answer.error_message})"
            )
        try:
            token = client.respond(bytes(answer.auth_bytes))
        except SaslClientError as exc:
            raise OSError(f"the gateway's login as {login.username}: {exc}") from None
        correlation_id += 1


async def _exchange(
    upstream: Any,
    sink: LoginSink,
    api_key: int,
    version: int,
    correlation_id: int,
    request: Any,
) -> Any:
    """Send one request of the login on ``upstream`` and decode its answer."""
    upstream.send_frame(
        encode_request(api_key, version, correlation_id, _CLIENT_ID, request)[4:]
    )
    payload = await sink.answer()
    try:
        return decode_response(api_key, version, payload).message
    except KafkaError as exc:
        raise OSError(f"malformed {api_name(api_key)} response: {exc}") from None
