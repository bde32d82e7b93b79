"""OAUTHBEARER access tokens checked as Kafka's broker checks them (``BrokerJwtValidator``
behind ``OAuthBearerValidatorCallbackHandler``), with PyJWT over ``cryptography``.

| check                 | rule (Kafka's, jose4j's ``JwtConsumer``)                          |
|-----------------------|-------------------------------------------------------------------|
| form                  | three base64url parts (RFC 7515 compact JWS)                     |
| signature             | by the JWKS key named by the header's ``kid``, with that key's   |
|                       | algorithm only (never ``none``, never an algorithm the token     |
|                       | picks for a key of another type)                                 |
| ``exp``               | required; refused once now >= exp + clock skew                    |
| ``iat``               | required                                                         |
| ``nbf``               | when present, refused while now < nbf - clock skew               |
| ``iss``               | equal to ``sasl.oauthbearer.expected.issuer`` when that is set   |
| ``aud``               | one of ``sasl.oauthbearer.expected.audience`` when that is set   |
| the subject claim     | ``sasl.oauthbearer.sub.claim.name`` (``sub``): a non-blank string,|
|                       | the principal's name                                              |
| the scope claim       | ``sasl.oauthbearer.scope.claim.name`` (``scope``): a string or a  |
|                       | list of strings, kept as the token's scopes                      |

The time checks use the injected clock's wall time (PyJWT's own time checks, which read
the system clock, are off), so tests run on a fake clock.  A refusal is an
:class:`InvalidToken` whose message is for the server's log; the client is only told
``{"status":"invalid_token"}``, as Kafka does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any

import jwt

from collector.security.jwks import JwksSource

__all__ = [
    "DEFAULT_CLOCK_SKEW_SECONDS",
    "InvalidToken",
    "JwtValidator",
    "OAuthBearerToken",
]

DEFAULT_CLOCK_SKEW_SECONDS = (
    30  # SaslConfigs.DEFAULT_SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS
)


class InvalidToken(Exception):
    """The token is refused (the message names why, never the token)."""


@dataclasses.dataclass(frozen=True, slots=True)
class OAuthBearerToken:
    """Kafka's ``OAuthBearerToken``: what a valid token grants."""

    value: str = dataclasses.field(repr=False)
    scopes: frozenset[str]
    lifetime_ms: int  # the expiry, wall-clock ms since the epoch
    principal_name: str
    start_time_ms: int | None  # iat, wall-clock ms


class JwtValidator:
    """Validates compact JWS access tokens against one key set and the expected claims."""

    def __init__(
        self,
        keys: JwksSource,
        wall_ms: Callable[[], int],
        *,
        expected_issuer: str | None = None,
        expected_audiences: Collection[str] = (),
        sub_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        clock_skew_seconds: int = DEFAULT_CLOCK_SKEW_SECONDS,
    ) -> None:
        self._keys = keys
        self._wall_ms = wall_ms
        self._issuer = expected_issuer or None
        self._audiences = frozenset(expected_audiences)
        self._sub_claim = sub_claim_name
        self._scope_claim = scope_claim_name
        self._skew_ms = clock_skew_seconds * 1000

    def validate(self, access_token: str) -> OAuthBearerToken:
        if access_token.count(".") != 2:
            raise InvalidToken(
                f"Malformed JWT provided; expected three sections (header, payload, and "
                f"signature), but {access_token.count('.') + 1} were found"
            )
        claims = self._verified_claims(access_token)
        now_ms = self._wall_ms()
        exp_ms = _time_claim(claims, "exp", required=True)
        iat_ms = _time_claim(claims, "iat", required=True)
        nbf_ms = _time_claim(claims, "nbf", required=False)
        assert exp_ms is not None
        if now_ms >= exp_ms + self._skew_ms:
            raise InvalidToken(
                f"The JWT is no longer valid - the evaluation time {now_ms // 1000} is on or "
                f"after the Expiration Time (exp={exp_ms // 1000}) claim value (even when "
                f"providing {self._skew_ms // 1000} seconds of leeway to account for clock skew)."
            )
        if nbf_ms is not None and now_ms + self._skew_ms < nbf_ms:
            raise InvalidToken(
                f"The JWT is not yet valid as the evaluation time {now_ms // 1000} is before the "
                f"Not Before (nbf={nbf_ms // 1000}) claim time"
            )
        subject = claims.get(self._sub_claim)
        if not isinstance(subject, str) or not subject.strip():
            raise InvalidToken(f"{self._sub_claim} value must be a non-blank string")
        return OAuthBearerToken(
            value=access_token,
            scopes=_scopes(claims.get(self._scope_claim), self._scope_claim),
            lifetime_ms=exp_ms,
            principal_name=subject.strip(),
            start_time_ms=iat_ms,
        )

    def _verified_claims(self, access_token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(access_token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"Could not parse the JWT header: {exc}") from None
        kid = header.get("kid")
        key = self._keys.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise InvalidToken(
                f"Unable to find a suitable verification key for JWS with kid {kid!r} in "
                f"{self._keys.url}"
            )
        options = {
            # Time is checked above on the injected clock; presence of exp and iat too.
            "verify_exp": False,
            "verify_iat": False,
            "verify_nbf": False,
            "verify_aud": bool(self._audiences),
            "verify_iss": self._issuer is not None,
            "verify_signature": True,
        }
        try:
            claims = jwt.decode(
                access_token,
                key=key,
                algorithms=[key.algorithm_name],
                audience=list(self._audiences) or None,
                issuer=self._issuer,
                options=options,  # type: ignore[arg-type]
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"Could not validate the access token: {exc}") from None
        if not isinstance(claims, dict):
            raise InvalidToken("the JWT payload is not a JSON object")
        return claims


def _time_claim(claims: dict[str, Any], name: str, *, required: bool) -> int | None:
    """A NumericDate claim in ms (ClaimValidationUtils: present when required, a number)."""
    value = claims.get(name)
    if value is None:
        if required:
            raise InvalidToken(f"No {name} claim present.")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"The value of the '{name}' claim is not the expected type")
    return int(value * 1000)


def _scopes(raw: object, claim: str) -> frozenset[str]:
    """ClaimValidationUtils.validateScopes: a string is one scope, a list its strings."""
    if raw is None:
        return frozenset()
    items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    scopes = set()
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise InvalidToken(f"{claim} value must be non-blank strings")
        scopes.add(item.strip())
    return frozenset(scopes)
