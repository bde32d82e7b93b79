"""Landing records as JSON-ready dicts, for ``ktc landing dump`` (one JSON line each).

The payload is shown as OTLP's JSON mapping (``MessageToDict`` of ``MetricsData``:
lowerCamelCase names, 64-bit integers as strings). A payload that is not a valid
MetricsData is still listed, with ``metrics`` null and the reason in ``error``, so a dump
shows everything the log holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.landing.reader import LandingReader, LandingRecord

__all__ = ["dump_records", "record_to_json_dict"]


def dump_records(
    directories: Iterable[Path], from_offset: int = 0
) -> Iterator[dict[str, Any]]:
    """Every record at or above ``from_offset`` in each landing directory (one node's
    ``landing/node-<id>``; see ``node_directories``), directory by directory, in offset order."""
    for directory in directories:
        for record in LandingReader(Path(directory)).read(from_offset):
            yield record_to_json_dict(record)


def record_to_json_dict(record: LandingRecord) -> dict[str, Any]:
    document: dict[str, Any] = {
        "offset": record.offset,
        "appended_time_unix_nano": record.appended_time_unix_nano,
        "context": record.context.to_json_dict(),
    }
    metrics = MetricsData()
    try:
        metrics.ParseFromString(record.payload)
    except DecodeError as error:
        document["metrics"] = None
        size = len(record.payload)
        document["error"] = f"payload is not OTLP MetricsData ({size} bytes): {error}"
    else:
        document["metrics"] = MessageToDict(metrics)
    return document
