"""Hypothesis strategies for generated messages, shared with tests/proto (message_strategies.py,
driven by the same JSON specs as the generated code)."""

from __future__ import annotations

from proto.codegen import MessageSpec
from tests.proto.message_strategies import message_strategy, specs

__all__ = ["message_strategy", "response_specs", "specs"]


def response_specs() -> list[MessageSpec]:
    return [spec for spec in specs().values() if spec.kind == "response"]
