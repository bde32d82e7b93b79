"""``ktc client-metrics``: the fleet's ``/metrics/clients``, folded from the landing topic.

In the scale-out layout every replica lands its pushes on one topic
(``landing.kafka.topic``); this process reads every partition of it and folds what landed
with the node's own code (``ClientSeries``, the same ``prometheus.clients.*`` settings), so
a client instance has one series set whichever replica it pushed through, and a push the
topic did not take never counts.  Nothing caches instances here, as a node's
ClientMetricsManager does: an instance is held until its series expire
(``prometheus.clients.series.expiry.ms``) or its terminating push arrives.

It reads the same config file and ``KTC_*`` variables as ``ktc gateway`` (the topic, its
cluster: ``landing.kafka.*``, else the fronted cluster's ``gateway.upstream.*``) and serves
``GET /metrics/clients``, ``/metrics`` (its own series) and ``/healthz`` on
``http.listener``.  Exit codes: 0 stopped by SIGTERM or SIGINT; 2 cannot run as configured
(no landing topic, no cluster, the topic unreachable at start, the port in use).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

import click

from collector.app.cli.common import CONFIG_ERROR_EXIT, fail_config, load, setup_logging
from collector.app.config import CollectorConfig

__all__ = ["client_metrics"]

log = logging.getLogger(__name__)

# How often what landed is folded (as a node's CLIENT_SERIES_FOLD_TICK_MS).
FOLD_TICK_MS = 1000


@click.command("client-metrics")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="YAML config file (the gateway's: landing.kafka.*, prometheus.clients.*).",
)
@click.option(
    "--http-listener", help="host:port for /metrics/clients, /metrics, /healthz."
)
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False),
    hidden=True,
    help="Write the bound port as JSON here once serving (for tests and scripts).",
)
def client_metrics(
    config_file: str | None, http_listener: str | None, ready_file: str | None
) -> None:
    """Serve /metrics/clients for every client of the landing topic (scale-out: one
    view of the fleet's clients, whichever replica they push through)."""
    config = load(config_file, {"http.listener": http_listener})
    if config.landing_kafka_topic is None:
        fail_config(
            "ktc client-metrics reads the landing topic: set landing.kafka.topic"
        )
    if not config.landing_cluster().bootstrap_servers:
        fail_config(
            "ktc client-metrics needs the landing topic's cluster: "
            "landing.kafka.bootstrap.servers or gateway.upstream.bootstrap.servers"
        )
    if config.http_host_port is None:
        fail_config("ktc client-metrics serves over HTTP: set http.listener")
    setup_logging(config.log_level)
    sys.exit(asyncio.run(_serve(config, ready_file)))


async def _serve(config: CollectorConfig, ready_file: str | None) -> int:
    from prometheus_client import CollectorRegistry

    from clock import SYSTEM_CLOCK
    from collector.app.clients_http import client_metrics_routes
    from collector.app.http import HealthEndpoints
    from collector.app.landing_topic import topic_settings
    from collector.app.parts.tasks import BackgroundTasks
    from collector.core.scrape import ScrapeCollector
    from collector.telemetry.prometheus.client_series import (
        ClientSeries,
        ClientSeriesSettings,
    )
    from collector.telemetry.prometheus.landed_topic import (
        LandedTopic,
        LandedTopicUnavailable,
    )

    settings = ClientSeriesSettings.parse(
        config.prometheus_clients_max_series,
        config.prometheus_clients_labels,
        config.prometheus_clients_metrics,
        max_series_per_instance=config.prometheus_clients_max_series_per_instance,
        series_expiry_ms=config.prometheus_clients_series_expiry_ms,
    )
    from exporters.kafka_topic import ensure_topic
    from exporters.kafka_topic.topic import TopicUnavailable

    topic = topic_settings(config)
    try:
        # Created when missing, as a replica does (so no read of it auto-creates it with
        # the broker's defaults).
        ensure_topic(topic)
        landed = LandedTopic(topic)
    except (TopicUnavailable, LandedTopicUnavailable) as exc:
        click.echo(f"ktc: cannot start: {exc}", err=True)
        return CONFIG_ERROR_EXIT
    # No manager caches instances here: every folded instance is held until its series
    # expire or it terminates.
    series = ClientSeries(settings, lambda _: True, landed=landed)
    registry = CollectorRegistry()
    registry.register(ScrapeCollector(series.collect))
    health = HealthEndpoints(registry)
    health.add_routes(client_metrics_routes(series))
    tasks = BackgroundTasks(SYSTEM_CLOCK)
    assert config.http_host_port is not None
    host, port = config.http_host_port
    try:
        try:
            bound = await health.start(host, port)
        except OSError as exc:
            click.echo(
                f"ktc: cannot start: http.listener {host}:{port}: {exc.strerror}",
                err=True,
            )
            return CONFIG_ERROR_EXIT
        tasks.every(FOLD_TICK_MS, "client-series-fold", series.fold_soon)
        log.info(
            "client metrics of landing topic %s (partitions %s from offsets %s) on "
            "http://%s:%d/metrics/clients",
            landed.topic,
            ",".join(map(str, landed.start_offsets)),
            ",".join(map(str, landed.start_offsets.values())),
            host or "0.0.0.0",
            bound,
        )
        if ready_file:
            _write_ready_file(Path(ready_file), bound, landed.start_offsets)
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stopped.set)
        await stopped.wait()
        log.info("stopping")
        return 0
    finally:
        tasks.cancel(lambda _: True)
        await tasks.finished()
        await health.stop()
        series.close()
        landed.close()


def _write_ready_file(path: Path, port: int, start_offsets: dict[int, int]) -> None:
    """The bound port and where each partition was read from, written whole."""
    info = {
        "http_port": port,
        "start_offsets": {str(p): o for p, o in start_offsets.items()},
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(info))
    tmp.replace(path)
