"""``ktc``: the collector's command line (click), one module per command group.

| command                                          | what it does                          | module           |
|--------------------------------------------------|---------------------------------------|------------------|
| ``ktc serve``                                    | run the collector until SIGTERM/SIGINT | ``run``          |
| ``ktc gateway --upstream HOST:PORT``             | run it in front of a Kafka cluster    | ``run``          |
| ``ktc validate-config FILE``                     | validate a config file, print it      | ``validate``     |
| ``ktc subscriptions alter|describe|list|delete`` | kafka-client-metrics.sh, local store  | ``subscriptions``|
| ``ktc subscriptions alter ... --dry-run --server URL`` | what a change would do to live clients | ``subscriptions`` |
| ``ktc quotas alter|describe``                    | kafka-configs.sh client quotas        | ``client_quotas`` |
| ``ktc users alter|describe|delete``              | kafka-configs.sh --entity-type users (SCRAM) | ``users`` |
| ``ktc acls add|list|remove``                     | kafka-acls.sh for the CLUSTER         | ``acls``         |
| ``ktc clients --server URL``                     | the live client instances             | ``clients``      |
| ``ktc clients --inventory --server URL``         | every client: connections, telemetry, request versions | ``clients`` |
| ``ktc landing dump``                             | the landing log as JSON lines         | ``landing``      |
| ``ktc client-metrics``                           | the fleet's /metrics/clients, from the landing topic | ``client_metrics`` |
| ``ktc ingest|sql|report|thriftserver|lake``      | the lakehouse (with its extra)        | ``lakehouse``    |

Exit codes (``errors``, docs/operations.md): 0 done; 1 refused (a Kafka error code, named on
stderr; a query Spark rejects); 2 cannot run as configured (a usage or configuration error, a
broken config or store file, a port in use, a data directory that cannot be written); 3
kept in a cluster (``--data-dir`` on a directory whose node keeps that state in a Kafka
cluster: the line names ``--bootstrap-server``); 130 interrupted.
"""

from __future__ import annotations

import importlib

import click

__all__ = ["cli", "main"]

# Each command and the module (and attribute) that defines it, imported only when the command
# runs or is listed: `ktc sql` must not pay for the collector's server, config and security
# modules, nor `ktc serve` for the lakehouse's libraries.
COMMANDS = {
    "serve": ("run", "serve"),
    "gateway": ("run", "gateway"),
    "validate-config": ("validate", "validate_config"),
    "subscriptions": ("subscriptions", "subscriptions"),
    "quotas": ("client_quotas", "quotas"),
    "users": ("users", "users"),
    "landing": ("landing", "landing"),
    "clients": ("clients", "clients"),
    "client-metrics": ("client_metrics", "client_metrics"),
    "acls": ("acls", "acls"),
}


class _LazyGroup(click.Group):
    """A group whose commands (:data:`COMMANDS` and the lakehouse's) load on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from collector.app.cli.lakehouse import LAKEHOUSE_COMMANDS

        return sorted({*COMMANDS, *LAKEHOUSE_COMMANDS, *self.commands})

    def get_command(
        self, ctx: click.Context | None, cmd_name: str
    ) -> click.Command | None:
        if cmd_name not in self.commands:
            found = _load_command(cmd_name)
            if found is None:
                return None
            self.add_command(found, cmd_name)
        return self.commands[cmd_name]


def _load_command(name: str) -> click.Command | None:
    from collector.app.cli.lakehouse import LAKEHOUSE_COMMANDS, lakehouse_command

    if name in LAKEHOUSE_COMMANDS:
        return lakehouse_command(name)
    if name not in COMMANDS:
        return None
    module, attribute = COMMANDS[name]
    command: click.Command = getattr(
        importlib.import_module(f"{__name__}.{module}"), attribute
    )
    return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kafka-telemetry-collector", prog_name="ktc")
def cli() -> None:
    """A KIP-714 client-telemetry collector that speaks the Kafka protocol."""


def main() -> None:
    """The ``ktc`` console script: every failure a user can cause by hand is one line and a
    documented exit code (``errors``)."""
    from collector.app.cli.errors import run

    run(cli, prog_name="ktc")
