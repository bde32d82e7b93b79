"""Hands a ``collect`` function to a prometheus registry.

The classes that keep the node's metrics are compiled (mypyc, see pyproject.toml) and count
on every request; a compiled class cannot derive from prometheus_client's ``Collector`` (the
isolated build sees prometheus_client untyped), so they register this regular Python class
instead of themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

__all__ = ["ScrapeCollector"]


class ScrapeCollector(Collector):
    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        return self._collect()
