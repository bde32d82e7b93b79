"""Hypothesis strategies for generated messages, driven by the same JSON specs, and a bridge
to kio (an independent code generator over the same specs) used as ground truth."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import typing
import uuid
from collections.abc import Iterator
from functools import cache
from types import ModuleType
from typing import Any, Literal

from hypothesis import strategies as st
from kio.index import UnknownEntity, load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from proto.codegen import FIXED_TYPES, SPEC_DIR, FieldSpec, MessageSpec, load_spec
from proto.primitives import ZERO_UUID

KIO_ERROR_CODES = sorted(int(code) for code in ErrorCode)
# int64 fields kio types as a nullable UTC datetime (-1 = None)
KIO_DATETIME_FIELDS = frozenset({"LogAppendTimeMs"})
# int64 fields kio types as a timedelta, exact only within about 2**52 microseconds
KIO_TIMEDELTA_I64_FIELDS = frozenset({"SessionLifetimeMs"})

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


@cache
def specs() -> dict[str, MessageSpec]:
    return {s.name: s for s in (load_spec(p) for p in sorted(SPEC_DIR.glob("*.json")))}


def module_of(spec: MessageSpec) -> ModuleType:
    return importlib.import_module(f"proto.messages.{spec.module}")


def api_messages() -> Iterator[tuple[MessageSpec, int]]:
    """Every (request/response spec, version) we generate code for."""
    for spec in specs().values():
        if spec.kind in ("request", "response"):
            for version in spec.versions():
                yield spec, version


def _scalar(f: FieldSpec, type_name: str) -> st.SearchStrategy[Any]:
    if type_name == "bool":
        return st.booleans()
    if type_name in _INT_RANGES:
        if f.name == "ErrorCode":
            return st.sampled_from(KIO_ERROR_CODES)  # kio types error codes as an enum
        if (
            f.name in KIO_DATETIME_FIELDS
        ):  # -1 or a millisecond time a datetime holds exactly
            return st.integers(-1, 2**42)
        if (
            type_name == "int64" and f.name in KIO_TIMEDELTA_I64_FIELDS
        ):  # kio: float seconds
            return st.integers(-(2**42), 2**42)
        low, high = _INT_RANGES[type_name]
        return st.integers(low, high) | st.sampled_from(
            [low, high, 0, -1 if low else 1]
        )
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "uuid":
        return st.uuids() | st.just(ZERO_UUID)
    if type_name == "string":
        return st.text(max_size=12)
    if type_name in ("bytes", "records"):  # records are raw bytes here, undecoded
        return st.binary(max_size=24)
    raise AssertionError(type_name)


def field_strategy(
    f: FieldSpec, version: int, module: ModuleType
) -> st.SearchStrategy[Any]:
    if f.is_struct:
        element: st.SearchStrategy[Any] = struct_strategy(
            getattr(module, f.element_type), f.fields, version, module
        )
    else:
        element = _scalar(f, f.element_type)
    value = st.lists(element, max_size=3).map(tuple) if f.is_array else element
    if f.nullable(version):
        value = st.none() | value
    return value


def struct_strategy(
    cls: type, fields: list[FieldSpec], version: int, module: ModuleType
) -> st.SearchStrategy[Any]:
    present = {
        f.attr: field_strategy(f, version, module) for f in fields if f.present(version)
    }
    return st.builds(cls, **present)


def message_strategy(spec: MessageSpec, version: int) -> st.SearchStrategy[Any]:
    module = module_of(spec)
    return struct_strategy(getattr(module, spec.name), spec.fields, version, module)


# ---- kio bridge --------------------------------------------------------------------------------


def kio_class(spec: MessageSpec, version: int) -> type | None:
    kind: Literal[EntityType.request, EntityType.response] = (
        EntityType.request if spec.kind == "request" else EntityType.response
    )
    assert spec.api_key is not None
    try:
        module = load_payload_module(spec.api_key, version, kind)
    except (ModuleNotFoundError, ValueError, KeyError, UnknownEntity):
        return None
    return getattr(module, spec.name, None)


def _our_name(ours: Any, kio_name: str) -> str:
    for candidate in (kio_name, f"{kio_name}_ms"):
        if hasattr(ours, candidate):
            return candidate
    raise AttributeError(f"{type(ours).__name__} has no field for kio's {kio_name}")


def _element_type(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        return args[0]
    if len(args) == 1:
        return _element_type(args[0]) if typing.get_origin(args[0]) is tuple else None
    return None


def to_kio(ours: Any, kio_cls: type) -> Any:
    hints = typing.get_type_hints(kio_cls)
    values = {}
    for f in dataclasses.fields(kio_cls):
        value = getattr(ours, _our_name(ours, f.name))
        kind = f.metadata.get("kafka_type")
        element = _element_type(hints[f.name])
        if value is None:
            pass
        elif dataclasses.is_dataclass(hints[f.name]):  # a single nested struct
            value = to_kio(value, hints[f.name])
        elif isinstance(element, type) and dataclasses.is_dataclass(element):
            value = tuple(to_kio(item, element) for item in value)
        elif kind == "datetime_i64":
            value = (
                None
                if value == -1
                else datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
            )
        elif kind in ("timedelta_i32", "timedelta_i64"):
            value = datetime.timedelta(milliseconds=value)
        elif kind == "error_code":
            value = ErrorCode(value)
        elif kind == "uuid" and value == ZERO_UUID:
            value = None
        elif isinstance(value, memoryview):
            value = bytes(value)
        values[f.name] = value
    return kio_cls(**values)


_kio_writer = cache(entity_writer)
_kio_reader = cache(entity_reader)


def kio_encode(ours: Any, kio_cls: type) -> bytes:
    buffer = io.BytesIO()
    _kio_writer(kio_cls)(buffer, to_kio(ours, kio_cls))
    return buffer.getvalue()


def kio_decode(data: bytes, kio_cls: type) -> Any:
    value, _ = _kio_reader(kio_cls)(data, 0)
    return value


def uuid_or_zero(value: uuid.UUID | None) -> uuid.UUID:
    return ZERO_UUID if value is None else value


__all__ = [
    "FIXED_TYPES",
    "api_messages",
    "kio_class",
    "kio_decode",
    "kio_encode",
    "message_strategy",
    "module_of",
    "specs",
    "to_kio",
]
