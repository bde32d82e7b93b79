"""The one error a node's start raises for its configuration."""

from __future__ import annotations

__all__ = ["StartupError"]


class StartupError(RuntimeError):
    """The server cannot start with this configuration (message says why)."""
