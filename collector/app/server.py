"""``ktc serve``: a :class:`~collector.app.node.Node` in
:class:`~collector.app.modes.serve.ServeMode` (the mode and what it answers:
collector/app/modes/serve.py; start, listeners and shutdown: collector/app/node.py)."""

from __future__ import annotations

from clock import SYSTEM_CLOCK, Clock
from collector.app.config import CollectorConfig
from collector.app.modes.serve import ServeMode
from collector.app.node import Node, StartupError, install_uvloop, quota_settings
from exporters.base import Exporter
from subscriptions.store import ConfigStore

__all__ = [
    "CollectorServer",
    "ServeMode",
    "StartupError",
    "install_uvloop",
    "quota_settings",
]


class CollectorServer(Node):
    """A node in :class:`ServeMode` (what ``ktc serve`` runs)."""

    def __init__(
        self,
        config: CollectorConfig,
        *,
        exporter: Exporter | None = None,
        store: ConfigStore | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(
            config, ServeMode(config), exporter=exporter, store=store, clock=clock
        )
