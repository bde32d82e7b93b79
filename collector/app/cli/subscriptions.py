"""``ktc subscriptions alter|delete|describe|list``: kafka-client-metrics.sh on the collector's
config store (a running collector picks changes up), or with ``--bootstrap-server`` on a
Kafka cluster's client-metrics configs, where a gateway keeps its subscriptions
(``cluster_subscriptions.py``); ``alter --dry-run`` asks a running collector (``--server``,
the same option and default as ``ktc clients``) what a change would do to its live clients
instead.  On a data directory whose node keeps its subscriptions in a cluster (it records
so at start), every verb without ``--bootstrap-server`` refuses, exit 3
(``common.kept_here``): the file it would write or read is not what the node serves."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from collector.app.cli.clients import ADMIN_SECRET, SERVER
from collector.app.cli.common import (
    DATA_DIR,
    config_store,
    kafka_error_exit,
    kept_here,
)

__all__ = ["subscriptions"]

BOOTSTRAP_SERVER = click.option(
    "--bootstrap-server",
    help="HOST:PORT[,...] of a Kafka cluster (or a gateway): its client-metrics configs "
    "instead of --data-dir's store, as kafka-client-metrics.sh.",
)
COMMAND_CONFIG = click.option(
    "--command-config",
    type=click.Path(dir_okay=False),
    help="With --bootstrap-server: Kafka client properties (security.protocol, "
    "sasl.mechanism, sasl.jaas.config, ssl.*.location in PEM).",
)


def _cluster(bootstrap_server: str, command_config: str | None) -> Any:
    from collector.app.cli.cluster_subscriptions import ClusterCommands, cluster_admin

    return ClusterCommands(cluster_admin(bootstrap_server, command_config))


@click.group()
def subscriptions() -> None:
    """Manage client-metrics subscriptions (like kafka-client-metrics.sh)."""


@subscriptions.command("alter")
@DATA_DIR
@BOOTSTRAP_SERVER
@COMMAND_CONFIG
@click.option("--name", help="Subscription name.")
@click.option(
    "--generate-name", is_flag=True, help="Use a random Kafka Uuid as the name."
)
@click.option(
    "--metrics", help="Comma-separated metric name prefixes; '*' = all; '' resets."
)
@click.option(
    "--interval", help="Push interval in ms (100..3600000); '' resets to 300000."
)
@click.option(
    "--match",
    help="k1=regex1,k2=regex2 over client_id, client_instance_id, "
    "client_software_name/version, client_source_address/port; '' resets.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Store nothing: print what the change would do to the live clients of --server.",
)
@SERVER
@ADMIN_SECRET
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="With --dry-run: how to print the preview.",
)
def subscriptions_alter(
    data_dir: str,
    bootstrap_server: str | None,
    command_config: str | None,
    name: str | None,
    generate_name: bool,
    metrics: str | None,
    interval: str | None,
    match: str | None,
    dry_run: bool,
    server: str,
    admin_secret: str | None,
    output_format: str,
) -> None:
    """Create or change a subscription; options not given stay as they are.

    With --dry-run nothing is stored: the collector evaluates the change
    against its live client instances (POST /v1/subscriptions/preview) and this prints,
    per affected instance, old -> new metrics, interval and subscription id."""
    from subscriptions import admin

    if bool(name) == bool(generate_name):
        raise click.UsageError("give exactly one of --name and --generate-name")
    given = click.get_current_context().get_parameter_source("server")
    if not dry_run and given == ParameterSource.COMMANDLINE:
        raise click.UsageError("--server is for --dry-run (the store is --data-dir)")
    if dry_run:
        from collector.app.cli.clients import post_preview, print_preview

        options = {
            "name": name,
            "generate_name": generate_name,
            "metrics": metrics,
            "interval": interval,
            "match": match,
        }
        print_preview(post_preview(server, admin_secret, options), output_format)
        return
    if not bootstrap_server:
        kept_here("subscriptions", data_dir)
    try:
        if bootstrap_server:
            altered = _cluster(bootstrap_server, command_config).alter(
                name, generate_name, metrics, interval, match
            )
        else:
            altered = admin.alter(
                config_store(data_dir),
                name,
                generate_name=generate_name,
                metrics=metrics,
                interval=interval,
                match=match,
            )
    except Exception as exc:  # a KafkaError with its code, or a store error
        kafka_error_exit(exc)
    click.echo(f"Altered client metrics config for {altered}.")


@subscriptions.command("delete")
@DATA_DIR
@BOOTSTRAP_SERVER
@COMMAND_CONFIG
@click.option("--name", required=True, help="Subscription name.")
def subscriptions_delete(
    data_dir: str, bootstrap_server: str | None, command_config: str | None, name: str
) -> None:
    """Delete a subscription (every key)."""
    from subscriptions import admin

    if not bootstrap_server:
        kept_here("subscriptions", data_dir)
    try:
        if bootstrap_server:
            _cluster(bootstrap_server, command_config).delete(name)
        else:
            admin.delete(config_store(data_dir), name)
    except Exception as exc:
        kafka_error_exit(exc)
    click.echo(f"Deleted client metrics config for {name}.")


@subscriptions.command("describe")
@DATA_DIR
@BOOTSTRAP_SERVER
@COMMAND_CONFIG
@click.option("--name", help="Only this subscription.")
def subscriptions_describe(
    data_dir: str,
    bootstrap_server: str | None,
    command_config: str | None,
    name: str | None,
) -> None:
    """Print each subscription's keys as key=value lines."""
    from subscriptions import admin

    if not bootstrap_server:
        kept_here("subscriptions", data_dir)
    try:
        if bootstrap_server:
            described = _cluster(bootstrap_server, command_config).describe(name)
        else:
            described = admin.describe(config_store(data_dir), name)
    except Exception as exc:
        kafka_error_exit(exc)
    for sub_name, configs in described:
        click.echo(f"Client metrics configs for {sub_name} are:")
        for key, value in configs.items():
            click.echo(f"  {key}={value}")


@subscriptions.command("list")
@DATA_DIR
@BOOTSTRAP_SERVER
@COMMAND_CONFIG
def subscriptions_list(
    data_dir: str, bootstrap_server: str | None, command_config: str | None
) -> None:
    """Print subscription names, one per line."""
    from subscriptions import admin

    if bootstrap_server:
        try:
            names = _cluster(bootstrap_server, command_config).names()
        except Exception as exc:
            kafka_error_exit(exc)
    else:
        kept_here("subscriptions", data_dir)
        names = admin.list(config_store(data_dir))
    for sub_name in names:
        click.echo(sub_name)
