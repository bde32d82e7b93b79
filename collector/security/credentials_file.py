"""The durable SCRAM credential store: ``<data-dir>/config/scram-credentials.yaml``.

Next to the subscriptions and quotas (``subscriptions/store.py``) and kept the same way:
written atomically (temp file, fsync, rename, directory fsync), hand-editable, hot-reloaded
when the directory changes or on SIGHUP, a file that does not validate rejected whole
(at start-up an error, on reload the last good credentials stay in force). It never holds
a password, only what Kafka's controller keeps (``UserScramCredentialRecord``)::

    users:
      alice:
        SCRAM-SHA-512:
          iterations: 8192
          salt: <base64>
          stored_key: <base64>
          server_key: <base64>
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from collector.security.credentials import (
    CredentialStore,
    ScramCredential,
    ScramMechanism,
    UserCredentials,
)
from subscriptions.config_file import ConfigDocument, Located
from subscriptions.durable_store import DurableDocumentStore

__all__ = [
    "SCRAM_CREDENTIALS_FILE",
    "DurableCredentialStore",
    "ScramCredentialsDocument",
]

SCRAM_CREDENTIALS_FILE = "scram-credentials.yaml"

Users = dict[str, dict[ScramMechanism, ScramCredential]]

_FIELDS = ("iterations", "salt", "stored_key", "server_key")


class ScramCredentialsDocument(ConfigDocument[Users]):
    filename = SCRAM_CREDENTIALS_FILE
    top_key = "users"
    header = (
        "# SCRAM credentials: salted keys only, never a password. Managed with\n"
        "# `ktc users` or kafka-configs.sh --entity-type users; reloaded on change or SIGHUP.\n"
    )

    def empty(self) -> Users:
        return {}

    def parse_entries(self, entries: Mapping[Any, Located]) -> Users:
        users: Users = {}
        for user, located in entries.items():
            if not isinstance(user, str) or not user:
                raise self.fail(
                    located.line, str(user), "a user name must be a non-empty string"
                )
            body = located.value
            if body is None:
                continue
            if not isinstance(body, dict):
                raise self.fail(
                    located.line, user, "expected a mapping of SCRAM mechanisms"
                )
            creds: dict[ScramMechanism, ScramCredential] = {}
            for name, value in body.items():
                mechanism = ScramMechanism.from_name(str(name))
                key = f"{user}.{name}"
                if mechanism is None:
                    raise self.fail(
                        value.line,
                        key,
                        "unknown SCRAM mechanism (SCRAM-SHA-256 or SCRAM-SHA-512)",
                    )
                creds[mechanism] = self._credential(mechanism, value, key)
            if creds:
                users[user] = creds
        return users

    def _credential(
        self, mechanism: ScramMechanism, located: Located, key: str
    ) -> ScramCredential:
        body = located.value
        if not isinstance(body, dict) or set(body) != set(_FIELDS):
            raise self.fail(located.line, key, "expected exactly " + ", ".join(_FIELDS))
        iterations = body["iterations"].value
        if (
            not isinstance(iterations, int)
            or isinstance(iterations, bool)
            or not mechanism.min_iterations <= iterations <= mechanism.max_iterations
        ):
            raise self.fail(
                body["iterations"].line,
                f"{key}.iterations",
                f"an integer from {mechanism.min_iterations} to "
                f"{mechanism.max_iterations}",
            )
        decoded: dict[str, bytes] = {}
        for field_name in ("salt", "stored_key", "server_key"):
            text = body[field_name].value
            try:
                decoded[field_name] = base64.b64decode(str(text), validate=True)
            except (binascii.Error, ValueError):
                raise self.fail(
                    body[field_name].line, f"{key}.{field_name}", "not valid base64"
                ) from None
            if (
                field_name != "salt"
                and len(decoded[field_name]) != mechanism.digest_size
            ):
                raise self.fail(
                    body[field_name].line,
                    f"{key}.{field_name}",
                    f"expected {mechanism.digest_size} bytes",
                )
        if not decoded["salt"]:
            raise self.fail(
                body["salt"].line, f"{key}.salt", "the salt must not be empty"
            )
        return ScramCredential(
            salt=decoded["salt"],
            stored_key=decoded["stored_key"],
            server_key=decoded["server_key"],
            iterations=iterations,
        )

    def render(self, state: Users) -> dict[str, Any]:
        def encode(data: bytes) -> str:
            return base64.b64encode(data).decode("ascii")

        return {
            user: {
                mechanism.mechanism_name: {
                    "iterations": cred.iterations,
                    "salt": encode(cred.salt),
                    "stored_key": encode(cred.stored_key),
                    "server_key": encode(cred.server_key),
                }
                for mechanism, cred in sorted(
                    creds.items(), key=lambda item: item[0].type_id
                )
            }
            for user, creds in state.items()
        }


class DurableCredentialStore(CredentialStore, DurableDocumentStore[Users]):
    """The credential store backed by ``<data_dir>/config/scram-credentials.yaml``.

    The constructor loads the file (raising ConfigFileError if it is invalid), so a bad
    file fails start-up and no write can replace a file that was never read.
    """

    what = "credentials"

    def __init__(self, data_dir: str | Path) -> None:
        DurableDocumentStore.__init__(self, data_dir, ScramCredentialsDocument)
        CredentialStore.__init__(self, self.read_document())

    def reload(self) -> bool:
        """Re-read the file; True if the credentials changed (DurableDocumentStore.reload)."""
        with self.lock:
            return DurableDocumentStore.reload(self)

    def in_force(self, state: Users) -> bool:
        return state == _plain(self.users())

    def put_in_force(self, state: Users) -> None:
        self.replace(state)

    def described(self) -> str:
        return f"{len(self.users())} users (version {self.version})"

    def write(self, users: Mapping[str, UserCredentials]) -> None:
        """Persist ``users`` (atomically, durably), then put them in force."""
        with self.lock:
            self.save_document(
                {user: dict(creds) for user, creds in users.items() if creds}
            )
            self.replace(users)


def _plain(users: Mapping[str, UserCredentials]) -> Users:
    return {user: dict(creds) for user, creds in users.items()}
