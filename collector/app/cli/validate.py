"""``ktc validate-config FILE``: load a config file as ``ktc serve`` would, check what loading
alone does not (listeners, the OTLP exporter's options) and print the effective config."""

from __future__ import annotations

import click
import yaml

from collector.app.cli.common import fail_config, load

__all__ = ["validate_config"]


@click.command("validate-config")
@click.argument("config_file", type=click.Path(dir_okay=False))
def validate_config(config_file: str) -> None:
    """Validate FILE (plus KTC_* environment overrides) and print the effective config."""
    config = load(config_file, {})
    from collector.net.listeners import (
        ListenerError,
        parse_listeners,
        parse_security_protocol_map,
    )

    try:
        protocols = parse_security_protocol_map(config.listener_security_protocol_map)
        parse_listeners(config.listeners, protocols)
        if config.advertised_listeners:
            parse_listeners(
                config.advertised_listeners, protocols, key="advertised.listeners"
            )
    except ListenerError as exc:
        fail_config(str(exc))
    if config.exporters_otlp is not None:
        from pydantic import ValidationError

        from exporters.otlp import OtlpExporterConfig

        try:
            OtlpExporterConfig.model_validate(config.exporters_otlp)
        except ValidationError as exc:
            # Named problems without the values (a header may hold a token).
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}"
                for e in exc.errors(include_input=False)
            )
            fail_config(f"exporters.otlp: {problems}")
    from collector.security.secrets import redact

    # Password-typed keys print as [hidden], as Kafka logs its configs.
    click.echo(yaml.safe_dump(redact(config.to_dotted()), sort_keys=False).rstrip())
    click.echo(f"# {config_file}: valid", err=True)
