"""The OTLP payload check (one reused protobuf message, replaced every REUSE_BYTES) and the
serving process's tuning (GC thresholds, glibc heap trimming)."""

from __future__ import annotations

import gc
import os

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from collector.app import process_tuning
from collector.telemetry.payload import REUSE_BYTES, MetricsDataValidator
from tests.collector.collector_testkit import otlp_payload


def test_each_parse_stands_alone_whatever_came_before() -> None:
    validator = MetricsDataValidator()
    big = otlp_payload(*(f"org.apache.kafka.producer.m{i}" for i in range(20)))
    small = otlp_payload("org.apache.kafka.producer.one")
    validator.validate(big)
    validator.validate(small)  # parsed into the same message: cleared first
    assert validator._message == MetricsData.FromString(small)
    with pytest.raises(DecodeError):
        validator.validate(b"\x0a\xff\xff\xff\xff\x0f")  # a length running past the end
    validator.validate(small)  # a failed parse leaves nothing behind
    assert validator._message == MetricsData.FromString(small)


def test_the_message_is_replaced_after_reuse_bytes() -> None:
    validator = MetricsDataValidator(reuse_bytes=1000)
    data = otlp_payload("org.apache.kafka.producer.m")
    replaced = 0
    for _ in range(3 * 1000 // len(data) + 3):
        before = validator._message
        validator.validate(data)
        replaced += validator._message is not before
        assert validator._parsed_bytes <= 1000
    assert replaced >= 3  # a new message (and arena) every ~1000 bytes
    assert REUSE_BYTES == 2 * 1024 * 1024  # the shipped bound


def test_serving_process_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    saved = gc.get_threshold()
    try:
        monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
        monkeypatch.setenv("MALLOC_TOP_PAD_", "4096")  # the operator's: left alone
        applied = process_tuning.tune_serving_process()
        assert gc.get_threshold() == process_tuning.GC_THRESHOLDS
        if process_tuning._glibc_mallopt() is not None:  # glibc (this machine and CI)
            assert (
                applied["malloc_trim_threshold"] == process_tuning.MALLOC_TRIM_THRESHOLD
            )
            assert "malloc_top_pad" not in applied
        assert os.environ["MALLOC_TOP_PAD_"] == "4096"
    finally:
        gc.set_threshold(*saved)
