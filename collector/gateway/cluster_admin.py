"""The node's own admin connection to a Kafka cluster: one request at a time, in order.

It is the gateway's upstream connection machinery (``collector.net.upstream``: TLS with the
``gateway.upstream.ssl.*`` context; the gateway's own SASL login, ``upstream_login.py``,
when it has one) used for the node's own questions, encoded and decoded by the project's
Kafka codec (``proto``): the same messages the node's admin APIs answer and the gateway
forwards, so a request or an error means one thing everywhere, and the cluster's error
codes and messages arrive as the cluster wrote them.

Why not a Kafka client library's admin client: the one at hand, confluent-kafka
(librdkafka), has no CLIENT_METRICS config resource type and no ListConfigResources, the
two things the subscription store needs (``cluster_subscriptions.py``); and the gateway
already holds the cluster's address, TLS settings and login in this form.

The connection is opened on first use (the first bootstrap server that accepts it) and
kept; any failure closes it, and the next request opens a new one.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from collections.abc import Sequence
from typing import Any, Final

from collector.gateway.upstream_login import LoginSink, UpstreamLogin, log_in
from collector.net.upstream import Upstream, open_upstream
from proto import ApiKeys, KafkaError, api_name, decode_response, encode_request
from proto.messages import ApiVersionsRequest

__all__ = ["ClusterAdmin"]

_CLIENT_ID: Final = "ktc-admin"
# ApiVersions v3 (KIP-511): what Kafka 2.4+ and every client of the last years send.
_API_VERSIONS_VERSION: Final = 3


class ClusterAdmin:
    """Requests of the node's own to the cluster at ``bootstrap``; ``await ask(...)``."""

    def __init__(
        self,
        bootstrap: Sequence[tuple[str, int]],
        *,
        ssl_context: ssl.SSLContext | None = None,
        login: UpstreamLogin | None = None,
        timeout_s: float = 10.0,
        max_response_size: int = 104857600,
    ) -> None:
        self.bootstrap = tuple(bootstrap)
        self._ssl_context = ssl_context
        self._login = login
        self.timeout_s = timeout_s
        self._max_response_size = max_response_size
        self._upstream: Upstream | None = None
        self._sink: LoginSink | None = None
        # The cluster's ApiVersions answer on the open connection: api key -> (min, max).
        self._versions: dict[int, tuple[int, int]] | None = None
        self._correlation = itertools.count(1000)  # the login's exchange counts from 1
        self._lock = asyncio.Lock()

    @property
    def servers(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.bootstrap)

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        """The versions the cluster's broker serves, api key -> (min, max)."""
        async with self._lock:
            await self._open()
            assert self._versions is not None
            return self._versions

    async def ask(self, api_key: int, version: int, message: Any) -> Any:
        """Send ``message`` and return the cluster's answer, decoded. Raises ``OSError``
        (cannot connect, connection lost, timeout) or ``KafkaError`` (an answer that
        cannot be read)."""
        async with self._lock:
            await self._open()
            return await self._exchange(api_key, version, message)

    def close(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
        self._upstream = self._sink = self._versions = None

    # -- internals ----------------------------------------------------------------------

    async def _open(self) -> None:
        if self._upstream is not None:
            return
        errors: list[str] = []
        for host, port in self.bootstrap:
            sink = LoginSink()
            try:
                upstream = await open_upstream(
                    host,
                    port,
                    sink,
                    max_response_size=self._max_response_size,
                    ssl_context=self._ssl_context,
                    connect_timeout_s=self.timeout_s,
                )
            except (OSError, TimeoutError) as exc:
                errors.append(f"{host}:{port}: {exc or type(exc).__name__}")
                continue
            self._upstream, self._sink = upstream, sink
            try:
                if self._login is not None:
                    await asyncio.wait_for(
                        log_in(upstream, sink, self._login), self.timeout_s
                    )
                self._versions = await self._ask_versions()
            except BaseException:
                self.close()
                raise
            return
        raise OSError(f"cannot connect to {self.servers} ({'; '.join(errors)})")

    async def _ask_versions(self) -> dict[int, tuple[int, int]]:
        answer = await self._exchange(
            ApiKeys.API_VERSIONS,
            _API_VERSIONS_VERSION,
            ApiVersionsRequest(client_software_name="ktc", client_software_version="1"),
        )
        if answer.error_code != 0:
            raise OSError(f"ApiVersions answered error {answer.error_code}")
        return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}

    async def _exchange(self, api_key: int, version: int, message: Any) -> Any:
        upstream, sink = self._upstream, self._sink
        assert upstream is not None and sink is not None
        correlation_id = next(self._correlation)
        try:
            upstream.send_frame(
                encode_request(api_key, version, correlation_id, _CLIENT_ID, message)[
                    4:
                ]
            )
            payload = await asyncio.wait_for(sink.answer(), self.timeout_s)
            frame = decode_response(api_key, version, payload)
        except (OSError, TimeoutError, KafkaError) as exc:
            self.close()
            if isinstance(exc, TimeoutError):
                raise TimeoutError(
                    f"{api_name(api_key)} to {self.servers}: no answer in "
                    f"{self.timeout_s:g} s"
                ) from None
            raise
        except BaseException:
            self.close()
            raise
        if frame.correlation_id != correlation_id:
            self.close()
            raise OSError(
                f"{api_name(api_key)}: an answer for correlation id "
                f"{frame.correlation_id}, expected {correlation_id}"
            )
        return frame.message
