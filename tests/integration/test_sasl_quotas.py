"""Quotas keyed by the SASL user: two SCRAM users with different ``request_percentage``
(set with AlterClientQuotas' store, entity ``user=<name>``) send ApiVersions requests over
authenticated connections; the one with the small share is throttled within a few dozen
(``throttle_time_ms`` in its responses, the quota metrics tagged with its user), the other
never in 300."""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from collector.security.credentials import (
    ScramMechanism,
    scram_credential_from_password,
)
from collector.security.credentials_file import DurableCredentialStore
from proto import decode_response, encode_request
from proto.messages import (
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from subscriptions.store import ConfigStore
from tests.integration.collector_harness import RunningCollector
from tests.integration.test_quotas_real_clients import SHORT_WINDOWS, scrape
from tests.secrets_under_test import SASL_USERS
from tests.security.sasl_client import ScramClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# request_percentage per user: a sliver of one handler thread for "slow", plenty for "fast".
QUOTAS = {"slow": 0.01, "fast": 1000.0}
REQUESTS = 300
THROTTLES = 3


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the collector")
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


class ScramConnection:
    """A raw Kafka connection that logs in with SASL/SCRAM-SHA-512 (independent client code:
    tests/security/sasl_client.py) and then sends ApiVersions v3."""

    def __init__(self, port: int, user: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlation = 0
        self.request(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        client = ScramClient("sha512", user, SASL_USERS[user])
        first = self.request(36, 2, SaslAuthenticateRequest(auth_bytes=client.first()))
        final = self.request(
            36,
            2,
            SaslAuthenticateRequest(auth_bytes=client.final(bytes(first.auth_bytes))),
        )
        assert final.error_code == 0 and client.verify(bytes(final.auth_bytes))

    def request(self, api_key: int, version: int, message: object) -> Any:
        self.correlation += 1
        self.sock.sendall(
            encode_request(api_key, version, self.correlation, "quota-test", message)
        )
        return decode_response(api_key, version, read_frame(self.sock)).message

    def close(self) -> None:
        self.sock.close()


def test_two_scram_users_are_throttled_by_their_own_request_quota(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    store = ConfigStore(data_dir)
    for user, percentage in QUOTAS.items():
        store.alter_quotas({"user": user}, {"request_percentage": percentage})
    DurableCredentialStore(data_dir).write(
        {
            user: {
                ScramMechanism.SCRAM_SHA_512: scram_credential_from_password(
                    ScramMechanism.SCRAM_SHA_512,
                    SASL_USERS[user],
                    user.encode() * 8,
                    4096,
                )
            }
            for user in QUOTAS
        }
    )
    settings = {
        **SHORT_WINDOWS,
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    throttled: dict[str, list[int]] = {}
    with RunningCollector(data_dir, **settings) as collector:
        connections = {user: ScramConnection(collector.port, user) for user in QUOTAS}
        try:
            # "fast" sends REQUESTS requests; then "slow" sends until it has been throttled
            # a few times (each throttle mutes its connection for up to a window, so more
            # would only take longer). "slow" needs far fewer than REQUESTS to be throttled:
            # the same quota would have throttled "fast" too.
            ask = ApiVersionsRequest("quota-test", "1.0")
            for user in ("fast", "slow"):
                for _ in range(REQUESTS):
                    answer = connections[user].request(18, 3, ask)
                    throttled.setdefault(user, []).append(answer.throttle_time_ms)
                    if sum(ms > 0 for ms in throttled[user]) >= THROTTLES:
                        break
        finally:
            for connection in connections.values():
                connection.close()
        samples = scrape(collector)
    slow = [ms for ms in throttled["slow"] if ms > 0]
    assert len(slow) >= THROTTLES, (
        "the user with the small request_percentage was not throttled"
    )
    assert all(0 < ms <= 1000 for ms in slow)  # never longer than one quota window
    assert len(throttled["slow"]) < REQUESTS / 2, len(throttled["slow"])
    assert len(throttled["fast"]) == REQUESTS
    assert not any(throttled["fast"]), "the user with the large share was throttled"

    def throttled_responses(user: str) -> float:
        return sum(
            value
            for (name, labels), value in samples.items()
            if name == "ktc_quota_throttled_responses_total"
            and dict(labels).get("quota") == "request"
            and dict(labels).get("user") == user
        )

    assert throttled_responses("slow") >= len(slow)
    assert throttled_responses("fast") == 0
