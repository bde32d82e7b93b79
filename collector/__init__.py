"""The node, in either mode: ``ktc serve`` (the broker role: listeners, protocol adapter,
dispatch, the KIP-714 client metrics manager, quotas) and ``ktc gateway`` (in front of a
Kafka cluster, ``collector.gateway``); security, health and metrics, the ``ktc`` CLI.

The public names are imported lazily so that ``ktc --help`` and the config loader do not
pay for the whole server.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "ClientMetricsManager",
    "CollectorConfig",
    "CollectorServer",
    "ConfigError",
    "GatewayServer",
    "Node",
    "StartupError",
    "load_config",
]

_HOMES = {
    "ClientMetricsManager": "collector.telemetry.client_metrics",
    "CollectorConfig": "collector.app.config",
    "ConfigError": "collector.app.config",
    "load_config": "collector.app.config",
    "CollectorServer": "collector.app.server",
    "GatewayServer": "collector.app.gateway_server",
    "Node": "collector.app.node",
    "StartupError": "collector.app.node",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'collector' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
