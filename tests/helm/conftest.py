"""Fixtures for the chart tests."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tests.helm.ktc_chart import render_documents

Docs = list[dict[str, Any]]


@pytest.fixture(scope="session")
def rendered() -> Callable[..., Docs]:
    """render(values) -> the parsed objects; each distinct values is rendered once."""
    cache: dict[str, Docs] = {}

    def _render(values: Mapping[str, Any] | None = None) -> Docs:
        key = json.dumps(values or {}, sort_keys=True)
        if key not in cache:
            cache[key] = render_documents(values)
        return copy.deepcopy(cache[key])

    return _render
