"""``ktc serve`` and ``ktc gateway`` are one node in two modes (collector/app/node.py): both
start through ``Node.start`` and its one list of steps, and a mode only fills in the steps
marked as its own and the handler of a new connection.  That the admin APIs are authorized
alike in both modes is shown over the wire: tests/gateway/test_admin_authorization_parity.py."""

from __future__ import annotations

from collector.app.gateway_server import GatewayServer
from collector.app.node import START_STEPS, Node
from collector.app.server import CollectorServer

MODE_STEPS = {"open_store", "build_handler", "bind_mode_listeners"}
MODE_HOOKS = {f"_{step}" for step in MODE_STEPS} | {"_connection_handler"}


def overridden(mode: type[Node]) -> set[str]:
    return {
        name
        for name, member in vars(mode).items()
        if callable(member) and name in vars(Node)
    }


def test_both_modes_start_through_the_nodes_one_list_of_steps() -> None:
    assert CollectorServer.start is Node.start
    assert GatewayServer.start is Node.start
    assert len(set(START_STEPS)) == len(START_STEPS)
    for step in START_STEPS:
        assert callable(getattr(Node, f"_{step}")), step


def test_a_mode_overrides_only_its_own_steps() -> None:
    assert overridden(CollectorServer) <= MODE_HOOKS
    # The gateway also checks its upstream setting when made, and pairs each connection
    # with its upstream as it opens and closes.
    assert overridden(GatewayServer) <= MODE_HOOKS | {
        "__init__",
        "connection_opened",
        "connection_closed",
    }
    assert "_build_handler" in overridden(CollectorServer)
    assert "_build_handler" in overridden(GatewayServer)
    assert "_bind_mode_listeners" in overridden(GatewayServer)
