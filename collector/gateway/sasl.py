"""The principal of a SASL exchange the gateway forwards: ``User:<name>``, never the secret.

SASL passes through the gateway unchanged on the client's own upstream connection; the
gateway only reads who the client says it is, for quota entities and the telemetry context.
Kafka's clients (Java since 1.0, librdkafka) send SaslHandshake v1 and then every token in a
SaslAuthenticate request (KIP-152); the first token names the user:

* PLAIN (RFC 4616, Kafka's ``PlainSaslServer``): ``authzid NUL authcid NUL passwd``, exactly
  three tokens; the principal is the authcid. An authzid that is neither empty nor the
  authcid is refused by Kafka, and gives no principal here.
* SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, Kafka's ``ScramMessages.ClientFirstMessage``):
  ``n,[a=authzid],n=saslname,r=nonce[,extensions]``; Kafka accepts only the ``n`` gs2 flag
  (no channel binding) and ASCII names, with ``=2C`` for "," and ``=3D`` for "=". The same
  authzid rule. With the ``tokenauth=true`` extension the name is a delegation-token id and
  Kafka's principal is the token's owner, which only the broker knows: no principal here.

Other mechanisms (GSSAPI, OAUTHBEARER) give no principal. A SaslHandshake v0 client sends its
tokens as bare size-prefixed frames without a request header (pre-KIP-152); no current
client does, so the gateway does not parse them (``principal_from_token`` would read such a
token just as well).

Nothing here returns, keeps or puts in an exception message the password or any other byte
of a token but the name it returns.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Mapping
from typing import Any

from proto.api_keys import ApiKeys
from proto.connection import RequestFrame
from proto.errors import KafkaError
from proto.messages import sasl_authenticate_request, sasl_handshake_request
from proto.primitives import INT16, BytesLike, MalformedError

__all__ = [
    "SCRAM_MECHANISMS",
    "SaslCapture",
    "authenticate_bytes",
    "handshake_mechanism",
    "principal_from_token",
]

SCRAM_MECHANISMS = frozenset({"SCRAM-SHA-256", "SCRAM-SHA-512"})
_PLAIN = "PLAIN"

# ScramMessages.ClientFirstMessage's pattern: "n,(a=(?<authzid>SASLNAME))?,RESERVEDn=(?<saslname>
# SASLNAME),r=(?<nonce>PRINTABLE)(?<extensions>EXTENSIONS)" with SASLNAME = "(?:[\x01-\x7F&&
# [^=,]]|=2C|=3D)+", VALUE = "[\x01-\x7F&&[^,]]+", RESERVED = "(m=VALUE,)?", PRINTABLE =
# "[\x21-\x7E&&[^,]]+", EXTENSIONS = "(,[A-Za-z]+=VALUE)*".
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>[\x21-\x2B\x2D-\x7E]+)(?P<extensions>(?:,[A-Za-z]+={_VALUE})*)"
)


def _unescape(saslname: str) -> str:
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _plain_user(token: bytes) -> str | None:
    parts = token.decode("utf-8", "replace").split("\x00")
    if len(parts) != 3:
        return None
    authzid, authcid = parts[0], parts[1]
    if not authcid or (authzid and authzid != authcid):
        return None
    return authcid


def _scram_user(token: bytes) -> str | None:
    match = _CLIENT_FIRST.fullmatch(token.decode("utf-8", "replace"))
    if match is None:
        return None
    extensions = dict(
        item.split("=", 1) for item in match.group("extensions").split(",")[1:]
    )
    if extensions.get("tokenauth", "").lower() == "true":
        return (
            None  # a delegation token: the principal is its owner, known to the broker
        )
    user = _unescape(match.group("saslname"))  # ScramFormatter.username
    authzid = match.group(
        "authzid"
    )  # ScramSaslServer compares it as sent, unescaped not
    if authzid and authzid != user:
        return None
    return user


def principal_from_token(mechanism: str, token: BytesLike) -> str | None:
    """``User:<name>`` from the client's first SASL token, or None (another mechanism, a token
    Kafka would refuse, a delegation token)."""
    raw = bytes(token)
    if mechanism == _PLAIN:
        user = _plain_user(raw)
    elif mechanism in SCRAM_MECHANISMS:
        user = _scram_user(raw)
    else:
        return None
    return None if user is None else f"User:{user}"


def handshake_mechanism(frame: RequestFrame) -> str:
    """The mechanism of a SaslHandshake request (v0-1)."""
    message: sasl_handshake_request.SaslHandshakeRequest = _decode(
        frame, sasl_handshake_request.READERS
    )
    return message.mechanism


def authenticate_bytes(frame: RequestFrame) -> BytesLike:
    """The AuthBytes of a SaslAuthenticate request (v0-2), a view into the frame."""
    message: sasl_authenticate_request.SaslAuthenticateRequest = _decode(
        frame, sasl_authenticate_request.READERS
    )
    return message.auth_bytes


def _decode(
    frame: RequestFrame, readers: Mapping[int, Callable[[BytesLike, int], Any]]
) -> Any:
    reader = readers.get(frame.api_version)
    if reader is None:
        raise MalformedError(f"No schema for API {frame.api_key} v{frame.api_version}")
    try:
        message, _ = reader(memoryview(frame.raw), frame.header_size)
    except KafkaError:
        raise
    except (struct.error, IndexError, ValueError):  # no token bytes in the message
        raise MalformedError(f"Malformed SASL request v{frame.api_version}") from None
    return message


# SaslAuthenticate round trips of a successful exchange: PLAIN's one token; SCRAM's
# client-first (answered with the server-first) and client-final (the server-final).
_ROUNDS = {_PLAIN: 1, "SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2}


class SaslCapture:
    """Per client connection: feed it every SaslHandshake / SaslAuthenticate request and
    response; ``principal`` is the user the exchange names once it has not failed, and
    ``authenticated`` that user once the broker has accepted the whole exchange (PLAIN: its
    one SaslAuthenticate; SCRAM: the second, which carries the proof).

    ``authenticating`` is true while a PLAIN or SCRAM exchange still owes the broker a
    SaslAuthenticate request: a broker then takes any other request for a protocol error and
    closes the connection (``SaslServerAuthenticator``: "Unexpected Kafka request of type ...
    during SASL handshake"), so a gateway answering a request itself must too.

    >>> capture = SaslCapture()
    >>> capture.on_request(handshake_frame)          # doctest: +SKIP
    >>> capture.on_request(authenticate_frame)       # doctest: +SKIP  -> "User:alice"
    """

    __slots__ = (
        "_accepted",
        "_failed",
        "_sent",
        "authenticated",
        "mechanism",
        "principal",
    )

    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.authenticated: str | None = None
        self._sent = 0  # SaslAuthenticate requests of this exchange
        self._accepted = 0  # ... and the broker's answers without an error
        self._failed = (
            False  # the broker refused the exchange (and closes the connection)
        )

    @property
    def authenticating(self) -> bool:
        """A PLAIN or SCRAM exchange is under way (or was refused): only SASL requests may
        come now."""
        rounds = _ROUNDS.get(self.mechanism or "")
        return self._failed or (rounds is not None and self._sent < rounds)

    def on_request(self, frame: RequestFrame) -> str | None:
        """Reads a SaslHandshake (the mechanism) or the first SaslAuthenticate of an exchange
        (the principal); returns the principal when this request revealed it."""
        if frame.api_key == ApiKeys.SASL_HANDSHAKE:
            # A new exchange (or a re-authentication, KIP-368: the connection keeps the
            # principal it has until the new exchange succeeds).
            self.mechanism = handshake_mechanism(frame)
            self.principal = None
            self._sent = self._accepted = 0
            self._failed = False
            return None
        if frame.api_key != ApiKeys.SASL_AUTHENTICATE or self.mechanism is None:
            return None
        self._sent += 1
        if self._sent > 1:
            return (
                None  # later tokens of the exchange (SCRAM's client-final) name no one
            )
        self.principal = principal_from_token(self.mechanism, authenticate_bytes(frame))
        return self.principal

    def on_response(self, api_key: int, body: BytesLike) -> str | None:
        """A SaslAuthenticate or SaslHandshake response with an error ends the exchange
        without a principal (Kafka then closes the connection); the answer to the last
        SaslAuthenticate of a PLAIN or SCRAM exchange without one authenticates the
        principal, which it returns."""
        if api_key not in (ApiKeys.SASL_AUTHENTICATE, ApiKeys.SASL_HANDSHAKE):
            return None
        (error_code,) = INT16.unpack_from(
            body, 0
        )  # ErrorCode is the first field of both
        if error_code != 0:
            self.principal = None
            self._failed = True
            return None
        if api_key != ApiKeys.SASL_AUTHENTICATE or self.principal is None:
            return None
        self._accepted += 1
        if self._accepted != _ROUNDS.get(self.mechanism or ""):
            return None
        self.authenticated = self.principal
        return self.authenticated
