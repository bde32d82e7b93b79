"""``GET /metrics/clients`` on the HTTP listener: the pushed client metrics as Prometheus
series (docs/prometheus.md), in OpenMetrics when the scraper asks for it (Prometheus does),
else in the text format.  Built on the series' worker thread, never on the event loop.
Open like ``/metrics``: it shows what clients pushed, which the operator chose to collect.
"""

from __future__ import annotations

from aiohttp import web

from collector.telemetry.prometheus.client_series import (
    ClientSeries,
    ClientSeriesClosed,
)
from collector.telemetry.prometheus.exposition import (
    OPENMETRICS_CONTENT_TYPE,
    TEXT_CONTENT_TYPE,
)

__all__ = ["client_metrics_routes", "wants_open_metrics"]


def wants_open_metrics(accept: str) -> bool:
    """Whether the Accept header names OpenMetrics with a weight above the text format's
    (Prometheus sends ``application/openmetrics-text;version=1.0.0,...,text/plain;q=0.5``)."""
    best_om = best_text = -1.0
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        weight = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        if media == "application/openmetrics-text":
            best_om = max(best_om, weight)
        elif media in ("text/plain", "*/*"):
            best_text = max(best_text, weight)
    return best_om > 0 and best_om >= best_text


def client_metrics_routes(series: ClientSeries) -> list[web.RouteDef]:
    async def client_metrics(request: web.Request) -> web.Response:
        open_metrics = wants_open_metrics(request.headers.get("Accept", ""))
        try:
            body = await series.scrape(open_metrics)
        except ClientSeriesClosed as exc:
            return web.Response(status=503, text=f"{exc}\n")
        content_type = OPENMETRICS_CONTENT_TYPE if open_metrics else TEXT_CONTENT_TYPE
        return web.Response(body=body, headers={"Content-Type": content_type})

    return [web.get("/metrics/clients", client_metrics)]
