"""Where a node's accepted pushes go, and what its answers wait for.

The landing log this node owns (``landing``: write-behind, one ``writev`` per event-loop
turn for all connections, before that turn's answers go out, collector/net/flush.py), or
the landing topic (``landing.kafka.topic``: an answer waits for its delivery report), or
an exporter given to the node; the landing's readiness and series; the OTLP forwarder
that follows the landed pushes; and, at shutdown, the landing flushed, fsynced and closed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from clock import Clock
from collector.app.config import CollectorConfig
from collector.app.landing_health import LandingHealth
from collector.app.parts.errors import StartupError
from collector.app.parts.tasks import BackgroundTasks
from collector.core.scrape import ScrapeCollector
from collector.net.flush import DurabilityGate
from exporters.base import Exporter
from exporters.landing import LandingLog, LandingOptions
from exporters.landing.layout import landing_directory

if TYPE_CHECKING:
    # Imported where used: gRPC is loaded only by a node that forwards.
    from exporters.otlp import OtlpForwarder
    from exporters.otlp.forwarder import RecordSource

__all__ = ["Landing"]

_FORWARDER = "otlp-forwarder"


class Landing:
    """The node's landing: ``exporter`` (where pushes go) and ``durability`` (what answers
    wait for), once :meth:`open`."""

    def __init__(
        self,
        config: CollectorConfig,
        clock: Clock,
        registry: CollectorRegistry,
        exporter: Exporter | None,
    ) -> None:
        self._config = config
        self._clock = clock
        self._registry = registry
        self.exporter = exporter
        self._owns_exporter = exporter is None
        self.durability: DurabilityGate | None = None
        self._log: LandingLog | None = None  # the landing log this node owns
        self._health: LandingHealth | None = None
        self._sync_executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._forwarder: OtlpForwarder | None = None
        self._forwarder_stop = asyncio.Event()

    @property
    def directory(self) -> Path:
        return landing_directory(self._config.data_dir, self._config.node_id)

    def open(self) -> Exporter:
        """The landing log this node owns (unless an exporter was given): the config's
        ``landing`` options, with retention protecting the forwarder's position; or the
        landing topic."""
        if self.exporter is not None:
            return self.exporter
        config = self._config
        if config.landing_kafka_topic is not None:  # the topic instead of the log
            return self._open_topic()
        try:
            options = LandingOptions.from_mapping(config.landing)
        except (TypeError, ValueError) as exc:
            raise StartupError(f"landing: {exc}") from exc
        if config.exporters_otlp is not None:
            # Retention must not delete what the forwarder has not sent, even before its
            # first commit (a consumer that never committed protects nothing).
            from exporters.otlp import consumer_name_for

            options = options.with_required_consumer(consumer_name_for("otlp"))
        log = self._log = LandingLog(self.directory, options, clock=self._clock)
        self.exporter = log
        self.durability = DurabilityGate(
            log, self._pending_sync if options.group_commit else None
        )
        self._health = LandingHealth(log, self.durability)
        self._registry.register(ScrapeCollector(self._health.collect))
        return log

    def _open_topic(self) -> Exporter:
        from collector.app.landing_topic import open_topic_landing
        from exporters.kafka_topic.topic import TopicUnavailable

        try:
            landing, self.durability, health = open_topic_landing(self._config)
        except TopicUnavailable as exc:
            raise StartupError(f"landing.kafka.topic: {exc}") from exc
        self.exporter = landing
        self._registry.register(ScrapeCollector(health.collect))
        return landing

    def _pending_sync(self) -> asyncio.Future[None] | None:
        """The group-commit fsync still owed for what is written, or None."""
        log = self._log
        if log is None or log.durable_offset >= log.next_offset:
            return None
        if self._sync_executor is None:
            self._sync_executor = concurrent.futures.ThreadPoolExecutor(
                1, "landing-sync"
            )
        return asyncio.get_running_loop().run_in_executor(self._sync_executor, log.sync)

    def not_ready_reason(self) -> str | None:
        if self._owns_exporter and self._log is not None:
            directory = self.directory
            if not directory.is_dir():
                return f"{directory} missing"
            if not os.access(directory, os.W_OK):
                return f"{directory} not writable"
        if self._health is not None:  # a full or failing disk
            return self._health.not_ready_reason()
        return None

    def start_forwarder(self, tasks: BackgroundTasks) -> None:
        """The OTLP forwarder (``exporters.otlp``), following the landing log or the
        landing topic."""
        otlp = self._config.exporters_otlp
        if otlp is None:
            return
        from exporters.otlp import OtlpExporterConfig, OtlpForwarder

        source: Path | RecordSource = self.directory
        if self._config.landing_kafka_topic is not None:
            from collector.app.landing_topic import topic_settings
            from exporters.kafka_topic import TopicSource

            settings = topic_settings(self._config)
            source = TopicSource(settings, settings.forwarder_group)
        self._forwarder = OtlpForwarder(
            [source],
            OtlpExporterConfig.model_validate(otlp),
            clock=self._clock,
            registry=self._registry,
        )
        tasks.start(self._forwarder.run(self._forwarder_stop), _FORWARDER)

    @staticmethod
    def stopped_with_the_node(task_name: str) -> bool:
        """Whether the shutdown cancels this task (the forwarder is stopped, it drains)."""
        return task_name != _FORWARDER

    def close(self) -> None:
        """The landing flushed, fsynced and closed (when this node opened it); the
        forwarder told to drain and stop."""
        exporter = self.exporter
        if exporter is not None and self._owns_exporter:
            if self._log is not None:
                with contextlib.suppress(Exception):
                    self._log.flush()
                    self._log.sync()
            exporter.close()
        if self._forwarder is not None:
            self._forwarder_stop.set()

    def closed(self) -> None:
        """Once every task has ended: the forwarder and the landing's sync thread."""
        if self._forwarder is not None:
            self._forwarder.close()
        if self._sync_executor is not None:
            self._sync_executor.shutdown(wait=True)
