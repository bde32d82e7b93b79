"""``ktc serve``: the node as a standalone broker for client telemetry.

The serve mode of :class:`~collector.app.node.Node` adds one thing to the node: its handler,
the dispatcher over every API this node answers itself (telemetry, ApiVersions, Metadata,
the admin APIs, ACLs, SCRAM credentials), behind a SASL gate on SASL listeners.  Start
steps, listeners and shutdown are the node's (collector/app/node.py).
"""

from __future__ import annotations

from typing import Any

from collector.app.node import Node, StartupError, install_uvloop, quota_settings
from collector.core.handler import RequestHandler
from collector.net.listeners import EndPoint
from proto.request_limits import (
    REQUEST_HEADER_MAX_BYTES,
    RequestSizeLimits,
    request_size_limits,
)

__all__ = ["CollectorServer", "StartupError", "install_uvloop", "quota_settings"]

# Listeners whose connections authenticate with SASL before anything else is answered.
_SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


class CollectorServer(Node):
    """``ktc serve``: the node answering every request with its own dispatcher."""

    mode_name = "collector"

    def _build_handler(self) -> None:
        from collector.broker.acl_apis import AclApis
        from collector.broker.scram_apis import ScramCredentialApis

        assert self._apis is not None and self.admin_apis is not None
        config = self.config
        table: dict[int, Any] = self._apis.table()
        table.update(self.admin_apis.table())
        table.update(AclApis(self.authorizer).table())
        table.update(
            ScramCredentialApis(self._open_credentials(), self.authorizer).table()
        )
        self.dispatcher = self.handler = self._dispatcher(table)
        self._apis.set_served_apis(self.dispatcher.api_keys)
        # An API this node does not serve closes the connection once its header is read:
        # its body is never needed.
        self.request_size_limits = RequestSizeLimits(
            request_size_limits(
                self.dispatcher.api_keys,
                telemetry_max_bytes=config.telemetry_max_bytes,
                max_request_size=config.socket_request_max_bytes,
            ),
            other=min(REQUEST_HEADER_MAX_BYTES, config.socket_request_max_bytes),
        )

    def _connection_handler(
        self, connection_id: int, endpoint: EndPoint, node_id: int | None
    ) -> RequestHandler | None:
        """A SASL listener's connection gets its own handler: its authenticator in front
        of the dispatcher (None elsewhere: the dispatcher itself)."""
        if endpoint.security_protocol not in _SASL_PROTOCOLS:
            return None
        return self._sasl_gate(endpoint, self.handler)
