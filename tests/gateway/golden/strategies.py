"""Hypothesis strategies for generated messages, shared with tests/proto (message_strategies.py,
driven by the same JSON specs as the generated code)."""

from __future__ import annotations

import sys
from pathlib import Path

_PROTO_TESTS = str(Path(__file__).resolve().parents[2] / "proto")
if _PROTO_TESTS not in sys.path:
    sys.path.append(_PROTO_TESTS)

from message_strategies import message_strategy, specs  # noqa: E402

from proto.codegen import MessageSpec  # noqa: E402

__all__ = ["message_strategy", "response_specs", "specs"]


def response_specs() -> list[MessageSpec]:
    return [spec for spec in specs().values() if spec.kind == "response"]
