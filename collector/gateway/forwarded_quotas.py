"""Kafka's quotas on the traffic a gateway forwards, recorded as a broker records them.

The engine, its entity precedence and its config store are the collector's own
(``collector.pipeline.quota_enforcer.QuotaEnforcer``); this module says *what* of the forwarded
traffic each quota meters (``KafkaApis`` is the model):

| quota                      | Kafka (``KafkaApis``)                 | here                                 |
|----------------------------|---------------------------------------|--------------------------------------|
| ``producer_byte_rate``     | ``handleProduceRequest`` records      | the Produce request's size, header   |
|                            | ``request.sizeInBytes``               | and body, when it is forwarded       |
| ``consumer_byte_rate``     | ``handleFetchRequest`` records the    | the Fetch response's size, when it   |
|                            | response size                         | comes back                           |
| ``request_percentage``     | handler + network-thread time         | the gateway's own time on the pair   |
| ``controller_mutation_rate`` | ``ControllerMutationQuota.record``  | checked before forwarding: strict    |
|                            | per topic; strict versions answer     | versions get THROTTLING_QUOTA_       |
|                            | THROTTLING_QUOTA_EXCEEDED (89)        | EXCEEDED here, not forwarded         |

Strict mutation quotas are checked per request: the partitions the request would mutate
(counted as Kafka's controller counts them, ``requests.py``) are recorded at once, and when
the quota is already exceeded the whole request is answered 89 here.  (A broker records
topic by topic, so a request whose own topics cross the limit has its later topics refused
there; here they pass and the next request is refused.  The broker's own quotas, if any,
still apply upstream.)

A broker handles one request of a connection at a time (its processor mutes the channel
from a request's arrival until its response is sent, then for the throttle, KIP-219); the
gateway pipelines a client's requests to the upstream.  So that pipelining lets no more
through than a broker would:

* a request whose own recording throttles it (Produce bytes, a permissive mutation) stops
  reading from the client at once (:meth:`GatewayQuotas.hold`); the timed mute starts when
  its response is written, as a broker's does, and the hold ends then;
* a channel muted by several responses in flight stays muted until the *last* of their
  throttles ends (the engine's delay queue unmutes per entry; here each entry releases one
  hold and the channel reads again when none is left);
* a Fetch request's ``MaxBytes`` is clamped to what the quota window allows
  (limit x (``quota.window.num`` - 1) x ``quota.window.size.seconds``), as ``KafkaApis``
  clamps ``fetchMaxBytes`` to ``maxValueInQuotaWindow``: 4 bytes patched in the request,
  no re-encoding;
* a Fetch response whose recording throttles the client (fetch bytes or request time) is
  answered as ``KafkaApis`` answers it: empty, with the throttle time, its bytes un-recorded
  (``getThrottledResponse``: no topics; session id 0 for a full or sessionless fetch, the
  session's id for an incremental one, whose broker-side fetch offsets the client's next
  request leaves where they were, so the same records come again).  The upstream's records
  are dropped; the clamp above bounds what that wastes.  A response with a top-level error
  is forwarded as it is, with the throttle.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from collector.gateway import requests
from collector.gateway.throttle import read_throttle_ms
from proto import ApiKeys
from proto.connection import encode_response
from proto.messages.fetch_response import FetchResponse
from quota import QuotaType
from quota.errors import ThrottlingQuotaExceededError

__all__ = ["GatewayQuotas"]

# ControllerApis: newQuotaFor(request, strictSinceVersion): from these versions a request
# over the quota is refused (89); before, it is admitted and throttled after.
_STRICT_SINCE: Final = {
    ApiKeys.CREATE_TOPICS: 6,
    ApiKeys.CREATE_PARTITIONS: 3,
    ApiKeys.DELETE_TOPICS: 5,
}


_INT32: Final = struct.Struct(">i")
_SESSION: Final = struct.Struct(">ii")  # SessionId, SessionEpoch


def _fetch_session_at(version: int) -> int | None:
    """Where a Fetch request's SessionId (then SessionEpoch) is in its body: after MaxBytes
    and IsolationLevel (v7+)."""
    if version < 7:
        return None
    return 17 if version <= 14 else 13


def _fetch_max_bytes_at(version: int) -> int | None:
    """Where a Fetch request's MaxBytes is in its body: after ReplicaId (v0-14), MaxWaitMs and
    MinBytes; v0-2 have none (tagged fields come after the fixed ones)."""
    if version < 3:
        return None
    return 12 if version <= 14 else 8


class _Hold:
    """The reasons a client channel is not read now: requests held for their response, and
    throttles whose time has not ended.  The channel is muted while any is left."""

    __slots__ = ("channel", "count", "owner")

    def __init__(self, owner: GatewayQuotas, channel: Any) -> None:
        self.owner = owner
        self.channel = channel
        self.count = 0

    def acquire(self) -> None:
        self.count += 1
        self.channel.mute()

    def release(self) -> None:
        if self.count <= 0:
            return
        self.count -= 1
        if self.count == 0:
            self.owner._holds_done(self)
            self.channel.unmute()


class _TimedHold:
    """One throttle's entry in the engine's delay queue: the enforcer mutes it when the
    throttle starts and unmutes it when it ends; it holds the client channel meanwhile."""

    __slots__ = ("hold",)

    def __init__(self, hold: _Hold) -> None:
        self.hold = hold

    def mute(self) -> None:
        self.hold.acquire()

    def unmute(self) -> None:
        self.hold.release()


class GatewayQuotas:
    def __init__(self, enforcer: Any) -> None:
        self.enforcer = enforcer
        self.engine = enforcer.engine
        # id(client channel) -> its hold, while it has any.
        self._holds: dict[int, _Hold] = {}

    @property
    def active(self) -> bool:
        """Some request, produce or fetch quota is configured (else nothing is recorded)."""
        engine = self.engine
        return bool(
            engine.request.quota_types_enabled
            or engine.produce.quota_types_enabled
            or engine.fetch.quota_types_enabled
        )

    def record_produce_bytes(
        self, user: str, client_id: str, nbytes: int, now_ms: int
    ) -> int:
        if not self.engine.produce.quota_types_enabled:
            return 0
        throttle_ms = self.engine.record_produce_bytes(user, client_id, nbytes, now_ms)
        if throttle_ms > 0:
            self.enforcer.count_throttle(
                QuotaType.PRODUCE, user, client_id, throttle_ms, now_ms
            )
        return throttle_ms

    def record_fetch_bytes(
        self, user: str, client_id: str, nbytes: int, now_ms: int
    ) -> int:
        if not self.engine.fetch.quota_types_enabled:
            return 0
        throttle_ms = self.engine.record_fetch_bytes(user, client_id, nbytes, now_ms)
        if throttle_ms > 0:
            self.enforcer.count_throttle(
                QuotaType.FETCH, user, client_id, throttle_ms, now_ms
            )
        return throttle_ms

    def record_request_time(
        self, user: str, client_id: str, handling_ns: int, now_ms: int
    ) -> int:
        if not self.engine.request.quota_types_enabled:
            return 0
        throttle_ms = self.engine.record_request(user, client_id, handling_ns, now_ms)
        if throttle_ms > 0:
            self.enforcer.count_throttle(
                QuotaType.REQUEST, user, client_id, throttle_ms, now_ms
            )
        return throttle_ms

    def mute(
        self,
        channel: Any,
        user: str,
        client_id: str,
        throttle_ms: int,
        *,
        held: bool = False,
    ) -> None:
        """Mute the client's channel for the gateway's part of a throttle (KIP-219), from now
        (its response is being written) until this and every other throttle of the channel
        has ended; ``held``: the request was :meth:`hold`-ing the channel, which ends now."""
        hold = self._hold(channel)
        if throttle_ms > 0:
            self.enforcer.mute(_TimedHold(hold), user, client_id, throttle_ms)
        if held:
            hold.release()

    def hold(self, channel: Any) -> None:
        """Read nothing more from the client until the request being forwarded, whose own
        recording throttled it, has its response (then :meth:`mute` with ``held``)."""
        self._hold(channel).acquire()

    def forget(self, channel: Any) -> None:
        """The channel closed: drop its hold (throttles still queued release nothing)."""
        self._holds.pop(id(channel), None)

    def _hold(self, channel: Any) -> _Hold:
        hold = self._holds.get(id(channel))
        if hold is None or hold.channel is not channel:
            hold = self._holds[id(channel)] = _Hold(self, channel)
        return hold

    def _holds_done(self, hold: _Hold) -> None:
        if self._holds.get(id(hold.channel)) is hold:
            del self._holds[id(hold.channel)]

    def throttled_fetch_response(
        self,
        frame: Any,
        body: Any,
        nbytes: int,
        user: str,
        throttle_ms: int,
        now_ms: int,
    ) -> bytes | None:
        """The whole frame answering a Fetch the gateway throttles (``throttle_ms`` > 0), as
        a broker answers it: empty, its ``nbytes`` taken back from the fetch quota; None
        when the upstream's response has a top-level error (forward it)."""
        version = frame.api_version
        if version >= 7 and int.from_bytes(body[4:6], "big", signed=True) != 0:
            return None
        self.engine.unrecord_fetch_bytes(user, frame.client_id, nbytes, now_ms)
        session_id = 0
        at = _fetch_session_at(version)
        if at is not None:
            raw: bytes = frame.raw
            at += requests.parse_request_header(raw).header_size
            if at + 8 <= len(raw):
                requested, epoch = _SESSION.unpack_from(raw, at)
                if epoch > 0:
                    session_id = requested  # incremental: the session goes on
        upstream_ms = read_throttle_ms(ApiKeys.FETCH, version, body) or 0
        empty = FetchResponse(
            throttle_time_ms=max(throttle_ms, upstream_ms), session_id=session_id
        )
        return encode_response(ApiKeys.FETCH, version, frame.correlation_id, empty)

    def fetch_request(self, frame: Any, user: str, now_ms: int) -> bytes:
        """The Fetch request to forward: ``frame.raw``, with MaxBytes lowered to what the
        client's fetch quota allows in one quota window when it asks for more (Kafka's
        ``fetchMaxBytes = min(request, fetch.max.bytes, maxValueInQuotaWindow)``)."""
        raw: bytes = frame.raw
        if not self.engine.fetch.quota_types_enabled:
            return raw
        offset = _fetch_max_bytes_at(frame.api_version)
        if offset is None:
            return raw
        # The header's own size: ``frame.header_size`` leaves a flexible header's tagged
        # fields in the body of an API ``proto`` has no request schema for (Fetch).
        at = requests.parse_request_header(raw).header_size + offset
        if at + 4 > len(raw):
            return raw  # too short to be a Fetch request: the broker will say so
        allowed = self.engine.max_fetch_bytes(user, frame.client_id, now_ms)
        (asked,) = _INT32.unpack_from(raw, at)
        if asked <= allowed:
            return raw
        clamped = bytearray(raw)
        _INT32.pack_into(clamped, at, max(1, int(allowed)))
        return bytes(clamped)

    def mutation_check(
        self,
        frame: Any,
        session: Any,
        channel: Any,
        now_ms: int,
        partition_count: Callable[[Any], int | None],
    ) -> bytes | int:
        """The local THROTTLING_QUOTA_EXCEEDED answer of a strict request over its quota,
        else the throttle the request's mutations earned (0 when none)."""
        request = requests.decode_mutation_request(frame)
        api_key = frame.api_key
        if api_key == ApiKeys.CREATE_TOPICS:
            permits = requests.create_topics_mutations(request)
        elif api_key == ApiKeys.CREATE_PARTITIONS:
            permits = requests.create_partitions_mutations(request, partition_count)
        else:
            permits = requests.delete_topics_mutations(request, partition_count)
        strict = frame.api_version >= _STRICT_SINCE[api_key]
        user = session.principal_name
        client_id = frame.client_id
        quota = self.engine.mutation_quota(user, client_id, strict, now_ms)
        try:
            quota.record(permits, now_ms)
        except ThrottlingQuotaExceededError:
            throttle_ms = quota.throttle_time_ms(now_ms)
            self.enforcer.count_throttle(
                QuotaType.CONTROLLER_MUTATION, user, client_id, throttle_ms, now_ms
            )
            if throttle_ms > 0:
                self.mute(channel, user, client_id, throttle_ms)
            return requests.quota_exceeded_response(frame, throttle_ms)
        throttle_ms = quota.throttle_time_ms(now_ms)
        if throttle_ms > 0:
            self.enforcer.count_throttle(
                QuotaType.CONTROLLER_MUTATION, user, client_id, throttle_ms, now_ms
            )
        return throttle_ms
