"""Records landed by an older writer still read: the golden segment in ``data/`` was
written before the telemetry context had its upstream (gateway) fields, byte for byte as
that code wrote it (see data/README.md)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.context import TelemetryContext
from exporters.landing import LandingLog, LandingReader
from exporters.landing.dump import dump_records

GOLDEN = Path(__file__).parent / "data" / "landing-before-upstream-fields"

# What the old writer was given for offsets 0-2 (payloads: conftest's metrics_data(offset)).
OLD_CONTEXTS = [
    TelemetryContext(
        "AAAAAAAAAAAAAAAAAAAAAQ",
        "producer-1",
        "confluent-kafka-python",
        "2.16.1-rdkafka-2.16.0",
        "127.0.0.1",
        50123,
        "PLAINTEXT",
        "PLAINTEXT",
        "User:ANONYMOUS",
        5000,
        False,
        1_763_700_000_000_000_000,
        1,
        "ktc-cluster-0001",
        123456,
        4,
        7,
    ),
    TelemetryContext(
        "AAAAAAAAAAAAAAAAAAAAAQ",
        "producer-1",
        "confluent-kafka-python",
        "2.16.1-rdkafka-2.16.0",
        "127.0.0.1",
        50123,
        "PLAINTEXT",
        "PLAINTEXT",
        "User:ANONYMOUS",
        5000,
        True,
        1_763_700_005_000_000_000,
        1,
        "ktc-cluster-0001",
        123456,
        4,
        8,
    ),
    TelemetryContext(
        "AAAAAAAAAAAAAAAAAAAAAg",
        None,
        "apache-kafka-java",
        "4.4.0",
        "::1",
        40001,
        "SASL_SSL",
        "SASL_SSL",
        "User:alice",
        10000,
        False,
        1_763_700_006_000_000_000,
        1,
        "ktc-cluster-0001",
        -7,
        0,
        2,
    ),
]


def test_the_golden_segment_has_no_upstream_keys() -> None:
    """Guards the data itself: it really is the old format."""
    raw = (GOLDEN / "00000000000000000000.log").read_bytes()
    assert raw.startswith(b"KTCLAND\n\x01") and b'"cluster_id"' in raw
    assert b"upstream" not in raw


def test_records_landed_before_the_upstream_fields_read_with_them_none(
    make_metrics: Callable[..., MetricsData],
) -> None:
    records = list(LandingReader(GOLDEN).read(0))
    assert [r.offset for r in records] == [0, 1, 2]
    assert [r.context for r in records] == OLD_CONTEXTS
    for record in records:
        assert record.context.upstream_cluster_id is None
        assert record.context.upstream_node_id is None
        assert record.payload == make_metrics(record.offset).SerializeToString()
    assert LandingReader(GOLDEN).corrupt_regions_skipped == 0


def test_the_dump_shows_old_records_with_null_upstream_fields() -> None:
    (first, _, third) = dump_records([GOLDEN])
    assert first["context"]["upstream_cluster_id"] is None
    assert first["context"]["upstream_node_id"] is None
    assert third["context"] == OLD_CONTEXTS[2].to_json_dict()


def test_a_new_writer_continues_an_old_segment(
    tmp_path: Path, make_context: Callable[..., TelemetryContext]
) -> None:
    """A collector upgraded in place opens the old active segment, recovers nothing, and
    appends records with the upstream fields after the old ones."""
    directory = tmp_path / "node-1"
    shutil.copytree(GOLDEN, directory)
    gateway = make_context(
        3, upstream_cluster_id="Yw3dJ2xXQ6qRbtJmPMOxZw", upstream_node_id=2
    )
    with LandingLog(directory, housekeeping=False) as log:
        assert log.stats().recovered_truncated_bytes == 0
        assert log.stats().recovered_corrupt_regions == 0
        assert log.append(gateway, b"new") == 3
    records = list(LandingReader(directory).read(0))
    assert [r.context for r in records] == [*OLD_CONTEXTS, gateway]
    assert records[3].context.upstream_node_id == 2
