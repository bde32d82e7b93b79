"""``ktc serve``: a :class:`~collector.app.node.Node` in
:class:`~collector.app.modes.serve.ServeMode` (the mode and what it answers:
collector/app/modes/serve.py; start, listeners and shutdown: collector/app/node.py)."""

from __future__ import annotations

from collector.app.modes.serve import ServeMode
from collector.app.node import (
    NodeInMode,
    StartupError,
    install_uvloop,
    quota_settings,
)

__all__ = [
    "CollectorServer",
    "ServeMode",
    "StartupError",
    "install_uvloop",
    "quota_settings",
]


class CollectorServer(NodeInMode):
    """A node in :class:`ServeMode` (what ``ktc serve`` runs)."""

    mode_class = staticmethod(ServeMode)
