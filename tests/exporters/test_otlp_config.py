"""OtlpExporterConfig: the Collector's key names, defaults and validation messages."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml
from pydantic import ValidationError

from exporters.otlp.config import OtlpExporterConfig, parse_go_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5s", dt.timedelta(seconds=5)),
        ("300ms", dt.timedelta(milliseconds=300)),
        ("1m30s", dt.timedelta(seconds=90)),
        ("1.5h", dt.timedelta(minutes=90)),
        ("250us", dt.timedelta(microseconds=250)),
        ("250µs", dt.timedelta(microseconds=250)),
        ("0", dt.timedelta(0)),
    ],
)
def test_go_durations_parse(text: str, expected: dt.timedelta) -> None:
    assert parse_go_duration(text) == expected


@pytest.mark.parametrize("bad", ["5", 5, "5 s", "s", "5d", "-1s", "1s2", ""])
def test_bad_durations_are_refused_with_an_example(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_go_duration(bad)


def test_defaults_are_the_collectors() -> None:
    config = OtlpExporterConfig(endpoint="otelcol:4317")
    assert config.use_tls  # tls.insecure defaults to false
    assert config.compression == "gzip"
    assert config.timeout == dt.timedelta(seconds=5)
    retry = config.retry_on_failure
    assert (
        retry.enabled,
        retry.initial_interval,
        retry.randomization_factor,
        retry.multiplier,
        retry.max_interval,
        retry.max_elapsed_time,
    ) == (
        True,
        dt.timedelta(seconds=5),
        0.5,
        1.5,
        dt.timedelta(seconds=30),
        dt.timedelta(seconds=300),
    )
    queue = config.sending_queue
    assert (
        queue.enabled,
        queue.num_consumers,
        queue.queue_size,
        queue.sizer,
        queue.batch,
    ) == (True, 10, 1000, "requests", None)


def test_a_collector_yaml_block_loads_unchanged() -> None:
    block = yaml.safe_load(
        """
        endpoint: otelcol:4317
        tls: {insecure: true}
        headers: {X-Scope-OrgID: tenant-1}
        compression: none
        timeout: 10s
        retry_on_failure: {initial_interval: 1s, max_interval: 10s, max_elapsed_time: 1m}
        sending_queue:
          num_consumers: 2
          queue_size: 5000
          batch:
        """
    )
    config = OtlpExporterConfig.model_validate(block)
    assert not config.use_tls
    assert config.metadata == (
        ("x-scope-orgid", "tenant-1"),
    )  # gRPC keys are lowercase
    assert config.timeout_s == 10.0
    assert config.retry_on_failure.max_elapsed_time == dt.timedelta(minutes=1)
    batch = config.sending_queue.batch
    assert batch is not None  # a bare `batch:` turns batching on with defaults
    assert (batch.flush_timeout, batch.min_size, batch.max_size, batch.sizer) == (
        dt.timedelta(milliseconds=200),
        8192,
        0,
        "items",
    )


@pytest.mark.parametrize(
    ("endpoint", "insecure", "tls"),
    [
        ("https://h:1", True, True),
        ("http://h:1", False, False),
        ("h:1", True, False),
        ("h:1", False, True),
    ],
)
def test_scheme_overrides_insecure(endpoint: str, insecure: bool, tls: bool) -> None:
    config = OtlpExporterConfig.model_validate(
        {"endpoint": endpoint, "tls": {"insecure": insecure}}
    )
    assert config.use_tls is tls
    assert config.target == "h:1"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"retry_on_failure": {"max_elapsed_time": "10s"}},
            "max_elapsed_time' must not be less than 'max_interval",
        ),
        (
            {"retry_on_failure": {"initial_interval": "1m"}},
            "max_interval' must not be less than 'initial_interval",
        ),
        ({"retry_on_failure": {"randomization_factor": 2}}, "less than or equal to 1"),
        (
            {"retry_on_failure": {"max_elapsed_tme": "1s"}},
            "Extra inputs are not permitted",
        ),
        ({"sending_queue": {"queue_size": 0}}, "greater than or equal to 1"),
        (
            {
                "sending_queue": {
                    "queue_size": 10,
                    "sizer": "items",
                    "batch": {"min_size": 100},
                }
            },
            "`min_size` must be less than or equal to `queue_size`",
        ),
        (
            {"sending_queue": {"batch": {"min_size": 10, "max_size": 5}}},
            "must be greater or equal",
        ),
        ({"compression": "zstd"}, "Input should be"),
        ({"tls": {"insecure_skip_verify": True}}, "not supported"),
        ({"tls": {"cert_file": "c.pem"}}, "must be set together"),
        ({"headers": {"grpc-timeout": "1"}}, "reserved"),
        ({"headers": {"bad key": "1"}}, "not a valid gRPC metadata key"),
        ({"timeout": "0s"}, "timeout must be positive"),
        ({"sending_queue": {"storage": "file_storage"}}, "landing log already is"),
    ],
)
def test_invalid_settings_name_the_problem(
    overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        OtlpExporterConfig.model_validate({"endpoint": "h:1", **overrides})


def test_zero_max_elapsed_time_means_never_give_up_and_is_valid() -> None:
    config = OtlpExporterConfig.model_validate(
        {"endpoint": "h:1", "retry_on_failure": {"max_elapsed_time": "0"}}
    )
    assert config.retry_on_failure.max_elapsed_time == dt.timedelta(0)
