"""``ktc ingest``: the landing logs, or the landing topic, into the lakehouse's Iceberg
tables, exactly once (the jobs themselves: ``exporters.lakehouse.ingest`` and
``exporters.lakehouse.topic_ingest``).

The command's own options are declared once, as click options, and arrive as one
:class:`IngestOptions`; an option is added by a ``click.option`` above
:func:`ingest_command` and a field of the same name in :class:`IngestOptions`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from exporters.lakehouse.cli.common import progress
from exporters.lakehouse.cli.options import LakeOptions, lake_options, parse_duration_s
from exporters.lakehouse.session import LakehouseConfig, LakeLibsMissing

if TYPE_CHECKING:
    from exporters.lakehouse.ingest_loop import BatchResult, Ingest
    from exporters.lakehouse.topic_source import TopicSource

__all__ = ["IngestOptions", "ingest_command"]


@dataclasses.dataclass(frozen=True)
class IngestOptions:
    """``ktc ingest``'s own options, as given (one field per option of the command)."""

    landing_dirs: tuple[Path, ...]
    once: bool
    trigger_interval: str
    max_records_per_batch: int
    maintenance_interval: str
    retention_days: int | None
    flatten_processes: int | None
    kafka_bootstrap_servers: str | None = None
    kafka_topic: str | None = None
    kafka_properties: tuple[str, ...] = ()

    def kafka_source(self) -> TopicSource | None:
        """The landing topic to read, or None (the landing logs); a usage error for a
        half-given or contradictory choice."""
        from exporters.lakehouse.topic_source import TopicSource

        if not self.kafka_topic and not self.kafka_bootstrap_servers:
            if self.kafka_properties:
                raise click.UsageError("--kafka-property needs --kafka-topic")
            return None
        if not self.kafka_topic or not self.kafka_bootstrap_servers:
            raise click.UsageError(
                "--kafka-topic and --kafka-bootstrap-servers go together"
            )
        if self.landing_dirs:
            raise click.UsageError(
                "--landing-dir and --kafka-topic are two sources: one ingest reads one"
            )
        properties = {}
        for pair in self.kafka_properties:
            key, sep, value = pair.partition("=")
            key = key.strip()
            if not sep or not key:
                # Never a value: it may be a password.
                shown = pair if not sep else "=..."
                raise click.UsageError(
                    f"--kafka-property expects KEY=VALUE, got {shown!r}"
                )
            if key.startswith("kafka."):
                raise click.UsageError(
                    f"--kafka-property {key}: give the Kafka client's name "
                    f"({key.removeprefix('kafka.')}), without Spark's kafka. prefix"
                )
            if key == "bootstrap.servers":
                raise click.UsageError(
                    "--kafka-property bootstrap.servers: use --kafka-bootstrap-servers"
                )
            properties[key] = _resolve_env_references(key, value, os.environ)
        return TopicSource(self.kafka_bootstrap_servers, self.kafka_topic, properties)


# Kafka's ConfigTransformer pattern, ${provider:[path:]key}, with the env provider only
# (EnvVarConfigProvider; the collector's config takes the same references).
_REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")


def _resolve_env_references(key: str, value: str, environ: Mapping[str, str]) -> str:
    """``value`` with each ``${env:VAR}`` (or ``${env::VAR}``) replaced by the variable,
    so a password need not be on the command line; an unset variable or another provider
    is a usage error naming the property and the reference, never a value."""

    def resolve(found: re.Match[str]) -> str:
        provider, path, name = found.groups()
        if provider != "env" or path:
            raise click.UsageError(
                f"--kafka-property {key}: {found.group(0)} is not an environment "
                "reference (${env:VAR})"
            )
        if name not in environ:
            raise click.UsageError(
                f"--kafka-property {key}: the environment variable {name} is not set"
            )
        return environ[name]

    return _REFERENCE.sub(resolve, value)


@click.command("ingest")
@lake_options
@click.option(
    "--landing-dir",
    "landing_dirs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A landing directory to ingest (repeatable); default: every "
    "<data-dir>/landing/node-*, discovered before each batch.",
)
@click.option("--once", is_flag=True, help="Ingest what is there, then exit.")
@click.option(
    "--trigger-interval",
    default="10s",
    show_default=True,
    help="Streaming: start a batch this often (a push is queryable within "
    "about this plus one batch's time).",
)
@click.option(
    "--max-records-per-batch",
    type=click.IntRange(min=1),
    default=20_000,
    show_default=True,
    help="Landing records per directory in one batch.",
)
@click.option(
    "--maintenance-interval",
    "--compact-interval",
    "maintenance_interval",
    default="1h",
    show_default=True,
    help="Streaming: compact, apply retention and expire snapshots this often, between batches.",
)
@click.option(
    "--retention-days",
    type=click.IntRange(min=1),
    default=None,
    help="Streaming: also delete the days received more than this many days ago.",
)
@click.option(
    "--flatten-processes",
    type=click.IntRange(min=1),
    default=None,
    help="Processes that flatten a large batch, this one included; default: one per "
    "core the process may use (its CPU affinity and cgroup quota), at most four.",
)
@click.option(
    "--kafka-bootstrap-servers",
    envvar="KTC_INGEST_KAFKA_BOOTSTRAP_SERVERS",
    metavar="HOST:PORT,...",
    help="Read the landing topic (landing.kafka.topic) on this cluster instead of "
    "the landing logs, with Spark's Kafka source; with --kafka-topic.",
)
@click.option(
    "--kafka-topic",
    envvar="KTC_INGEST_KAFKA_TOPIC",
    help="The landing topic to ingest (every partition, each exactly once).",
)
@click.option(
    "--kafka-property",
    "kafka_properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Kafka consumer property for the topic (the Java client's names, e.g. "
    "security.protocol=SASL_SSL, sasl.jaas.config=...), repeatable; ${env:VAR} in a "
    "value is the environment variable VAR, so a password stays off the command line.",
)
def ingest_command(lake: LakeOptions, **params: Any) -> None:
    """Ingest the landing logs (or the landing topic) into the lakehouse's Iceberg
    tables, exactly once."""
    params["landing_dirs"] = tuple(params["landing_dirs"])
    params["kafka_properties"] = tuple(params["kafka_properties"])
    run_ingest(lake, IngestOptions(**params))


def run_ingest(lake: LakeOptions, options: IngestOptions) -> None:
    """Start the job, then one pass (``--once``) or batches until SIGTERM/SIGINT."""
    from exporters.lakehouse.topic_source import TopicUnavailable

    source = options.kafka_source()
    _log_to_stderr()
    config = lake.config()
    job = _job(lake, config, options, source)
    if sys.stderr.isatty():  # a terminal: what the first seconds are spent on
        progress(
            f"ktc ingest: starting Spark ({config.master}), catalog {config.catalog_kind}"
        )
    _start(job)
    try:
        if options.once:
            _run_once(job)
            return
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())  # finish the batch, then exit
        following = f"topic {source.topic}" if source else "the landing logs"
        progress(
            f"ktc ingest: following {following}, a batch every "
            f"{options.trigger_interval}"
        )
        job.run_forever(stop, on_batch=_print_batch)
    except TopicUnavailable as exc:
        raise click.ClickException(_unavailable(str(exc), source)) from None
    finally:
        job.close()


def _unavailable(message: str, source: TopicSource | None) -> str:
    """The topic's error, and for a cluster that never answered, what to check: a
    listener that wants a login (or TLS) drops a client that speaks another protocol
    without a word, and the client only ever sees the timeout."""
    if source is None or "TimeoutException" not in message:
        return message
    protocol = source.properties.get("security.protocol", "PLAINTEXT")
    return (
        f"{message} (nothing answered: is the cluster up, and does that listener "
        f"take security.protocol {protocol}? --kafka-property sets it)"
    )


def _log_to_stderr() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # one INFO line per gateway call
    logging.getLogger("py4j").setLevel(logging.WARNING)


def _job(
    lake: LakeOptions,
    config: LakehouseConfig,
    options: IngestOptions,
    source: TopicSource | None,
) -> Ingest:
    """The ingest job the options describe (not started)."""
    # Imported here: pyarrow, protobuf and the OTLP classes cost `ktc sql` a quarter second.
    from exporters.lakehouse.flatten_pool import default_processes
    from exporters.lakehouse.ingest import IngestJob, IngestSettings
    from exporters.lakehouse.maintenance import MaintenanceSettings, run_maintenance

    settings = IngestSettings(
        max_records_per_source=options.max_records_per_batch,
        trigger_interval_s=parse_duration_s(options.trigger_interval),
        maintenance_interval_s=parse_duration_s(options.maintenance_interval),
        retention_days=options.retention_days,
        flatten_processes=options.flatten_processes or default_processes(),
    )
    maintenance = MaintenanceSettings(retention_days=options.retention_days)
    if source is not None:
        from exporters.lakehouse.topic_ingest import TopicIngestJob

        return TopicIngestJob(
            config,
            source,
            settings,
            maintenance=lambda spark: run_maintenance(spark, config, maintenance),
        )
    return IngestJob(
        config,
        _landing_dirs(lake, options),
        settings,
        maintenance=lambda spark: run_maintenance(spark, config, maintenance),
    )


def _landing_dirs(
    lake: LakeOptions, options: IngestOptions
) -> Callable[[], list[Path]]:
    """The landing directories to read, listed again before each batch: the ones given,
    else every ``<data-dir>/landing/node-*``."""
    from exporters.lakehouse.ingest import landing_dirs_under

    if options.landing_dirs:
        return lambda: list(options.landing_dirs)
    return landing_dirs_under(lake.data_dir)


def _start(job: Ingest) -> None:
    """Start the JVM and take the landing directories; a missing jar or a directory
    another ingest holds is one line."""
    from exporters.lakehouse.ingest import LandingDirBusy
    from exporters.lakehouse.topic_source import KafkaSourceJarsMissing

    try:
        job.spark  # noqa: B018 - start the JVM here, so a missing jar is one line
    except (LakeLibsMissing, KafkaSourceJarsMissing) as exc:
        raise click.ClickException(str(exc)) from None
    try:
        job.start()
    except LandingDirBusy as exc:
        raise click.ClickException(str(exc)) from None


def _run_once(job: Ingest) -> None:
    from exporters.lakehouse.topic_ingest import TopicIngestJob

    results = job.run_once()
    for result in results:
        _print_batch(result)
    if not results:  # say so: an empty stdout alone reads like a hang or a bug
        positions = job.positions.get("pushes", {})
        where = ", ".join(f"{n} at {o}" for n, o in sorted(positions.items()))
        progress(
            "ktc ingest: nothing new in "
            + (
                f"topic {job.source.topic}"
                if isinstance(job, TopicIngestJob)
                else "the landing logs"
            )
            + (f" (committed: {where})" if where else "")
        )


def _print_batch(result: BatchResult) -> None:
    """A batch: a summary line on stderr, its figures as one JSON line on stdout."""
    ranges = ", ".join(f"{n} [{a}, {b})" for n, (a, b) in sorted(result.ranges.items()))
    progress(
        f"ktc ingest: batch {result.batch}: {result.records} records ({ranges}), "
        f"{sum(result.rows.values())} rows in {result.seconds:.1f} s"
        + (" (completing a batch a killed ingest left)" if result.replayed else "")
    )
    click.echo(
        json.dumps(
            {
                "batch": result.batch,
                "records": result.records,
                "rows": result.rows,
                "ranges": {n: list(r) for n, r in result.ranges.items()},
                "replayed": result.replayed,
                "rejected": result.rejected,
                # The topic ingest: the executors' processes that flattened it.
                **(
                    {"flattened_by": list(result.flattened_by)}
                    if result.flattened_by is not None
                    else {}
                ),
            },
            sort_keys=True,
        ),
        nl=True,
    )
    sys.stdout.flush()
