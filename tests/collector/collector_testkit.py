"""Helpers for the collector's unit tests: real subscriptions, real OTLP payloads, a real
node on loopback ports of its own."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)

from collector.app.config import CollectorConfig, load_config
from collector.app.server import CollectorServer
from collector.core.session import Session
from collector.net.protocol import KafkaProtocol
from collector.telemetry.client_metrics import ClientMetricsManager
from proto import compression
from subscriptions.effective import EffectiveSubscription, resolve
from subscriptions.kafka_uuid import kafka_uuid_to_str, random_instance_id
from subscriptions.matching import ClientMetadata
from subscriptions.model import Subscription
from subscriptions.store import ConfigStore


class MemorySubscriptions:
    """The SubscriptionSource contract over a plain list of real ``Subscription``s."""

    def __init__(self, *subscriptions: Subscription) -> None:
        self.subscriptions = list(subscriptions)
        self._version = 1

    @property
    def version(self) -> int:
        return self._version

    def set(self, *subscriptions: Subscription) -> None:
        self.subscriptions = list(subscriptions)
        self._version += 1

    def resolve(
        self,
        metadata: ClientMetadata,
        client_instance_id: uuid.UUID,
        subscriptions: tuple[Subscription, ...] | None = None,
    ) -> EffectiveSubscription:
        chosen = self.subscriptions if subscriptions is None else subscriptions
        return resolve(chosen, metadata, client_instance_id)


def make_session(
    connection_id: int = 1,
    *,
    client_software_name: str = "confluent-kafka-python",
    client_software_version: str = "2.16.1-rdkafka-2.16.0",
    client_source_address: str = "127.0.0.1",
    client_source_port: int = 50000,
    listener_name: str = "PLAINTEXT",
    security_protocol: str = "PLAINTEXT",
    principal: str = "User:ANONYMOUS",
) -> Session:
    """A connection's identity as a confluent-kafka client on loopback shows it."""
    return Session(
        connection_id,
        listener_name,
        security_protocol,
        principal=principal,
        peer_ip=client_source_address,
        client_source_address=client_source_address,
        client_source_port=client_source_port,
        client_software_name=client_software_name,
        client_software_version=client_software_version,
    )


@dataclasses.dataclass
class RecordingChannel:
    """A :class:`~collector.core.channel.Channel` that records what was asked of it, with
    the session of the connection it stands for (``handle(frame, channel.session,
    channel)``)."""

    session: Session = dataclasses.field(default_factory=make_session)
    muted: bool = False
    mutes: int = 0
    unmutes: int = 0
    reading_held: bool = False
    closed_for: list[str] = dataclasses.field(default_factory=list)

    def mute(self) -> None:
        self.muted = True
        self.mutes += 1

    def unmute(self) -> None:
        self.muted = False
        self.unmutes += 1

    def hold_reading(self, held: bool) -> None:
        self.reading_held = held

    def close_for(self, reason: str, quiet: bool = False) -> None:
        self.closed_for.append(reason)


def subscription(
    name: str, metrics: str, interval_ms: int = 1000, match: str = ""
) -> Subscription:
    configs = {"metrics": metrics, "interval.ms": str(interval_ms)}
    if match:
        configs["match"] = match
    return Subscription.from_configs(name, configs)


def otlp_payload(*names: str, attrs: int = 1) -> bytes:
    """A real OTLP MetricsData with one gauge per name."""
    metrics = [
        Metric(
            name=name,
            gauge=Gauge(
                data_points=[
                    NumberDataPoint(
                        as_double=1.5,
                        time_unix_nano=1_700_000_000_000_000_000,
                        attributes=[KeyValue(key=f"k{i}") for i in range(attrs)],
                    )
                ]
            ),
        )
        for name in names
    ]
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])
        ]
    ).SerializeToString()


def zstd(data: bytes) -> bytes:
    return compression.compress(compression.CompressionType.ZSTD, data)


def make_manager(
    subs: MemorySubscriptions, exporter: object, **kwargs: object
) -> ClientMetricsManager:
    defaults: dict[str, object] = {
        "subscriptions": subs,
        "exporter": exporter,
        "instance_id_to_str": kafka_uuid_to_str,
        "new_instance_id": random_instance_id,
        "telemetry_max_bytes": 1_048_576,
        "node_id": 7,
        "cluster_id": "test-cluster",
    }
    defaults.update(kwargs)
    return ClientMetricsManager(**defaults)  # type: ignore[arg-type]


class RecordingTransport:
    """The part of an asyncio transport a KafkaProtocol uses; keeps what it writes (for
    feeding a real server's protocol objects in process, without sockets)."""

    def __init__(self, port: int = 50000) -> None:
        self.port = port
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def writelines(self, data: Iterable[bytes]) -> None:
        # KafkaProtocol hands a read's several answers over in one call.
        self.written.extend(data)

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", self.port) if name == "peername" else default

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


class LoneHost:
    """The ConnectionHost of a KafkaProtocol driven without a server: its handler (if
    any), default limits, every connection welcome."""

    def __init__(self, handler: Any = None) -> None:
        self.handler = handler
        self.max_request_size = 104_857_600
        self.max_inflight_requests = 100
        self.durability = None

    def connection_opened(self, protocol: Any) -> bool:
        return True

    def connection_closed(self, protocol: Any) -> None:
        pass

    def protocol_error(self, protocol: Any) -> None:
        pass


def lone_connection(handler: Any = None, port: int = 50000) -> KafkaProtocol:
    """A real KafkaProtocol on a RecordingTransport, driven without a server."""
    connection = KafkaProtocol(LoneHost(handler), 1, "PLAINTEXT", "PLAINTEXT")  # type: ignore[arg-type]
    connection.connection_made(RecordingTransport(port))  # type: ignore[arg-type]
    return connection


def open_connections(server: Any) -> list[KafkaProtocol]:
    """A running CollectorServer's open connections, oldest first."""
    return server.connections()


def newest_session(server: Any) -> Session:
    """The session of a running CollectorServer's most recent open connection."""
    return open_connections(server)[-1].session


def collector_config(tmp_path: Path, **overrides: object) -> CollectorConfig:
    """A collector on loopback ports of its own (port 0), its data under ``tmp_path``, the
    landing log without fsync; ``overrides`` add or replace settings."""
    return load_config(
        environ={},
        overrides={
            "listeners": "PLAINTEXT://127.0.0.1:0",
            # Not None: an override of None means "not overridden" (the default 0.0.0.0:8714).
            "http.listener": "127.0.0.1:0",
            "data.dir": str(tmp_path / "data"),
            "landing": {"fsync": "never"},
            **overrides,
        },
    )


# The ``start`` fixture: ``await start(clock, **settings)`` starts one more node.
Start = Callable[..., Awaitable[CollectorServer]]


@asynccontextmanager
async def running(
    config: CollectorConfig, **options: Any
) -> AsyncIterator[CollectorServer]:
    """A started node (``options``: CollectorServer's keyword arguments), stopped on exit."""
    server = CollectorServer(config, **options)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def subscribe_producers(tmp_path: Path) -> None:
    """Store the subscription "producers" (the producer metrics, every second) in the data
    directory ``collector_config(tmp_path)`` names, before the node starts."""
    ConfigStore(tmp_path / "data").alter_subscription(
        "producers",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"},
        [],
    )
