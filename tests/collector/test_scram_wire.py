"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) over real sockets:
a raw request creates credentials that land in the data dir (salted, no password) and that
the running server's store checks; Kafka's errors come back per user."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.app.server import CollectorServer
from collector.security.credentials import ScramMechanism, new_salt, salted_password
from collector.security.credentials_file import (
    SCRAM_CREDENTIALS_FILE,
    DurableCredentialStore,
)
from proto import SUPPORTED_VERSIONS, ApiKeys
from proto.errors import Errors
from proto.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from proto.messages.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from tests.collector.collector_testkit import collector_config, running
from tests.collector.wire_client import WireClient

pytestmark = pytest.mark.timeout(60)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
PASSWORD = "wire-secret-9f3c"


def upsertion(
    user: str, mechanism: ScramMechanism, iterations: int
) -> ScramCredentialUpsertion:
    salt = new_salt()
    return ScramCredentialUpsertion(
        name=user,
        mechanism=mechanism.type_id,
        iterations=iterations,
        salt=salt,
        salted_password=salted_password(mechanism, PASSWORD, salt, iterations),
    )


async def test_every_version_is_advertised() -> None:
    assert SUPPORTED_VERSIONS[ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS] == (0, 0)
    assert SUPPORTED_VERSIONS[ApiKeys.ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)


async def test_raw_alter_creates_credentials_the_server_checks(
    server: CollectorServer, tmp_path: Path
) -> None:
    client = await WireClient.connect(server.port(), "scram-admin")
    response = await client.request(
        ApiKeys.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        AlterUserScramCredentialsRequest(
            deletions=(
                ScramCredentialDeletion(name="ghost", mechanism=SHA256.type_id),
            ),
            upsertions=(
                upsertion("alice", SHA512, 8192),
                upsertion("bob", SHA256, 4096),
                upsertion("weak", SHA256, 1024),
            ),
        ),
    )
    assert [(r.user, r.error_code, r.error_message) for r in response.results] == [
        ("alice", Errors.NONE, None),
        ("bob", Errors.NONE, None),
        (
            "ghost",
            Errors.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        ),
        ("weak", Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
    ]
    assert server.credentials is not None
    assert server.credentials.verify_plain("alice", PASSWORD)
    assert server.credentials.verify_plain("bob", PASSWORD)
    assert not server.credentials.verify_plain("alice", "not-it")
    stored = (tmp_path / "data" / "config" / SCRAM_CREDENTIALS_FILE).read_text()
    assert PASSWORD not in stored and "alice" in stored
    assert DurableCredentialStore(tmp_path / "data").verify_plain("alice", PASSWORD)

    described = await client.request(
        ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        DescribeUserScramCredentialsRequest(
            users=(UserName("alice"), UserName("nobody"))
        ),
    )
    assert described.error_code == Errors.NONE
    assert [
        (
            r.user,
            r.error_code,
            r.error_message,
            [(c.mechanism, c.iterations) for c in r.credential_infos],
        )
        for r in described.results
    ] == [
        ("alice", Errors.NONE, "", [(SHA512.type_id, 8192)]),
        (
            "nobody",
            Errors.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: nobody",
            [],
        ),
    ]
    everyone = await client.request(
        ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        DescribeUserScramCredentialsRequest(users=None),
    )
    assert [r.user for r in everyone.results] == ["alice", "bob"]

    deleted = await client.request(
        ApiKeys.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        AlterUserScramCredentialsRequest(
            deletions=(ScramCredentialDeletion(name="bob", mechanism=SHA256.type_id),)
        ),
    )
    assert [(r.user, r.error_code) for r in deleted.results] == [("bob", Errors.NONE)]
    assert not server.credentials.verify_plain("bob", PASSWORD)
    await client.close()


@pytest.mark.parametrize("super_users,allowed", [("", False), ("User:ANONYMOUS", True)])
async def test_authorizer_checks_cluster_describe_and_alter(
    tmp_path: Path, super_users: str, allowed: bool
) -> None:
    config = collector_config(
        tmp_path,
        **{
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": super_users,
        },
    )
    async with running(config) as server:
        client = await WireClient.connect(server.port(), "scram-admin")
        altered = await client.request(
            ApiKeys.ALTER_USER_SCRAM_CREDENTIALS,
            0,
            AlterUserScramCredentialsRequest(
                upsertions=(
                    upsertion("zed", SHA512, 4096),
                    upsertion("amy", SHA256, 4096),
                )
            ),
        )
        described = await client.request(
            ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS,
            0,
            DescribeUserScramCredentialsRequest(users=(UserName("amy"),)),
        )
        await client.close()
    if allowed:
        assert [(r.user, r.error_code) for r in altered.results] == [
            ("zed", Errors.NONE),
            ("amy", Errors.NONE),
        ]
        assert described.error_code == Errors.NONE
        assert described.results[0].credential_infos[0].mechanism == SHA256.type_id
        return
    # ControllerApis: every user, sorted, with ClusterAuthorizationException's message.
    assert [(r.user, r.error_code) for r in altered.results] == [
        ("amy", Errors.CLUSTER_AUTHORIZATION_FAILED),
        ("zed", Errors.CLUSTER_AUTHORIZATION_FAILED),
    ]
    assert altered.results[0].error_message.startswith("Request Request(")
    assert altered.results[0].error_message.endswith("is not authorized.")
    assert described.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert described.error_message == "Cluster authorization failed."
    assert [(r.user, r.error_code) for r in described.results] == [
        ("", Errors.CLUSTER_AUTHORIZATION_FAILED)
    ]
    assert DurableCredentialStore(tmp_path / "data").users() == {}
