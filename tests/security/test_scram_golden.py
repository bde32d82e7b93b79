"""Golden bytes of DescribeUserScramCredentials (50) and AlterUserScramCredentials (51),
every version Kafka 4.4.0 defines (v0): ``golden_scram.txt`` is what Kafka's own message
classes serialize (java/GoldenScram.java). The generated codecs read it to the same
messages and write it back byte for byte, and the collector answers the golden requests
with exactly the golden responses."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from collector.broker.scram_apis import ScramCredentialApis
from collector.security.credentials import (
    ScramMechanism,
    new_salt,
    scram_credential_from_password,
)
from collector.security.credentials_file import DurableCredentialStore
from proto.messages import (
    alter_user_scram_credentials_request as alter_request,
)
from proto.messages import (
    alter_user_scram_credentials_response as alter_response,
)
from proto.messages import (
    describe_user_scram_credentials_request as describe_request,
)
from proto.messages import (
    describe_user_scram_credentials_response as describe_response,
)
from tests.gateway.golden import kafka_classpath

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden_scram.txt"
NOT_DESCRIBED = "Attempt to describe a user credential that does not exist: nobody"

MESSAGES: dict[str, tuple[Any, Any]] = {
    "DescribeUserScramCredentialsRequest": (
        describe_request,
        describe_request.DescribeUserScramCredentialsRequest(
            users=(
                describe_request.UserName("alice"),
                describe_request.UserName("nobody"),
            )
        ),
    ),
    "DescribeUserScramCredentialsRequestAll": (
        describe_request,
        describe_request.DescribeUserScramCredentialsRequest(users=None),
    ),
    "DescribeUserScramCredentialsResponse": (
        describe_response,
        describe_response.DescribeUserScramCredentialsResponse(
            throttle_time_ms=0,
            error_code=0,
            error_message="",
            results=(
                describe_response.DescribeUserScramCredentialsResult(
                    user="alice",
                    error_code=0,
                    error_message="",
                    credential_infos=(
                        describe_response.CredentialInfo(1, 4096),
                        describe_response.CredentialInfo(2, 8192),
                    ),
                ),
                describe_response.DescribeUserScramCredentialsResult(
                    user="nobody",
                    error_code=91,
                    error_message=NOT_DESCRIBED,
                    credential_infos=(),
                ),
            ),
        ),
    ),
    "AlterUserScramCredentialsRequest": (
        alter_request,
        alter_request.AlterUserScramCredentialsRequest(
            deletions=(alter_request.ScramCredentialDeletion("ghost", 1),),
            upsertions=(
                alter_request.ScramCredentialUpsertion(
                    "alice", 2, 8192, bytes(range(1, 17)), bytes(range(100, 164))
                ),
                alter_request.ScramCredentialUpsertion(
                    "weak", 1, 1024, bytes(range(1, 17)), bytes(range(100, 132))
                ),
            ),
        ),
    ),
    "AlterUserScramCredentialsResponse": (
        alter_response,
        alter_response.AlterUserScramCredentialsResponse(
            throttle_time_ms=0,
            results=(
                alter_response.AlterUserScramCredentialsResult("alice", 0, None),
                alter_response.AlterUserScramCredentialsResult(
                    "ghost",
                    91,
                    "Attempt to delete a user credential that does not exist",
                ),
                alter_response.AlterUserScramCredentialsResult(
                    "weak", 93, "Too few iterations"
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


def golden(name: str) -> bytes:
    return next(data for n, _, data in goldens() if n == name)


def test_every_version_of_both_apis_has_goldens() -> None:
    have = {(name, version) for name, version, _ in goldens()}
    for name, (module, _) in MESSAGES.items():
        low, high = module.VALID_VERSIONS
        assert (low, high) == (0, 0)  # Kafka 4.4.0
        assert (name, 0) in have


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


def test_the_collector_answers_the_golden_requests_with_the_golden_responses(
    tmp_path: Path,
) -> None:
    store = DurableCredentialStore(tmp_path)
    apis = ScramCredentialApis(store)
    request, _ = alter_request.READERS[0](
        memoryview(golden("AlterUserScramCredentialsRequest")), 0
    )
    out = bytearray()
    alter_response.WRITERS[0](apis.alter(request, None), out)  # type: ignore[arg-type]
    assert bytes(out) == golden("AlterUserScramCredentialsResponse")

    store.write(
        {
            "alice": {
                ScramMechanism.SCRAM_SHA_256: scram_credential_from_password(
                    ScramMechanism.SCRAM_SHA_256, "pw", new_salt(), 4096
                ),
                ScramMechanism.SCRAM_SHA_512: scram_credential_from_password(
                    ScramMechanism.SCRAM_SHA_512, "pw", new_salt(), 8192
                ),
            }
        }
    )
    describe, _ = describe_request.READERS[0](
        memoryview(golden("DescribeUserScramCredentialsRequest")), 0
    )
    out = bytearray()
    describe_response.WRITERS[0](apis.describe(describe, None), out)  # type: ignore[arg-type]
    assert bytes(out) == golden("DescribeUserScramCredentialsResponse")


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
            str(HERE / "java" / "GoldenScram.java"),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.stdout == GOLDEN.read_text()
