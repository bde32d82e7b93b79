"""Generate ``proto/messages/*.py`` from Kafka's JSON message specs in ``proto/specs/``.

Run ``python -m proto.codegen`` after changing a spec (``--check`` only reports stale files;
``tests/proto/test_codegen.py`` fails when the committed code is stale).

What comes out, per spec (``PushTelemetryRequest.json`` -> ``push_telemetry_request.py``):

* one frozen slotted dataclass per struct (the message and every nested struct type), fields
  in spec order with snake_case names (``ClientInstanceId`` -> ``client_instance_id``) and
  Kafka's defaults; a field's type covers every version (absent in a version = its default);
* per version, straight-line ``read_vN(buf, pos) -> (message, pos)`` and
  ``write_vN(message, out: bytearray)`` functions: runs of fixed-size fields become one
  precompiled ``struct.Struct`` call; no per-field interpretation at run time. Versions whose
  code would be identical share one function;
* ``READERS`` / ``WRITERS`` tables ``version -> function`` and the spec's metadata.

Encoding rules follow Kafka's own generator (``generator/src/main/java/org/apache/kafka/message``):
a version in ``flexibleVersions`` uses compact strings/bytes/arrays (unless the field overrides
``flexibleVersions``, as the header's ClientId does) and ends every struct with a tagged-field
section; tagged fields are written only when they differ from their default, in tag order; a
non-ignorable field that is absent from the version being written must hold its default, else
``UnsupportedVersionError`` (``MessageDataGenerator`` does the same). A ``records`` field is
encoded like ``bytes`` and decodes to the raw record set; a struct held in a single field is
defined before its holder (its class is the holder's default factory).

It also writes ``proto/api_table.py`` (every API key of a Kafka release) from the compact
table in ``proto/specs/apis/``, which ``--api-table JAR_OR_DIR`` derives from a release's
specs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["OUT_DIR", "SPEC_DIR", "main", "render_all", "stale_files"]

SPEC_DIR = Path(__file__).resolve().parent / "specs"
OUT_DIR = Path(__file__).resolve().parent / "messages"

# Kafka type -> (struct format char, byte size, python type, default value source)
FIXED_TYPES: dict[str, tuple[str, int, str, str]] = {
    "bool": ("?", 1, "bool", "False"),
    "int8": ("b", 1, "int", "0"),
    "int16": ("h", 2, "int", "0"),
    "uint16": ("H", 2, "int", "0"),
    "int32": ("i", 4, "int", "0"),
    "uint32": ("I", 4, "int", "0"),
    "int64": ("q", 8, "int", "0"),
    "float64": ("d", 8, "float", "0.0"),
    "uuid": ("16s", 16, "uuid.UUID", "ZERO_UUID"),
}
VARIABLE_TYPES = {"string": "str", "bytes": "BytesLike", "records": "BytesLike"}
# "records" (a record set: Produce, Fetch, ShareFetch) is encoded exactly like "bytes" and
# decodes to the raw bytes, undecoded; like Kafka's generator it always defaults to null
# ("Records fields default to null", clients/src/main/resources/common/message/README.md).


# ---- spec model --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Versions:
    """A version range from a spec: "3+", "0-4", "2", or "none"."""

    low: int
    high: int | None  # None = no upper bound

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return cls(1, 0)  # empty
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return version >= self.low and (self.high is None or version <= self.high)


@dataclass(slots=True)
class FieldSpec:
    name: str
    type: str
    versions: Versions
    nullable_versions: Versions
    tagged_versions: Versions
    tag: int | None
    default: object
    ignorable: bool
    flexible_override: Versions | None
    about: str
    fields: list[FieldSpec] = field(default_factory=list)

    @property
    def attr(self) -> str:
        return snake_case(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        element = self.element_type
        return element not in FIXED_TYPES and element not in VARIABLE_TYPES

    def present(self, version: int) -> bool:
        return version in self.versions

    def nullable(self, version: int) -> bool:
        return version in self.nullable_versions

    def tagged(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged_versions

    def compact(self, version: int, flexible: bool) -> bool:
        if self.flexible_override is not None:
            return version in self.flexible_override
        return flexible


@dataclass(slots=True)
class MessageSpec:
    name: str
    api_key: int | None
    kind: str  # request | response | header
    valid_versions: Versions
    flexible_versions: Versions
    fields: list[FieldSpec]
    source: str

    @property
    def module(self) -> str:
        return snake_case(self.name)

    def versions(self) -> list[int]:
        assert self.valid_versions.high is not None
        return list(range(self.valid_versions.low, self.valid_versions.high + 1))


def isort_key(name: str) -> tuple[int, str]:
    """isort's order-by-type (what ruff's I001 and RUF022 expect): CONSTANTS, Classes, rest."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def snake_case(name: str) -> str:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return spaced.lower()


def strip_comments(text: str) -> str:
    """Drop ``//`` comments outside strings (Kafka's specs are JSON with comments)."""
    out: list[str] = []
    in_string = False
    i = 0
    while i < len(text):
        char = text[i]
        if in_string:
            out.append(char)
            if char == "\\":
                out.append(text[i + 1])
                i += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
            out.append(char)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(char)
        i += 1
    return "".join(out)


def _field_from_json(
    raw: dict[str, Any], common: dict[str, list[dict[str, Any]]]
) -> FieldSpec:
    type_name = str(raw["type"])
    element = type_name.removeprefix("[]")
    children: list[dict[str, Any]] = raw.get("fields") or common.get(element) or []
    flexible = raw.get("flexibleVersions")
    tag = raw.get("tag")
    return FieldSpec(
        name=str(raw["name"]),
        type=type_name,
        versions=Versions.parse(str(raw["versions"])),
        nullable_versions=Versions.parse(raw.get("nullableVersions")),
        tagged_versions=Versions.parse(raw.get("taggedVersions")),
        tag=int(tag) if tag is not None else None,
        default=raw.get("default"),
        ignorable=bool(raw.get("ignorable", False)),
        flexible_override=Versions.parse(str(flexible))
        if flexible is not None
        else None,
        about=str(raw.get("about", "")),
        fields=[_field_from_json(child, common) for child in children],
    )


def load_spec(path: Path) -> MessageSpec:
    raw = json.loads(strip_comments(path.read_text()))
    common = {str(s["name"]): s["fields"] for s in raw.get("commonStructs", [])}
    return MessageSpec(
        name=raw["name"],
        api_key=raw.get("apiKey"),
        kind=raw["type"],
        valid_versions=Versions.parse(raw["validVersions"]),
        flexible_versions=Versions.parse(raw["flexibleVersions"]),
        fields=[_field_from_json(f, common) for f in raw["fields"]],
        source=path.name,
    )


NO_VERSIONS = Versions(1, 0)


# ---- python types and defaults -------------------------------------------------------------------


def python_type(f: FieldSpec) -> str:
    element = f.element_type
    if f.is_struct:
        base = element
    elif element in FIXED_TYPES:
        base = FIXED_TYPES[element][2]
    else:
        base = VARIABLE_TYPES[element]
    typ = f"tuple[{base}, ...]" if f.is_array else base
    if f.nullable_versions != NO_VERSIONS or f.type == "records":
        typ += " | None"
    return typ


def default_source(f: FieldSpec) -> str:
    """Python source of the field's default, following Kafka's generator rules."""
    if f.default == "null" or f.type == "records":
        return "None"
    if f.is_array:
        return "()"
    if f.is_struct:
        return f"{f.element_type}()"
    if f.type in FIXED_TYPES:
        if f.default is None:
            return FIXED_TYPES[f.type][3]
        if f.type == "bool":
            return "True" if str(f.default).lower() == "true" else "False"
        if f.type == "float64":
            return repr(float(str(f.default)))
        if f.type == "uuid":
            return "ZERO_UUID"
        return str(int(str(f.default), 0))
    if f.type == "string":
        return json.dumps(str(f.default)) if f.default is not None else '""'
    return 'b""'  # bytes


# ---- code emission -----------------------------------------------------------------------------


LINE_LIMIT = 100


def wrap_items(
    opening: str, items: list[str], closing: str, *, tuple_target: bool = False
) -> list[str]:
    """``opening + items + closing`` on one line if it fits, else one item per line."""
    joined = ", ".join(items) + ("," if tuple_target and len(items) == 1 else "")
    one_line = opening + joined + closing
    if len(one_line) <= LINE_LIMIT:
        return [one_line]
    indent = opening[: len(opening) - len(opening.lstrip())]
    return [opening, *(f"{indent}    {item}," for item in items), indent + closing]


class Emitter:
    """Collects module-level pieces: struct formats and helper functions, deduplicated."""

    def __init__(self) -> None:
        self.structs: dict[str, str] = {}  # format -> name
        self.functions: dict[str, str] = {}  # signature + body -> name of the function
        self.blocks: list[str] = []
        self.aliases: list[str] = []
        self.primitives: set[str] = set()
        self.setters: dict[str, str] = {}
        self.needs_struct_module = False
        self.needs_unsupported = False

    def struct(self, fmt: str) -> str:
        if fmt not in self.structs:
            self.structs[fmt] = f"_S{len(self.structs)}"
        return self.structs[fmt]

    def setter(self, class_name: str, attr: str) -> str:
        name = f"_set_{class_name}_{attr}"
        self.setters[name] = f'{class_name}, "{attr}"'
        self.prim("slot_setter")
        return name

    def prim(self, name: str) -> str:
        self.primitives.add(name)
        return name

    def function(self, name: str, signature: str, body: list[str]) -> str:
        """Define ``name`` unless an identical body exists; then alias it. Returns the name."""
        key = signature + "\n" + "\n".join(body)
        existing = self.functions.get(key)
        if existing is not None:
            if not name.startswith("_"):  # keep every public read_vN / write_vN name
                self.aliases.append(f"{name} = {existing}")
            return existing
        self.functions[key] = name
        head = f"def {name}{signature}"
        if len(head) > LINE_LIMIT:  # "(params) -> result:" split after the parameters
            params, result = signature[1:].split(") -> ", 1)
            head = f"def {name}(\n    {params}\n) -> {result}"
        self.blocks.append(head + "\n" + "\n".join(body) + "\n")
        return name


def _group_fixed(
    fields: list[FieldSpec], version: int
) -> list[list[FieldSpec] | FieldSpec]:
    """Split a struct's fields into runs of fixed-size fields (one struct call) and the rest."""
    groups: list[list[FieldSpec] | FieldSpec] = []
    run: list[FieldSpec] = []
    for f in fields:
        if not f.present(version) or f.tagged(version):
            continue
        if not f.is_array and f.type in FIXED_TYPES:
            run.append(f)
            continue
        if run:
            groups.append(run)
            run = []
        groups.append(f)
    if run:
        groups.append(run)
    return groups


class ReaderGen:
    def __init__(self, emitter: Emitter, message: MessageSpec) -> None:
        self.e = emitter
        self.message = message

    def struct_reader(
        self, class_name: str, fields: list[FieldSpec], version: int, name: str
    ) -> str:
        flexible = version in self.message.flexible_versions
        body: list[str] = []
        for group in _group_fixed(fields, version):
            if isinstance(group, list):
                fmt = ">" + "".join(FIXED_TYPES[f.type][0] for f in group)
                size = sum(FIXED_TYPES[f.type][1] for f in group)
                s = self.e.struct(fmt)
                body.extend(
                    wrap_items(
                        "    (",
                        [f"_{f.attr}" for f in group],
                        f") = {s}.unpack_from(buf, pos)",
                        tuple_target=True,
                    )
                )
                body.append(f"    pos += {size}")
                for f in group:
                    if f.type == "uuid":
                        body.append(
                            f"    _{f.attr} = {self.e.prim('uuid_from_bytes')}(_{f.attr})"
                        )
            else:
                body.extend(
                    self.field_read(group, version, flexible, f"_{group.attr}", "    ")
                )
        tagged = [f for f in fields if f.present(version) and f.tagged(version)]
        if flexible:
            if tagged:
                for f in tagged:
                    body.append(
                        f"    _{f.attr}: {python_type(f)} = {default_source(f)}"
                    )
                body.append(
                    f"    _tagged, pos = {self.e.prim('read_tagged_fields')}(buf, pos)"
                )
                body.append("    if _tagged:")
                for f in sorted(tagged, key=lambda t: t.tag or 0):
                    reader = self.tag_reader(class_name, f, version, flexible)
                    body.append(f"        _raw = _tagged.get({f.tag})")
                    body.append("        if _raw is not None:")
                    body.extend(
                        wrap_items(
                            f"            _{f.attr} = {self.e.prim('decode_tagged')}(",
                            ["_raw", reader, str(f.tag)],
                            ")",
                        )
                    )
            else:
                body.append(f"    pos = {self.e.prim('skip_tagged_fields')}(buf, pos)")
        # Build the frozen dataclass without its __init__: allocate, then store each slot
        # through its descriptor. Same object, about 3x faster than the generated __init__
        # (which goes through object.__setattr__ per field); absent fields get their default.
        body.append(f"    _message = _new({class_name})")
        for f in fields:
            value = f"_{f.attr}" if f.present(version) else default_source(f)
            body.extend(
                wrap_items(
                    f"    {self.e.setter(class_name, f.attr)}(",
                    ["_message", value],
                    ")",
                )
            )
        body.append("    return _message, pos")
        signature = f"(buf: BytesLike, pos: int) -> tuple[{class_name}, int]:"
        return self.e.function(name, signature, body)

    def tag_reader(
        self, class_name: str, f: FieldSpec, version: int, flexible: bool
    ) -> str:
        body = self.field_read(f, version, flexible, "value", "    ")
        body.append("    return value, pos")
        signature = f"(buf: BytesLike, pos: int) -> tuple[{python_type(f)}, int]:"
        return self.e.function(
            f"_read_{class_name}_{f.attr}_v{version}", signature, body
        )

    def field_read(
        self, f: FieldSpec, version: int, flexible: bool, target: str, ind: str
    ) -> list[str]:
        compact = f.compact(version, flexible)
        nullable = f.nullable(version)
        if f.is_array:
            return self.array_read(f, version, flexible, compact, nullable, target, ind)
        if f.is_struct:
            reader = self.struct_reader(
                f.type, f.fields, version, f"_read_{f.type}_v{version}"
            )
            return [f"{ind}{target}, pos = {reader}(buf, pos)"]
        if f.type in FIXED_TYPES:
            fmt, size, _, _ = FIXED_TYPES[f.type]
            s = self.e.struct(">" + fmt)
            lines = [
                f"{ind}({target},) = {s}.unpack_from(buf, pos)",
                f"{ind}pos += {size}",
            ]
            if f.type == "uuid":
                lines.append(
                    f"{ind}{target} = {self.e.prim('uuid_from_bytes')}({target})"
                )
            return lines
        reader = (
            "read_"
            + ("nullable_" if nullable else "")
            + ("compact_" if compact else "")
        )
        reader += "bytes" if f.type == "records" else f.type
        return [f"{ind}{target}, pos = {self.e.prim(reader)}(buf, pos)"]

    def array_read(
        self,
        f: FieldSpec,
        version: int,
        flexible: bool,
        compact: bool,
        nullable: bool,
        target: str,
        ind: str,
    ) -> list[str]:
        length_reader = self.e.prim(
            "read_compact_array_length" if compact else "read_array_length"
        )
        lines = [f"{ind}_n, pos = {length_reader}(buf, pos)"]
        lines.append(f"{ind}if _n < 0:")
        if nullable:
            lines.append(f"{ind}    {target} = None")
        else:
            err = self.e.prim("MalformedError")
            lines.append(
                f'{ind}    raise {err}("Non-nullable array {f.name} was null")'
            )
        element = f.element_type
        lines.append(f"{ind}else:")
        inner = ind + "    "
        if element in FIXED_TYPES and element != "uuid":
            fmt, size, _, _ = FIXED_TYPES[element]
            self.e.needs_struct_module = True
            lines.append(
                f'{inner}{target} = struct.unpack_from(f">{{_n}}{fmt}", buf, pos)'
            )
            lines.append(f"{inner}pos += _n * {size}")
            return lines
        if f.is_struct:
            reader = self.struct_reader(
                element, f.fields, version, f"_read_{element}_v{version}"
            )
            call = f"{reader}(buf, pos)"
        elif element == "uuid":
            call = f"{self.e.prim('read_uuid')}(buf, pos)"
        else:
            name = "read_" + ("compact_" if compact else "") + element
            call = f"{self.e.prim(name)}(buf, pos)"
        # per-field names: one local name never holds two types (mypy --strict)
        items, item = f"_items_{f.attr}", f"_item_{f.attr}"
        lines.append(f"{inner}{items} = []")
        lines.append(f"{inner}for _ in range(_n):")
        lines.append(f"{inner}    {item}, pos = {call}")
        lines.append(f"{inner}    {items}.append({item})")
        lines.append(f"{inner}{target} = tuple({items})")
        return lines


class WriterGen:
    def __init__(self, emitter: Emitter, message: MessageSpec) -> None:
        self.e = emitter
        self.message = message

    def struct_writer(
        self, class_name: str, fields: list[FieldSpec], version: int, name: str
    ) -> str:
        flexible = version in self.message.flexible_versions
        body: list[str] = []
        for f in fields:
            if not f.present(version) and not f.ignorable:
                # MessageDataGenerator: a non-default value for a field the version lacks is an
                # error unless the field is ignorable.
                self.e.needs_unsupported = True
                body.append(f"    if msg.{f.attr} != {default_source(f)}:")
                body.extend(
                    wrap_items(
                        "        raise UnsupportedVersionError(",
                        [f'"{f.name} cannot be written at version {version}"'],
                        ")",
                    )
                )
        for group in _group_fixed(fields, version):
            if isinstance(group, list):
                fmt = ">" + "".join(FIXED_TYPES[f.type][0] for f in group)
                s = self.e.struct(fmt)
                values = [
                    f"msg.{f.attr}.bytes" if f.type == "uuid" else f"msg.{f.attr}"
                    for f in group
                ]
                body.extend(wrap_items(f"    out += {s}.pack(", values, ")"))
            else:
                body.extend(
                    self.field_write(
                        group, version, flexible, f"msg.{group.attr}", "    "
                    )
                )
        tagged = [f for f in fields if f.present(version) and f.tagged(version)]
        if flexible:
            if tagged:
                body.append("    _tags: list[tuple[int, bytearray]] = []")
                for f in sorted(tagged, key=lambda t: t.tag or 0):
                    body.append(f"    if msg.{f.attr} != {default_source(f)}:")
                    body.append("        _buf = bytearray()")
                    body.extend(
                        self.field_write(
                            f, version, flexible, f"msg.{f.attr}", "        ", "_buf"
                        )
                    )
                    body.append(f"        _tags.append(({f.tag}, _buf))")
                body.append(f"    {self.e.prim('write_tagged_fields')}(out, _tags)")
            else:
                body.append("    out.append(0)")
        if not body:
            body.append("    pass")
        signature = f"(msg: {class_name}, out: bytearray) -> None:"
        return self.e.function(name, signature, body)

    def field_write(
        self,
        f: FieldSpec,
        version: int,
        flexible: bool,
        value: str,
        ind: str,
        out: str = "out",
    ) -> list[str]:
        compact = f.compact(version, flexible)
        nullable = f.nullable(version)
        if f.is_array:
            return self.array_write(
                f, version, flexible, compact, nullable, value, ind, out
            )
        if f.is_struct:
            writer = self.struct_writer(
                f.type, f.fields, version, f"_write_{f.type}_v{version}"
            )
            return [f"{ind}{writer}({value}, {out})"]
        if f.type in FIXED_TYPES:
            fmt = FIXED_TYPES[f.type][0]
            s = self.e.struct(">" + fmt)
            arg = f"{value}.bytes" if f.type == "uuid" else value
            return [f"{ind}{out} += {s}.pack({arg})"]
        writer = (
            "write_"
            + ("nullable_" if nullable else "")
            + ("compact_" if compact else "")
        )
        writer += "bytes" if f.type == "records" else f.type
        return [f"{ind}{self.e.prim(writer)}({out}, {value})"]

    def array_write(
        self,
        f: FieldSpec,
        version: int,
        flexible: bool,
        compact: bool,
        nullable: bool,
        value: str,
        ind: str,
        out: str,
    ) -> list[str]:
        length_writer = self.e.prim(
            "write_compact_array_length" if compact else "write_array_length"
        )
        array, item = f"_array_{f.attr}", f"_item_{f.attr}"
        lines = [f"{ind}{array} = {value}", f"{ind}if {array} is None:"]
        if nullable:
            lines.append(f"{ind}    {length_writer}({out}, -1)")
        else:
            lines.append(
                f'{ind}    raise ValueError("Non-nullable array {f.name} was None")'
            )
        lines.append(f"{ind}else:")
        inner = ind + "    "
        lines.append(f"{inner}{length_writer}({out}, len({array}))")
        element = f.element_type
        if element in FIXED_TYPES and element != "uuid":
            fmt = FIXED_TYPES[element][0]
            self.e.needs_struct_module = True
            fmt_arg = f'f">{{len({array})}}{fmt}"'
            lines.extend(
                wrap_items(f"{inner}{out} += struct.pack(", [fmt_arg, f"*{array}"], ")")
            )
            return lines
        if f.is_struct:
            writer = self.struct_writer(
                element, f.fields, version, f"_write_{element}_v{version}"
            )
            lines.append(f"{inner}for {item} in {array}:")
            lines.append(f"{inner}    {writer}({item}, {out})")
            return lines
        if element == "uuid":
            lines.append(f"{inner}for {item} in {array}:")
            lines.append(f"{inner}    {out} += {item}.bytes")
            return lines
        name = "write_" + ("compact_" if compact else "") + element
        lines.append(f"{inner}for {item} in {array}:")
        lines.append(f"{inner}    {self.e.prim(name)}({out}, {item})")
        return lines


# ---- dataclasses -------------------------------------------------------------------------------


def _collect_structs(fields: list[FieldSpec], out: dict[str, list[FieldSpec]]) -> None:
    for f in fields:
        if f.is_struct:
            _collect_structs(f.fields, out)
            out.setdefault(f.element_type, f.fields)


def _docstring(text: str, indent: str) -> list[str]:
    text = text.replace("\\", "\\\\").replace('"""', "'''")
    if not text:
        return []
    if len(indent) + len(text) + 6 <= LINE_LIMIT:
        return [f'{indent}"""{text}"""']
    wrapped = textwrap.wrap(text, LINE_LIMIT - len(indent) - 3)
    return [
        f'{indent}"""{wrapped[0]}',
        *(indent + line for line in wrapped[1:]),
        f'{indent}"""',
    ]


def dataclass_source(class_name: str, fields: list[FieldSpec], doc: str) -> str:
    # A regular Python class even where mypyc compiles the module (pyproject.toml): the
    # readers allocate it with object.__new__ and set its slots directly, which a native
    # class forbids.
    lines = [
        "@mypyc_attr(native_class=False)",
        "@dataclass(frozen=True, slots=True)",
        f"class {class_name}:",
    ]
    lines.extend(_docstring(doc, "    "))
    if not fields:
        lines.append("    pass")
    for f in fields:
        default = default_source(f)
        if f.is_struct and not f.is_array and default != "None":
            default = f"field(default_factory={f.element_type})"
        lines.append(f"    {f.attr}: {python_type(f)} = {default}")
        lines.extend(_docstring(f.about, "    "))
    return "\n".join(lines) + "\n"


# ---- module ------------------------------------------------------------------------------------


HEADER = '''\
# Generated by `python -m proto.codegen` from proto/specs/{source}
# (Apache Kafka, Apache License 2.0, see proto/specs/LICENSE). Do not edit by hand.
"""{name}: API key {api_key}, versions {low}-{high}, flexible from {flex}."""

from __future__ import annotations
'''


def render_module(spec: MessageSpec) -> str:
    emitter = Emitter()
    readers = ReaderGen(emitter, spec)
    writers = WriterGen(emitter, spec)
    read_table: list[str] = []
    write_table: list[str] = []
    for version in spec.versions():
        read_table.append(
            f"    {version}: "
            + readers.struct_reader(spec.name, spec.fields, version, f"read_v{version}")
            + ","
        )
        write_table.append(
            f"    {version}: "
            + writers.struct_writer(
                spec.name, spec.fields, version, f"write_v{version}"
            )
            + ","
        )

    structs: dict[str, list[FieldSpec]] = {}
    _collect_structs(spec.fields, structs)
    uses_uuid = any(f.element_type == "uuid" for f in _all_fields(spec.fields))

    flex = (
        spec.flexible_versions.low if spec.flexible_versions != NO_VERSIONS else "never"
    )
    header = [
        HEADER.format(
            source=spec.source,
            name=spec.name,
            api_key=spec.api_key,
            low=spec.valid_versions.low,
            high=spec.valid_versions.high,
            flex=flex,
        )
    ]
    imports = [""]
    if emitter.needs_struct_module or emitter.structs:
        imports.append("import struct")
    if uses_uuid:
        imports.append("import uuid")
    imports.append("from collections.abc import Callable")
    dataclass_names = ["dataclass"]
    if any(f.is_struct and not f.is_array for f in _all_fields(spec.fields)):
        dataclass_names.append("field")
    imports.append(f"from dataclasses import {', '.join(dataclass_names)}")
    imports.append("")
    imports.append("from mypy_extensions import mypyc_attr")
    imports.append("")
    if emitter.needs_unsupported:
        imports.append("from proto.errors import UnsupportedVersionError")
    prims = sorted(
        emitter.primitives | {"BytesLike"} | ({"ZERO_UUID"} if uses_uuid else set()),
        key=isort_key,
    )
    imports.append("from proto.primitives import (")
    imports.extend(f"    {p}," for p in prims)
    imports.append(")")
    parts = [header[0] + "\n".join(imports) + "\n"]

    exported = [
        spec.name,
        *structs,
        "API_KEY",
        "VALID_VERSIONS",
        "FIRST_FLEXIBLE_VERSION",
        "READERS",
        "WRITERS",
    ]
    # one blank line between the imports and __all__ (isort's lines-after-imports)
    parts[0] += (
        "\n__all__ = [\n"
        + "".join(f'    "{n}",\n' for n in sorted(exported, key=isort_key))
        + "]\n"
    )
    first_flexible = spec.flexible_versions.low if flex != "never" else None
    parts.append(
        f"API_KEY = {spec.api_key}\n"
        f"VALID_VERSIONS = ({spec.valid_versions.low}, {spec.valid_versions.high})\n"
        f"FIRST_FLEXIBLE_VERSION: int | None = {first_flexible}\n"
    )
    for struct_name, struct_fields in _definition_order(structs):
        parts.append(dataclass_source(struct_name, struct_fields, ""))
    parts.append(dataclass_source(spec.name, spec.fields, ""))
    parts.append(
        "_new = object.__new__\n"
        + "".join(
            f"{name} = slot_setter({target})\n"
            if len(name) + len(target) + 16 <= LINE_LIMIT
            else f"{name} = slot_setter(\n    {target}\n)\n"
            for name, target in sorted(emitter.setters.items())
        )
    )
    parts.append(
        "\n".join(
            f'{name} = struct.Struct("{fmt}")' for fmt, name in emitter.structs.items()
        )
        + "\n"
        if emitter.structs
        else ""
    )
    parts.extend(emitter.blocks)
    if emitter.aliases:
        parts.append("\n".join(emitter.aliases) + "\n")
    parts.append(
        f"READERS: dict[int, Callable[[BytesLike, int], tuple[{spec.name}, int]]] = {{\n"
        + "\n".join(read_table)
        + "\n}\n"
    )
    parts.append(
        f"WRITERS: dict[int, Callable[[{spec.name}, bytearray], None]] = {{\n"
        + "\n".join(write_table)
        + "\n}\n"
    )
    return "\n\n".join(p.rstrip("\n") + "\n" for p in parts if p).replace(
        "\n\n\n\n", "\n\n\n"
    )


def _definition_order(
    structs: dict[str, list[FieldSpec]],
) -> list[tuple[str, list[FieldSpec]]]:
    """Outermost struct first (annotations are lazy), except that a struct held in a single
    (non-array) field is defined before its holder: its class is the field's default factory,
    evaluated when the holder's class is created."""
    order: list[str] = []

    def place(name: str) -> None:
        if name in order:
            return
        for f in structs[name]:
            if f.is_struct and not f.is_array:
                place(f.element_type)
        order.append(name)

    for name in reversed(list(structs)):
        place(name)
    return [(name, structs[name]) for name in order]


def _all_fields(fields: list[FieldSpec]) -> list[FieldSpec]:
    out: list[FieldSpec] = []
    for f in fields:
        out.append(f)
        out.extend(_all_fields(f.fields))
    return out


INIT_TEMPLATE = '''\
# Generated by `python -m proto.codegen`. Do not edit by hand.
"""Generated Kafka message codecs, one module per JSON spec in proto/specs/.

``REQUEST_MODULES`` / ``RESPONSE_MODULES`` map an API key to its module (``READERS``,
``WRITERS``, ``VALID_VERSIONS``, ``FIRST_FLEXIBLE_VERSION`` and the message classes).
"""

from __future__ import annotations

from types import ModuleType

from proto.messages import (
{imports}
)
{class_imports}

__all__ = [
    "REQUEST_MODULES",
    "RESPONSE_MODULES",
{exported}
]

REQUEST_MODULES: dict[int, ModuleType] = {{
{requests}
}}
RESPONSE_MODULES: dict[int, ModuleType] = {{
{responses}
}}
'''


def render_init(specs: list[MessageSpec]) -> str:
    modules = sorted(s.module for s in specs if s.kind in ("request", "response"))
    class_imports = "\n".join(
        f"from proto.messages.{s.module} import {s.name}"
        for s in sorted(specs, key=lambda s: s.module)
    )
    by_kind = {
        kind: "\n".join(
            f"    {s.api_key}: {s.module},"
            for s in sorted(specs, key=lambda s: s.api_key or 0)
            if s.kind == kind
        )
        for kind in ("request", "response")
    }
    return INIT_TEMPLATE.format(
        imports="\n".join(f"    {m}," for m in modules),
        class_imports=class_imports,
        exported="\n".join(
            f'    "{n}",' for n in sorted((s.name for s in specs), key=isort_key)
        ),
        requests=by_kind["request"],
        responses=by_kind["response"],
    )


# ---- the API table: every API key of a Kafka release ----------------------------------------

# A compact table derived from every request/response spec of one Kafka release (all ~95 API
# keys, most of which have no generated module here): what a gateway must know to frame, route
# and patch any request or response without decoding it. Refresh it from a kafka-clients jar
# (or a directory of specs) with ``python -m proto.codegen --api-table SOURCE``.
API_TABLE_DIR = SPEC_DIR / "apis"
API_TABLE_OUT = Path(__file__).resolve().parent / "api_table.py"

API_TABLE_LICENSE = """\
// Licensed to the Apache Software Foundation (ASF) under one or more
// contributor license agreements.  See the NOTICE file distributed with
// this work for additional information regarding copyright ownership.
// The ASF licenses this file to You under the Apache License, Version 2.0
// (the "License"); you may not use this file except in compliance with
// the License.  You may obtain a copy of the License at
//
//    http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.
"""


def _version_set_text(versions: list[int]) -> str:
    """A contiguous version list as a spec range ("3-13", "5", "none")."""
    if not versions:
        return "none"
    low, high = versions[0], versions[-1]
    if versions != list(range(low, high + 1)):
        raise ValueError(f"versions {versions} are not contiguous")
    return str(low) if low == high else f"{low}-{high}"


def _throttle_versions(response: MessageSpec, first_only: bool) -> list[int]:
    """Versions whose response has a top-level, untagged int32 ThrottleTimeMs (first_only: as
    its very first field, at offset 0 of the body)."""
    if response.valid_versions == NO_VERSIONS:
        return []
    found = []
    for version in response.versions():
        present = [
            f for f in response.fields if f.present(version) and not f.tagged(version)
        ]
        candidates = present[:1] if first_only else present
        if any(f.name == "ThrottleTimeMs" and f.type == "int32" for f in candidates):
            found.append(version)
    return found


def _throttle_offset(response: MessageSpec) -> str:
    """ "LOW-HIGH@OFFSET": the versions whose ThrottleTimeMs sits at a fixed offset of the body
    (only fixed-size fields before it); "none" if there is no such version."""
    found: dict[int, int] = {}
    for version in _throttle_versions(response, False):
        offset = 0
        for f in response.fields:
            if not f.present(version) or f.tagged(version):
                continue
            if f.name == "ThrottleTimeMs":
                found[version] = offset
                break
            if f.is_array or f.type not in FIXED_TYPES:
                break
            offset += FIXED_TYPES[f.type][1]
    if not found:
        return "none"
    if len(set(found.values())) != 1:
        raise ValueError(
            f"{response.name}: the throttle offset differs between versions"
        )
    return f"{_version_set_text(sorted(found))}@{next(iter(found.values()))}"


def api_table_rows(texts: dict[str, str]) -> list[dict[str, Any]]:
    """One row per API key from spec file name -> JSON text (all *Request/*Response specs)."""
    requests: dict[int, tuple[dict[str, Any], MessageSpec]] = {}
    responses: dict[int, MessageSpec] = {}
    for name, text in sorted(texts.items()):
        raw = json.loads(strip_comments(text))
        if raw.get("type") not in ("request", "response"):
            continue
        raw.setdefault("flexibleVersions", "none")
        common = {str(s["name"]): s["fields"] for s in raw.get("commonStructs", [])}
        spec = MessageSpec(
            name=raw["name"],
            api_key=raw["apiKey"],
            kind=raw["type"],
            valid_versions=Versions.parse(raw["validVersions"]),
            flexible_versions=Versions.parse(raw["flexibleVersions"]),
            fields=[_field_from_json(f, common) for f in raw.get("fields", [])],
            source=name,
        )
        if spec.kind == "request":
            requests[int(raw["apiKey"])] = (raw, spec)
        else:
            responses[int(raw["apiKey"])] = spec
    if set(requests) != set(responses):
        raise ValueError(f"unpaired API keys: {sorted(set(requests) ^ set(responses))}")
    rows = []
    for api_key in sorted(requests):
        raw, request = requests[api_key]
        response = responses[api_key]
        for what in ("valid_versions", "flexible_versions"):
            if getattr(request, what) != getattr(response, what):
                raise ValueError(f"{request.name} and its response differ in {what}")
        rows.append(
            {
                "apiKey": api_key,
                "name": request.name.removesuffix("Request"),
                "listeners": sorted(raw.get("listeners", [])),
                "validVersions": raw["validVersions"],
                "flexibleVersions": raw["flexibleVersions"],
                "latestVersionUnstable": bool(raw.get("latestVersionUnstable", False)),
                "throttleFirst": _version_set_text(_throttle_versions(response, True)),
                "throttleField": _version_set_text(_throttle_versions(response, False)),
                "throttleOffset": _throttle_offset(response),
            }
        )
    return rows


def api_table_spec() -> Path:
    """The one vendored table, named after its source (``kafka-clients-4.4.0.json``)."""
    (path,) = API_TABLE_DIR.glob("*.json")
    return path


def vendor_api_table(source: Path) -> Path:
    """Replace the vendored table with one derived from a kafka-clients jar or a directory of
    message specs (``common/message/*.json``)."""
    import zipfile

    texts: dict[str, str] = {}
    if source.is_dir():
        for path in source.glob("*.json"):
            texts[path.name] = path.read_text()
        origin = source.name
    else:
        with zipfile.ZipFile(source) as jar:
            for info in jar.infolist():
                if info.filename.startswith(
                    "common/message/"
                ) and info.filename.endswith(".json"):
                    texts[info.filename.rsplit("/", 1)[1]] = jar.read(info).decode()
        origin = source.name
    names = [n for n in texts if n.endswith(("Request.json", "Response.json"))]
    rows = api_table_rows({n: texts[n] for n in names})
    body = ",\n".join("    " + json.dumps(row, separators=(", ", ": ")) for row in rows)
    API_TABLE_DIR.mkdir(exist_ok=True)
    for old in API_TABLE_DIR.glob("*.json"):
        old.unlink()
    target = API_TABLE_DIR / f"{source.stem}.json"
    target.write_text(
        API_TABLE_LICENSE
        + f"\n// Derived from the {len(names)} request/response specs in common/message/ of\n"
        + f"// {origin} by `python -m proto.codegen --api-table {origin}`. One row per API key.\n"
        + "// throttleFirst: versions whose response body starts with ThrottleTimeMs (int32);\n"
        + "// throttleField: versions whose response has ThrottleTimeMs anywhere at top level;\n"
        + "// throttleOffset: VERSIONS@OFFSET, the versions where it is at that fixed offset.\n"
        + "[\n"
        + body
        + "\n]\n"
    )
    return target


API_TABLE_TEMPLATE = '''\
# Generated by `python -m proto.codegen` from proto/specs/apis/{source}
# (derived from Apache Kafka's message specs, Apache License 2.0, see proto/specs/LICENSE).
# Do not edit by hand.
"""Every API key of Apache Kafka {release}: versions, header versions, where the throttle time is.

A gateway forwards requests it does not decode, so it still needs, for every API key: whether
the key exists, which versions are valid, the request header version (v2, with a tagged-field
section, from the first flexible version; else v1), the response header version (v1 from the
first flexible version, else v0; ApiVersions always v0, KIP-511), and where the response's
``ThrottleTimeMs`` is: ``throttle_first`` lists the versions whose response body starts with it
(read or patch it at offset 0 after the response header); ``throttle_field`` the versions
that have it at top level at all (Produce's comes after its Responses array).
``tests/proto/test_api_table.py`` checks this table against ``ApiKeys`` in the release's jar.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "API_TABLE",
    "KAFKA_RELEASE",
    "ApiInfo",
    "request_header_version",
    "response_header_version",
]

KAFKA_RELEASE = "{release}"


@dataclass(frozen=True, slots=True)
class ApiInfo:
    api_key: int
    name: str
    """Kafka's message name without Request/Response, e.g. "Produce"."""
    min_version: int | None
    """None: no valid version left (an API removed from the protocol, e.g. LeaderAndIsr)."""
    max_version: int | None
    latest_version_unstable: bool
    """max_version is unstable: brokers advertise it only with unstable.api.versions.enable."""
    first_flexible: int | None
    """First flexible version (request header v2, response header v1); None: never."""
    throttle_first: tuple[int, int] | None
    """Versions whose response body starts with ThrottleTimeMs, as (low, high)."""
    throttle_field: tuple[int, int] | None
    """Versions whose response has a top-level ThrottleTimeMs at all, as (low, high)."""
    throttle_offset: tuple[int, int, int] | None
    """(low, high, offset): versions whose ThrottleTimeMs is at a fixed offset of the body,
    only fixed-size fields before it (OffsetDelete: 2, after its ErrorCode)."""
    listeners: frozenset[str]
    """Kafka's "listeners": broker, controller (which servers answer the API)."""

    def is_valid(self, version: int) -> bool:
        return self.min_version is not None and self.min_version <= version <= (
            self.max_version if self.max_version is not None else -1
        )

    def is_flexible(self, version: int) -> bool:
        return self.first_flexible is not None and version >= self.first_flexible

    def throttle_at_start(self, version: int) -> bool:
        span = self.throttle_first
        return span is not None and span[0] <= version <= span[1]

    def fixed_throttle_offset(self, version: int) -> int | None:
        at = self.throttle_offset
        return at[2] if at is not None and at[0] <= version <= at[1] else None

    def has_throttle(self, version: int) -> bool:
        span = self.throttle_field
        return span is not None and span[0] <= version <= span[1]


# api_key: ApiInfo(api_key, name, min_version, max_version, latest_version_unstable,
#                  first_flexible, throttle_first, throttle_field, throttle_offset, listeners)
API_TABLE: dict[int, ApiInfo] = {{
{rows}
}}

_API_VERSIONS = 18


def request_header_version(api_key: int, api_version: int) -> int:
    """2 from the first flexible version, else 1; KeyError for an API key Kafka does not have."""
    return 2 if API_TABLE[api_key].is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 from the first flexible version, else 0; ApiVersions is always 0 (KIP-511)."""
    if api_key == _API_VERSIONS:
        return 0
    return 1 if API_TABLE[api_key].is_flexible(api_version) else 0
'''


def _span_source(text: str) -> str:
    versions = Versions.parse(text)
    if versions == NO_VERSIONS:
        return "None"
    return f"({versions.low}, {versions.high})"


def _offset_source(text: str) -> str:
    if text == "none":
        return "None"
    versions, offset = text.split("@")
    span = Versions.parse(versions)
    return f"({span.low}, {span.high}, {offset})"


def render_api_table(path: Path | None = None) -> str:
    path = path or api_table_spec()
    rows = json.loads(strip_comments(path.read_text()))
    lines = []
    for row in rows:
        valid = Versions.parse(row["validVersions"])
        flexible = Versions.parse(row["flexibleVersions"])
        empty = valid == NO_VERSIONS
        listeners = ", ".join(f'"{name}"' for name in row["listeners"])
        fields = [
            str(row["apiKey"]),
            f'"{row["name"]}"',
            str(None if empty else valid.low),
            str(None if empty else valid.high),
            str(row["latestVersionUnstable"]),
            str(None if flexible == NO_VERSIONS else flexible.low),
            _span_source(row["throttleFirst"]),
            _span_source(row["throttleField"]),
            _offset_source(row["throttleOffset"]),
            f"frozenset({{{listeners}}})" if listeners else "frozenset()",
        ]
        lines.extend(wrap_items(f"    {row['apiKey']}: ApiInfo(", fields, "),"))
    release = path.stem.removeprefix("kafka-clients-")
    return API_TABLE_TEMPLATE.format(
        source=path.name, release=release, rows="\n".join(lines)
    )


def render_all() -> dict[Path, str]:
    specs = [load_spec(p) for p in sorted(SPEC_DIR.glob("*.json"))]
    files = {OUT_DIR / f"{s.module}.py": render_module(s) for s in specs}
    files[OUT_DIR / "__init__.py"] = render_init(specs)
    files[API_TABLE_OUT] = render_api_table()
    return files


def stale_files() -> list[Path]:
    """Generated files whose committed content differs from what the specs produce."""
    stale = [
        p for p, text in render_all().items() if not p.exists() or p.read_text() != text
    ]
    known = set(render_all())
    stale.extend(p for p in OUT_DIR.glob("*.py") if p not in known)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale files")
    parser.add_argument(
        "--api-table",
        metavar="SOURCE",
        type=Path,
        help="first refresh proto/specs/apis/ from a kafka-clients jar or a directory of specs",
    )
    args = parser.parse_args(argv)
    if args.api_table is not None:
        print(f"wrote {vendor_api_table(args.api_table)}")
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"stale: {path}")
        return 1 if stale else 0
    OUT_DIR.mkdir(exist_ok=True)
    files = render_all()
    for path in OUT_DIR.glob("*.py"):
        if path not in files:
            path.unlink()
    for path, text in files.items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(OUT_DIR.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
