"""A connection's identity, as Kafka's ``RequestContext`` and ``ClientInformation`` carry
it: who is on the other end, on which listener, running which client software.

The network layer creates one :class:`Session` per connection and fills in what the socket
and the handshake tell (the peer address, :meth:`Session.set_principal`); the
ApiVersions handler records the client software (KIP-511).  Everything above reads it: the
ClientMetricsManager (subscription matching, the context of a landed push), the quota
pipeline (the quota "user"), Metadata (the listener a client came in on).

Compiled (mypyc): the push path reads these fields on every request, and from compiled code
a field of a compiled class is a direct read.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ANONYMOUS_PRINCIPAL", "UNKNOWN_SOFTWARE", "Session", "principal_name"]

# KafkaPrincipal.ANONYMOUS, what a PLAINTEXT connection (or SSL without a client
# certificate) is.
ANONYMOUS_PRINCIPAL: Final = "User:ANONYMOUS"
# Kafka's ClientInformation.UNKNOWN_NAME_OR_VERSION, until the client sends ApiVersions v3+.
UNKNOWN_SOFTWARE: Final = "unknown"


def principal_name(principal: str) -> str:
    """``User:ANONYMOUS`` -> ``ANONYMOUS`` (``KafkaPrincipal.getName``: the quota "user");
    a string without a type prefix is its own name."""
    return principal.partition(":")[2] or principal


class Session:
    """One connection's identity (mutable only by the layer that learns each part)."""

    __slots__ = (
        "client_software_name",
        "client_software_version",
        "client_source_address",
        "client_source_port",
        "connection_id",
        "listener_name",
        "peer_ip",
        "principal",
        "principal_name",
        "security_protocol",
        "upstream_cluster_id",
        "upstream_node_id",
    )

    def __init__(
        self,
        connection_id: int,
        listener_name: str,
        security_protocol: str,
        *,
        principal: str = ANONYMOUS_PRINCIPAL,
        peer_ip: str = "",
        client_source_address: str = "",
        client_source_port: int = 0,
        client_software_name: str = UNKNOWN_SOFTWARE,
        client_software_version: str = UNKNOWN_SOFTWARE,
    ) -> None:
        self.connection_id = connection_id
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.principal = principal
        self.principal_name = principal_name(principal)
        # As the socket reports it (what connection quotas count).
        self.peer_ip = peer_ip
        # Java's InetAddress.getHostAddress() form ("0:0:0:0:0:0:0:1" for ::1): what Kafka
        # matches client_source_address selectors against and hands plugins.
        self.client_source_address = client_source_address
        self.client_source_port = client_source_port
        self.client_software_name = client_software_name
        self.client_software_version = client_software_version
        # Gateway mode: the cluster the gateway stands in front of, and the upstream node
        # whose gateway listener this connection came in on (None: the bootstrap listener,
        # or a standalone collector).
        self.upstream_cluster_id: str | None = None
        self.upstream_node_id: int | None = None

    def set_principal(self, principal: str) -> None:
        self.principal = principal
        self.principal_name = principal_name(principal)

    def __repr__(self) -> str:
        return (
            f"Session(connection_id={self.connection_id}, listener_name={self.listener_name!r}, "
            f"principal={self.principal!r}, client_source_address="
            f"{self.client_source_address!r}, client_source_port={self.client_source_port})"
        )
