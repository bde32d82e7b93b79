"""Ingest through real Spark + Iceberg tables: round trip, views, a batch killed midway,
where a restart reads from, bounds."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from exporters.lakehouse import failpoints
from exporters.lakehouse.flatten import PointRowsBuilder
from exporters.lakehouse.flatten_pool import MIN_RECORDS_PER_SLICE
from exporters.lakehouse.iceberg_java import table_snapshots
from exporters.lakehouse.ingest import (
    CONSUMER_NAME,
    BatchResult,
    IngestJob,
    IngestSettings,
    LandingDirBusy,
    load,
)
from exporters.lakehouse.rebuild import rebuild
from exporters.lakehouse.schema import TABLES, TableSpec, create_table_sql
from exporters.lakehouse.session import LakehouseConfig
from exporters.landing import ConsumerPositions
from tests.lakehouse.conftest import SPARK_TEST_CONF, write_landing
from tests.lakehouse.lakehouse_otlp import (
    CONTEXTS,
    canonical,
    make_context,
    metrics_data,
    sample_metrics_data,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

# Written by the landing log before the telemetry context had its upstream fields.
GOLDEN_LANDING = (
    Path(__file__).parents[1] / "exporters" / "data" / "landing-before-upstream-fields"
)

_examples = itertools.count()


def table_rows(spark, database: str) -> dict[str, list[dict]]:
    out = {}
    for table in TABLES:
        spark.catalog.refreshTable(f"{database}.{table.name}")
        rows = spark.table(f"`{database}`.`{table.name}`").collect()
        out[table.kind] = [r.asDict(recursive=True) for r in rows]
    return out


def job_for(
    config: LakehouseConfig, spark, dirs: list[Path], **settings_kw
) -> IngestJob:
    return IngestJob(config, lambda: dirs, IngestSettings(**settings_kw), spark=spark)


@settings(
    max_examples=2,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(
    pushes=st.lists(
        st.tuples(st.integers(0, 1), metrics_data(), CONTEXTS), min_size=1, max_size=8
    )
)
def test_every_point_type_round_trips_through_spark_tables(
    spark_lake, tmp_path_factory, pushes
) -> None:
    spark, lake = spark_lake
    config = LakehouseConfig(
        lake, database=f"roundtrip{next(_examples)}", extra_conf=SPARK_TEST_CONF
    )
    root = tmp_path_factory.mktemp("landing")
    dirs = [root / "node-0", root / "node-1"]
    expected = {}
    for node in (0, 1):
        mine = [(ctx, md) for n, md, ctx in pushes if n == node]
        offsets = write_landing(
            dirs[node], [(ctx, md.SerializeToString()) for ctx, md in mine]
        )
        for offset, (_, md) in zip(offsets, mine, strict=True):
            expected[(f"node-{node}", offset)] = md
    # Small batches: several batches, both directories, partitions by receive hour.
    with job_for(config, spark, dirs, max_records_per_source=4) as job:
        results = job.run_once()
    assert sum(r.records for r in results) == len(pushes)

    rows = table_rows(spark, config.database)
    rebuilt = rebuild(rows)
    assert len(rows["pushes"]) == len(pushes)
    with_points = {k: md for k, md in expected.items() if canonical(md) != {}}
    assert set(rebuilt) <= set(expected)
    for key, md in expected.items():
        if key in rebuilt:
            assert canonical(rebuilt[key]) == canonical(md), key
        else:
            assert not _has_points(md), key
    assert set(rebuilt) == {k for k, md in with_points.items() if _has_points(md)}


def test_a_batch_flattened_on_two_processes_lands_every_point_once(
    spark_lake, tmp_path: Path
) -> None:
    spark, lake = spark_lake
    config = LakehouseConfig(
        lake, database=f"sliced{next(_examples)}", extra_conf=SPARK_TEST_CONF
    )
    pushes = [
        sample_metrics_data(seed) for seed in range(2 * MIN_RECORDS_PER_SLICE + 1)
    ]
    directory = tmp_path / "node-1"
    offsets = write_landing(
        directory, [(make_context(), md.SerializeToString()) for md in pushes]
    )
    with job_for(config, spark, [directory], flatten_processes=2) as job:
        results = job.run_once()
    assert [(r.records, r.flattened_on) for r in results] == [(len(pushes), 2)]
    rebuilt = rebuild(table_rows(spark, config.database))
    assert {key: canonical(md) for key, md in rebuilt.items()} == {
        ("node-1", offset): canonical(md)
        for offset, md in zip(offsets, pushes, strict=True)
    }


def _has_points(md: MetricsData) -> bool:
    return any(
        len(getattr(m, m.WhichOneof("data")).data_points) if m.WhichOneof("data") else 0
        for rm in md.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    )


def _gauge_push(
    value: float,
    *,
    attrs: dict[str, str] | None = None,
    time_s: int = 1_795_000_000,
    name: str = "org.apache.kafka.producer.node.request.latency.max",
) -> bytes:
    md = MetricsData()
    metric = (
        md.resource_metrics.add().scope_metrics.add().metrics.add(name=name, unit="ms")
    )
    point = metric.gauge.data_points.add(time_unix_nano=time_s * 10**9)
    if isinstance(value, int):
        point.as_int = value
    else:
        point.as_double = value
    for k, v in (attrs or {"node.id": "1"}).items():
        point.attributes.add(key=k, value=AnyValue(string_value=v))
    return md.SerializeToString()


def test_views_metrics_clients_latest(spark, lake_config, tmp_path) -> None:
    t0 = 1_795_000_000
    # A is behind a gateway (first push on upstream broker 1, then on 2); B is standalone.
    a = make_context(
        client_instance_id="A" * 22,
        client_id="producer-a",
        upstream_cluster_id="Yw3dJ2xXQ6qRbtJmPMOxZw",
        upstream_node_id=1,
    )
    b = make_context(
        client_instance_id="B" * 22,
        client_id="consumer-b",
        client_software_version="2.15.0-rdkafka-2.15.0",
    )
    md = MetricsData()
    hist = md.resource_metrics.add().scope_metrics.add().metrics.add(name="h")
    hist.histogram.data_points.add(
        count=4, sum=10.0, min=1.0, max=4.0, time_unix_nano=t0 * 10**9
    )
    pushes = [
        (
            dataclasses.replace(a, received_time_unix_nano=(t0 + 1) * 10**9),
            _gauge_push(5, time_s=t0),
        ),
        (
            dataclasses.replace(
                a, received_time_unix_nano=(t0 + 2) * 10**9, upstream_node_id=2
            ),
            _gauge_push(7.5, time_s=t0 + 1),
        ),
        (
            dataclasses.replace(b, received_time_unix_nano=(t0 + 3) * 10**9),
            _gauge_push(1.0, time_s=t0),
        ),
        (
            dataclasses.replace(
                b, received_time_unix_nano=(t0 + 4) * 10**9, terminating=True
            ),
            md.SerializeToString(),
        ),
    ]
    write_landing(tmp_path / "node-1", pushes)
    with job_for(lake_config, spark, [tmp_path / "node-1"]) as job:
        job.run_once()
    db = lake_config.database

    metrics = spark.sql(
        f"SELECT metric_name, metric_type, value, value_int, count, sum, client_id, "
        f"upstream_cluster_id, upstream_node_id FROM {db}.metrics ORDER BY received_time"
    ).collect()
    assert [(r.metric_type, r.value, r.value_int, r.client_id) for r in metrics] == [
        ("gauge", 5.0, 5, "producer-a"),
        ("gauge", 7.5, None, "producer-a"),
        ("gauge", 1.0, None, "consumer-b"),
        ("histogram", 2.5, None, "consumer-b"),  # mean: sum 10 / count 4
    ]
    assert [(r.upstream_cluster_id, r.upstream_node_id) for r in metrics] == [
        ("Yw3dJ2xXQ6qRbtJmPMOxZw", 1),
        ("Yw3dJ2xXQ6qRbtJmPMOxZw", 2),
        (None, None),
        (None, None),
    ]
    clients = {
        r.client_instance_id: r
        for r in spark.sql(f"SELECT * FROM {db}.clients").collect()
    }
    assert clients["A" * 22].push_count == 2 and clients["A" * 22].terminated is False
    assert clients["B" * 22].terminated is True
    assert clients["B" * 22].client_software_version == "2.15.0-rdkafka-2.15.0"
    assert (
        clients["A" * 22].upstream_cluster_id,
        clients["A" * 22].upstream_node_id,
    ) == ("Yw3dJ2xXQ6qRbtJmPMOxZw", 2)  # as of the latest push
    assert (
        clients["B" * 22].upstream_cluster_id,
        clients["B" * 22].upstream_node_id,
    ) == (None, None)
    # PySpark hands TIMESTAMPs back as naive local datetimes; .timestamp() undoes that.
    assert clients["A" * 22].first_push.timestamp() == t0 + 1
    assert clients["A" * 22].last_push.timestamp() == t0 + 2
    latest = spark.sql(
        f"SELECT client_id, value, upstream_node_id FROM {db}.latest "
        f"WHERE metric_type = 'gauge' ORDER BY client_id"
    ).collect()
    assert [(r.client_id, r.value, r.upstream_node_id) for r in latest] == [
        ("consumer-b", 1.0, None),
        ("producer-a", 7.5, 2),
    ]


def test_tables_made_before_the_upstream_columns_gain_them_and_old_rows_read_null(
    spark, lake_config, tmp_path
) -> None:
    """A lake created before the context had its upstream fields: its tables lack the two
    columns and hold rows without them.  The next ingest adds the columns (in the order a
    new table has them), old rows read null, and records landed before the fields existed
    (the golden segment, written by that code) ingest with null too."""
    db = lake_config.database
    upstream = {"upstream_cluster_id", "upstream_node_id"}
    spark.sql(f"CREATE NAMESPACE lake.`{db}`")
    old_tables = {}
    for table in TABLES:
        old = TableSpec(
            table.kind,
            table.name,
            pa.schema([f for f in table.arrow_schema if f.name not in upstream]),
        )
        spark.sql(create_table_sql(db, old))
        old_tables[table.kind] = old
    # Rows as the old ingest wrote them: no upstream columns, a batch of their own.
    builder = PointRowsBuilder()
    builder.add_payload(
        _gauge_push(1.0, time_s=1_795_000_000),
        make_context(client_id="before", received_time_unix_nano=1_795_000_000 * 10**9),
        "node-0",
        0,
    )
    old_rows = {
        old_tables[kind].name: table.select(
            [f.name for f in old_tables[kind].data_schema]
        )
        for kind, table in builder.finish().items()
    }
    load(spark, lake_config, old_rows, {name: {} for name in old_rows})

    node = tmp_path / "node-1"
    shutil.copytree(
        GOLDEN_LANDING, node
    )  # offsets 0-2, landed without the upstream fields
    write_landing(
        node,
        [
            (
                make_context(
                    client_id="behind-gateway",
                    upstream_node_id=2,
                    upstream_cluster_id="Yw3dJ2xXQ6qRbtJmPMOxZw",
                ),
                _gauge_push(3.0),
            )
        ],
    )
    with job_for(lake_config, spark, [node]) as job:
        assert sum(r.records for r in job.run_once()) == 4

    for table in TABLES:
        assert set(spark.table(f"`{db}`.`{table.name}`").columns) == set(
            table.column_names
        )
    pushes = spark.sql(
        f"SELECT client_id, landing_node, landing_offset, upstream_cluster_id, upstream_node_id "
        f"FROM {db}.pushes ORDER BY landing_node, landing_offset"
    ).collect()
    assert [tuple(r) for r in pushes] == [
        ("before", "node-0", 0, None, None),
        ("producer-1", "node-1", 0, None, None),
        ("producer-1", "node-1", 1, None, None),
        (None, "node-1", 2, None, None),
        ("behind-gateway", "node-1", 3, "Yw3dJ2xXQ6qRbtJmPMOxZw", 2),
    ]
    gauges = spark.sql(
        f"SELECT client_id, upstream_cluster_id, upstream_node_id FROM {db}.metrics "
        f"WHERE client_id IN ('before', 'behind-gateway') AND metric_type = 'gauge' ORDER BY value"
    ).collect()
    assert [tuple(r) for r in gauges] == [
        ("before", None, None),
        ("behind-gateway", "Yw3dJ2xXQ6qRbtJmPMOxZw", 2),
    ]


def test_a_batch_that_died_after_some_tables_committed_is_completed_not_doubled(
    spark, lake_config, tmp_path, monkeypatch
) -> None:
    node = tmp_path / "node-1"
    write_landing(node, [(make_context(), _gauge_push(i)) for i in range(6)])
    committed_tables = []

    def die_after_one_table(point: str, batch: int) -> None:
        if point == "mid_write":
            committed_tables.append(batch)
            if len(committed_tables) == 1:
                raise RuntimeError("killed")

    monkeypatch.setattr(failpoints, "reached", die_after_one_table)
    with job_for(lake_config, spark, [node], max_records_per_source=4) as job:
        with pytest.raises(RuntimeError, match="killed"):
            job.run_batch()
    monkeypatch.undo()
    db = lake_config.database
    # The point tables committed first: the gauge table holds the batch, pushes not yet.
    assert spark.table(f"{db}.metrics_gauge").count() == 4
    assert spark.table(f"{db}.pushes").count() == 0
    with job_for(lake_config, spark, [node], max_records_per_source=4) as job:
        results = job.run_once()
    assert [(r.ranges, r.records, r.replayed) for r in results] == [
        ({"node-1": (0, 4)}, 4, True),
        ({"node-1": (4, 6)}, 6 - 4, False),
    ]
    for table in ("metrics_gauge", "pushes"):
        offsets = sorted(
            r.landing_offset for r in spark.table(f"{db}.{table}").collect()
        )
        assert offsets == list(range(6)), table
    # Each table's snapshots hold what it committed, once.
    gauge = [
        s.summary.get("ktc.landing.node-1")
        for s in table_snapshots(spark, lake_config.table("metrics_gauge"))
    ]
    assert gauge == ["0-4", "4-6"]
    pushes = [
        s.summary.get("ktc.landing.node-1")
        for s in table_snapshots(spark, lake_config.table("pushes"))
    ]
    assert pushes == ["0-4", "4-6"]


def test_a_partial_batch_completed_by_a_larger_one_keeps_each_row_once(
    spark, lake_config, tmp_path, monkeypatch
) -> None:
    """The replay filter on its boundary: killed after the point tables committed
    records [0, 3) of each directory (pushes not), the restart's batches are larger, so
    its first reads [0, 6): the point tables get the rows from offset 3 on (the
    ``landing_offset >= 3`` of ingest._rows_from), pushes all six.  A filter off by one
    (``>``) loses offset 3's rows; none (``>= 0``) doubles 0-2."""
    nodes = [tmp_path / "node-1", tmp_path / "node-2"]
    for node in nodes:
        write_landing(node, [(make_context(), _gauge_push(i)) for i in range(6)])

    def die_before_pushes(point: str, batch: int) -> None:
        if point == "before_pushes":
            raise RuntimeError("killed")

    monkeypatch.setattr(failpoints, "reached", die_before_pushes)
    with job_for(lake_config, spark, nodes, max_records_per_source=3) as job:
        with pytest.raises(RuntimeError, match="killed"):
            job.run_batch()
    monkeypatch.undo()
    db = lake_config.database
    assert spark.table(f"{db}.metrics_gauge").count() == 6
    assert spark.table(f"{db}.pushes").count() == 0
    with job_for(lake_config, spark, nodes, max_records_per_source=10) as job:
        results = job.run_once()
    assert [(r.ranges, r.rows, r.replayed) for r in results] == [
        (
            {"node-1": (0, 6), "node-2": (0, 6)},
            {"metrics_gauge": 6, "pushes": 12},
            True,
        )
    ]
    for table in ("metrics_gauge", "pushes"):
        lineage = sorted(
            (r.landing_node, r.landing_offset)
            for r in spark.table(f"{db}.{table}").collect()
        )
        assert lineage == [(n.name, o) for n in nodes for o in range(6)], table
    assert ConsumerPositions(node, CONSUMER_NAME).load() == 6


def test_snapshots_read_from_table_metadata_match_spark_and_see_other_writers(
    spark, lake_config, tmp_path
) -> None:
    """The positions come from the table's metadata through Iceberg's Java API: the same
    snapshots, times and summaries as Spark's ``.snapshots`` metadata table, and a commit
    by another writer (here pyiceberg, another process's library) after this session
    loaded the table is seen on the next read."""
    from pyiceberg.catalog import load_catalog

    node = tmp_path / "node-1"
    write_landing(node, [(make_context(), _gauge_push(i)) for i in range(3)])
    with job_for(lake_config, spark, [node], max_records_per_source=2) as job:
        job.run_once()
    name = lake_config.table("metrics_gauge")

    def from_spark() -> list[tuple[int, int, dict[str, str]]]:
        rows = spark.sql(
            f"SELECT snapshot_id, unix_millis(committed_at) AS ms, operation, summary "
            f"FROM {name}.snapshots"
        ).collect()
        return [
            (r.snapshot_id, r.ms, {**r.summary, "operation": r.operation}) for r in rows
        ]

    def from_metadata() -> list[tuple[int, int, dict[str, str]]]:
        return [
            (s.snapshot_id, s.committed_at_ms, dict(s.summary))
            for s in table_snapshots(spark, name)
        ]

    assert from_metadata() == from_spark()
    assert [s[2]["ktc.landing.node-1"] for s in from_metadata()] == ["0-2", "2-3"]

    other = load_catalog("lake", **lake_config.pyiceberg_properties()).load_table(
        (lake_config.database, "metrics_gauge")
    )
    # An append of no files: a commit by another catalog client, nothing more.
    with other.transaction() as transaction:
        with transaction.update_snapshot(
            snapshot_properties={"ktc.landing.node-2": "0-1"}
        ).fast_append():
            pass
    seen = from_metadata()
    assert len(seen) == 3
    assert seen[-1][2]["ktc.landing.node-2"] == "0-1"
    assert seen == from_spark()


def test_positions_behind_the_tables_are_committed_again(
    spark, lake_config, tmp_path
) -> None:
    """A crash between the table commits and the consumer positions."""
    node = tmp_path / "node-1"
    write_landing(node, [(make_context(), _gauge_push(i)) for i in range(3)])
    with job_for(lake_config, spark, [node]) as job:
        job.run_once()
    positions = ConsumerPositions(node, CONSUMER_NAME)
    positions.commit(1)  # as if the process died before committing positions
    with job_for(lake_config, spark, [node]) as job:
        assert (
            job.run_once() == []
        )  # nothing re-ingested: the snapshots say where we are
    assert positions.load() == 3
    assert spark.table(f"{lake_config.database}.metrics_gauge").count() == 3


def test_a_directory_the_tables_do_not_know_is_ingested_from_its_first_record(
    spark, lake_config, tmp_path
) -> None:
    """A rebuild: the tables, not the consumer position, say what is in."""
    node1, node2 = tmp_path / "node-1", tmp_path / "node-2"
    write_landing(node1, [(make_context(), _gauge_push(1))])
    write_landing(node2, [(make_context(), _gauge_push(i)) for i in range(3)])
    ConsumerPositions(node2, CONSUMER_NAME).commit(2)  # e.g. an old lake moved aside
    dirs = [node1]
    with IngestJob(lake_config, lambda: dirs, spark=spark) as job:
        assert [r.records for r in job.run_once()] == [1]
        dirs.append(node2)
        assert [r.records for r in job.run_once()] == [3]
        assert job.run_once() == []
    rows = spark.table(f"{lake_config.database}.metrics_gauge").collect()
    assert sorted((r.landing_node, r.landing_offset) for r in rows) == [
        ("node-1", 0),
        ("node-2", 0),
        ("node-2", 1),
        ("node-2", 2),
    ]


def test_garbage_payload_is_recorded_and_skipped(spark, lake_config, tmp_path) -> None:
    node = tmp_path / "node-1"
    write_landing(
        node, [(make_context(), b"\xff\xff\xff"), (make_context(), _gauge_push(3))]
    )
    with job_for(lake_config, spark, [node]) as job:
        [result] = job.run_once()
    assert result.rejected == 1
    [snapshot] = table_snapshots(spark, lake_config.table("pushes"))
    assert snapshot.summary["ktc.rejected"] == "1"
    assert '"offset": 0' in snapshot.summary["ktc.rejected.first"]
    assert snapshot.summary["ktc.landing.node-1"] == "0-2"
    assert spark.table(f"{lake_config.database}.metrics_gauge").count() == 1


def test_a_second_writer_of_one_landing_directory_is_refused(
    spark, lake_config, tmp_path
) -> None:
    node = tmp_path / "node-1"
    node.mkdir()
    with job_for(lake_config, spark, [node]), pytest.raises(LandingDirBusy):
        job_for(lake_config, spark, [node]).start()


def test_streaming_picks_up_new_pushes_and_runs_maintenance_between_batches(
    spark, lake_config, tmp_path
) -> None:
    import threading
    import time

    node = tmp_path / "node-1"
    write_landing(node, [(make_context(), _gauge_push(0))])
    maintenance_calls: list[SparkSession] = []
    batches: list[BatchResult] = []
    job = IngestJob(
        lake_config,
        lambda: [node],
        IngestSettings(trigger_interval_s=0.2, maintenance_interval_s=0.0),
        spark=spark,
        maintenance=maintenance_calls.append,
    )
    stop = threading.Event()
    runner = threading.Thread(target=job.run_forever, args=(stop, batches.append))
    runner.start()
    try:
        deadline = time.monotonic() + 120
        while not batches:
            assert time.monotonic() < deadline and runner.is_alive()
            time.sleep(0.1)
        write_landing(node, [(make_context(), _gauge_push(1))])  # while it runs
        while sum(b.records for b in batches) < 2:
            assert time.monotonic() < deadline and runner.is_alive()
            time.sleep(0.1)
    finally:
        stop.set()
        runner.join(120)
        job.close()
    assert not runner.is_alive()
    assert [b.records for b in batches] == [1, 1]
    assert maintenance_calls and maintenance_calls[0] is spark
    assert spark.table(f"{lake_config.database}.metrics_gauge").count() == 2
