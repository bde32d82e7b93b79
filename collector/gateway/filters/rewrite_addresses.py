"""Broker addresses in responses become the gateway's: every response that names a broker
(``collector.gateway.addresses.SCANNERS``: the API, its versions and the walker that finds
the addresses) is rewritten by node id to the gateway listener standing for that node, and
the nodes it reveals are learned (their listeners bound on first sight)."""

from __future__ import annotations

from collector.gateway import addresses
from collector.gateway.filters.base import Body, Exchange, Filter

__all__ = ["RewriteAddresses"]


class RewriteAddresses(Filter):
    __slots__ = ()

    def on_response(self, exchange: Exchange, body: Body) -> Body:
        frame = exchange.frame
        scan = addresses.scan_addresses(frame.api_key, frame.api_version, body)
        if scan is None or scan.empty:
            return body  # nothing to learn or rewrite (the common Produce and Fetch answer)
        topology = self.services.cluster.topology
        for node_id, (host, port) in scan.nodes().items():
            topology.learn(node_id, host, port)
        for endpoint in scan.endpoints:
            # A controller endpoint (DescribeQuorum, DescribeCluster type 2) of a node no
            # broker endpoint named gets a port of its own; a combined node keeps its broker's.
            if endpoint.node_id not in topology.upstream:
                topology.learn(endpoint.node_id, endpoint.host, endpoint.port)
        rewritten = scan.rewrite(topology.address_for)
        return body if rewritten is None else rewritten
