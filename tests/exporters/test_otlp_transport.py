"""One Export attempt against a real in-process gRPC receiver: outcomes and wire options."""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter
from pathlib import Path

import grpc
import pytest
import trustme

from exporters.otlp.config import OtlpExporterConfig
from exporters.otlp.retry import ALWAYS_RETRYABLE_CODES
from exporters.otlp.transport import ExportAccepted, OtlpGrpcTransport
from tests.exporters.otlp_receiver import (
    ByteCountingProxy,
    Fail,
    OtlpReceiver,
    PartialSuccess,
    Slow,
    point_values,
    sample_metrics_data,
)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


def _transport(target: str, **overrides: object) -> OtlpGrpcTransport:
    settings: dict[str, object] = {"endpoint": target, "tls": {"insecure": True}}
    settings.update(overrides)
    return OtlpGrpcTransport(OtlpExporterConfig.model_validate(settings))


BODY = sample_metrics_data(gauges=2, points_per_metric=3).SerializeToString()


def test_an_accepted_export_arrives_intact_with_headers(receiver: OtlpReceiver) -> None:
    transport = _transport(receiver.target, headers={"X-Scope-OrgID": "tenant-1"})
    try:
        assert transport.export(BODY) == ExportAccepted(0, "")
    finally:
        transport.close()
    (export,) = receiver.received
    assert point_values(export.request.resource_metrics) == list(range(7))
    assert export.metadata["x-scope-orgid"] == "tenant-1"
    assert export.metadata["user-agent"].startswith("ktc-otlp-forwarder")


def test_concatenated_metrics_data_is_one_request(receiver: OtlpReceiver) -> None:
    second = sample_metrics_data(start_value=100).SerializeToString()
    transport = _transport(receiver.target)
    try:
        transport.export(BODY + second)
    finally:
        transport.close()
    (export,) = receiver.received
    assert len(export.request.resource_metrics) == 2
    assert point_values(export.request.resource_metrics) == list(range(7)) + [
        100,
        101,
        102,
    ]


@pytest.mark.parametrize("code", sorted(ALWAYS_RETRYABLE_CODES, key=attrgetter("name")))
def test_the_collectors_retryable_codes_are_retryable(
    receiver: OtlpReceiver, code: grpc.StatusCode
) -> None:
    receiver.script(Fail(code))
    transport = _transport(receiver.target)
    try:
        failure = transport.export(BODY)
    finally:
        transport.close()
    assert not isinstance(failure, ExportAccepted)
    assert (failure.code, failure.retryable, failure.retry_delay_s) == (
        code,
        True,
        None,
    )


@pytest.mark.parametrize(
    "code",
    [
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ],
)
def test_other_codes_are_permanent(
    receiver: OtlpReceiver, code: grpc.StatusCode
) -> None:
    receiver.script(Fail(code, message="no"))
    transport = _transport(receiver.target)
    try:
        failure = transport.export(BODY)
    finally:
        transport.close()
    assert not isinstance(failure, ExportAccepted)
    assert (failure.code, failure.retryable, failure.message) == (code, False, "no")


def test_resource_exhausted_with_retry_info_is_retryable_with_its_delay(
    receiver: OtlpReceiver,
) -> None:
    receiver.script(Fail(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_delay_s=2.5))
    transport = _transport(receiver.target)
    try:
        failure = transport.export(BODY)
    finally:
        transport.close()
    assert not isinstance(failure, ExportAccepted)
    assert (failure.code, failure.retryable, failure.retry_delay_s) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        True,
        2.5,
    )


def test_partial_success_is_reported(receiver: OtlpReceiver) -> None:
    receiver.script(PartialSuccess(3, "bad points"))
    transport = _transport(receiver.target)
    try:
        assert transport.export(BODY) == ExportAccepted(3, "bad points")
    finally:
        transport.close()


def test_a_slow_receiver_hits_the_per_attempt_timeout(receiver: OtlpReceiver) -> None:
    receiver.script(Slow(5.0))
    transport = _transport(receiver.target, timeout="200ms")
    try:
        failure = transport.export(BODY)
    finally:
        transport.close()
        receiver.stop()  # release the slow handler
    assert not isinstance(failure, ExportAccepted)
    assert (failure.code, failure.retryable) == (
        grpc.StatusCode.DEADLINE_EXCEEDED,
        True,
    )


def test_a_stopped_receiver_is_unavailable() -> None:
    receiver = OtlpReceiver()
    receiver.start()
    receiver.stop()
    transport = _transport(receiver.target)
    try:
        failure = transport.export(BODY)
    finally:
        transport.close()
    assert not isinstance(failure, ExportAccepted)
    assert (failure.code, failure.retryable) == (grpc.StatusCode.UNAVAILABLE, True)


def _wire_bytes(receiver: OtlpReceiver, compression: str, body: bytes) -> int:
    proxy = ByteCountingProxy(receiver.port)
    transport = _transport(proxy.target, compression=compression)
    try:
        assert transport.export(body) == ExportAccepted()
    finally:
        transport.close()
        proxy.close()
    return proxy.bytes_upstream


def test_gzip_compresses_on_the_wire_and_none_does_not(receiver: OtlpReceiver) -> None:
    # 2,000 near-identical points: about 40 KB raw, a few KB gzipped.
    body = sample_metrics_data(gauges=20, points_per_metric=100).SerializeToString()
    plain = _wire_bytes(receiver, "none", body)
    gzipped = _wire_bytes(receiver, "gzip", body)
    assert plain > len(body)  # the whole message crossed uncompressed
    assert gzipped < plain / 3
    assert [point_values(e.request.resource_metrics) for e in receiver.received] == [
        point_values(
            sample_metrics_data(gauges=20, points_per_metric=100).resource_metrics
        )
    ] * 2


def test_tls_with_a_private_ca_and_client_certificate(tmp_path: Path) -> None:
    ca = trustme.CA()
    server_cert = ca.issue_cert("localhost", "127.0.0.1")
    client_cert = ca.issue_cert("client.example")
    ca_file, cert_file, key_file = (
        tmp_path / "ca.pem",
        tmp_path / "client.pem",
        tmp_path / "client.key",
    )
    ca.cert_pem.write_to_path(str(ca_file))
    client_cert.cert_chain_pems[0].write_to_path(str(cert_file))
    client_cert.private_key_pem.write_to_path(str(key_file))
    credentials = grpc.ssl_server_credentials(
        [
            (
                server_cert.private_key_pem.bytes(),
                b"".join(p.bytes() for p in server_cert.cert_chain_pems),
            )
        ],
        root_certificates=ca.cert_pem.bytes(),
        require_client_auth=True,
    )
    with OtlpReceiver(server_credentials=credentials) as receiver:
        secure = OtlpGrpcTransport(
            OtlpExporterConfig.model_validate(
                {
                    "endpoint": f"localhost:{receiver.port}",
                    "tls": {
                        "ca_file": str(ca_file),
                        "cert_file": str(cert_file),
                        "key_file": str(key_file),
                    },
                }
            )
        )
        plaintext = _transport(receiver.target)
        try:
            assert secure.export(BODY) == ExportAccepted()
            refused = plaintext.export(BODY)
        finally:
            secure.close()
            plaintext.close()
    assert len(receiver.received) == 1
    assert (
        not isinstance(refused, ExportAccepted)
        and refused.code is grpc.StatusCode.UNAVAILABLE
    )
