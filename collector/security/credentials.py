"""SCRAM credentials (RFC 5802 / 7677) and the store SASL checks them against.

A credential is what Kafka's ``ScramFormatter`` derives from a password, never the
password: ``SaltedPassword = PBKDF2-HMAC(H, password, salt, iterations)``,
``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``. The password is taken as its UTF-8
bytes, as Kafka does (no SASLprep). PLAIN users are checked against the same salted
credentials: the password is derived again with the stored salt and iterations of the
strongest stored mechanism and the stored keys compared in constant time.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "CredentialStore",
    "ScramCredential",
    "ScramMechanism",
    "UserCredentials",
    "new_salt",
    "scram_credential_from_password",
    "scram_credential_from_salted_password",
    "salted_password",
]


class ScramMechanism(enum.Enum):
    """The SCRAM mechanisms, with Kafka's ids (``org.apache.kafka.clients.admin.ScramMechanism``)
    and iteration bounds (``...security.scram.internals.ScramMechanism``)."""

    #          mechanism name,  type id, hash name
    SCRAM_SHA_256 = ("SCRAM-SHA-256", 1, "sha256")
    SCRAM_SHA_512 = ("SCRAM-SHA-512", 2, "sha512")

    def __init__(self, mechanism_name: str, type_id: int, hash_name: str) -> None:
        self.mechanism_name = mechanism_name
        self.type_id = type_id
        self.hash_name = hash_name

    # Kafka: minIterations 4096 for both; the controller refuses more than 16384
    # (ScramControlManager, UNACCEPTABLE_CREDENTIAL).
    @property
    def min_iterations(self) -> int:
        return 4096

    @property
    def max_iterations(self) -> int:
        return 16384

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism | None:
        """``SCRAM-SHA-512`` -> SCRAM_SHA_512; None for any other name."""
        return _BY_NAME.get(name)

    @classmethod
    def from_type_id(cls, type_id: int) -> ScramMechanism | None:
        """Kafka's wire id (1, 2) -> mechanism; None for 0 (UNKNOWN) or any other."""
        return _BY_TYPE.get(type_id)


_BY_NAME = {m.mechanism_name: m for m in ScramMechanism}
_BY_TYPE = {m.type_id: m for m in ScramMechanism}
# The strongest first: PLAIN verifies against the first one a user has.
_STRENGTH_ORDER = (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps for one user and mechanism (RFC 5802 section 3)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys are secrets-equivalent: never in a log line
        return f"ScramCredential(iterations={self.iterations}, salt=<{len(self.salt)} bytes>)"


def new_salt() -> bytes:
    """A fresh random salt (32 bytes from the operating system's CSPRNG)."""
    return secrets.token_bytes(32)


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """RFC 5802 ``Hi(Normalize(password), salt, i)``: PBKDF2 with HMAC-H."""
    return hashlib.pbkdf2_hmac(
        mechanism.hash_name, password.encode("utf-8"), salt, iterations
    )


def scram_credential_from_salted_password(
    mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The stored credential from a SaltedPassword (what AlterUserScramCredentials carries)."""
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    return ScramCredential(
        salt=bytes(salt),
        stored_key=hashlib.new(mechanism.hash_name, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", mechanism.hash_name),
        iterations=iterations,
    )


def scram_credential_from_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    """The stored credential for a password (RFC 5802 section 3)."""
    return scram_credential_from_salted_password(
        mechanism,
        salted_password(mechanism, password, salt, iterations),
        salt,
        iterations,
    )


# A user's credentials: mechanism -> credential (at most one per mechanism, as Kafka).
UserCredentials = Mapping[ScramMechanism, ScramCredential]

# Compared against when PLAIN names an unknown user, so the answer takes as long as for a
# known one (same mechanism, same default iterations).
_DUMMY_SALT = secrets.token_bytes(32)
_DUMMY = scram_credential_from_password(
    ScramMechanism.SCRAM_SHA_512, secrets.token_hex(16), _DUMMY_SALT, 4096
)


class CredentialStore:
    """User -> mechanism -> ScramCredential, read by SASL on every authentication.

    Reads are lock-free (one immutable mapping replaced whole); ``write`` installs a new
    set (an alteration), ``replace`` too (what a reload of the durable file calls). The
    durable, hot-reloaded store is ``collector.security.credentials_file.
    DurableCredentialStore``, a subclass.
    """

    def __init__(self, users: Mapping[str, UserCredentials] | None = None) -> None:
        self.lock = threading.RLock()  # held for a read-modify-write (alterations)
        self._users: Mapping[str, UserCredentials] = MappingProxyType({})
        self.version = 0
        self.replace(users or {})

    def replace(self, users: Mapping[str, UserCredentials]) -> None:
        with self.lock:
            self._users = MappingProxyType(
                {
                    user: MappingProxyType(dict(creds))
                    for user, creds in users.items()
                    if creds
                }
            )
            self.version += 1

    def write(self, users: Mapping[str, UserCredentials]) -> None:
        """Put ``users`` in force (the durable store persists them first)."""
        self.replace(users)

    def users(self) -> Mapping[str, UserCredentials]:
        """Every user with at least one credential (an immutable view)."""
        return self._users

    def scram_credential(
        self, user: str, mechanism: ScramMechanism
    ) -> ScramCredential | None:
        """The user's credential for the mechanism, None if there is none."""
        creds = self._users.get(user)
        return None if creds is None else creds.get(mechanism)

    def verify_plain(self, user: str, password: str) -> bool:
        """PLAIN (RFC 4616): does ``password`` derive the user's stored keys?

        Derived with the salt and iterations of the user's strongest mechanism; an unknown
        user is compared against a dummy credential so it costs the same time.
        """
        creds = self._users.get(user)
        mechanism, expected, known = ScramMechanism.SCRAM_SHA_512, _DUMMY, False
        if creds:
            for candidate in _STRENGTH_ORDER:
                if candidate in creds:
                    mechanism, expected, known = candidate, creds[candidate], True
                    break
        derived = scram_credential_from_password(
            mechanism, password, expected.salt, expected.iterations
        )
        # Both keys compared, always, so the time does not tell which one differed.
        stored_ok = hmac.compare_digest(derived.stored_key, expected.stored_key)
        server_ok = hmac.compare_digest(derived.server_key, expected.server_key)
        return known and stored_ok and server_ok
