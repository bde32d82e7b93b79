"""Sans-IO Kafka connections: bytes in, request frames and messages out; messages in, bytes out.

No sockets, no asyncio, no clock: the collector's protocol adapter feeds ``receive_data`` with
whatever the transport read and writes what ``encode_response`` returns (the h11 model).

Framing (Kafka's ``NetworkReceive``): every request is an int32 size, then that many bytes of
header + body. A size prefix is validated as soon as its 4 bytes are buffered, before any of
its body is: negative, or over ``max_request_size`` (the broker's ``socket.request.max.bytes``,
default 104857600) -> ``FramingError``, and the connection must be closed.  Given per-API
limits (``proto.request_limits``), a request's size is also held against its API's limit as
soon as the api key after the prefix is in, before its body is kept: over it,
``FramingError`` too.

What Kafka does with a bad request, and what this module raises (the collector decides):

=====================================================  ======================================
input                                                  here / Kafka (SocketServer, Processor)
=====================================================  ======================================
bad size prefix                                        FramingError / close
header that cannot be parsed                           FramingError / close
unknown API key                                        UnknownApiKey (INVALID_REQUEST) / close
known API this server does not serve                   InvalidRequestError / close
served API, unsupported version (not ApiVersions)      UnsupportedVersionError / close
ApiVersions, unsupported version                       UnsupportedVersionError / answer with
                                                       ``api_versions_unsupported_response``
body that does not follow the schema                   InvalidRequestError / close
bytes left over after the body                         ignored, as Kafka does (no remaining
                                                       check in ``AbstractRequest.parseRequest``)
=====================================================  ======================================

Header versions (``ApiMessageTypeGenerator``): a request header is v2 (with a tagged-field
section) when the API version is flexible, else v1; a response header is v1 when flexible,
else v0, except ApiVersionsResponse, which always uses v0 (KIP-511).
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from proto.api_keys import ApiKeys
from proto.errors import (
    Errors,
    FramingError,
    InvalidRequestError,
    KafkaError,
    UnknownApiKey,
    UnsupportedVersionError,
)
from proto.messages import REQUEST_MODULES, RESPONSE_MODULES
from proto.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from proto.primitives import (
    INT16,
    INT32,
    MalformedError,
    skip_tagged_fields,
    write_nullable_string,
)
from proto.request_limits import RequestSizeLimits

__all__ = [
    "DEFAULT_MAX_REQUEST_SIZE",
    "SUPPORTED_VERSIONS",
    "ApiKeys",
    "ClientConnection",
    "RequestFrame",
    "ResponseFrame",
    "ResponseFramer",
    "ServerConnection",
    "api_versions_unsupported_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "request_is_flexible",
    "response_is_flexible",
]

# What this server speaks: api_key -> (min, max) version, Apache Kafka 4.4.0's ranges for these
# APIs (tests/compat/test_kafka_differential.py compares them with a running 4.4.0 broker).
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKeys.METADATA: (0, 13),
    ApiKeys.API_VERSIONS: (0, 5),
    ApiKeys.DESCRIBE_CONFIGS: (1, 4),
    ApiKeys.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKeys.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKeys.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKeys.PUSH_TELEMETRY: (0, 0),
    ApiKeys.LIST_CONFIG_RESOURCES: (0, 1),
    # ACLs (collector.broker.acl_apis): every version Kafka 4.4.0 defines (v0 removed in 4.0).
    ApiKeys.DESCRIBE_ACLS: (1, 3),
    ApiKeys.CREATE_ACLS: (1, 3),
    ApiKeys.DELETE_ACLS: (1, 3),
    # SASL listeners (collector.security.sasl). SaslHandshake v0, after which the SASL
    # tokens come unframed, is not served: clients use v1 when the broker offers it.
    ApiKeys.SASL_HANDSHAKE: (1, 1),
    ApiKeys.SASL_AUTHENTICATE: (0, 2),
    ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}

DEFAULT_MAX_REQUEST_SIZE = 104857600  # socket.request.max.bytes
_KNOWN_API_KEYS = frozenset(int(k) for k in ApiKeys)
# api key, api version, correlation id, client id length
_HEADER_FIXED = struct.Struct(">hhih")
_SIZE_AND_CORRELATION = struct.Struct(">ii")
_REQUEST_FIXED = struct.Struct(">ihhi")  # size, api key, api version, correlation id
_SIZE_PREFIX_BYTES = 4
_SIZE_AND_API_KEY = 6  # a request's size prefix and api key: what a size limit needs
# Pieces of a frame smaller than this are coalesced while the frame is assembled.
_SMALL_PIECE = 16384


def _first_flexible(modules: dict[int, ModuleType]) -> dict[int, int]:
    return {
        api_key: module.FIRST_FLEXIBLE_VERSION
        for api_key, module in modules.items()
        if module.FIRST_FLEXIBLE_VERSION is not None
    }


_REQUEST_FIRST_FLEXIBLE = _first_flexible(REQUEST_MODULES)
_RESPONSE_FIRST_FLEXIBLE = _first_flexible(RESPONSE_MODULES)
del _RESPONSE_FIRST_FLEXIBLE[ApiKeys.API_VERSIONS]  # KIP-511: always response header v0
_NEVER = 1 << 16  # above every int16 version


def request_is_flexible(api_key: int, api_version: int) -> bool:
    """Whether the request header is v2; False for API keys we have no schema for."""
    return api_version >= _REQUEST_FIRST_FLEXIBLE.get(api_key, _NEVER)


def response_is_flexible(api_key: int, api_version: int) -> bool:
    """Whether the response header is v1 (never for ApiVersions, KIP-511)."""
    return api_version >= _RESPONSE_FIRST_FLEXIBLE.get(api_key, _NEVER)


# A value (nothing changes a frame once parsed), but not frozen and with its own __init__:
# one is built per request, and the dataclass-generated __init__ is interpreted Python even
# where this module is compiled (mypyc), which cost about 2 us per request.
@dataclass(slots=True, init=False)
class RequestFrame:
    """One request as framed on the wire, its header parsed, its body still bytes.

    ``raw`` is the frame without its 4-byte size prefix (header + body, exactly what a gateway
    forwards after a fresh prefix); ``body`` is a zero-copy view of ``raw[header_size:]``.
    The header's tagged fields are consumed only when the (api_key, version) is one we have a
    schema for and is flexible; otherwise they stay at the start of ``body``.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    """Kafka's RequestHeader.parse turns a null client id into "" and so does this."""
    header_size: int
    raw: bytes

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str,
        header_size: int,
        raw: bytes,
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_size = header_size
        self.raw = raw

    @property
    def body(self) -> memoryview:
        """The body, ``raw[header_size:]`` without a copy (decode_request reads a view of
        ``raw`` from ``header_size`` instead of slicing one per request)."""
        return memoryview(self.raw)[self.header_size :]


@dataclass(frozen=True, slots=True)
class ResponseFrame:
    correlation_id: int
    api_key: int
    api_version: int
    message: Any


def _parse_request_frame(raw: bytes) -> RequestFrame:
    # Header v1/v2: api key, api version, correlation id, client id (a legacy nullable
    # string even in v2), then in v2 a tagged-field section. One unpack for the fixed part.
    if len(raw) < _HEADER_FIXED.size:
        raise FramingError(f"Malformed request header: {len(raw)} bytes")
    api_key, api_version, correlation_id, client_id_length = _HEADER_FIXED.unpack_from(
        raw, 0
    )
    pos = _HEADER_FIXED.size
    if client_id_length >= 0:
        end = pos + client_id_length
        if end > len(raw):
            raise FramingError(
                f"Malformed request header: client id of {client_id_length} bytes"
            )
        client_id = str(raw[pos:end], "utf-8", "replace")
        pos = end
    elif client_id_length == -1:
        client_id = ""  # Kafka's RequestHeader.parse: a null client id is ""
    else:
        raise FramingError(
            f"Malformed request header: client id length {client_id_length}"
        )
    if api_version >= _REQUEST_FIRST_FLEXIBLE.get(api_key, _NEVER):
        try:
            pos = skip_tagged_fields(raw, pos)
        except MalformedError as exc:
            raise FramingError(f"Malformed request header: {exc}") from None
    frame = RequestFrame(api_key, api_version, correlation_id, client_id, pos, raw)
    return frame


class _FrameBuffer:
    """Cuts size-prefixed frames out of the bytes received, checking each prefix on arrival.

    Every complete frame is copied once, into the ``bytes`` that :meth:`next_frame` returns:
    whole frames straight out of the bytes just received (a read usually holds whole
    requests), and a frame that spans reads from the pieces it arrived in, joined when its
    last byte is in.  The pieces are kept as they came (views of the received ``bytes``),
    not appended to a growing buffer: a 1 MiB Produce request or Fetch response that arrives
    in 64-256 KiB reads would otherwise be copied twice and its buffer regrown (fresh pages
    faulted in) on its way through, which was most of the gateway's CPU per forwarded MiB.
    Small pieces (a client trickling a frame a few bytes per read) are coalesced, so the
    bookkeeping stays proportional to the bytes held.

    With ``api_limits`` (requests only), a frame is also held against its API's own limit
    as soon as its api key (the two bytes after the size) is in, before its body is kept.
    """

    def __init__(
        self,
        max_frame_size: int,
        what: str,
        api_limits: dict[int, int] | None = None,
        other_api_limit: int = 0,
    ) -> None:
        if max_frame_size < 0:
            raise ValueError(f"max frame size must be >= 0, got {max_frame_size}")
        self._max_frame_size = max_frame_size
        self._what = what
        self._api_limits = api_limits
        self._other_api_limit = other_api_limit
        # The frame in progress still has its api key to be checked (fewer than 6 bytes).
        self._api_unchecked = False
        # How many frames have started arriving without being whole in one read.
        self.partial_frames = 0
        self._ready: deque[bytes] = deque()  # complete frames, in order
        self._ready_bytes = 0
        # The frame still arriving: its pieces from its size prefix on, how many bytes they
        # hold, and the frame's length with its prefix (0 while the prefix is incomplete).
        self._parts: list[Any] = []
        self._parts_bytes = 0
        self._needed = 0
        self._broken: FramingError | None = None

    @property
    def buffered_bytes(self) -> int:
        return self._ready_bytes + self._parts_bytes

    @property
    def reserved_bytes(self) -> int:
        """Complete frames not yet taken, plus the whole announced size of the frame in
        progress once its size is accepted (with its api key's limit, when there are
        limits): what it will hold once its last byte is in."""
        if self._needed and not self._api_unchecked:
            return self._ready_bytes + self._needed
        return self._ready_bytes + self._parts_bytes

    @property
    def frame_in_progress(self) -> bool:
        """A frame's size is known and accepted, and not all of its bytes are in."""
        return self._needed != 0 and not self._api_unchecked

    def receive(self, data: bytes | bytearray | memoryview) -> None:
        if self._broken is not None:
            raise self._broken
        # Pieces are kept as views of what was received: a caller's bytearray or
        # memoryview (which it may reuse) is copied first.  uvloop hands over bytes.
        chunk = data if isinstance(data, bytes) else bytes(data)
        if self._parts:
            if self._needed == 0:  # fewer than 4 bytes of a size prefix so far
                chunk = b"".join(self._parts) + chunk
                self._parts = []
                self._parts_bytes = 0
            else:
                if self._api_unchecked:
                    self._check_partial_api(chunk)
                missing = self._needed - self._parts_bytes
                if len(chunk) < missing:
                    self._keep(chunk)
                    return
                view = memoryview(chunk)
                self._parts.append(view[:missing])
                self._complete()
                if len(chunk) > missing:
                    self._cut(view[missing:])
                return
        elif len(chunk) >= _SIZE_PREFIX_BYTES:
            (size,) = INT32.unpack_from(chunk, 0)
            if (
                len(chunk) - _SIZE_PREFIX_BYTES == size
            ):  # exactly one frame: the usual read
                self._check_size(size)
                if self._api_limits is not None and size >= 2:
                    self._check_api(
                        INT16.unpack_from(chunk, _SIZE_PREFIX_BYTES)[0], size
                    )
                self._ready.append(chunk[_SIZE_PREFIX_BYTES:])
                self._ready_bytes += len(chunk)
                return
        self._cut(memoryview(chunk))

    def _check_size(self, size: int) -> None:
        if size < 0 or size > self._max_frame_size:
            self._broken = FramingError(
                f"Invalid {self._what} size {size} (must be 0..{self._max_frame_size})"
            )
            raise self._broken

    def _check_api(self, api_key: int, size: int) -> None:
        api_limits = self._api_limits
        assert api_limits is not None
        limit = api_limits.get(api_key, self._other_api_limit)
        if size > limit:
            self._broken = FramingError(
                f"Request of {size} bytes for api key {api_key} is over that API's limit "
                f"of {limit} bytes"
            )
            raise self._broken

    def _check_partial_api(self, chunk: bytes) -> None:
        """The frame in progress had fewer than 6 bytes (size and api key): check its api
        key once ``chunk`` completes them."""
        head = b"".join(self._parts) + chunk[:_SIZE_AND_API_KEY]
        if len(head) >= _SIZE_AND_API_KEY:
            self._check_api(
                INT16.unpack_from(head, _SIZE_PREFIX_BYTES)[0],
                self._needed - _SIZE_PREFIX_BYTES,
            )
            self._api_unchecked = False
            self.partial_frames += 1

    def _cut(self, view: memoryview) -> None:
        """Whole frames of ``view`` to the ready queue, the rest kept as the next frame's
        first piece (no frame is being assembled when this is called)."""
        at = 0
        length = len(view)
        while length - at >= _SIZE_PREFIX_BYTES:
            (size,) = INT32.unpack_from(view, at)
            self._check_size(size)
            has_api_key = length - at >= _SIZE_AND_API_KEY
            if self._api_limits is not None and has_api_key:
                self._check_api(
                    INT16.unpack_from(view, at + _SIZE_PREFIX_BYTES)[0], size
                )
            end = at + _SIZE_PREFIX_BYTES + size
            if end > length:
                self._needed = end - at
                if self._api_limits is not None and not has_api_key:
                    self._api_unchecked = True  # checked, and reserved, once it is in
                else:
                    self.partial_frames += 1
                break
            self._ready.append(bytes(view[at + _SIZE_PREFIX_BYTES : end]))
            self._ready_bytes += end - at
            at = end
        if at < length:
            rest = view[at:]
            self._parts.append(rest)
            self._parts_bytes = len(rest)

    def _keep(self, data: bytes) -> None:
        """One more piece of the frame being assembled (not its last)."""
        parts = self._parts
        if len(data) < _SMALL_PIECE:
            last = parts[-1]
            if type(last) is bytearray and len(last) < _SMALL_PIECE:
                last += data
            else:
                parts.append(bytearray(data))
        else:
            parts.append(data)
        self._parts_bytes += len(data)

    def _complete(self) -> None:
        """The frame being assembled has all its bytes: join them, the prefix left out."""
        parts = self._parts
        first = parts[0]
        parts[0] = memoryview(first)[_SIZE_PREFIX_BYTES:]
        raw = b"".join(parts)
        self._ready.append(raw)
        self._ready_bytes += len(raw) + _SIZE_PREFIX_BYTES
        self._parts = []
        self._parts_bytes = 0
        self._needed = 0
        self._api_unchecked = False

    def next_frame(self) -> bytes | None:
        if self._broken is not None:
            raise self._broken
        if self._ready:
            raw = self._ready.popleft()
            self._ready_bytes -= _SIZE_PREFIX_BYTES + len(raw)
            return raw
        return None


class ServerConnection:
    """The broker side of one Kafka connection.

    >>> conn = ServerConnection()
    >>> conn.receive_data(b"\\x00\\x00\\x00\\x0a\\x00\\x12\\x00\\x00")
    >>> conn.next_request() is None  # needs the rest of the frame
    True
    """

    def __init__(
        self,
        max_request_size: int = DEFAULT_MAX_REQUEST_SIZE,
        limits: RequestSizeLimits | None = None,
    ) -> None:
        self.max_request_size = max_request_size
        if limits is None:
            self._frames = _FrameBuffer(max_request_size, "request")
        else:
            self._frames = _FrameBuffer(
                max_request_size, "request", dict(limits.per_api), limits.other
            )

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet returned as a request (for flow control)."""
        return self._frames.buffered_bytes

    @property
    def reserved_bytes(self) -> int:
        """What this connection's requests hold: the complete ones not yet taken, and the
        frame in progress at its announced size (``queued.max.request.bytes`` counts this)."""
        return self._frames.reserved_bytes

    @property
    def frame_in_progress(self) -> bool:
        return self._frames.frame_in_progress

    @property
    def partial_frames(self) -> int:
        """How many requests have begun without arriving whole in one read (a counter:
        a change tells a caller that a new frame began)."""
        return self._frames.partial_frames

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer ``data``; raises FramingError on a bad size prefix (close the connection)."""
        self._frames.receive(data)

    def next_request(self) -> RequestFrame | None:
        """The next complete request, or None when more bytes are needed."""
        raw = self._frames.next_frame()
        if raw is None:
            return None
        return _parse_request_frame(raw)


# (api_key, version) -> reader, for every version served: one dict lookup per request.
_SERVED_READERS: dict[tuple[int, int], Any] = {
    (api_key, version): REQUEST_MODULES[api_key].READERS[version]
    for api_key, (low, high) in SUPPORTED_VERSIONS.items()
    for version in range(low, high + 1)
}


def _refuse(api_key: int, api_version: int) -> KafkaError:
    """The error for a request this server does not parse (the slow path)."""
    if api_key not in _KNOWN_API_KEYS:
        return UnknownApiKey(api_key)
    name = ApiKeys(api_key).name
    supported = SUPPORTED_VERSIONS.get(api_key)
    if supported is None:
        return InvalidRequestError(
            f"Received request for disabled api with key {api_key} ({name}) "
            f"and version {api_version}"
        )
    return UnsupportedVersionError(
        f"Received request for api with key {api_key} ({name}) and unsupported "
        f"version {api_version} (supported {supported[0]}-{supported[1]})"
    )


def decode_request(frame: RequestFrame) -> Any:
    """Parse the body of ``frame`` into its generated message dataclass.

    Raises UnknownApiKey, InvalidRequestError (disabled API or malformed body) or
    UnsupportedVersionError; see the module docstring for what Kafka does with each.
    """
    reader = _SERVED_READERS.get((frame.api_key, frame.api_version))
    if reader is None:
        raise _refuse(frame.api_key, frame.api_version)
    try:
        message, _ = reader(memoryview(frame.raw), frame.header_size)
    except KafkaError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError) as exc:
        raise MalformedError(
            f"Malformed {ApiKeys(frame.api_key).name} v{frame.api_version} request: {exc}"
        ) from None
    return message


_RESPONSE_WRITERS: dict[tuple[int, int], Any] = {
    (api_key, version): writer
    for api_key, module in RESPONSE_MODULES.items()
    for version, writer in module.WRITERS.items()
}


def _writer(modules: dict[int, ModuleType], api_key: int, api_version: int) -> Any:
    module = modules.get(api_key)
    if module is None:
        raise UnknownApiKey(api_key)
    writer = module.WRITERS.get(api_version)
    if writer is None:
        raise UnsupportedVersionError(
            f"No schema for {ApiKeys(api_key).name} v{api_version}"
        )
    return writer


def encode_response(
    api_key: int, api_version: int, correlation_id: int, message: Any
) -> bytes:
    """The response frame, size prefix included, with the header version Kafka would use."""
    writer = _RESPONSE_WRITERS.get((api_key, api_version))
    if writer is None:
        writer = _writer(
            RESPONSE_MODULES, api_key, api_version
        )  # raises the right error
    out = bytearray(_SIZE_AND_CORRELATION.pack(0, correlation_id))
    if response_is_flexible(api_key, api_version):
        out.append(0)  # response header v1: empty tagged-field section
    writer(message, out)
    INT32.pack_into(out, 0, len(out) - _SIZE_PREFIX_BYTES)
    return bytes(out)


def api_versions_unsupported_response(
    correlation_id: int, versions: tuple[int, int] | None = None
) -> bytes:
    """ApiVersionsResponse v0: UNSUPPORTED_VERSION and only the ApiVersions entry (KIP-511).

    Kafka's ``RequestContext`` treats an ApiVersions request of a version it does not know as
    v0 without parsing its body and ``ApiVersionsRequest.getErrorResponse`` lists only its own
    ApiVersions range, so the client can retry with a version both sides speak. ``versions``:
    that range when it is not this server's (a gateway's own).
    """
    low, high = versions or SUPPORTED_VERSIONS[ApiKeys.API_VERSIONS]
    message = ApiVersionsResponse(
        error_code=Errors.UNSUPPORTED_VERSION,
        api_keys=(
            ApiVersion(api_key=ApiKeys.API_VERSIONS, min_version=low, max_version=high),
        ),
    )
    return encode_response(ApiKeys.API_VERSIONS, 0, correlation_id, message)


# ---- client side (tests, load generator, future gateway) -------------------------------------


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    message: Any,
) -> bytes:
    """A request frame, size prefix included (header v2 when flexible, else v1)."""
    writer = _writer(REQUEST_MODULES, api_key, api_version)
    out = bytearray(_REQUEST_FIXED.pack(0, api_key, api_version, correlation_id))
    write_nullable_string(out, client_id)
    if request_is_flexible(api_key, api_version):
        out.append(0)  # request header v2: empty tagged-field section
    writer(message, out)
    INT32.pack_into(out, 0, len(out) - _SIZE_PREFIX_BYTES)
    return bytes(out)


def decode_response(
    api_key: int, api_version: int, payload: bytes | memoryview
) -> ResponseFrame:
    """Parse a response frame's payload (size prefix already removed).

    ApiVersions falls back to v0 like Kafka's client (``ApiVersionsResponse.parse``): a broker
    that does not know the requested version answers with a v0 UNSUPPORTED_VERSION response.
    The returned frame then says ``api_version=0``.
    """
    if api_key == ApiKeys.API_VERSIONS and api_version != 0:
        try:
            return _decode_response(api_key, api_version, payload)
        except (MalformedError, UnsupportedVersionError):
            return _decode_response(api_key, 0, payload)
    return _decode_response(api_key, api_version, payload)


def _decode_response(
    api_key: int, api_version: int, payload: bytes | memoryview
) -> ResponseFrame:
    module = RESPONSE_MODULES.get(api_key)
    if module is None:
        raise UnknownApiKey(api_key)
    reader = module.READERS.get(api_version)
    if reader is None:
        raise UnsupportedVersionError(
            f"No schema for {ApiKeys(api_key).name} v{api_version}"
        )
    try:
        (correlation_id,) = INT32.unpack_from(payload, 0)
        pos = INT32.size
        if response_is_flexible(api_key, api_version):
            pos = skip_tagged_fields(payload, pos)
        message, _ = reader(payload, pos)
    except KafkaError:
        raise
    except (struct.error, IndexError, ValueError, OverflowError) as exc:
        raise MalformedError(
            f"Malformed {ApiKeys(api_key).name} response: {exc}"
        ) from None
    return ResponseFrame(correlation_id, api_key, api_version, message)


class ResponseFramer:
    """Cuts a client's (or a gateway's upstream) byte stream into response payloads: size
    prefix removed, correlation id first.  Each size prefix is checked on arrival, before its
    bytes are buffered."""

    def __init__(self, max_response_size: int = 1 << 30) -> None:
        self._frames = _FrameBuffer(max_response_size, "response")

    @property
    def buffered_bytes(self) -> int:
        return self._frames.buffered_bytes

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Raises FramingError on a negative or oversized size prefix."""
        self._frames.receive(data)

    def next_frame(self) -> bytes | None:
        """The next whole response payload, or None."""
        return self._frames.next_frame()


class ClientConnection:
    """The client side: numbers requests, matches responses to them in order.

    >>> client = ClientConnection(client_id="app-1")
    >>> wire = client.send_request(ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS, 0, message)  # doctest: +SKIP
    >>> client.receive_data(server_bytes); client.next_response()  # doctest: +SKIP
    """

    def __init__(
        self, client_id: str | None = "ktc-client", max_response_size: int = 1 << 30
    ) -> None:
        self.client_id = client_id
        self._next_correlation_id = 0
        self._in_flight: dict[int, tuple[int, int]] = {}
        self._frames = _FrameBuffer(max_response_size, "response")

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def send_request(self, api_key: int, api_version: int, message: Any) -> bytes:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        wire = encode_request(
            api_key, api_version, correlation_id, self.client_id, message
        )
        self._in_flight[correlation_id] = (api_key, api_version)
        return wire

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._frames.receive(data)

    def next_response(self) -> ResponseFrame | None:
        payload = self._frames.next_frame()
        if payload is None:
            return None
        if len(payload) < INT32.size:
            raise FramingError(
                f"Response of {len(payload)} bytes has no correlation id"
            )
        (correlation_id,) = INT32.unpack_from(payload, 0)
        request = self._in_flight.pop(correlation_id, None)
        if request is None:
            raise FramingError(f"Response for unknown correlation id {correlation_id}")
        return decode_response(request[0], request[1], payload)
