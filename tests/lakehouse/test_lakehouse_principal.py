"""The principal column: a push's principal (an SSL-mapped one here) in every table's rows,
in the metrics view and, as of the latest push, in the clients view. Without Spark."""

from __future__ import annotations

from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.lakehouse.catalog import (
    METRICS_VIEW_COLUMNS,
    clients_view_sql,
    metrics_view_sql,
)
from exporters.lakehouse.flatten import flatten
from exporters.lakehouse.schema import TABLES
from tests.lakehouse.lakehouse_otlp import make_context

PRINCIPAL = "User:ORDERS-APP@PAYMENTS"


def test_every_table_carries_the_push_principal() -> None:
    md = MetricsData()
    metrics = md.resource_metrics.add().scope_metrics.add().metrics
    metrics.add(name="g").gauge.data_points.add(as_int=1)
    metrics.add(name="s").sum.data_points.add(as_double=2.0)
    metrics.add(name="h").histogram.data_points.add(count=1)
    context = make_context(
        listener_name="SSL", security_protocol="SSL", principal=PRINCIPAL
    )
    tables = flatten(md, context, "node-1", 7)
    assert {"gauge", "sum", "histogram", "pushes"} <= set(tables)
    for kind in ("gauge", "sum", "histogram", "pushes"):
        assert set(tables[kind].column("principal").to_pylist()) == {PRINCIPAL}, kind
    assert all("principal" in table.column_names for table in TABLES)


def test_the_views_select_the_principal() -> None:
    assert "principal" in METRICS_VIEW_COLUMNS
    assert "`principal`" in metrics_view_sql("lake")
    assert (
        "max_by(`principal`, received_time_unix_nano) AS `principal`"
        in clients_view_sql("lake")
    )
