"""What the collector knows about a push besides its payload.

Mirrors what Apache Kafka hands a telemetry plugin: ``ClientTelemetryContext``
(push interval) plus ``AuthorizableRequestContext`` (listener, principal, address),
plus what Kafka only used for matching (software name/version, source port), the
collector's own identity and, when it runs as a gateway in front of a Kafka cluster,
that cluster's id and the upstream broker the client addressed.  Librdkafka sends no
OTLP resource attributes, so these fields are the only way a backend can tell clients
apart.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

__all__ = ["OTLP_CONTENT_TYPE", "TelemetryContext"]

# Kafka's PushTelemetryRequest.OTLP_CONTENT_TYPE: the literal string, not a MIME type.
OTLP_CONTENT_TYPE = "OTLP"


# Slotted but not frozen, with its own __init__: one is built per accepted push, and the
# dataclass-generated __init__ is interpreted Python even where this module is compiled
# (mypyc), about 1 us per push; a frozen one pays an object.__setattr__ per field on top.
# Treat instances as values all the same: nothing mutates a context after it was built.
@dataclasses.dataclass(slots=True, init=False)
class TelemetryContext:
    client_instance_id: str  # Kafka Uuid.toString(): 22 chars base64url, no padding
    client_id: str | None
    client_software_name: str
    client_software_version: str
    client_source_address: str
    client_source_port: int
    listener_name: str
    security_protocol: str
    principal: (
        str  # "User:ANONYMOUS" on PLAINTEXT, as Kafka's KafkaPrincipal.toString()
    )
    push_interval_ms: int
    terminating: bool
    received_time_unix_nano: int
    node_id: int
    cluster_id: str
    # Gateway mode: the id of the Kafka cluster the gateway stands in front of, and the
    # upstream broker's node id whose gateway listener the push came in on (None on the
    # gateway's bootstrap listener).  Both None when the collector runs standalone.
    # The cluster id is the same for every push of a gateway; the node id is per
    # connection, so one client instance's pushes may carry different ones.
    upstream_cluster_id: str | None
    upstream_node_id: int | None
    subscription_id: int
    compression_type: int  # as pushed (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)
    correlation_id: int
    content_type: str

    def __init__(
        self,
        client_instance_id: str,
        client_id: str | None,
        client_software_name: str,
        client_software_version: str,
        client_source_address: str,
        client_source_port: int,
        listener_name: str,
        security_protocol: str,
        principal: str,
        push_interval_ms: int,
        terminating: bool,
        received_time_unix_nano: int,
        node_id: int,
        cluster_id: str,
        subscription_id: int,
        compression_type: int,
        correlation_id: int = 0,
        content_type: str = OTLP_CONTENT_TYPE,
        *,
        upstream_cluster_id: str | None = None,
        upstream_node_id: int | None = None,
    ) -> None:
        self.client_instance_id = client_instance_id
        self.client_id = client_id
        self.client_software_name = client_software_name
        self.client_software_version = client_software_version
        self.client_source_address = client_source_address
        self.client_source_port = client_source_port
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.principal = principal
        self.push_interval_ms = push_interval_ms
        self.terminating = terminating
        self.received_time_unix_nano = received_time_unix_nano
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.upstream_cluster_id = upstream_cluster_id
        self.upstream_node_id = upstream_node_id
        self.subscription_id = subscription_id
        self.compression_type = compression_type
        self.correlation_id = correlation_id
        self.content_type = content_type

    def to_json_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json_bytes(self) -> bytes:
        return json.dumps(
            self.to_json_dict(), separators=(",", ":"), ensure_ascii=False
        ).encode()

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled by the ingest's flattening processes (exporters/lakehouse/
        # flatten_pool.py).  Compiled by mypyc, the class has no default pickling that
        # calls this __init__ with its arguments.
        return (
            _context_from_fields,
            ({name: getattr(self, name) for name in _FIELDS},),
        )

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> TelemetryContext:
        # Unknown keys are ignored so a newer writer's log stays readable by an older reader.
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_FIELDS = tuple(field.name for field in dataclasses.fields(TelemetryContext))


def _context_from_fields(fields: dict[str, Any]) -> TelemetryContext:
    return TelemetryContext(**fields)
