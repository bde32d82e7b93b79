"""The principal of a SASL login reaches the lakehouse: librdkafka clients log in over
SASL_SSL with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN as three users, their pushes land at a
real collector, one ingest run loads them into Spark, and the ``principal`` column of the
point tables, the ``metrics`` view and the ``clients`` view is each client's ``User:<name>``."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters.lakehouse.ingest import IngestJob, IngestSettings
from exporters.lakehouse.session import LakehouseConfig
from tests.integration.collector_harness import RunningCollector
from tests.integration.test_sasl_ssl_real_clients import (
    CASES,
    librdkafka,
    prepare,
    sasl_ssl_settings,
    wait_for_pushes,
)
from tests.integration.test_tls import pki  # noqa: F401 - the module-scoped CA and server certificate

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(300)]


def test_sasl_principals_in_the_lakehouse_rows(
    spark,
    lake_config: LakehouseConfig,
    tmp_path: Path,
    pki: Path,  # noqa: F811
) -> None:
    prepare(tmp_path / "data")
    client_ids = [f"lake-{user}" for _, user in CASES]
    with RunningCollector(tmp_path / "data", **sasl_ssl_settings(pki)) as collector:
        clients = [librdkafka(collector, pki, m, u, f"lake-{u}") for m, u in CASES]
        try:
            wait_for_pushes(collector, client_ids, 1, 40)
        finally:
            for client in clients:
                client.close()
        landing = collector.landing_directory
    with IngestJob(
        lake_config, lambda: [landing], IngestSettings(), spark=spark
    ) as job:
        job.run_once()
    db = lake_config.database
    expected = {f"lake-{user}": f"User:{user}" for _, user in CASES}
    clients_view = spark.sql(f"SELECT client_id, principal FROM {db}.clients").collect()
    assert {r.client_id: r.principal for r in clients_view} == expected
    rows = spark.sql(
        f"SELECT DISTINCT client_id, principal FROM {db}.metrics"
    ).collect()
    assert {r.client_id: r.principal for r in rows} == expected
    pushes = spark.sql(
        f"SELECT DISTINCT client_id, principal FROM {db}.pushes"
    ).collect()
    assert {r.client_id: r.principal for r in pushes} == expected
