"""Client-metrics administration at the gateway: CLIENT_METRICS resources are the gateway's.

The gateway terminates telemetry, so its subscription store, not the upstream cluster's,
decides what clients send; ``kafka-client-metrics.sh`` / ``kafka-configs.sh`` pointed at
the gateway must read and change that store.  Requests that name config resources are
split by resource type:

| request                         | CLIENT_METRICS part           | the rest                  |
|---------------------------------|-------------------------------|---------------------------|
| DescribeConfigs                 | answered by the gateway's     | forwarded; the answers    |
| IncrementalAlterConfigs         | dispatcher                    | merged in request order   |
| ListConfigResources v1, types   | the gateway's subscriptions   | forwarded with the other  |
| empty (all) or including 16     | (the upstream's own CLIENT_   | types; upstream CLIENT_   |
|                                 | METRICS entries are dropped)  | METRICS entries dropped   |
| ListConfigResources v0          | all of it (v0 lists only      | -                         |
|                                 | client-metrics resources)     |                           |
| ListConfigResources, upstream   | all of it, as ``ktc serve``   | -                         |
| without it (Tansu 0.6)          | answers (client metrics only) |                           |

With the subscriptions kept in the cluster (``gateway.subscriptions.store: cluster``,
``collector.gateway.cluster_subscriptions``), nothing is split: the three APIs are forwarded
untouched, with the client's own identity, and the cluster validates and authorizes them as
for any other admin request; after a forwarded IncrementalAlterConfigs that names a
CLIENT_METRICS resource, the gateway reads the cluster's subscriptions again at once.

A request with only one side goes whole to that side, untouched.  The gateway lists
ListConfigResources in ApiVersions whatever the upstream has (client-metrics administration
needs it); what the upstream lists is read from the ApiVersions answers passing by
(:meth:`AdminSplitter.upstream_api_versions`), and a ListConfigResources request is never
forwarded to an upstream that does not list it at the request's version (one that does not
know the API closes the connection).  The local part is
answered by the same dispatcher (and so the same admin handlers, validation and quota
records) as in ``ktc serve``: the splitter builds a request frame for it and reads the
encoded answer back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

from collector.gateway.frames import response_body_offset
from proto import (
    ApiKeys,
    ServerConnection,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from proto.connection import response_is_flexible
from proto.messages import api_versions_response

__all__ = ["CLIENT_METRICS", "AdminSplitter"]

CLIENT_METRICS: Final = 16  # ConfigResource.Type.CLIENT_METRICS

_ADMIN_APIS: Final = frozenset(
    {
        ApiKeys.DESCRIBE_CONFIGS,
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        ApiKeys.LIST_CONFIG_RESOURCES,
    }
)


@dataclasses.dataclass(frozen=True, slots=True)
class _Split:
    """What the merge needs: which request positions were local, and the local answer."""

    api_key: int
    local_positions: tuple[bool, ...]  # per request resource: answered by the gateway
    local_response: Any


@dataclasses.dataclass(frozen=True, slots=True)
class _AlteredInCluster:
    """A forwarded IncrementalAlterConfigs naming CLIENT_METRICS resources: once the cluster
    answered, its subscriptions are read again."""


_ALTERED_IN_CLUSTER: Final = _AlteredInCluster()


class AdminSplitter:
    def __init__(
        self,
        dispatcher: Any,
        max_request_size: int,
        *,
        in_cluster: Callable[[], bool] = lambda: False,
        altered_in_cluster: Callable[[], object] = lambda: None,
    ) -> None:
        self._dispatcher = dispatcher
        self._max_request_size = max_request_size
        # Whether the subscriptions are the cluster's now (then nothing is answered here),
        # and what to do after an alter of them was forwarded (read them again).
        self._in_cluster = in_cluster
        self._altered_in_cluster = altered_in_cluster
        # The upstream's ListConfigResources versions (None: it does not list the API), as
        # its latest ApiVersions answer said; unknown until one passes by.
        self._upstream_list_versions: tuple[int, int] | None = (0, 0x7FFF)

    def answered_versions(
        self, local: Mapping[int, tuple[int, int]]
    ) -> Mapping[int, tuple[int, int]]:
        """The versions ApiVersions sets for the APIs the gateway answers (``local``): with
        the subscriptions in the cluster the admin APIs are forwarded, so the cluster's own
        ranges (capped to what the gateway reads) stand, as for any forwarded API."""
        if not self._in_cluster():
            return local
        return {k: v for k, v in local.items() if k not in _ADMIN_APIS}

    def upstream_api_versions(self, version: int, body: Any) -> None:
        """Reads the upstream's own ApiVersions answer (the body, before capping)."""
        try:
            message, _ = api_versions_response.READERS[version](body, 0)
        except Exception:
            return
        if message.error_code != 0:
            return  # an UNSUPPORTED_VERSION fallback: the client asks again
        self._upstream_list_versions = next(
            (
                (k.min_version, k.max_version)
                for k in message.api_keys
                if k.api_key == ApiKeys.LIST_CONFIG_RESOURCES
            ),
            None,
        )

    def split(
        self, frame: Any, session: Any, channel: Any
    ) -> bytes | tuple[_Split | _AlteredInCluster, bytes] | None:
        """The local answer (bytes, size prefix included) when the request names only
        CLIENT_METRICS resources; None when it names none (forward it untouched); else the
        merge state and the request to forward (header and body, no size prefix)."""
        api_key = frame.api_key
        if self._in_cluster():
            if api_key == ApiKeys.INCREMENTAL_ALTER_CONFIGS and any(
                r.resource_type == CLIENT_METRICS
                for r in decode_request(frame).resources
            ):
                return _ALTERED_IN_CLUSTER, frame.raw
            return None
        if api_key == ApiKeys.LIST_CONFIG_RESOURCES:
            return self._split_list(frame, session, channel)
        request = decode_request(frame)
        resources = request.resources
        local = tuple(r.resource_type == CLIENT_METRICS for r in resources)
        if not any(local):
            return None
        if all(local):
            return self._handle(frame, session, channel)
        mine = tuple(
            r for r, is_local in zip(resources, local, strict=True) if is_local
        )
        theirs = tuple(
            r for r, is_local in zip(resources, local, strict=True) if not is_local
        )
        local_response = self._answer(
            frame, dataclasses.replace(request, resources=mine), session, channel
        )
        forwarded = _wire(frame, dataclasses.replace(request, resources=theirs))
        return _Split(api_key, local, local_response), forwarded

    def _split_list(
        self, frame: Any, session: Any, channel: Any
    ) -> bytes | tuple[_Split, bytes] | None:
        upstream = self._upstream_list_versions
        if (
            frame.api_version == 0
            or upstream is None
            or not upstream[0] <= frame.api_version <= upstream[1]
        ):
            return self._handle(frame, session, channel)
        request = decode_request(frame)
        types = request.resource_types
        if types and CLIENT_METRICS not in types:
            return None
        others = tuple(t for t in types if t != CLIENT_METRICS)
        if types and not others:  # CLIENT_METRICS only (perhaps named more than once)
            return self._handle(frame, session, channel)
        local_response = self._answer(
            frame,
            dataclasses.replace(request, resource_types=(CLIENT_METRICS,)),
            session,
            channel,
        )
        forwarded = (
            frame.raw
            if not types
            else _wire(frame, dataclasses.replace(request, resource_types=others))
        )
        return _Split(ApiKeys.LIST_CONFIG_RESOURCES, (), local_response), forwarded

    def merge(
        self, split: _Split | _AlteredInCluster, frame: Any, payload: bytes
    ) -> bytes:
        """The response body (after the response header) joining the upstream's answer to
        the local one, in the order of the client's request."""
        if isinstance(split, _AlteredInCluster):
            self._altered_in_cluster()
            # The cluster's answer, untouched.
            return payload[
                response_body_offset(frame.api_key, frame.api_version, payload) :
            ]
        upstream = decode_response(frame.api_key, frame.api_version, payload).message
        local = split.local_response
        throttle_ms = max(upstream.throttle_time_ms, local.throttle_time_ms)
        if split.api_key == ApiKeys.LIST_CONFIG_RESOURCES:
            if upstream.error_code != 0:
                merged = upstream
            else:
                theirs = tuple(
                    r
                    for r in upstream.config_resources
                    if r.resource_type != CLIENT_METRICS
                )
                merged = dataclasses.replace(
                    upstream,
                    config_resources=theirs + tuple(local.config_resources),
                    throttle_time_ms=throttle_ms,
                )
        else:
            field = (
                "results" if split.api_key == ApiKeys.DESCRIBE_CONFIGS else "responses"
            )
            mine = iter(getattr(local, field))
            theirs = iter(getattr(upstream, field))
            results = tuple(
                next(mine) if is_local else next(theirs)
                for is_local in split.local_positions
            )
            merged = dataclasses.replace(
                upstream, throttle_time_ms=throttle_ms, **{field: results}
            )
        wire = encode_response(
            frame.api_key, frame.api_version, frame.correlation_id, merged
        )
        header = 9 if response_is_flexible(frame.api_key, frame.api_version) else 8
        return wire[header:]

    def _handle(self, frame: Any, session: Any, channel: Any) -> bytes:
        """The dispatcher's answer (size prefix included), as ``ktc serve`` gives it."""
        answer: bytes = self._dispatcher.handle(frame, session, channel)
        return answer

    def _answer(self, frame: Any, request: Any, session: Any, channel: Any) -> Any:
        """The gateway's own answer to the CLIENT_METRICS part, decoded."""
        wire = _wire(frame, request)
        codec = ServerConnection(max_request_size=self._max_request_size)
        codec.receive_data(len(wire).to_bytes(4, "big") + wire)
        local_frame = codec.next_request()
        answer = self._handle(local_frame, session, channel)
        return decode_response(frame.api_key, frame.api_version, answer[4:]).message


def _wire(frame: Any, request: Any) -> bytes:
    """``request`` as a frame with ``frame``'s header (no size prefix)."""
    return encode_request(
        frame.api_key, frame.api_version, frame.correlation_id, frame.client_id, request
    )[4:]
