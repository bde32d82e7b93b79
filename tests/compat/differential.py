"""Send the same request frames to Apache Kafka 4.4.0 and to the collector; compare answers.

A :class:`Pair` is one connection to each server. :meth:`Pair.exchange` encodes a request
once (``proto.encode_request``, the codec generated from Kafka's own JSON specs), writes the
same bytes to both connections, reads one response from each and decodes both with the same
codec, then walks the two decoded messages field by field. Every leaf compared counts toward
the report's per API/version figure; a leaf that differs is a difference unless a rule of
:data:`KNOWN_DIFFERENCES` (conftest's table) names it, in which case it is counted as known.

Normalisation happens before the walk and only where the two servers cannot agree by design:
node ids, host names, ports and cluster ids (the collector is a different node) are replaced
by placeholders (:func:`normalise`), and a response's correlation id is checked against the
request on both sides but not compared.

Connection closes are answers too: when either side closes the connection instead of
answering, both must close (``Closed`` on each side).
"""

from __future__ import annotations

import dataclasses
import itertools
import socket
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from proto import ApiKeys, decode_response, encode_request

__all__ = [
    "CLOSED",
    "Difference",
    "KnownDifference",
    "Pair",
    "Report",
    "Servers",
    "compare",
    "normalise",
]

_correlation = itertools.count(1)
_SIZE = struct.Struct(">i")


class _Closed:
    """What a server answered when it closed the connection instead."""

    def __repr__(self) -> str:
        return "<connection closed>"


CLOSED = _Closed()


@dataclass(frozen=True)
class Difference:
    api: str
    version: int
    path: str
    kafka: Any
    collector: Any
    case: str

    def line(self) -> str:
        return (
            f"{self.api} v{self.version} [{self.case}] {self.path}: "
            f"kafka={self.kafka!r} collector={self.collector!r}"
        )


@dataclass(frozen=True)
class KnownDifference:
    """A deliberate difference: the cases and field it applies to, why, and where it is stated."""

    name: str
    api_key: int
    case_prefix: str
    path_prefix: str
    reason: str
    doc: str
    # Optional check on the two values (None: any values).
    values: Callable[[Any, Any], bool] | None = None

    def applies(
        self, api_key: int, case: str, path: str, kafka: Any, mine: Any
    ) -> bool:
        return (
            api_key == self.api_key
            and case.startswith(self.case_prefix)
            and path.startswith(self.path_prefix)
            and (self.values is None or self.values(kafka, mine))
        )


@dataclass
class Report:
    """What the session compared: fields per API/version, known and unknown differences."""

    fields: Counter[tuple[int, int]] = field(default_factory=Counter)
    exchanges: Counter[tuple[int, int]] = field(default_factory=Counter)
    known_hits: Counter[str] = field(default_factory=Counter)
    # The first difference each known entry absorbed, shown in the table.
    known_examples: dict[str, Difference] = field(default_factory=dict)
    differences: list[Difference] = field(default_factory=list)
    known: tuple[KnownDifference, ...] = ()

    def lines(self) -> list[str]:
        out = ["API / version                        exchanges  fields compared"]
        for (api_key, version), count in sorted(self.fields.items()):
            name = f"{ApiKeys(api_key).name.title().replace('_', '')} ({api_key}) v{version}"
            out.append(
                f"{name:<36} {self.exchanges[(api_key, version)]:>9}  {count:>15}"
            )
        out.append(
            f"{'total':<36} {sum(self.exchanges.values()):>9}  {sum(self.fields.values()):>15}"
        )
        out.append("")
        out.append(
            "Known deliberate differences (field differences seen, reason, where stated):"
        )
        for known in self.known:
            out.append(
                f"- {known.name} ({ApiKeys(known.api_key).name}, {known.path_prefix or 'whole answer'}): "
                f"seen {self.known_hits[known.name]}x. {known.reason} [{known.doc}]"
            )
            example = self.known_examples.get(known.name)
            if example is not None:
                out.append(f"    e.g. {example.line()[:160]}")
        if self.differences:
            out.append("")
            out.append(f"UNEXPECTED differences: {len(self.differences)}")
            out.extend(f"  {d.line()}" for d in self.differences)
        return out


@dataclass(frozen=True)
class Servers:
    """Where each server listens, and what a comparison normalises."""

    kafka: dict[str, int]
    collector: dict[str, int]
    kafka_cluster_id: str
    collector_cluster_id: str
    kafka_node_id: int
    collector_node_id: int
    report: Report
    broker: Any  # harness.kafka_cluster.KafkaCluster
    running_collector: Any  # collector_harness.RunningCollector


def normalise(value: Any, rules: dict[str, Callable[[Any], Any]]) -> Any:
    """A copy of a decoded message whose fields named in ``rules`` (by snake_case field
    name, at any depth) are replaced by the rule's result."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for item in dataclasses.fields(value):
            current = getattr(value, item.name)
            if item.name in rules:
                changes[item.name] = rules[item.name](current)
            else:
                changes[item.name] = normalise(current, rules)
        return dataclasses.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(normalise(v, rules) for v in value)
    return value


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            yield from _leaves(getattr(value, item.name), f"{path}.{item.name}")
    elif isinstance(value, tuple):
        yield (f"{path}#len", len(value))
        for index, item in enumerate(value):
            yield from _leaves(item, f"{path}[{index}]")
    elif isinstance(value, bytes | bytearray | memoryview):
        yield (path, bytes(value))
    else:
        yield (path, value)


def compare(kafka: Any, mine: Any) -> tuple[int, list[tuple[str, Any, Any]]]:
    """(leaves compared, [(path, kafka value, collector value)] that differ)."""
    left = dict(_leaves(kafka, ""))
    right = dict(_leaves(mine, ""))
    differing = []
    for path in sorted(left.keys() | right.keys()):
        a, b = left.get(path, "<absent>"), right.get(path, "<absent>")
        if a != b:
            differing.append((path, a, b))
    return len(left.keys() | right.keys()), differing


class _Side:
    def __init__(
        self, host: str, port: int, timeout_s: float, source_port: int = 0
    ) -> None:
        # Both sides of a pair may share one source port (client_source_port selectors):
        # two connections from 127.0.0.1:p to different servers are distinct 4-tuples.
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.settimeout(timeout_s)
        self.sock.bind((host, source_port))
        self.sock.connect((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.closed = False
        self.local_port = self.sock.getsockname()[1]

    def send(self, frame: bytes) -> None:
        if self.closed:
            return
        try:
            self.sock.sendall(frame)
        except OSError:
            self.closed = True

    def _exactly(self, size: int) -> bytes | None:
        chunks = []
        while size:
            try:
                chunk = self.sock.recv(min(size, 1 << 20))
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            if not chunk:
                self.closed = True
                return None
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> bytes | None:
        """The next response payload (size prefix removed), or None: closed."""
        if self.closed:
            return None
        head = self._exactly(4)
        if head is None:
            return None
        return self._exactly(_SIZE.unpack(head)[0])

    def close(self) -> None:
        self.closed = True
        self.sock.close()


class Pair:
    """One connection to Kafka and one to the collector, used in lock step."""

    def __init__(
        self,
        report: Report,
        kafka_port: int,
        collector_port: int,
        *,
        client_id: str | None = "ktc-compat",
        rules: dict[str, Callable[[Any], Any]] | None = None,
        timeout_s: float = 15.0,
    ) -> None:
        self.report = report
        self.client_id = client_id
        self.rules = rules or {}
        self.kafka = _Side("127.0.0.1", kafka_port, timeout_s)
        self.collector = _Side(
            "127.0.0.1", collector_port, timeout_s, source_port=self.kafka.local_port
        )
        self.source_port = self.kafka.local_port

    def __enter__(self) -> Pair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.kafka.close()
        self.collector.close()

    def send_raw(self, frame: bytes) -> tuple[Any, Any]:
        """The same raw bytes to both; returns both raw answers (payload bytes or CLOSED)."""
        self.kafka.send(frame)
        self.collector.send(frame)
        answers = []
        for side in (self.kafka, self.collector):
            payload = side.receive()
            answers.append(CLOSED if payload is None else payload)
        return answers[0], answers[1]

    def exchange(
        self,
        api_key: int,
        version: int,
        message: Any,
        *,
        case: str,
        client_id: str | None = None,
        frame: bytes | None = None,
        adjust: Callable[[Any, Any], tuple[Any, Any]] | None = None,
    ) -> tuple[Any, Any]:
        """Sends ``message`` (or the given raw ``frame``) to both; compares and records the
        decoded answers; returns them (after normalisation)."""
        correlation_id = next(_correlation)
        if frame is None:
            frame = encode_request(
                api_key,
                version,
                correlation_id,
                self.client_id if client_id is None else client_id,
                message,
            )
        else:
            correlation_id = struct.unpack_from(">i", frame, 8)[0]
        raw = self.send_raw(frame)
        decoded = []
        for payload in raw:
            if payload is CLOSED:
                decoded.append(CLOSED)
                continue
            response = decode_response(api_key, version, payload)
            assert response.correlation_id == correlation_id
            decoded.append(normalise(response.message, self.rules))
        kafka, mine = decoded
        if adjust is not None and kafka is not CLOSED and mine is not CLOSED:
            kafka, mine = adjust(kafka, mine)
        self.record(api_key, version, case, kafka, mine)
        return kafka, mine

    def exchange_each(
        self,
        api_key: int,
        version: int,
        messages: tuple[Any, Any],
        *,
        case: str,
        adjust: Callable[[Any, Any], tuple[Any, Any]] | None = None,
    ) -> tuple[Any, Any]:
        """Like :meth:`exchange`, for a request whose bytes must differ per server (a SCRAM
        client-final message answers each server's own nonce)."""
        correlation_id = next(_correlation)
        decoded = []
        for side, message in zip((self.kafka, self.collector), messages, strict=True):
            side.send(
                encode_request(
                    api_key, version, correlation_id, self.client_id, message
                )
            )
            payload = side.receive()
            if payload is None:
                decoded.append(CLOSED)
                continue
            response = decode_response(api_key, version, payload)
            decoded.append(normalise(response.message, self.rules))
        kafka, mine = decoded
        if adjust is not None and kafka is not CLOSED and mine is not CLOSED:
            kafka, mine = adjust(kafka, mine)
        self.record(api_key, version, case, kafka, mine)
        return kafka, mine

    def record(
        self, api_key: int, version: int, case: str, kafka: Any, mine: Any
    ) -> None:
        report = self.report
        report.exchanges[(api_key, version)] += 1
        if kafka is CLOSED or mine is CLOSED:
            count, differing = 1, [] if kafka is mine else [("", kafka, mine)]
        else:
            count, differing = compare(kafka, mine)
        report.fields[(api_key, version)] += count
        name = ApiKeys(api_key).name
        for path, a, b in differing:
            for known in report.known:
                if known.applies(api_key, case, path, a, b):
                    report.known_hits[known.name] += 1
                    report.known_examples.setdefault(
                        known.name, Difference(name, version, path, a, b, case)
                    )
                    break
            else:
                report.differences.append(Difference(name, version, path, a, b, case))


def versions(api_key: int, served: dict[int, tuple[int, int]]) -> Iterable[int]:
    low, high = served[api_key]
    return range(low, high + 1)
