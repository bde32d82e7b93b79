"""A real ``ktc gateway`` on a background thread (its own event loop) in front of an upstream,
bound to 127.0.0.1 port 0 with OS-chosen per-node ports; helpers to read what it learned
and what it landed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collector.app.gateway_server import GatewayServer
from tests.integration.collector_harness import RunningCollector, wait_for

__all__ = ["RunningGateway", "wait_for"]


class RunningGateway(RunningCollector):
    server_class = GatewayServer

    def __init__(self, data_dir: Path, upstream: str, **overrides: Any) -> None:
        settings: dict[str, Any] = {
            "gateway.upstream.bootstrap.servers": upstream,
            "gateway.broker.port.start": 0,
            # Most gateway tests seed the gateway's own store; the cluster-kept store
            # (the product's default) is tested where it is asked for.
            "gateway.subscriptions.store": "local",
        }
        settings.update(overrides)
        super().__init__(data_dir, **settings)

    @property
    def gateway_server(self) -> GatewayServer:
        assert isinstance(self.server, GatewayServer)
        return self.server

    def gateway_ports(self) -> set[int]:
        """Every port the gateway listens on: the bootstrap listener and each node's."""

        def ports() -> set[int]:
            server = self.gateway_server
            found = {endpoint.port for endpoint in server.bound.values()}
            if server.topology is not None:
                found |= set(server.topology.ports.values())
            return found

        return self.call(ports)

    def node_ports(self) -> dict[int, int]:
        return self.call(lambda: dict(self.gateway_server.topology.ports))  # type: ignore[union-attr]

    def upstream_cluster_id(self) -> str | None:
        return self.call(lambda: self.gateway_server.gateway.cluster_id)  # type: ignore[union-attr]

    def metrics_text(self) -> str:
        from prometheus_client import generate_latest

        return self.call(lambda: generate_latest(self.gateway_server.registry).decode())

    def metric_value(self, name: str, **labels: str) -> float | None:
        """The value of the sample ``name`` with ``labels`` (among others) on /metrics,
        None when there is none."""
        from prometheus_client.parser import text_string_to_metric_families

        for family in text_string_to_metric_families(self.metrics_text()):
            for sample in family.samples:
                if sample.name == name and labels.items() <= sample.labels.items():
                    return float(sample.value)
        return None
