"""``ktc``: the collector's command line (click), one module per command group.

| command                                          | what it does                          | module           |
|--------------------------------------------------|---------------------------------------|------------------|
| ``ktc serve``                                    | run the collector until SIGTERM/SIGINT | ``run``          |
| ``ktc gateway --upstream HOST:PORT``             | run it in front of a Kafka cluster    | ``run``          |
| ``ktc validate-config FILE``                     | validate a config file, print it      | ``validate``     |
| ``ktc subscriptions alter|describe|list|delete`` | kafka-client-metrics.sh, local store  | ``subscriptions``|
| ``ktc subscriptions alter ... --dry-run --server URL`` | what a change would do to live clients | ``subscriptions`` |
| ``ktc quotas alter|describe``                    | kafka-configs.sh client quotas        | ``quotas``       |
| ``ktc users alter|describe|delete``              | kafka-configs.sh --entity-type users (SCRAM) | ``users`` |
| ``ktc acls add|list|remove``                     | kafka-acls.sh for the CLUSTER         | ``acls``         |
| ``ktc clients --server URL``                     | the live client instances             | ``clients``      |
| ``ktc landing dump``                             | the landing log as JSON lines         | ``landing``      |
| ``ktc ingest|sql|report|thriftserver|lake``      | the lakehouse (with its extra)        | ``lakehouse``    |

Exit codes (``errors``, docs/operations.md): 0 done; 1 refused (a Kafka error code, named on
stderr; a query Spark rejects); 2 cannot run as configured (a usage or configuration error, a
broken config or store file, a port in use, a data directory that cannot be written); 130
interrupted.
"""

from __future__ import annotations

import click

from collector.app.cli.acls import acls
from collector.app.cli.clients import clients
from collector.app.cli.lakehouse import lakehouse_commands
from collector.app.cli.landing import landing
from collector.app.cli.quotas import quotas
from collector.app.cli.run import gateway, serve
from collector.app.cli.subscriptions import subscriptions
from collector.app.cli.users import users
from collector.app.cli.validate import validate_config

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kafka-telemetry-collector", prog_name="ktc")
def cli() -> None:
    """A KIP-714 client-telemetry collector that speaks the Kafka protocol."""


for _command in (
    serve,
    gateway,
    validate_config,
    subscriptions,
    quotas,
    users,
    landing,
    *lakehouse_commands(),
    clients,
    acls,
):
    cli.add_command(_command)


def main() -> None:
    """The ``ktc`` console script: every failure a user can cause by hand is one line and a
    documented exit code (``errors``)."""
    from collector.app.cli.errors import run

    run(cli, prog_name="ktc")
