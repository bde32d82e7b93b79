"""A node's stop, and the signals that start it.

Shutdown (SIGTERM/SIGINT, or ``Node.stop``), once, bounded by
``shutdown.timeout.seconds``: readiness off first, so load balancers stop routing;
listeners stop accepting; every connection finishes writing what it already answered and
closes; the background tasks end (the forwarder last, once the landing is closed: it
drains); the landing log is flushed, fsynced and closed; what the node registered with
``at_stop`` is closed; the HTTP endpoint goes last.  SIGHUP runs the node's reload.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from collector.app.config import CollectorConfig
from collector.app.http import HealthEndpoints
from collector.app.parts.connections import Connections
from collector.app.parts.landing import Landing
from collector.app.parts.listeners import Listeners
from collector.app.parts.tasks import BackgroundTasks

__all__ = ["Lifecycle"]

log = logging.getLogger(__name__)

# How long a graceful shutdown waits for connections to write what they answered.
CONNECTIONS_DRAIN_S = 5.0


class Lifecycle:
    """Stops the node's parts in order, once; ``stopped`` is set when it is done."""

    def __init__(
        self,
        config: CollectorConfig,
        health: HealthEndpoints,
        listeners: Listeners,
        connections: Connections,
        tasks: BackgroundTasks,
        landing: Landing,
    ) -> None:
        self._timeout_s = config.shutdown_timeout_seconds
        self._health = health
        self._listeners = listeners
        self._connections = connections
        self._tasks = tasks
        self._landing = landing
        self._at_stop: list[Callable[[], None]] = []
        self._stopping = False
        self.stopped = asyncio.Event()

    def at_stop(self, close: Callable[[], None]) -> None:
        """Run ``close`` once the landing is closed (in the order they were given)."""
        self._at_stop.append(close)

    def install_signal_handlers(self, reload: Callable[[], None]) -> None:
        """SIGTERM and SIGINT stop the node; SIGHUP runs ``reload``."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._signalled, sig)
        loop.add_signal_handler(signal.SIGHUP, reload)

    def _signalled(self, sig: signal.Signals) -> None:
        log.info("received %s, shutting down", sig.name)
        asyncio.get_running_loop().create_task(self.stop())

    async def stop(self) -> None:
        if self._stopping:
            await self.stopped.wait()
            return
        self._stopping = self._connections.stopping = True
        try:
            await asyncio.wait_for(self._shutdown(), self._timeout_s)
        except TimeoutError:
            log.error("shutdown did not finish in %.0f s", self._timeout_s)
        finally:
            self.stopped.set()

    async def _shutdown(self) -> None:
        self._health.begin_shutdown()  # readiness off before anything closes
        self._listeners.close()
        await self._connections.drain(CONNECTIONS_DRAIN_S)
        self._tasks.cancel(self._landing.stopped_with_the_node)
        self._landing.close()
        await self._tasks.finished()
        self._landing.closed()
        for close in self._at_stop:
            close()
        await self._health.stop()
        log.info("collector stopped")
