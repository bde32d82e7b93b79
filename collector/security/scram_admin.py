"""Kafka's rules for altering and describing SCRAM credentials, shared by the wire APIs
(AlterUserScramCredentials 51, DescribeUserScramCredentials 50) and ``ktc users``.

Ported from Kafka's ``ScramControlManager.alterCredentials`` and ``ScramImage.describe``:

| situation                                       | error                      | message |
|-------------------------------------------------|----------------------------|---------|
| a user named twice in one alteration (deletions | DUPLICATE_RESOURCE (92)    | A user credential cannot be altered twice in the same request |
| twice, or a deletion and an upsertion)          |                            |         |
| empty user name                                 | UNACCEPTABLE_CREDENTIAL (93)| Username must not be empty |
| mechanism id not 1 or 2                         | UNSUPPORTED_SASL_MECHANISM (33) | Unknown SCRAM mechanism |
| iterations < 4096 / > 16384                     | UNACCEPTABLE_CREDENTIAL (93)| Too few iterations / Too many iterations |
| deleting a credential that does not exist       | RESOURCE_NOT_FOUND (91)    | Attempt to delete a user credential that does not exist |
| describing a user twice                         | DUPLICATE_RESOURCE (92)    | Cannot describe SCRAM credentials for the same user twice in a single request: <user> |
| describing a user without credentials           | RESOURCE_NOT_FOUND (91)    | Attempt to describe a user credential that does not exist: <user> |

An alteration is atomic, as the controller's ``ControllerResult.atomicOf``: the accepted
changes of one request are written together, one file replacement. Results come in
Kafka's order (accepted deletions, accepted upsertions, then the failures), each group
in request order (Kafka's HashMap order is unspecified).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collector.security.credentials import (
    CredentialStore,
    ScramCredential,
    ScramMechanism,
    scram_credential_from_salted_password,
)
from proto.errors import Errors

__all__ = [
    "CredentialDeletion",
    "CredentialUpsertion",
    "DescribeResult",
    "UserResult",
    "alter_credentials",
    "describe_credentials",
]

_ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
_DESCRIBED_TWICE = (
    "Cannot describe SCRAM credentials for the same user twice in a single request: "
)
_NOT_DESCRIBED = "Attempt to describe a user credential that does not exist: "


@dataclass(frozen=True, slots=True)
class CredentialDeletion:
    user: str
    mechanism_type: int  # Kafka's wire id: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512


@dataclass(frozen=True, slots=True)
class CredentialUpsertion:
    user: str
    mechanism_type: int
    iterations: int
    salt: bytes
    salted_password: bytes = (
        b""  # the client's Hi(password, salt, i), never the password
    )

    def __repr__(self) -> str:  # the salted password is as good as the password
        return (
            f"CredentialUpsertion(user={self.user!r}, mechanism_type={self.mechanism_type}, "
            f"iterations={self.iterations})"
        )


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error: Errors
    message: str | None


@dataclass(frozen=True, slots=True)
class DescribeResult:
    user: str
    error: Errors
    message: str | None
    credentials: tuple[tuple[ScramMechanism, int], ...]  # (mechanism, iterations)


def _check_user_and_mechanism(
    user: str, mechanism: ScramMechanism | None
) -> tuple[Errors, str] | None:
    if not user:
        return Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism is None:
        return Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _check_upsertion(upsertion: CredentialUpsertion) -> tuple[Errors, str] | None:
    mechanism = ScramMechanism.from_type_id(upsertion.mechanism_type)
    error = _check_user_and_mechanism(upsertion.user, mechanism)
    if error is not None or mechanism is None:
        return error
    if upsertion.iterations < mechanism.min_iterations:
        return Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if upsertion.iterations > mechanism.max_iterations:
        return Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


def alter_credentials(
    store: CredentialStore,
    deletions: Sequence[CredentialDeletion],
    upsertions: Sequence[CredentialUpsertion],
) -> list[UserResult]:
    """Apply one AlterUserScramCredentials request to ``store``; a result per user."""
    with store.lock:  # one read-modify-write against concurrent alterations
        current = store.users()
        to_delete: dict[str, CredentialDeletion] = {}
        to_upsert: dict[str, CredentialUpsertion] = {}
        errors: dict[str, tuple[Errors, str]] = {}
        for deletion in deletions:
            if deletion.user in errors:
                continue
            if to_delete.pop(deletion.user, None) is not None:
                errors[deletion.user] = (Errors.DUPLICATE_RESOURCE, _ALTERED_TWICE)
                continue
            mechanism = ScramMechanism.from_type_id(deletion.mechanism_type)
            error = _check_user_and_mechanism(deletion.user, mechanism)
            if error is None and mechanism not in current.get(deletion.user, {}):
                error = (
                    Errors.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
            if error is not None:
                errors[deletion.user] = error
            else:
                to_delete[deletion.user] = deletion
        for upsertion in upsertions:
            if upsertion.user in errors:
                continue
            if (
                to_delete.pop(upsertion.user, None) is not None
                or to_upsert.pop(upsertion.user, None) is not None
            ):
                errors[upsertion.user] = (Errors.DUPLICATE_RESOURCE, _ALTERED_TWICE)
                continue
            error = _check_upsertion(upsertion)
            if error is not None:
                errors[upsertion.user] = error
            else:
                to_upsert[upsertion.user] = upsertion
        if to_delete or to_upsert:
            users = {user: dict(creds) for user, creds in current.items()}
            for deletion in to_delete.values():
                users[deletion.user].pop(_mechanism(deletion.mechanism_type), None)
            for upsertion in to_upsert.values():
                users.setdefault(upsertion.user, {})[
                    _mechanism(upsertion.mechanism_type)
                ] = _credential(upsertion)
            store.write(users)
    results = [UserResult(user, Errors.NONE, None) for user in to_delete]
    results += [UserResult(user, Errors.NONE, None) for user in to_upsert]
    results += [
        UserResult(user, code, message) for user, (code, message) in errors.items()
    ]
    return results


def _mechanism(type_id: int) -> ScramMechanism:
    mechanism = ScramMechanism.from_type_id(type_id)
    assert mechanism is not None  # validated before
    return mechanism


def _credential(upsertion: CredentialUpsertion) -> ScramCredential:
    return scram_credential_from_salted_password(
        _mechanism(upsertion.mechanism_type),
        upsertion.salted_password,
        upsertion.salt,
        upsertion.iterations,
    )


def describe_credentials(
    store: CredentialStore, users: Sequence[str] | None
) -> list[DescribeResult]:
    """DescribeUserScramCredentials: the named users (None or empty: every user)."""
    current = store.users()
    named: dict[str, bool] = {}  # user -> named twice
    if not users:
        named = dict.fromkeys(current, False)
    else:
        for user in users:
            named[user] = user in named
    results = []
    for user, twice in named.items():
        if twice:
            results.append(
                DescribeResult(
                    user, Errors.DUPLICATE_RESOURCE, _DESCRIBED_TWICE + user, ()
                )
            )
            continue
        creds = current.get(user, {})
        if not creds:
            results.append(
                DescribeResult(
                    user, Errors.RESOURCE_NOT_FOUND, _NOT_DESCRIBED + user, ()
                )
            )
            continue
        infos = tuple(
            (mechanism, creds[mechanism].iterations)
            for mechanism in ScramMechanism
            if mechanism in creds
        )
        results.append(DescribeResult(user, Errors.NONE, None, infos))
    return results
