"""Golden bytes of DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), every version
Kafka 4.4.0 defines (1-3): ``golden_acls.txt`` is what Kafka's own message classes
serialize (java/GoldenAcls.java); the generated codecs read it to the same messages and
write it back byte for byte."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from proto.messages import (
    create_acls_request,
    create_acls_response,
    delete_acls_request,
    delete_acls_response,
    describe_acls_request,
    describe_acls_response,
)
from tests.gateway.golden import kafka_classpath

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden_acls.txt"

ALICE = "User:CN=alice"
MESSAGES: dict[str, tuple[Any, Any]] = {
    "DescribeAclsRequest": (
        describe_acls_request,
        describe_acls_request.DescribeAclsRequest(
            resource_type_filter=4,
            resource_name_filter=None,
            pattern_type_filter=2,
            principal_filter=ALICE,
            host_filter=None,
            operation=1,
            permission_type=3,
        ),
    ),
    "DescribeAclsResponse": (
        describe_acls_response,
        describe_acls_response.DescribeAclsResponse(
            throttle_time_ms=7,
            error_code=0,
            error_message=None,
            resources=(
                describe_acls_response.DescribeAclsResource(
                    resource_type=4,
                    resource_name="kafka-cluster",
                    pattern_type=3,
                    acls=(
                        describe_acls_response.AclDescription(ALICE, "*", 11, 3),
                        describe_acls_response.AclDescription(
                            "User:*", "10.0.0.1", 7, 2
                        ),
                    ),
                ),
            ),
        ),
    ),
    "CreateAclsRequest": (
        create_acls_request,
        create_acls_request.CreateAclsRequest(
            creations=(
                create_acls_request.AclCreation(
                    resource_type=4,
                    resource_name="kafka-cluster",
                    resource_pattern_type=3,
                    principal=ALICE,
                    host="*",
                    operation=11,
                    permission_type=3,
                ),
            )
        ),
    ),
    "CreateAclsResponse": (
        create_acls_response,
        create_acls_response.CreateAclsResponse(
            throttle_time_ms=0,
            results=(
                create_acls_response.AclCreationResult(
                    error_code=0, error_message=None
                ),
                create_acls_response.AclCreationResult(
                    error_code=42,
                    error_message="The only valid name for the CLUSTER resource is kafka-cluster",
                ),
            ),
        ),
    ),
    "DeleteAclsRequest": (
        delete_acls_request,
        delete_acls_request.DeleteAclsRequest(
            filters=(
                delete_acls_request.DeleteAclsFilter(
                    resource_type_filter=4,
                    resource_name_filter="kafka-cluster",
                    pattern_type_filter=1,
                    principal_filter=ALICE,
                    host_filter=None,
                    operation=1,
                    permission_type=1,
                ),
            )
        ),
    ),
    "DeleteAclsResponse": (
        delete_acls_response,
        delete_acls_response.DeleteAclsResponse(
            throttle_time_ms=3,
            filter_results=(
                delete_acls_response.DeleteAclsFilterResult(
                    error_code=0,
                    error_message=None,
                    matching_acls=(
                        delete_acls_response.DeleteAclsMatchingAcl(
                            error_code=0,
                            error_message=None,
                            resource_type=4,
                            resource_name="kafka-cluster",
                            pattern_type=3,
                            principal=ALICE,
                            host="*",
                            operation=11,
                            permission_type=3,
                        ),
                    ),
                ),
            ),
        ),
    ),
}


def goldens() -> list[tuple[str, int, bytes]]:
    rows = []
    for line in GOLDEN.read_text().splitlines():
        name, version, data = line.split()
        rows.append((name, int(version), bytes.fromhex(data)))
    return rows


def test_every_version_of_every_acl_api_has_goldens() -> None:
    have = {(name, version) for name, version, _ in goldens()}
    for name, (module, _) in MESSAGES.items():
        low, high = module.VALID_VERSIONS
        assert low == 1 and high == 3  # Kafka 4.4.0: v0 removed in 4.0
        assert {(name, v) for v in range(low, high + 1)} <= have


@pytest.mark.parametrize(
    ("name", "version", "data"), goldens(), ids=[f"{n}-v{v}" for n, v, _ in goldens()]
)
def test_codec_reads_and_writes_kafkas_bytes(
    name: str, version: int, data: bytes
) -> None:
    module, expected = MESSAGES[name]
    message, end = module.READERS[version](memoryview(data), 0)
    assert end == len(data)
    assert message == expected
    out = bytearray()
    module.WRITERS[version](expected, out)
    assert bytes(out) == data


def test_goldens_are_what_kafka_serializes(tmp_path: Path) -> None:
    """Re-runs the Java program and compares with the committed file."""
    java, classpath = shutil.which("java"), kafka_classpath()
    if java is None or classpath is None:
        reason = "needs java and the kafka-clients 4.4.0 jar (make kafka-libs)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    done = subprocess.run(
        [
            java,
            f"-Djava.io.tmpdir={tmp_path}",
            "-cp",
            classpath,
            str(HERE / "java" / "GoldenAcls.java"),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.stdout == GOLDEN.read_text()
