"""``ktc serve`` and ``ktc gateway``: the two ways to run a node. They share their options
(config file, listeners, data directory, HTTP listener, ready file) and how a node runs until
SIGTERM; each adds the options of its mode. Every option overrides one config key (the table
below), so ``--data-dir X`` and ``data.dir: X`` in the config file are the same thing."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from collector.app.cli.common import CONFIG_ERROR_EXIT, fail_config, load, setup_logging
from collector.app.config import CollectorConfig

if TYPE_CHECKING:
    from collector.app.node import Mode, Node

__all__ = ["gateway", "serve"]

log = logging.getLogger(__name__)

# Command parameter -> the config key it overrides (an option not given overrides nothing).
CONFIG_KEYS = {
    "listeners": "listeners",
    "advertised_listeners": "advertised.listeners",
    "data_dir": "data.dir",
    "node_id": "node.id",
    "http_listener": "http.listener",
    "upstream": "gateway.upstream.bootstrap.servers",
    "broker_port_start": "gateway.broker.port.start",
    "advertised_host": "gateway.advertised.host",
}

# The options of both modes, in --help order.
NODE_OPTIONS = (
    click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False),
        help="YAML config file.",
    ),
    click.option(
        "--listeners",
        help="Kafka-style listeners, e.g. PLAINTEXT://0.0.0.0:9092 (for a gateway: its "
        "bootstrap listener).",
    ),
    click.option(
        "--data-dir",
        type=click.Path(file_okay=False),
        help="Landing log, config store, meta.properties (and a gateway's learned "
        "topology).",
    ),
    click.option("--http-listener", help="host:port for /metrics, /healthz, /readyz."),
    click.option(
        "--ready-file",
        type=click.Path(dir_okay=False),
        hidden=True,
        help="Write the bound ports as JSON here once serving (for tests and scripts).",
    ),
)


def node_options(command: Callable[..., None]) -> Callable[..., None]:
    for option in reversed(NODE_OPTIONS):
        command = option(command)
    return command


def _config(config_file: str | None, options: dict[str, object]) -> CollectorConfig:
    return load(
        config_file, {CONFIG_KEYS[name]: value for name, value in options.items()}
    )


@click.command()
@node_options
@click.option(
    "--advertised-listeners",
    help="What Metadata tells clients, e.g. PLAINTEXT://host:9092.",
)
@click.option("--node-id", type=int, help="This node's broker id.")
def serve(config_file: str | None, ready_file: str | None, **options: object) -> None:
    """Run the collector until SIGTERM or SIGINT (SIGHUP reloads subscriptions)."""
    from collector.app.server import ServeMode

    config = _config(config_file, options)
    _run(config, ServeMode, ready_file)


@click.command()
@node_options
@click.option(
    "--upstream",
    help="The cluster's bootstrap servers, HOST:PORT[,HOST:PORT...] "
    "(gateway.upstream.bootstrap.servers).",
)
@click.option(
    "--broker-port-start",
    type=int,
    help="Upstream node n is served on this port + n - gateway.min.node.id; 0 picks free ports "
    "(gateway.broker.port.start).",
)
@click.option(
    "--advertised-host",
    help="The host clients are sent to for every broker (gateway.advertised.host).",
)
def gateway(config_file: str | None, ready_file: str | None, **options: object) -> None:
    """Run as a gateway in front of a Kafka-compatible cluster: forward clients' traffic,
    terminate their telemetry, apply quotas (SIGTERM drains, SIGHUP reloads)."""
    config = _config(config_file, options)
    # Checked here, before anything binds or connects.
    if not config.gateway_upstream.bootstrap_servers:
        fail_config(
            "gateway mode needs the upstream cluster: --upstream HOST:PORT[,HOST:PORT...] "
            "or gateway.upstream.bootstrap.servers in the config file"
        )
    from collector.app.gateway_server import GatewayMode

    _run(config, GatewayMode, ready_file)


def _run(
    config: CollectorConfig,
    mode: Callable[[CollectorConfig], Mode],
    ready_file: str | None,
) -> None:
    """Run a node in the mode ``mode`` makes from the config, until it is stopped."""
    setup_logging(config.log_level)
    from collector.app.node import install_uvloop

    install_uvloop()
    sys.exit(asyncio.run(_serve(config, mode, ready_file)))


async def _serve(
    config: CollectorConfig,
    mode: Callable[[CollectorConfig], Mode],
    ready_file: str | None,
) -> int:
    """Start the node, write the ready file, run until stopped; the exit code."""
    from collector.app.node import Node, StartupError
    from collector.app.process_tuning import tune_serving_process
    from collector.net.listeners import ListenerError

    try:
        server = Node(config, mode(config))
    except StartupError as exc:
        click.echo(f"ktc: cannot start: {exc}", err=True)
        return CONFIG_ERROR_EXIT
    try:
        await server.start()
    except (StartupError, ListenerError) as exc:
        click.echo(f"ktc: cannot start: {exc}", err=True)
        await server.stop()
        return CONFIG_ERROR_EXIT
    except OSError:
        # A port in use, a data directory that cannot be written: what started is stopped
        # (the landing log closed), then the CLI's table says it in one line (errors.py).
        await server.stop()
        raise
    server.install_signal_handlers()
    # GC thresholds and glibc heap trimming, as collector/app/process_tuning.py explains.
    log.debug("process tuning: %s", tune_serving_process())
    if ready_file:
        _write_ready_file(server, Path(ready_file))
    await server.wait_stopped()
    return 0


def _write_ready_file(server: Node, path: Path) -> None:
    """The bound ports as JSON, written whole (a reader never sees half of it)."""
    info: dict[str, object] = {
        "listeners": {name: e.port for name, e in server.bound.items()},
        "http_port": server.http_port,
        "cluster_id": server.cluster_id,
        **server.mode.ready_file(),
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(info))
    tmp.replace(path)
