"""The gateway's own series on ``/metrics`` (``ktc_gateway_*``), read from the
:class:`~collector.gateway.service.Gateway` at each scrape."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from collector.gateway.service import Gateway

__all__ = ["gateway_metrics"]


def gateway_metrics(gateway: Gateway) -> Iterator[Metric]:
    """The gateway's series: upstream failures and outages, refused connections, pairs,
    requests in flight, and the port standing for each upstream node."""
    stats = gateway.stats
    failures = CounterMetricFamily(
        "ktc_gateway_upstream_failures",
        "Upstream connections that could not be opened (unreachable), were dropped with "
        "requests in flight (lost) or with none (closed), or broke the protocol "
        "(protocol), by upstream node (bootstrap: the bootstrap listener's).",
        labels=["node", "reason"],
    )
    for (node, reason), count in sorted(stats.upstream_failures.items()):
        failures.add_metric([node, reason], count)
    yield failures
    refused = CounterMetricFamily(
        "ktc_gateway_unauthenticated_refused",
        "Client connections closed for a request the gateway answers itself, sent "
        "before the client authenticated where that is required, by API.",
        labels=["api"],
    )
    for api, count in sorted(stats.refused_unauthenticated.items()):
        refused.add_metric([api], count)
    yield refused
    down = GaugeMetricFamily(
        "ktc_gateway_upstream_down",
        "1 while an upstream node is down: from a failed or lost connection until a "
        "connection to it succeeds again.",
        labels=["node"],
    )
    for node in stats.health.down:
        down.add_metric([node], 1)
    yield down
    yield GaugeMetricFamily(
        "ktc_gateway_client_pairs",
        "Client connections paired with an upstream connection.",
        value=len(gateway.pairs),
    )
    yield GaugeMetricFamily(
        "ktc_gateway_requests_in_flight",
        "Forwarded requests waiting for the upstream broker's response.",
        value=sum(pair.in_flight for pair in gateway.pairs),
    )
    nodes = GaugeMetricFamily(
        "ktc_gateway_node_port",
        "The gateway port that stands for each upstream node.",
        labels=["node", "upstream"],
    )
    topology = gateway.cluster.bound_topology
    if topology is not None:
        for node_id, port in sorted(topology.ports.items()):
            host, upstream_port = topology.upstream.get(node_id, ("", 0))
            nodes.add_metric([str(node_id), f"{host}:{upstream_port}"], port)
    yield nodes
