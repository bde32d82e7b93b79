"""SCRAM credentials: the RFC 7677 derivation, PLAIN checks against the salted store, the
durable file (never a password), its hot reload, and Kafka's alter/describe rules."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
from pathlib import Path

import pytest

from collector.security.credentials import (
    CredentialStore,
    ScramMechanism,
    new_salt,
    salted_password,
    scram_credential_from_password,
)
from collector.security.credentials_file import (
    SCRAM_CREDENTIALS_FILE,
    DurableCredentialStore,
)
from collector.security.scram_admin import (
    CredentialDeletion,
    CredentialUpsertion,
    UserResult,
    alter_credentials,
    describe_credentials,
)
from proto.errors import Errors
from subscriptions.config_file import ConfigFileError

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
SECRET = "pa55-w0rd-never-stored"


def upsert(
    user: str, mechanism: ScramMechanism, password: str = SECRET, iterations: int = 8192
) -> CredentialUpsertion:
    salt = new_salt()
    return CredentialUpsertion(
        user,
        mechanism.type_id,
        iterations,
        salt,
        salted_password(mechanism, password, salt, iterations),
    )


def test_kafka_mechanism_ids_and_bounds() -> None:
    assert [(m.mechanism_name, m.type_id) for m in ScramMechanism] == [
        ("SCRAM-SHA-256", 1),
        ("SCRAM-SHA-512", 2),
    ]
    assert ScramMechanism.from_type_id(0) is None
    assert ScramMechanism.from_name("SCRAM-SHA-1") is None
    assert (SHA512.min_iterations, SHA512.max_iterations) == (4096, 16384)


def test_rfc7677_exchange_verifies_with_the_stored_keys() -> None:
    # RFC 7677 section 3: user "user", password "pencil".
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = scram_credential_from_password(SHA256, "pencil", salt, 4096)
    auth_message = (
        b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client_signature = hmac.digest(cred.stored_key, auth_message, "sha256")
    client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
    assert hashlib.sha256(client_key).digest() == cred.stored_key
    server_signature = hmac.digest(cred.server_key, auth_message, "sha256")
    assert (
        base64.b64encode(server_signature)
        == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    )
    assert "pencil" not in repr(cred) and cred.stored_key.hex() not in repr(cred)


def test_plain_checks_the_strongest_salted_credential() -> None:
    weak = scram_credential_from_password(SHA256, "old-password", new_salt(), 4096)
    strong = scram_credential_from_password(SHA512, SECRET, new_salt(), 8192)
    store = CredentialStore({"alice": {SHA256: weak, SHA512: strong}})
    assert store.verify_plain("alice", SECRET)
    assert not store.verify_plain("alice", "old-password")  # SHA-512 is the one checked
    assert not store.verify_plain("alice", SECRET + "x")
    assert not store.verify_plain(
        "mallory", SECRET
    )  # unknown user: the dummy, never True
    store.replace({"bob": {SHA256: weak}})
    assert store.verify_plain("bob", "old-password")
    assert store.scram_credential("bob", SHA256) == weak
    assert store.scram_credential("bob", SHA512) is None
    assert store.scram_credential("alice", SHA512) is None


def test_durable_store_keeps_salted_keys_never_the_password(tmp_path: Path) -> None:
    store = DurableCredentialStore(tmp_path)
    results = alter_credentials(
        store, [], [upsert("alice", SHA512), upsert("bob", SHA256)]
    )
    assert results == [
        UserResult("alice", Errors.NONE, None),
        UserResult("bob", Errors.NONE, None),
    ]
    text = (tmp_path / "config" / SCRAM_CREDENTIALS_FILE).read_text()
    assert SECRET not in text
    assert base64.b64encode(SECRET.encode()).decode() not in text
    assert (
        "stored_key:" in text
        and "SCRAM-SHA-512:" in text
        and "iterations: 8192" in text
    )
    # Another process (the CLI, a restart) reads the same credentials back.
    again = DurableCredentialStore(tmp_path)
    assert again.users() == store.users()
    assert again.verify_plain("alice", SECRET) and again.verify_plain("bob", SECRET)
    assert not again.verify_plain("alice", "wrong")
    assert not list((tmp_path / "config").glob(".*tmp-*"))


def test_reload_applies_a_valid_file_and_keeps_the_last_good_one(
    tmp_path: Path,
) -> None:
    store = DurableCredentialStore(tmp_path)
    other = DurableCredentialStore(tmp_path)
    alter_credentials(other, [], [upsert("carol", SHA512)])
    assert store.scram_credential("carol", SHA512) is None
    assert store.reload() is True
    assert store.verify_plain("carol", SECRET)
    assert store.reload() is False
    store.path.write_text("users:\n  carol:\n    SCRAM-SHA-512: {iterations: 100}\n")
    assert store.reload() is False
    assert store.last_error is not None and "line 3" in store.last_error
    assert store.verify_plain("carol", SECRET)
    with pytest.raises(
        ConfigFileError, match="iterations, salt, stored_key, server_key"
    ):
        DurableCredentialStore(tmp_path)


@pytest.mark.parametrize(
    "body,problem",
    [
        ("users:\n  a:\n    SCRAM-SHA-1: {}\n", "unknown SCRAM mechanism"),
        (
            "users:\n  a:\n    SCRAM-SHA-256: {iterations: 4096, salt: '!!', stored_key: '', "
            "server_key: ''}\n",
            "not valid base64",
        ),
        (
            "users:\n  a:\n    SCRAM-SHA-256: {iterations: 4096, salt: YQ==, stored_key: YQ==, "
            "server_key: YQ==}\n",
            "expected 32 bytes",
        ),
        (
            "users:\n  a:\n    SCRAM-SHA-256: {iterations: 20000, salt: YQ==, stored_key: YQ==, "
            "server_key: YQ==}\n",
            "from 4096 to 16384",
        ),
    ],
)
def test_invalid_file_fails_start_with_line_and_key(
    tmp_path: Path, body: str, problem: str
) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / SCRAM_CREDENTIALS_FILE).write_text(body)
    with pytest.raises(ConfigFileError, match=problem):
        DurableCredentialStore(tmp_path)


async def test_watch_picks_up_a_change_made_by_another_writer(tmp_path: Path) -> None:
    store = DurableCredentialStore(tmp_path)
    changed, ready, stop = asyncio.Event(), asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        store.watch(changed.set, stop, debounce_ms=20, ready=ready)
    )
    await asyncio.wait_for(ready.wait(), 10)
    alter_credentials(DurableCredentialStore(tmp_path), [], [upsert("dave", SHA256)])
    await asyncio.wait_for(changed.wait(), 10)
    assert store.verify_plain("dave", SECRET)
    stop.set()
    await asyncio.wait_for(task, 10)


def test_alter_errors_follow_kafka(tmp_path: Path) -> None:
    store = DurableCredentialStore(tmp_path)
    alter_credentials(store, [], [upsert("alice", SHA256), upsert("twice", SHA256)])
    results = alter_credentials(
        store,
        [
            CredentialDeletion("alice", SHA512.type_id),  # no such credential
            CredentialDeletion("bob", 0),
            CredentialDeletion("", SHA256.type_id),
            CredentialDeletion("twice", SHA256.type_id),
        ],
        [
            upsert("twice", SHA512),
            upsert("few", SHA512, iterations=4095),
            upsert("many", SHA512, iterations=16385),
            upsert("ok", SHA512, iterations=4096),
        ],
    )
    assert results == [
        UserResult("ok", Errors.NONE, None),
        UserResult(
            "alice",
            Errors.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        ),
        UserResult("bob", Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        UserResult("", Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        UserResult(
            "twice",
            Errors.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        ),
        UserResult("few", Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        UserResult("many", Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
    ]
    assert set(store.users()) == {"alice", "ok", "twice"}  # nothing of "twice" changed
    # Deleting the last credential removes the user.
    assert alter_credentials(
        store, [CredentialDeletion("alice", SHA256.type_id)], []
    ) == [UserResult("alice", Errors.NONE, None)]
    assert set(DurableCredentialStore(tmp_path).users()) == {"ok", "twice"}


def test_describe_follows_kafka(tmp_path: Path) -> None:
    store = DurableCredentialStore(tmp_path)
    alter_credentials(store, [], [upsert("alice", SHA512, iterations=8192)])
    alter_credentials(
        store, [], [upsert("alice", SHA256, iterations=4096), upsert("bob", SHA256)]
    )
    everyone = describe_credentials(store, None)
    assert [(r.user, r.error, r.credentials) for r in everyone] == [
        ("alice", Errors.NONE, ((SHA256, 4096), (SHA512, 8192))),
        ("bob", Errors.NONE, ((SHA256, 8192),)),
    ]
    assert describe_credentials(store, []) == everyone
    named = describe_credentials(store, ["bob", "nobody", "alice", "alice"])
    assert [(r.user, r.error, r.message) for r in named] == [
        ("bob", Errors.NONE, None),
        (
            "nobody",
            Errors.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: nobody",
        ),
        (
            "alice",
            Errors.DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: alice",
        ),
    ]
