"""The OTLP exporter's configuration, in the OpenTelemetry Collector's own words.

Key names and defaults follow the Collector's ``otlp`` exporter (``exporter/otlpexporter``),
its gRPC client settings (``config/configgrpc``, ``config/configtls``) and the exporter
helper (``exporter/exporterhelper/README.md``: ``timeout``, ``retry_on_failure``,
``sending_queue``), so an operator's existing ``exporters: otlp:`` block pastes in unchanged.
Durations are Go duration strings (``"5s"``, ``"300ms"``, ``"1m30s"``), as in the Collector.

Where the Collector's semantics cannot carry over, the difference is stated on the field:
the sending queue here is a read-ahead window over the durable landing log, not the only
copy of the data, so nothing is ever dropped because it is full.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

__all__ = [
    "BatchConfig",
    "Duration",
    "OtlpExporterConfig",
    "RetryConfig",
    "SendingQueueConfig",
    "TlsClientConfig",
    "parse_go_duration",
]

# Go's time.ParseDuration units, in nanoseconds.  "µs" and "μs" are both accepted by Go.
_GO_DURATION_UNIT_NS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_GO_DURATION_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(value: object) -> dt.timedelta:
    """Parse a Go duration string such as ``"1m30s"`` or ``"250ms"`` into a timedelta.

    Bare numbers are refused: the Collector would read ``5`` as five *nanoseconds*, which is
    never what the writer meant.  ``"0"`` is allowed, as in Go.
    """
    if isinstance(value, dt.timedelta):
        return value
    if not isinstance(value, str):
        # ValueError, not TypeError: pydantic turns only ValueError into a ValidationError.
        raise ValueError(
            f"duration must be a string with a unit such as '5s' or '300ms', got {value!r}"
        )
    text = value.strip()
    if text == "0":
        return dt.timedelta(0)
    pos = 0
    total_ns = 0.0
    for match in _GO_DURATION_TERM.finditer(text):
        if match.start() != pos:
            break
        total_ns += float(match.group(1)) * _GO_DURATION_UNIT_NS[match.group(2)]
        pos = match.end()
    if pos == 0 or pos != len(text):
        raise ValueError(
            f"invalid duration {value!r}: expected e.g. '5s', '300ms', '1m30s'"
        )
    return dt.timedelta(microseconds=total_ns / 1_000)


Duration = Annotated[dt.timedelta, BeforeValidator(parse_go_duration)]


class _Section(BaseModel):
    # Unknown keys are an error: a misspelt ``max_elapsed_tme`` must not silently keep 300s.
    model_config = ConfigDict(extra="forbid", frozen=True)


class TlsClientConfig(_Section):
    """``configtls.ClientConfig``.  ``insecure: true`` means plaintext gRPC (no TLS)."""

    insecure: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False
    server_name_override: str | None = None

    @model_validator(mode="after")
    def _check(self) -> TlsClientConfig:
        if self.insecure_skip_verify:
            # grpcio exposes no way to turn off server certificate verification; pretending to
            # honour the key would leave the operator with a failing or a silently verifying
            # connection.  Trusting the server's CA with ca_file is the supported route.
            raise ValueError(
                "tls.insecure_skip_verify is not supported by the Python gRPC client; "
                "set tls.ca_file to the server's CA (or tls.insecure: true for plaintext)"
            )
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError(
                "tls.cert_file and tls.key_file must be set together (mTLS)"
            )
        return self


class RetryConfig(_Section):
    """``retry_on_failure`` (``config/configretry``), same defaults.

    ``max_elapsed_time`` differs on purpose: the Collector drops a batch once it is exceeded;
    here the batch stays in the durable landing log and is retried every ``max_interval``
    until the receiver is back.  ``0`` means "never give up", as in the Collector.
    """

    enabled: bool = True
    initial_interval: Duration = dt.timedelta(seconds=5)
    randomization_factor: float = Field(default=0.5, ge=0.0, le=1.0)
    multiplier: float = Field(default=1.5, ge=1.0)
    max_interval: Duration = dt.timedelta(seconds=30)
    max_elapsed_time: Duration = dt.timedelta(seconds=300)

    @model_validator(mode="after")
    def _check(self) -> RetryConfig:
        if self.initial_interval <= dt.timedelta(
            0
        ) or self.max_interval <= dt.timedelta(0):
            raise ValueError("retry_on_failure intervals must be positive")
        if self.max_interval < self.initial_interval:
            raise ValueError("'max_interval' must not be less than 'initial_interval'")
        if self.max_elapsed_time < dt.timedelta(0):
            raise ValueError("'max_elapsed_time' must not be negative")
        if self.max_elapsed_time > dt.timedelta(0):
            # configretry's own checks, same messages.
            if self.max_elapsed_time < self.initial_interval:
                raise ValueError(
                    "'max_elapsed_time' must not be less than 'initial_interval'"
                )
            if self.max_elapsed_time < self.max_interval:
                raise ValueError(
                    "'max_elapsed_time' must not be less than 'max_interval'"
                )
        return self


Sizer = Literal["requests", "items", "bytes"]


class BatchConfig(_Section):
    """``sending_queue.batch``: present (even as ``batch: {}``) means batching is on.

    ``items`` are metric data points.  A landing record (one client push) is never split:
    ``max_size`` closes a batch before the record that would overflow it, and a single
    record larger than ``max_size`` travels alone.
    """

    flush_timeout: Duration = dt.timedelta(milliseconds=200)
    min_size: int = Field(default=8192, ge=0)
    max_size: int = Field(default=0, ge=0)
    sizer: Literal["items", "bytes"] = "items"

    @model_validator(mode="after")
    def _check(self) -> BatchConfig:
        if self.flush_timeout <= dt.timedelta(0):
            raise ValueError("`flush_timeout` must be positive")
        if self.max_size and self.max_size < self.min_size:
            raise ValueError(
                f"`max_size` ({self.max_size}) must be greater or equal to "
                f"`min_size` ({self.min_size})"
            )
        return self


class SendingQueueConfig(_Section):
    """``sending_queue``.  Here it is the in-memory read-ahead over the landing log.

    ``queue_size`` bounds how much is read from the log and held in memory, in ``sizer``
    units, across all landing directories; the log itself is the durable queue, so a full
    window means "stop reading ahead", never "drop".  ``num_consumers`` is the number of
    sender threads; each landing directory is served by one of them, in offset order.
    ``enabled: false`` sends one record at a time with a single consumer.
    """

    enabled: bool = True
    num_consumers: int = Field(default=10, ge=1)
    queue_size: int = Field(default=1000, ge=1)
    sizer: Sizer = "requests"
    block_on_overflow: bool = (
        False  # accepted for compatibility; reading ahead never drops
    )
    wait_for_result: bool = False  # accepted for compatibility; commits always wait
    batch: BatchConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _collector_spellings(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        if "storage" in data:
            raise ValueError(
                "sending_queue.storage is not supported: the landing log already is the "
                "forwarder's persistent queue"
            )
        # ``batch:`` with no value turns batching on with defaults, as in the Collector
        # (exporter/otlpexporter/testdata/default-batch.yaml).
        if "batch" in data and data["batch"] is None:
            return {**data, "batch": {}}
        return data

    @model_validator(mode="after")
    def _check(self) -> SendingQueueConfig:
        batch = self.batch
        if (
            batch is not None
            and batch.sizer == self.sizer
            and batch.min_size > self.queue_size
        ):
            raise ValueError("`min_size` must be less than or equal to `queue_size`")
        return self


Compression = Literal["gzip", "deflate", "none", ""]


class OtlpExporterConfig(_Section):
    """The ``exporters: otlp:`` block.  Only ``endpoint`` is required.

    ``endpoint`` is ``host:port`` (gRPC naming); an ``https://`` prefix forces TLS and an
    ``http://`` prefix plaintext, overriding ``tls.insecure`` as the Collector does.
    """

    endpoint: str
    tls: TlsClientConfig = TlsClientConfig()
    headers: dict[str, str] = Field(default_factory=dict)
    compression: Compression = "gzip"
    timeout: Duration = dt.timedelta(seconds=5)
    retry_on_failure: RetryConfig = RetryConfig()
    sending_queue: SendingQueueConfig = SendingQueueConfig()

    @model_validator(mode="after")
    def _check(self) -> OtlpExporterConfig:
        if not self.target:
            raise ValueError("endpoint must be 'host:port'")
        if self.timeout <= dt.timedelta(0):
            raise ValueError("timeout must be positive")
        for key in self.headers:
            # gRPC metadata keys are lowercase ASCII tokens; "-bin" keys carry binary values
            # that a YAML string cannot express.
            if not re.fullmatch(r"[0-9a-zA-Z_.-]+", key) or key.lower().endswith(
                "-bin"
            ):
                raise ValueError(f"header {key!r} is not a valid gRPC metadata key")
            if key.lower().startswith("grpc-"):
                raise ValueError(f"header {key!r} uses the reserved 'grpc-' prefix")
        return self

    @property
    def target(self) -> str:
        """The gRPC target with any ``http(s)://`` scheme removed."""
        for scheme in ("https://", "http://"):
            if self.endpoint.startswith(scheme):
                return self.endpoint[len(scheme) :].rstrip("/")
        return self.endpoint

    @property
    def use_tls(self) -> bool:
        if self.endpoint.startswith("https://"):
            return True
        if self.endpoint.startswith("http://"):
            return False
        return not self.tls.insecure

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        """``headers`` as gRPC call metadata (keys lowercased, as grpc-go's metadata.New)."""
        return tuple(
            (key.lower(), value) for key, value in sorted(self.headers.items())
        )

    @property
    def timeout_s(self) -> float:
        return self.timeout.total_seconds()
