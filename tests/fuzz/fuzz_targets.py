"""The fuzz targets: what the collector and the gateway parse from bytes a peer sent, and the
errors each parse is allowed to raise (docs/fuzzing.md).

Every target is a function ``(code, data) -> result`` over one :class:`Code` (a set of the
project's modules) and must either return or raise one of its ``allowed`` errors, the ones
the caller turns into a Kafka error or a closed connection.  Anything else is a crash.

Two copies of the code are loaded side by side (:func:`load_code`):

* **interpreted**: every module from its ``.py``, including the ones mypyc compiles at
  install time (pyproject.toml's include list).  atheris instruments Python bytecode and
  gets no coverage from a C extension, so this is the copy whose coverage guides the fuzzer;
* **compiled**: the modules as the collector imports them (the ``.so`` where there is one).

:func:`check` runs each input through both and fails when their outcomes differ (the
result, or the class of the allowed error): the compiled code is what runs in production,
and mypyc changes semantics in a few places (native ints, strict types at boundaries).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import struct
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from types import ModuleType
from typing import Any

from google.protobuf.message import DecodeError

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
# The project's top-level packages (pyproject.toml); the rest of sys.modules is shared.
PACKAGES = ("clock", "collector", "exporters", "proto", "quota", "subscriptions")
# What the targets call; each brings the modules it imports.
MODULES = (
    "proto.errors",
    "proto.primitives",
    "proto.api_table",
    "proto.connection",
    "proto.compression",
    "proto.messages",
    "proto.messages.metadata_response",
    "collector.gateway.wire",
    "collector.gateway.frames",
    "collector.gateway.requests",
    "collector.gateway.sasl",
    "collector.gateway.api_versions",
    "collector.gateway.addresses",
    "collector.gateway.throttle",
    "collector.telemetry.payload",
)
# Loaded from source but not instrumented: atheris 2.3.0's bytecode rewrite of
# ``compression._gzip`` (a loop around zlib calls) crashes CPython 3.11 with a segmentation
# fault at the loop's back edge (reproduced with ``atheris.instrument_func`` alone, nothing
# of ours involved).  The decompressors are thin wrappers over C codecs, whose branches
# atheris cannot see either; their target is driven by the seeds (bombs, real pushes) and
# libFuzzer's mutations, and still compares the interpreted and compiled outcomes.
NOT_INSTRUMENTED = ("proto.compression",)
# The decompressors' output bounds under test: telemetry.max.bytes' default (1 MiB), a small
# one, and 0 (a payload must then be empty).
MAX_BYTES = (1 << 20, 4096, 0, 65536)


def _ours(name: str) -> bool:
    return name.split(".", 1)[0] in PACKAGES


class _PreferSource(importlib.abc.MetaPathFinder):
    """Loads a module of the project from its ``.py`` where a compiled extension sits beside
    it (the default finder takes the extension)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if not _ours(name):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not isinstance(
            spec.loader, importlib.machinery.ExtensionFileLoader
        ):
            return None
        assert spec.origin is not None
        source = Path(spec.origin).with_name(name.rpartition(".")[2] + ".py")
        return importlib.util.spec_from_file_location(name, source)


class Code:
    """One copy of the modules the targets call, by their last name (``code.connection``)."""

    def __init__(self, modules: dict[str, ModuleType], label: str) -> None:
        self.label = label
        self.modules = modules
        self._by_last_name = {
            name.rpartition(".")[2]: module for name, module in modules.items()
        }
        errors = modules["proto.errors"]
        self.request_errors = (errors.FramingError, errors.KafkaError)
        self.payload_errors = (
            errors.InvalidRecordError,
            errors.TelemetryTooLargeError,
            errors.UnsupportedCompressionTypeError,
        )

    def __getattr__(self, last_name: str) -> ModuleType:
        # Through __dict__: called for a missing name, it must not ask for one itself.
        by_last_name: dict[str, ModuleType] = self.__dict__["_by_last_name"]
        try:
            return by_last_name[last_name]
        except KeyError:
            raise AttributeError(last_name) from None

    @property
    def compiled(self) -> list[str]:
        """The modules of this copy that are extension modules."""
        return sorted(
            name
            for name, module in sys.modules.items()
            if _ours(name) and str(getattr(module, "__file__", "")).endswith(".so")
        )


def load_code(
    instrument: AbstractContextManager[Any] | None = None,
) -> tuple[Code, Code]:
    """(interpreted, compiled): the interpreted copy is imported under ``instrument`` (atheris'
    ``instrument_imports``); ``sys.modules`` is left holding the compiled copy, as before."""
    compiled = Code(
        {name: importlib.import_module(name) for name in MODULES}, "compiled"
    )
    saved = {name: module for name, module in sys.modules.items() if _ours(name)}
    for name in saved:
        del sys.modules[name]
    finder = _PreferSource()
    sys.meta_path.insert(0, finder)
    try:
        with instrument or nullcontext():
            interpreted = Code(
                {name: importlib.import_module(name) for name in MODULES}, "interpreted"
            )
    finally:
        sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if _ours(name)]:
            del sys.modules[name]
        sys.modules.update(saved)
    return interpreted, compiled


def plain(value: Any) -> Any:
    """A value both copies can be compared by: each copy has its own message classes, and
    views compare by identity in a repr."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(
        value, float
    ):  # by its bits: a NaN (a float64 field) is not equal to itself
        return ("float", struct.pack(">d", value))
    if isinstance(value, (list, tuple)):
        return tuple(plain(item) for item in value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            tuple(plain(getattr(value, f.name)) for f in dataclasses.fields(value)),
        )
    return value


# ---- serve mode: the collector's request decoding ------------------------------------------


def served_versions(code: Code) -> list[tuple[int, int]]:
    """Every (api key, version) ``ktc serve`` decodes (proto.connection.SUPPORTED_VERSIONS,
    which the broker's API table and ApiVersions answer list)."""
    return [
        (key, version)
        for key, (low, high) in sorted(code.connection.SUPPORTED_VERSIONS.items())
        for version in range(low, high + 1)
    ]


def _frame_fields(frame: Any) -> tuple[Any, ...]:
    return (
        frame.api_key,
        frame.api_version,
        frame.correlation_id,
        frame.client_id,
        frame.header_size,
    )


def serve_request(code: Code, data: bytes) -> Any:
    """One request frame (header + body, no size prefix), as ``ServerConnection`` cuts it and
    the dispatcher decodes it (``Dispatcher._decode``): the frame arrives in two reads."""
    conn = code.connection.ServerConnection(max_request_size=1 << 20)
    wire = len(data).to_bytes(4, "big") + data
    half = len(wire) // 2
    conn.receive_data(wire[:half])
    conn.receive_data(wire[half:])
    frame = conn.next_request()
    assert frame is not None and conn.next_request() is None, (
        "one frame in, one frame out"
    )
    return _frame_fields(frame), code.connection.decode_request(frame)


def serve_stream(code: Code, data: bytes) -> Any:
    """A byte stream (size prefixes included) in reads of ``data[0] % 64 + 1`` bytes, every
    frame decoded until the first error: the framing codec's own checks."""
    if not data:
        return None
    step = data[0] % 64 + 1
    conn = code.connection.ServerConnection(max_request_size=4096)
    decoded = []
    for at in range(1, len(data), step):
        conn.receive_data(data[at : at + step])
        while (frame := conn.next_request()) is not None:
            decoded.append(
                (_frame_fields(frame), code.connection.decode_request(frame))
            )
        assert conn.buffered_bytes <= len(data), "more bytes held than received"
    return decoded


# ---- gateway mode: client requests and upstream responses -----------------------------------

# SaslAuthenticate tokens are read for the mechanism the handshake named; the fuzzer picks it
# with the correlation id.
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI")


def gateway_request(code: Code, data: bytes) -> Any:
    """One client request frame (no size prefix) through what the gateway reads of it: the
    header of any Kafka 4.4.0 API (``parse_request_header``), Produce acks, the partition
    mutations and their strict-quota answer, SASL principals, and the requests it decodes
    (ApiVersions v3+, the config APIs it splits) -- each as ``forwarding.py`` calls it."""
    requests = code.requests
    frame = requests.parse_request_header(data)
    api_key = frame.api_key
    out: list[Any] = [_frame_fields(frame)]
    if api_key == 0:  # Produce
        out.append(requests.produce_acks(frame.api_version, frame.body))
    elif (
        api_key in requests.STRICT_MUTATION_QUOTA_FROM
    ):  # CreateTopics/Partitions, DeleteTopics
        request = requests.decode_mutation_request(frame)
        counts = {"t": 2}
        if api_key == 19:
            out.append(requests.create_topics_mutations(request))
        elif api_key == 37:
            out.append(requests.create_partitions_mutations(request, counts.get))
        else:
            out.append(requests.delete_topics_mutations(request, counts.get))
        out.append(requests.quota_exceeded_response(frame, 1000))
    elif api_key in (17, 36):  # SaslHandshake, SaslAuthenticate
        capture = code.sasl.SaslCapture()
        if api_key == 36:
            capture.mechanism = _MECHANISMS[frame.correlation_id % len(_MECHANISMS)]
        out.append(capture.on_request(frame))
        out.append((capture.mechanism, capture.principal))
    elif api_key in (18, 32, 44, 74) and api_key in code.connection.SUPPORTED_VERSIONS:
        # ApiVersions (v3+: the client software), DescribeConfigs, IncrementalAlterConfigs,
        # ListConfigResources: decoded by the collector's codec, as in serve mode.
        out.append(code.connection.decode_request(frame))
    return out


# The APIs whose responses the gateway reads (service.py: ``response``), by route.
_LOCAL_API_VERSIONS = {71: (0, 0), 72: (0, 0)}


def gateway_response_keys(code: Code) -> list[int]:
    """API keys whose responses the gateway walks: addresses, ApiVersions, SASL, throttle."""
    keys = set(code.addresses.ADDRESS_VERSIONS) | {18, 17, 36}
    keys |= {
        key for key, info in code.api_table.API_TABLE.items() if info.throttle_field
    }
    return sorted(keys)


def gateway_response(code: Code, data: bytes) -> Any:
    """An upstream response: ``data`` is api key (int16), api version (int16), then the
    response payload (correlation id, header, body) as the gateway's framer cuts it; read as
    ``GatewayService.response`` reads it."""
    if len(data) < 4:
        return None
    api_key = int.from_bytes(data[0:2], "big", signed=True)
    version = int.from_bytes(data[2:4], "big", signed=True)
    info = code.api_table.API_TABLE.get(api_key)
    if info is None or info.min_version is None or info.max_version is None:
        return None
    if not info.min_version <= version <= info.max_version:
        return None  # the gateway forwards only requests of versions its ApiVersions offered
    payload = bytes(data[4:])
    code.frames.response_correlation_id(payload)
    at = code.frames.response_body_offset(api_key, version, payload)
    body = memoryview(payload)[at:]
    out: list[Any] = []
    if api_key == 18:
        out.append(
            code.api_versions.cap_api_versions(version, body, _LOCAL_API_VERSIONS)
        )
    elif api_key in code.addresses.ADDRESS_VERSIONS:
        low, high = code.addresses.ADDRESS_VERSIONS[api_key]
        if low <= version <= high:
            scan = code.addresses.scan_addresses(api_key, version, body)
            if scan is not None:
                out.append(scan.endpoints)
                out.append(scan.nodes())
                out.append(
                    scan.rewrite(lambda node: ("gateway.test", 19092 + node % 1000))
                )
                if (
                    api_key == 3
                ):  # Metadata: partition counts, read after the walk passed
                    out.append(code.requests.metadata_partition_counts(version, body))
    elif api_key in (17, 36) and len(body) >= 2:
        capture = code.sasl.SaslCapture()
        capture.mechanism = "PLAIN"
        capture.principal = "User:fuzz"
        out.append(capture.on_response(api_key, body))
    throttle = code.throttle.read_throttle_ms(api_key, version, body)
    out.append(throttle)
    out.append(code.throttle.with_throttle_ms(api_key, version, bytes(body), 4321))
    return out


# ---- push payloads: decompression and the OTLP check ----------------------------------------


def decompress(code: Code, data: bytes) -> Any:
    """``data[0]``: the codec id (``% 8``: 5-7 are unknown ids) and the output bound
    (``MAX_BYTES[(data[0] >> 3) % 4]``); the rest is the payload.  The bound must hold."""
    if not data:
        return None
    codec = data[0] % 8
    max_bytes = MAX_BYTES[(data[0] >> 3) % len(MAX_BYTES)]
    out = code.compression.decompress(codec, memoryview(data)[1:], max_bytes)
    assert len(out) <= max_bytes, (
        f"codec {codec}: {len(out)} bytes out, bound {max_bytes}"
    )
    return out


def otlp_metrics(code: Code, data: bytes) -> Any:
    """A decompressed push payload through the OTLP ``MetricsData`` check."""
    validator = code.payload.MetricsDataValidator(reuse_bytes=1 << 16)
    validator.validate(data)
    return len(data)


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[Code, bytes], Any]
    allowed: Callable[[Code], tuple[type[BaseException], ...]]


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("serve_request", serve_request, lambda c: c.request_errors),
        Target("serve_stream", serve_stream, lambda c: c.request_errors),
        Target("gateway_request", gateway_request, lambda c: c.request_errors),
        Target("gateway_response", gateway_response, lambda c: c.request_errors),
        Target("decompress", decompress, lambda c: c.payload_errors),
        Target("otlp_metrics", otlp_metrics, lambda c: (DecodeError,)),
    )
}


class Mismatch(AssertionError):
    """The compiled and the interpreted code disagree about one input."""


def outcome(target: Target, code: Code, data: bytes) -> tuple[str, Any]:
    """("ok", result) or ("error", class name) for an allowed error; anything else raises."""
    try:
        return "ok", plain(target.run(code, data))
    except target.allowed(code) as exc:
        return "error", type(exc).__name__


def check(
    target: Target, interpreted: Code, compiled: Code, data: bytes
) -> tuple[str, Any]:
    """One input through both copies; raises on a crash in either or on a disagreement."""
    expected = outcome(target, interpreted, data)
    actual = outcome(target, compiled, data)
    if expected != actual:
        raise Mismatch(
            f"{target.name}: interpreted -> {_short(expected)}, compiled -> {_short(actual)}"
        )
    return expected


def _short(result: tuple[str, Any]) -> str:
    text = repr(result)
    return text if len(text) < 300 else text[:300] + "..."


def corpus_files(target: str) -> Iterator[Path]:
    yield from sorted((CORPUS / target).glob("*"))
