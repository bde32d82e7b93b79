"""``ktc users``: kafka-configs.sh --entity-type users on the local credential store."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collector.app.cli import cli
from collector.security.credentials import ScramMechanism
from collector.security.credentials_file import (
    SCRAM_CREDENTIALS_FILE,
    DurableCredentialStore,
)

PASSWORD = "cli-secret-77aa"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_alter_describe_delete(tmp_path: Path) -> None:
    data = str(tmp_path)
    code, out, _ = run(
        "users",
        "alter",
        "--data-dir",
        data,
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--add-config",
        f"SCRAM-SHA-256=[iterations=8192,password={PASSWORD}],"
        f"SCRAM-SHA-512=[password={PASSWORD}]",
    )
    assert code == 0 and "Completed updating config for user alice." in out
    text = (tmp_path / "config" / SCRAM_CREDENTIALS_FILE).read_text()
    assert PASSWORD not in text
    store = DurableCredentialStore(tmp_path)
    assert store.verify_plain("alice", PASSWORD)
    sha256 = store.scram_credential("alice", ScramMechanism.SCRAM_SHA_256)
    sha512 = store.scram_credential("alice", ScramMechanism.SCRAM_SHA_512)
    assert sha256 is not None and sha256.iterations == 8192
    assert sha512 is not None and sha512.iterations == 4096

    code, out, _ = run(
        "users", "describe", "--data-dir", data, "--entity-name", "alice"
    )
    assert code == 0
    assert out == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )

    code, _, _ = run(
        "users",
        "alter",
        "--data-dir",
        data,
        "--entity-name",
        "alice",
        "--delete-config",
        "SCRAM-SHA-512",
    )
    assert code == 0
    assert list(DurableCredentialStore(tmp_path).users()["alice"]) == [
        ScramMechanism.SCRAM_SHA_256
    ]

    code, out, _ = run("users", "delete", "--data-dir", data, "--entity-name", "alice")
    assert code == 0 and "Deleted SCRAM credentials of user alice." in out
    assert DurableCredentialStore(tmp_path).users() == {}
    code, _, err = run(
        "users", "describe", "--data-dir", data, "--entity-name", "alice"
    )
    assert code == 1
    assert (
        "RESOURCE_NOT_FOUND: Attempt to describe a user credential that does not exist: alice"
        in err
    )


@pytest.mark.parametrize(
    "add_config,problem",
    [
        ("SCRAM-SHA-1=[password=x]", "unknown SCRAM mechanism 'SCRAM-SHA-1'"),
        (
            "SCRAM-SHA-512=[iterations=100,password=x]",
            "iterations must be from 4096 to 16384",
        ),
        (
            "SCRAM-SHA-512=[iterations=99999,password=x]",
            "iterations must be from 4096 to 16384",
        ),
        ("SCRAM-SHA-512=[iterations=8192]", "password is required"),
        (
            "SCRAM-SHA-512=password=x",
            "expected SCRAM-SHA-512=[iterations=N,password=...]",
        ),
        ("SCRAM-SHA-512=[password=x,y-is-secret]", "a password cannot contain ','"),
        ("SCRAM-SHA-512=[password=x", "unbalanced '['"),
        (
            "SCRAM-SHA-512=[password=a],SCRAM-SHA-512=[password=b]",
            "SCRAM-SHA-512 is given twice",
        ),
    ],
)
def test_bad_add_config_is_a_usage_error(
    tmp_path: Path, add_config: str, problem: str
) -> None:
    code, _, err = run(
        "users",
        "alter",
        "--data-dir",
        str(tmp_path),
        "--entity-name",
        "bob",
        "--add-config",
        add_config,
    )
    assert code == 2
    assert problem in err
    assert "y-is-secret" not in err
    assert DurableCredentialStore(tmp_path).users() == {}


def test_deleting_what_does_not_exist_gets_kafkas_error(tmp_path: Path) -> None:
    code, _, err = run(
        "users",
        "alter",
        "--data-dir",
        str(tmp_path),
        "--entity-name",
        "carol",
        "--delete-config",
        "SCRAM-SHA-256",
    )
    assert code == 1
    assert (
        "RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist"
        in err
    )
    code, _, err = run(
        "users", "alter", "--data-dir", str(tmp_path), "--entity-name", "carol"
    )
    assert code == 2 and "give --add-config and/or --delete-config" in err
