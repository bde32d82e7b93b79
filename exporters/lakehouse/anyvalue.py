"""OTLP attributes <-> ``MAP<STRING,STRING>`` plus a ``*_types`` map, losslessly.

Analysts want ``attributes['node.id'] = '1'``, so every value is text in one map.  A
string keeps its exact text; any other AnyValue is written as text by the table below
and its kind is recorded under the same key in the companion ``*_types`` map (absent
key there = a string).  That companion map is what makes the round trip exact: the
string ``"5"`` and the integer ``5`` have the same text but different types.

==================  ================  =============================================
AnyValue            ``*_types`` entry  text in the values map
==================  ================  =============================================
string_value        (none)            the string itself
bool_value          ``bool``          ``true`` / ``false``
int_value           ``int``           decimal, e.g. ``-42``
double_value        ``double``        shortest text that reads back to the same
                                      double (Python ``repr``): ``1.5``, ``1e+100``,
                                      ``nan``, ``inf``, ``-inf`` (a NaN's sign and
                                      payload bits are not kept)
bytes_value         ``bytes``         standard base64 with padding
array_value         ``array``         OTLP/JSON (the protobuf JSON mapping) of the
                                      ArrayValue, e.g. ``{"values":[{"intValue":"1"}]}``
kvlist_value        ``kvlist``        OTLP/JSON of the KeyValueList
string_value_strindex ``strindex``    decimal
(no value set)      ``empty``         empty text
==================  ================  =============================================

The ``*_types`` map is null when every value is a string (what librdkafka sends), so
it costs nothing in the common case.  Attribute keys are unique in OTLP; if a client
sends a key twice the last value wins (a map cannot hold both).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["decode_attributes", "decode_value", "encode_attributes", "encode_value"]


def _json(message: Any) -> str:
    return json_format.MessageToJson(
        message, indent=None, preserving_proto_field_name=False
    )


# kind -> (AnyValue oneof field, value -> text); the order of the oneof in the .proto.
_ENCODERS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "bool": ("bool_value", lambda v: "true" if v else "false"),
    "int": ("int_value", str),
    "double": ("double_value", repr),
    "bytes": ("bytes_value", lambda v: base64.b64encode(v).decode("ascii")),
    "array": ("array_value", _json),
    "kvlist": ("kvlist_value", _json),
    "strindex": ("string_value_strindex", str),
}
_KIND_BY_FIELD: dict[str, str] = {field: kind for kind, (field, _) in _ENCODERS.items()}

_BOOLS = {"true": True, "false": False}


def encode_value(value: AnyValue) -> tuple[str, str | None]:
    """(text, kind) of one AnyValue; kind is None for a string."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return value.string_value, None
    if which is None:
        return "", "empty"
    kind = _KIND_BY_FIELD[which]
    return _ENCODERS[kind][1](getattr(value, which)), kind


def decode_value(text: str, kind: str | None, into: AnyValue) -> None:
    """Set ``into`` to the AnyValue that :func:`encode_value` turned into (text, kind)."""
    if kind is None:
        into.string_value = text
    elif kind == "empty":
        into.Clear()
    elif kind == "bool":
        into.bool_value = _BOOLS[text]
    elif kind == "int":
        into.int_value = int(text)
    elif kind == "double":
        into.double_value = float(text)
    elif kind == "bytes":
        into.bytes_value = base64.b64decode(text, validate=True)
    elif kind == "array":
        into.array_value.SetInParent()  # an empty array is "{}": still an array
        json_format.Parse(text, into.array_value)
    elif kind == "kvlist":
        into.kvlist_value.SetInParent()
        json_format.Parse(text, into.kvlist_value)
    elif kind == "strindex":
        into.string_value_strindex = int(text)
    else:
        raise ValueError(f"unknown attribute value kind {kind!r}")


def encode_attributes(
    key_values: Iterable[KeyValue],
) -> tuple[dict[str, str], dict[str, str] | None]:
    """(values, types) maps for a repeated KeyValue; types is None if all are strings."""
    values: dict[str, str] = {}
    types: dict[str, str] | None = None
    for kv in key_values:
        value = kv.value
        if value.WhichOneof("value") == "string_value":  # the hot path: librdkafka
            values[kv.key] = value.string_value
            if types is not None:
                types.pop(kv.key, None)
            continue
        text, kind = encode_value(value)
        values[kv.key] = text
        if types is None:
            types = {}
        types[kv.key] = kind  # type: ignore[assignment]
    return values, types


def decode_attributes(
    values: Mapping[str, str] | Iterable[tuple[str, str]] | None,
    types: Mapping[str, str] | Iterable[tuple[str, str]] | None,
    into: Any,
) -> None:
    """Append KeyValues to the repeated field ``into`` (e.g. ``point.attributes``).

    Accepts dicts (Spark rows) or lists of (key, value) pairs (Arrow's map form).
    """
    if not values:
        return
    items = values.items() if isinstance(values, Mapping) else values
    kinds = (
        dict(types.items() if isinstance(types, Mapping) else types) if types else {}
    )
    for key, text in items:
        kv = into.add()
        kv.key = key
        decode_value(text, kinds.get(key), kv.value)
