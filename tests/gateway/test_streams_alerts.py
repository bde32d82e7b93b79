"""A Kafka Streams 4.4.0 stream thread made to fail fires the failed-thread alert in a real
Prometheus: the word count of tests/prometheus/java/TelemetryStreams.java (2 stream
threads; ``--fail-on``: a processor throws on one word, once, and the uncaught exception
handler answers REPLACE_THREAD) through ``ktc gateway`` in front of the real Kafka 4.4.0
cluster, ``/metrics/clients`` on, Prometheus 2.42 scraping it every second and evaluating
the shipped rules file as it is (KafkaStreamsThreadFailed has no ``for:``: a failure is
an event).  Before the failure: both threads and the process RUNNING by name, each with one
state at 1, and the alert quiet although its rule was evaluated over the counter at 0;
after it: the alert fires for that process, with its application id, and the replacing
thread brings the alive threads back to 2.  Every query and variable of the "Kafka Streams
applications" dashboard (helm/ktc/files/grafana/ktc-streams.json) then returns data."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from collector.telemetry.prometheus.naming import MetricType, metric_name
from proto.streams_states import (
    CLIENT_STATE_METRIC,
    KAFKA_STREAMS_STATES,
    STREAM_THREAD_STATES,
    THREAD_STATE_METRIC,
)
from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway
from tests.gateway.harness.kafka_cluster import KafkaCluster
from tests.gateway.test_streams_application import STREAMS_APP, need
from tests.prometheus.prometheus_server import PrometheusServer
from tests.prometheus.test_client_metrics_endpoint import (
    STREAMS_DASHBOARD,
    dashboard_queries,
    variable_queries,
    with_variables_all,
)
from tests.prometheus.test_rules import RULES
from tests.waiting import eventually_sync

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(240)]

ALERT = "KafkaStreamsThreadFailed"
CLIENT_STATE = metric_name(CLIENT_STATE_METRIC, "", MetricType.GAUGE)
THREAD_STATE = metric_name(THREAD_STATE_METRIC, "", MetricType.GAUGE)
FAIL_ON = "kaboom"


def streams_libs() -> str:
    libs = os.environ.get("KTC_STREAMS_LIBS", "")
    if not (Path(libs) / "kafka-streams-4.4.0.jar").is_file():
        need("needs kafka-streams 4.4.0 (make streams-libs)")
    return libs


@contextmanager
def failing_streams_app(
    bootstrap: str, app: str, work: Path
) -> Iterator[subprocess.Popen[str]]:
    """The word count, RUNNING, until the block ends; then killed (a clean close, after
    its replaced thread, takes some 45 s on 2 shared vCPUs, and nothing here needs its
    terminating pushes)."""
    libs = streams_libs()
    process = subprocess.Popen(
        [
            "java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}", "-cp", f"{libs}/*", str(STREAMS_APP),
            "--bootstrap", bootstrap, "--application-id", app,
            "--input", f"{app}-words", "--output", f"{app}-counts",
            "--threads", "2", "--recording-level", "INFO", "--fail-on", FAIL_ON,
        ],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("KTC running"), line
        yield process
    finally:
        process.kill()
        process.wait(30)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


def alerts(prometheus: PrometheusServer, app: str) -> list[dict[str, Any]]:
    """The application's KafkaStreamsThreadFailed alerts, pending or firing."""
    return [
        alert
        for alert in prometheus.api("/api/v1/alerts")["alerts"]
        if alert["labels"]["alertname"] == ALERT
        and alert["labels"].get("application_id") == app
    ]


def last_evaluation_s(prometheus: PrometheusServer) -> float:
    """When Prometheus last evaluated the alert's rule (0: never)."""
    for group in prometheus.api("/api/v1/rules")["groups"]:
        for rule in group["rules"]:
            if rule["name"] == ALERT and rule["health"] == "ok":
                # RFC 3339 with nanoseconds: whole seconds are enough here.
                stamp = rule["lastEvaluation"][:19]
                return datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()
    return 0.0


def http_port(gateway: RunningGateway) -> int:
    assert gateway.server is not None and gateway.server.http_port is not None
    return gateway.server.http_port


def answers(prometheus: PrometheusServer, expr: str) -> Callable[[], object]:
    return lambda: prometheus.query(expr)


def points(
    prometheus: PrometheusServer, expr: str, at: str
) -> dict[frozenset[tuple[str, str]], float]:
    """The instant vector of ``expr`` at ``at``: labels (without the name) -> value."""
    result = prometheus.api("/api/v1/query", query=expr, time=at)["result"]
    return {
        frozenset((k, v) for k, v in r["metric"].items() if k != "__name__"): float(
            r["value"][1]
        )
        for r in result
    }


def test_a_failed_stream_thread_fires_its_alert(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    streams_libs()
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "streams", {"metrics": "org.apache.kafka.stream.", "interval.ms": "1000"}, []
    )
    app = f"failing-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers()})
    for topic in (f"{app}-words", f"{app}-counts"):
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(60)
    with (
        RunningGateway(
            data_dir,
            kafka_cluster.bootstrap_servers(),
            **{"prometheus.clients.enable": True},
        ) as gateway,
        PrometheusServer(
            tmp_path / "prometheus",
            {"ktc": (f"127.0.0.1:{http_port(gateway)}", "/metrics/clients")},
            [RULES],
        ) as prometheus,
        failing_streams_app(gateway.bootstrap, app, tmp_path) as streams,
    ):
        # The process and both threads RUNNING by their pushed ordinals (2, 4) ...
        eventually_sync(
            lambda: (
                len(
                    prometheus.query(
                        f"max by (thread_id) ({THREAD_STATE}{{group_id={app!r}}}) == 4"
                    )
                )
                == 2
                and prometheus.query(f"{CLIENT_STATE}{{application_id={app!r}}} == 2")
            ),
            timeout_s=90,
            what="the process and both threads RUNNING",
        )
        # ... and every pushed ordinal has its name at 1 in the same scrape.
        at = str(time.time())
        for ordinal, named, states in (
            (CLIENT_STATE, "ktc_stream_client_state", KAFKA_STREAMS_STATES),
            (THREAD_STATE, "ktc_stream_thread_state", STREAM_THREAD_STATES),
        ):
            selector = (
                f"{{group_id={app!r}}}"
                if ordinal == THREAD_STATE
                else (f"{{application_id={app!r}}}")
            )
            pushed = points(prometheus, f"{ordinal}{selector}", at)
            shown = points(prometheus, f"{named}{selector} == 1", at)
            assert len(pushed) >= 1
            assert {k: states[int(v)] for k, v in pushed.items()} == {
                frozenset(k - {("state", s)}): s
                for k in shown
                for s in [dict(k)["state"]]
            }, (pushed, shown)
        threads = f'ktc_stream_thread_state{{group_id="{app}"'
        # One state at a time: the named series of each pushed point add up to 1.
        per_point = prometheus.query(f"sum without (state) ({threads}}})")
        assert len(per_point) >= 2, per_point
        assert {float(r["value"][1]) for r in per_point} == {1.0}, per_point

        failed = (
            "org_apache_kafka_stream_failed_stream_threads_total"
            f'{{client_id=~"{app}-.*-admin"}}'
        )
        eventually_sync(
            lambda: prometheus.query(f"{failed} == 0"),
            timeout_s=30,
            what="failed.stream.threads at 0 in Prometheus",
        )
        seen_s = time.time()
        eventually_sync(
            lambda: last_evaluation_s(prometheus) > seen_s + 1,
            timeout_s=30,
            what=f"{ALERT} evaluated over the counter at 0",
        )
        assert alerts(prometheus, app) == []

        assert streams.stdin is not None and streams.stdout is not None
        streams.stdin.write(f"the {FAIL_ON} word\n")
        streams.stdin.flush()
        line = streams.stdout.readline()
        assert line.startswith("KTC thread failed"), line

        def firing() -> list[dict[str, Any]]:
            return [a for a in alerts(prometheus, app) if a["state"] == "firing"]

        eventually_sync(firing, timeout_s=60, what=f"{ALERT} to fire")
        (alert,) = firing()
        process_id = prometheus.query(
            f'ktc_stream_client_state{{application_id="{app}",state="RUNNING"}}'
        )[0]["metric"]["process_id"]
        assert alert["labels"]["process_id"] == process_id
        assert alert["labels"]["client_id"] == f"{app}-{process_id}-admin"
        assert alert["labels"]["severity"] == "warning"
        assert float(alert["value"]) > 0
        # REPLACE_THREAD: one failed, and two alive again.
        eventually_sync(
            lambda: (
                prometheus.query(f"{failed} == 1")
                and prometheus.query(
                    "org_apache_kafka_stream_alive_stream_threads"
                    f'{{client_id=~"{app}-.*-admin"}} == 2'
                )
            ),
            timeout_s=60,
            what="one failed thread, two alive",
        )

        for _, title, expr in dashboard_queries([STREAMS_DASHBOARD]):
            eventually_sync(
                answers(prometheus, with_variables_all(expr)),
                timeout_s=30,
                what=f"{title}: data for {expr}",
            )
        for name, selector, label in variable_queries(STREAMS_DASHBOARD):
            values = prometheus.api(
                f"/api/v1/label/{label}/values", **{"match[]": selector}
            )
            assert app in values, name
