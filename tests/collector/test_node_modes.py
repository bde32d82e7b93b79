"""``ktc serve`` and ``ktc gateway`` are one node in two modes (collector/app/node.py): both
start through ``Node.start``, and a mode is an object given to the node (``ServeMode``,
``GatewayMode``), not a subclass that overrides its steps.  That the admin APIs are
authorized alike in both modes is shown over the wire:
tests/gateway/test_admin_authorization_parity.py."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from collector.app.config import CollectorConfig, load_config
from collector.app.gateway_server import GatewayMode, GatewayServer
from collector.app.node import Mode, Node, StartupError
from collector.app.parts.cluster_subscriptions import KeptSubscriptions
from collector.app.server import CollectorServer, ServeMode

# What the node asks of its mode (the Mode protocol, its connection hooks included).
MODE_METHODS = {
    "kept_subscriptions",
    "build_handling",
    "bind_listeners",
    "subscriptions_admin",
    "connection_handler",
    "connection_opened",
    "connection_closed",
    "ready_file",
    "state_clusters",
}


def collector_config(tmp_path: Path, **overrides: object) -> CollectorConfig:
    return load_config(
        environ={},
        overrides={
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "data.dir": str(tmp_path / "data"),
            **overrides,
        },
    )


def test_both_modes_start_through_the_nodes_one_start() -> None:
    assert CollectorServer.start is Node.start
    assert GatewayServer.start is Node.start


def test_the_named_modes_override_nothing_of_the_node() -> None:
    # CollectorServer and GatewayServer only make a node with their mode (through their
    # shared base, NodeInMode; and the gateway reads what its mode learned).
    for server in (CollectorServer, GatewayServer):
        below_node = server.__mro__[: server.__mro__.index(Node)]
        methods = {
            name
            for cls in below_node
            for name, member in vars(cls).items()
            if inspect.isfunction(member) and name in vars(Node)
        }
        assert methods == {"__init__"}, server


def test_a_mode_is_an_object_with_the_nodes_mode_methods() -> None:
    for mode in (ServeMode, GatewayMode):
        assert not issubclass(mode, Node)
        assert {
            name for name in MODE_METHODS if callable(getattr(mode, name, None))
        } == MODE_METHODS, mode
    assert {
        name for name in MODE_METHODS if callable(getattr(Mode, name, None))
    } == MODE_METHODS


def test_a_node_is_made_in_the_mode_given(tmp_path: Path) -> None:
    config = collector_config(
        tmp_path, **{"gateway.upstream.bootstrap.servers": "127.0.0.1:9092"}
    )
    assert isinstance(Node(config, ServeMode(config)).mode, ServeMode)
    assert isinstance(Node(config, GatewayMode(config)).mode, GatewayMode)
    assert isinstance(GatewayServer(config).mode, GatewayMode)
    assert isinstance(CollectorServer(config).mode, ServeMode)


def test_the_gateway_mode_needs_its_upstream(tmp_path: Path) -> None:
    with pytest.raises(StartupError, match="upstream"):
        GatewayMode(collector_config(tmp_path))


def test_where_the_subscriptions_are_kept_is_each_modes_settings(
    tmp_path: Path,
) -> None:
    # The node makes the cluster-kept subscriptions part from this (Node._open_store);
    # neither mode looks at the store it is given.
    upstream = {"gateway.upstream.bootstrap.servers": "up:9092"}
    assert ServeMode(collector_config(tmp_path)).kept_subscriptions() is None
    serve_kafka = collector_config(
        tmp_path,
        **{
            "subscriptions.store": "kafka",
            "subscriptions.kafka.bootstrap.servers": "k:9092",
            "subscriptions.kafka.refresh.ms": 500,
            "subscriptions.kafka.stale.after.ms": 7000,
        },
    )
    assert ServeMode(serve_kafka).kept_subscriptions() == KeptSubscriptions(
        "k:9092", 500, 7000
    )
    gateway = GatewayMode(collector_config(tmp_path, **upstream))
    assert gateway.kept_subscriptions() == KeptSubscriptions("up:9092", 2000, 60000)
    local = collector_config(
        tmp_path, **upstream, **{"gateway.subscriptions.store": "local"}
    )
    assert GatewayMode(local).kept_subscriptions() is None
