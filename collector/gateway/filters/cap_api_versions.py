"""ApiVersions through the gateway: the upstream's ranges capped to what the gateway can
read and rewrite, with the APIs it answers itself added (``collector.gateway.api_versions``);
a request newer than the gateway speaks gets Kafka's v0 UNSUPPORTED_VERSION answer here.
The client's software name and version (KIP-511) are recorded on its session, as the
broker's ApiVersions handler does in serve."""

from __future__ import annotations

from collector.gateway.api_versions import (
    API_VERSIONS_RANGE,
    cap_api_versions,
    unsupported_version_response,
)
from collector.gateway.filters.base import CONTINUE, Body, Exchange, Filter, malformed
from proto import KafkaError, decode_request

__all__ = ["CapApiVersions"]


class CapApiVersions(Filter):
    __slots__ = ()

    def on_request(self, exchange: Exchange) -> object:
        frame = exchange.frame
        if frame.api_version > API_VERSIONS_RANGE[1]:
            return unsupported_version_response(frame.correlation_id)
        if frame.api_version >= 3:
            try:
                request = decode_request(frame)
            except KafkaError as exc:
                raise malformed(frame, exc) from None
            session = exchange.session
            session.client_software_name = request.client_software_name
            session.client_software_version = request.client_software_version
        return CONTINUE

    def on_response(self, exchange: Exchange, body: Body) -> Body:
        version = exchange.frame.api_version
        services = self.services
        local = services.admin.answered_versions(services.local_api_versions)
        capped = cap_api_versions(version, body, local)
        # The upstream's own list says where ListConfigResources may be forwarded.
        services.admin.upstream_api_versions(version, body)
        return capped
