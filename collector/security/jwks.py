"""The JSON Web Key Set that OAUTHBEARER tokens are checked against, as Kafka's
``VerificationKeyResolverFactory`` reads ``sasl.oauthbearer.jwks.endpoint.url``: a ``file:``
URL read from disk, an ``http(s):`` URL fetched, both again every
``sasl.oauthbearer.jwks.endpoint.refresh.ms``.

| call          | does                                                                   |
|---------------|------------------------------------------------------------------------|
| ``load()``    | read or fetch the set now (blocking: at start, or in a worker thread) |
|               | and put it in force; a failure raises and keeps the last good set     |
| ``key(kid)``  | the verification key of a token's ``kid`` (None: no such key)         |
| ``refresh_forever(source, clock, ms)`` | ``load`` every ``ms`` in a worker thread (never on  |
|               | the event loop); a failed load is logged and the last good set kept   |

Bounded: a set larger than :data:`MAX_JWKS_BYTES` or holding more than :data:`MAX_KEYS`
keys is refused, a fetch times out after :data:`FETCH_TIMEOUT_S`.  Keys PyJWT cannot use
(an unknown ``kty``, an unsupported ``alg``) are skipped as Kafka's jose4j skips them; keys
whose ``use`` is not ``sig`` are never used to verify.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jwt

if TYPE_CHECKING:
    from clock import Clock

__all__ = [
    "FETCH_TIMEOUT_S",
    "MAX_JWKS_BYTES",
    "MAX_KEYS",
    "JwksError",
    "JwksSource",
    "check_jwks_url",
    "refresh_forever",
]

log = logging.getLogger(__name__)

MAX_JWKS_BYTES = (
    1 << 20
)  # a provider's set is a few KiB; a MiB is far more than any needs
MAX_KEYS = 256
FETCH_TIMEOUT_S = 10.0
_SCHEMES = ("file", "http", "https")


class JwksError(Exception):
    """The key set could not be read, fetched or parsed (the message names the URL)."""


def check_jwks_url(url: str) -> str:
    """Kafka's ``ConfigurationUtils.validateUrl``: a URL with an http, https or file scheme
    (ValueError otherwise, in Kafka's words)."""
    parsed = urllib.parse.urlparse(url.strip())
    scheme = parsed.scheme.lower()
    if not scheme:
        raise ValueError(f"contains a URL ({url}) that is missing the protocol")
    if scheme not in _SCHEMES:
        raise ValueError(
            f'contains a URL ({url}) that contains an invalid protocol ({scheme}); only "http", '
            '"https", and "file" protocol are supported'
        )
    if scheme == "file" and not parsed.path:
        raise ValueError(f"contains a URL ({url}) that names no file")
    return url.strip()


class JwksSource:
    """The verification keys of one ``sasl.oauthbearer.jwks.endpoint.url``; ``load`` may run
    in a worker thread while connections ask ``key`` on the event loop."""

    def __init__(self, url: str) -> None:
        self.url = check_jwks_url(url)
        self._keys: Mapping[str | None, Any] = {}
        self._lock = threading.Lock()
        self.loads = 0  # successful loads (tests, logs)
        self.failed_loads = 0

    def key(self, kid: str | None) -> Any | None:
        """The public key for ``kid``; a token without ``kid`` is matched only when the set
        holds exactly one key (jose4j's resolver does the same)."""
        with self._lock:
            keys = self._keys
        if kid is None:
            return next(iter(keys.values())) if len(keys) == 1 else None
        return keys.get(kid)

    def load(self) -> int:
        """Read the set and put it in force; returns how many keys it holds."""
        try:
            keys = _parse(self._read(), self.url)
        except JwksError:
            self.failed_loads += 1
            raise
        with self._lock:
            self._keys = keys
        self.loads += 1
        return len(keys)

    def _read(self) -> bytes:
        parsed = urllib.parse.urlparse(self.url)
        try:
            if parsed.scheme.lower() == "file":
                path = Path(urllib.request.url2pathname(parsed.path))
                with path.open("rb") as handle:
                    body = handle.read(MAX_JWKS_BYTES + 1)
            else:
                request = urllib.request.Request(
                    self.url, headers={"Accept": "application/json"}
                )
                # The scheme is http or https (checked when the source was made).
                with urllib.request.urlopen(
                    request, timeout=FETCH_TIMEOUT_S
                ) as response:
                    body = response.read(MAX_JWKS_BYTES + 1)
        except OSError as exc:
            raise JwksError(f"{self.url}: cannot read the JWKS: {exc}") from None
        if len(body) > MAX_JWKS_BYTES:
            raise JwksError(
                f"{self.url}: the JWKS is larger than {MAX_JWKS_BYTES} bytes"
            )
        return body


def _parse(body: bytes, url: str) -> dict[str | None, Any]:
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise JwksError(f"{url}: not a JSON document: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwksError(f'{url}: not a JSON Web Key Set (no "keys" list)')
    entries = document["keys"]
    if len(entries) > MAX_KEYS:
        raise JwksError(f"{url}: more than {MAX_KEYS} keys")
    keys: dict[str | None, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWKError, jwt.InvalidKeyError):
            continue  # a key type or algorithm PyJWT does not support
        keys[entry.get("kid")] = key
    if not keys:
        raise JwksError(f"{url}: the JWKS holds no usable signing key")
    return keys


async def refresh_forever(source: JwksSource, clock: Clock, refresh_ms: int) -> None:
    """Kafka's ``RefreshingHttpsJwks``: read the set again every ``refresh_ms`` (a worker
    thread does the blocking read); until a read succeeds the last good keys stay in force."""
    while True:
        await clock.sleep(refresh_ms)
        try:
            count = await asyncio.to_thread(source.load)
        except JwksError as exc:
            log.warning("%s; keeping the last good keys", exc)
        else:
            log.debug("JWKS %s reloaded: %d keys", source.url, count)
