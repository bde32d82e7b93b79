"""``dump_records``: landing records as JSON-ready dicts with the OTLP payload decoded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.context import TelemetryContext
from exporters.landing import LandingLog, landing_directory, node_directories
from exporters.landing.dump import dump_records

MakeContext = Callable[..., TelemetryContext]


def test_dump_decodes_real_otlp_metrics(
    tmp_path: Path, make_context: MakeContext, make_metrics: Callable[..., MetricsData]
) -> None:
    node_1 = landing_directory(tmp_path, 1)
    node_2 = landing_directory(tmp_path, 2)
    with LandingLog(node_1, housekeeping=False) as log:
        for i in range(3):
            log.append(make_context(i), make_metrics(i).SerializeToString())
    with LandingLog(node_2, housekeeping=False) as log:
        log.append(make_context(9, node_id=2), make_metrics(9).SerializeToString())
        log.append(make_context(10, node_id=2), b"\xff\xff not protobuf")
    assert node_directories(tmp_path) == [node_1, node_2]

    dumped = list(dump_records(node_directories(tmp_path)))
    assert [(d["context"]["node_id"], d["offset"]) for d in dumped] == [
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 0),
        (2, 1),
    ]
    first = dumped[0]
    assert first["context"] == make_context(0).to_json_dict()
    assert first["metrics"] == MessageToDict(make_metrics(0))
    metric_names = [
        m["name"]
        for m in first["metrics"]["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
    ]
    assert metric_names == [
        "org.apache.kafka.producer.node.request.latency.avg",
        "org.apache.kafka.producer.record.queue.time.total",
    ]
    assert isinstance(first["appended_time_unix_nano"], int)
    # A payload that is not MetricsData is still listed, with the reason.
    assert (
        dumped[-1]["metrics"] is None and "not OTLP MetricsData" in dumped[-1]["error"]
    )
    # Every dict is JSON-ready (the CLI prints them as JSON lines).
    for document in dumped:
        json.dumps(document)
    assert [d["offset"] for d in dump_records([node_1], from_offset=2)] == [2]


def test_no_landing_directory_means_nothing_to_dump(tmp_path: Path) -> None:
    assert node_directories(tmp_path) == []
    assert list(dump_records([tmp_path / "missing"])) == []


def test_dump_shows_the_upstream_fields(
    tmp_path: Path, make_context: MakeContext
) -> None:
    node = landing_directory(tmp_path, 1)
    gateway = make_context(
        1, upstream_cluster_id="Yw3dJ2xXQ6qRbtJmPMOxZw", upstream_node_id=2
    )
    with LandingLog(node, housekeeping=False) as log:
        log.append(gateway, b"")
        log.append(make_context(2), b"")  # standalone: both null
    (landed, standalone) = dump_records([node])
    assert landed["context"]["upstream_cluster_id"] == "Yw3dJ2xXQ6qRbtJmPMOxZw"
    assert landed["context"]["upstream_node_id"] == 2
    assert standalone["context"]["upstream_cluster_id"] is None
    assert standalone["context"]["upstream_node_id"] is None
