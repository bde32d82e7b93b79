"""End to end: real librdkafka producers push to a real collector; `ktc ingest --once`
commits to Iceberg tables, and `ktc sql` on both engines (Spark, and pyiceberg + DuckDB)
and pyiceberg itself (real processes, real libraries) return exactly the values in the
landing log; the tables' snapshots carry the landing ranges they hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from subscriptions.store import ConfigStore
from tests.integration.collector_harness import RunningCollector, wait_for
from tests.ktc_process import ktc
from tests.lakehouse.conftest import require_lake_jars
from tests.lakehouse.postgres_cluster import postgres_database

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]

CLIENTS = ("lake-orders-1", "lake-orders-2")


def attribute_text(value) -> str:
    """librdkafka sends strings and ints (node.id); the table keeps ints as decimal text."""
    which = value.WhichOneof("value")
    assert which in ("string_value", "int_value"), which
    return value.string_value if which == "string_value" else str(value.int_value)


def kind_of(value) -> str | None:
    return "int" if value.WhichOneof("value") == "int_value" else None


def expected_points(records) -> list[tuple]:
    """Every number point of the landed pushes, as the metrics view must show it."""
    out = []
    for record in records:
        md = MetricsData.FromString(record.payload)
        for rm in md.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    kind = metric.WhichOneof("data")
                    assert kind in ("gauge", "sum"), f"librdkafka sent a {kind}"
                    for p in getattr(metric, kind).data_points:
                        is_int = p.WhichOneof("value") == "as_int"
                        out.append(
                            (
                                record.offset,
                                metric.name,
                                kind,
                                {
                                    kv.key: attribute_text(kv.value)
                                    for kv in p.attributes
                                },
                                {
                                    kv.key: kind_of(kv.value)
                                    for kv in p.attributes
                                    if kind_of(kv.value)
                                }
                                or None,
                                p.time_unix_nano,
                                float(p.as_int) if is_int else p.as_double,
                                p.as_int if is_int else None,
                                record.context.client_id,
                                record.context.client_instance_id,
                                record.context.terminating,
                            )
                        )
    return sorted(out, key=repr)


def _row_key(r: dict) -> tuple:
    return (
        r["landing_offset"],
        r["metric_name"],
        r["metric_type"],
        r["attributes"],
        r["attributes_types"],
        r["time_unix_nano"],
        r["value"],
        r["value_int"],
        r["client_id"],
        r["client_instance_id"],
        r["terminating"],
    )


def test_real_clients_through_collector_ingest_and_sql(tmp_path: Path) -> None:
    _real_clients_end_to_end(tmp_path, catalog_uri=None)


def test_the_same_on_a_postgresql_catalog(tmp_path: Path) -> None:
    """Iceberg's JDBC catalog on a real PostgreSQL server this test starts."""
    with postgres_database() as catalog_uri:
        _real_clients_end_to_end(tmp_path, catalog_uri=catalog_uri)


def _real_clients_end_to_end(tmp_path: Path, catalog_uri: str | None) -> None:
    require_lake_jars()
    catalog = ["--catalog", catalog_uri] if catalog_uri else []
    data = tmp_path / "data"
    ConfigStore(data).alter_subscription(
        "producers", {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"}, []
    )
    with RunningCollector(data) as collector:
        producers = [
            Producer(
                {
                    "bootstrap.servers": collector.bootstrap,
                    "client.id": cid,
                    "enable.metrics.push": True,
                    "log_level": 3,
                }
            )
            for cid in CLIENTS
        ]

        def pushes(cid: str) -> list:
            return [r for r in collector.landed() if r.context.client_id == cid]

        wait_for(
            lambda: all(len(pushes(c)) >= 3 for c in CLIENTS),
            timeout_s=30,
            what="three pushes from each producer",
        )
        for p in producers:
            p.close()  # sends the terminating push
        wait_for(
            lambda: all(any(r.context.terminating for r in pushes(c)) for c in CLIENTS),
            timeout_s=30,
            what="the terminating pushes",
        )
        landed = [r for r in collector.landed() if r.context.client_id in CLIENTS]
        node = collector.landing_directory.name

    ingest = ktc(
        "ingest", "--once", "--data-dir", str(data), "--master", "local[1]", *catalog
    )
    assert ingest.returncode == 0, ingest.stderr[-3000:]
    assert sum(
        json.loads(line)["records"] for line in ingest.stdout.splitlines()
    ) >= len(landed)

    clients = ", ".join(f"'{c}'" for c in CLIENTS)
    query = (
        "SELECT landing_node, landing_offset, metric_name, metric_type, attributes, attributes_types, "
        "time_unix_nano, "
        "value, value_int, client_id, client_instance_id, terminating "
        f"FROM metrics WHERE client_id IN ({clients})"
    )
    engines = {}
    for engine in ("spark", "duckdb"):
        sql = ktc(
            "sql",
            query,
            "--format",
            "json",
            "--engine",
            engine,
            "--data-dir",
            str(data),
            "--master",
            "local[1]",
            *catalog,
        )
        assert sql.returncode == 0, sql.stderr[-3000:]
        assert sql.stderr == "", sql.stderr[-3000:]
        rows = [json.loads(line) for line in sql.stdout.splitlines()]
        assert {r["landing_node"] for r in rows} == {node}
        engines[engine] = sorted((_row_key(r) for r in rows), key=repr)
    assert engines["spark"] == expected_points(landed)
    assert engines["duckdb"] == engines["spark"]
    assert len(engines["spark"]) > 0

    # pyiceberg, as any Python reader would open the catalog: the same rows.
    from pyiceberg.catalog import load_catalog

    from exporters.lakehouse.session import LakehouseConfig

    config = LakehouseConfig.for_data_dir(data, catalog_uri=catalog_uri)
    iceberg = load_catalog("lake", **config.pyiceberg_properties())
    read = []
    for name in ("metrics_gauge", "metrics_sum"):
        for r in iceberg.load_table(("ktc", name)).scan().to_arrow().to_pylist():
            if r["client_id"] in CLIENTS:
                value = r["as_double"] if r["as_int"] is None else float(r["as_int"])
                read.append(
                    (r["landing_offset"], r["metric_name"], r["time_unix_nano"], value)
                )
    assert sorted(read) == sorted((k[0], k[1], k[5], k[6]) for k in engines["spark"])

    # The snapshots of the pushes table cover the landing log from its first record, once.
    pushes_table = iceberg.load_table(("ktc", "pushes"))
    ranges = sorted(
        tuple(
            int(x)
            for x in s.summary.additional_properties[f"ktc.landing.{node}"].split("-")
        )
        for s in pushes_table.snapshots()
        if s.summary is not None
        and f"ktc.landing.{node}" in s.summary.additional_properties
    )
    assert ranges[0][0] == 0
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert ranges[-1][1] > max(r.offset for r in landed)
    offsets = (
        pushes_table.scan(selected_fields=("landing_offset",))
        .to_arrow()
        .column(0)
        .to_pylist()
    )
    assert len(offsets) == len(set(offsets)) == ranges[-1][1]
