"""The join behind GET /v1/applications (collector/app/applications.py): instances made by
a real ClientMetricsManager from real OTLP pushes shaped as Kafka Streams 4.4.0, Java
consumers and share consumers push them; no JVM.  Then the endpoint on an in-process
server, and ``ktc clients --applications``.  The real Streams application:
tests/gateway/test_streams_application.py."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from clock.testing import FakeClock
from collector.app.applications import applications
from collector.app.cli import cli
from collector.app.cli.clients import application_rows
from collector.telemetry.application_signals import (
    ALIVE_THREADS_METRIC,
    FAILED_THREADS_METRIC,
)
from collector.telemetry.client_metrics import ClientMetricsManager
from exporters.landing import LandingLog
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import PushTelemetryRequest
from proto.streams_states import CLIENT_STATE_METRIC, THREAD_STATE_METRIC
from subscriptions.store import ConfigStore
from tests.collector.collector_testkit import (
    MemorySubscriptions,
    Start,
    make_manager,
    make_session,
    subscription,
)
from tests.collector.streams_payloads import T0, delta_sum, gauge, payload, point
from tests.collector.test_live_clients_endpoint import SECRET, connect, get, http
from tests.collector.wire_client import WireClient

ZERO = uuid.UUID(int=0)
P1 = "0f5bd7c4-2b8e-4a3c-9d1e-7a6b5c4d3e2f"
P2 = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
PRODUCER_METRIC = gauge("org.apache.kafka.producer.record.send.rate", point(1))


class Fleet:
    """Instances of one manager, each created by a Get and fed one accepted push."""

    def __init__(self, landing: LandingLog) -> None:
        self.manager: ClientMetricsManager = make_manager(
            MemorySubscriptions(subscription("all", "*", 1000)), landing
        )
        self.now = 0

    def push(self, client_id: str, body: bytes) -> str:
        session = make_session()
        answer = self.manager.get_telemetry_subscriptions(
            ZERO, session, client_id, self.now
        )
        request = PushTelemetryRequest(
            client_instance_id=answer.client_instance_id,
            subscription_id=answer.subscription_id,
            terminating=False,
            compression_type=0,
            metrics=body,
        )
        response = self.manager.push_telemetry(request, session, client_id, 1, self.now)
        assert response.error_code == Errors.NONE
        instance = self.manager.instance(answer.client_instance_id)
        assert instance is not None
        return instance.instance_id_str

    def applications(self) -> list[dict[str, Any]]:
        return applications(self.manager.instances(), 0)


def streams_process(
    fleet: Fleet,
    app: str,
    process_id: str,
    *,
    state: int = 2,
    thread_states: tuple[int, ...] = (4, 4),
) -> dict[str, str]:
    """The clients of one Streams process as 4.4.0 names them and what each pushes: client
    id -> instance id."""
    prefix = f"{app}-{process_id}"
    made = {
        f"{prefix}-admin": fleet.push(
            f"{prefix}-admin",
            payload(
                [
                    gauge(
                        CLIENT_STATE_METRIC,
                        point(state, process_id=process_id, application_id=app),
                    ),
                    gauge(ALIVE_THREADS_METRIC, point(len(thread_states))),
                    delta_sum(FAILED_THREADS_METRIC, point(0)),
                ]
            ),
        )
    }
    for n, thread_state in enumerate(thread_states, start=1):
        thread = f"{prefix}-StreamThread-{n}"
        made[f"{thread}-consumer"] = fleet.push(
            f"{thread}-consumer",
            payload(
                [
                    gauge(
                        THREAD_STATE_METRIC,
                        point(thread_state, process_id=process_id, thread_id=thread),
                    ),
                    gauge("org.apache.kafka.stream.task.process.rate", point(1)),
                ],
                {"group_id": app, "group_member_id": f"{thread}-consumer-m"},
            ),
        )
        made[f"{thread}-producer"] = fleet.push(
            f"{thread}-producer", payload([PRODUCER_METRIC])
        )
        made[f"{prefix}-StateUpdater-{n}-restore-consumer"] = fleet.push(
            f"{prefix}-StateUpdater-{n}-restore-consumer",
            payload([gauge("org.apache.kafka.consumer.fetch.rate", point(0))]),
        )
    return made


@pytest.fixture
def fleet(landing: LandingLog) -> Fleet:
    return Fleet(landing)


def test_one_streams_process_is_one_application(fleet: Fleet) -> None:
    made = streams_process(fleet, "wordcount", P1, thread_states=(4, 3))
    fleet.push("orders-producer", payload([PRODUCER_METRIC]))  # in no application
    [app] = fleet.applications()
    assert (app["application_id"], app["kind"], app["state"]) == (
        "wordcount",
        "streams",
        "RUNNING",
    )
    [process] = app["processes"]
    assert process["process_id"] == P1
    assert (process["state"], process["state_value"]) == ("RUNNING", 2)
    assert process["state_since"] == "2025-12-01T14:40:00.000Z"  # T0
    assert (process["alive_stream_threads"], process["failed_stream_threads"]) == (2, 0)
    assert [(t["thread_id"], t["state"]) for t in app["threads"]] == [
        (f"wordcount-{P1}-StreamThread-1", "RUNNING"),
        (f"wordcount-{P1}-StreamThread-2", "PARTITIONS_ASSIGNED"),
    ]
    roles = {
        i["client_id"]: (i["role"], i["client_instance_id"]) for i in app["instances"]
    }
    assert {c: r for c, (r, _) in roles.items()} == {
        f"wordcount-{P1}-admin": "admin",
        f"wordcount-{P1}-StreamThread-1-consumer": "consumer",
        f"wordcount-{P1}-StreamThread-1-producer": "producer",
        f"wordcount-{P1}-StreamThread-2-consumer": "consumer",
        f"wordcount-{P1}-StreamThread-2-producer": "producer",
        f"wordcount-{P1}-StateUpdater-1-restore-consumer": "restore-consumer",
        f"wordcount-{P1}-StateUpdater-2-restore-consumer": "restore-consumer",
    }
    assert {c: i for c, (_, i) in roles.items()} == made
    assert {i["process_id"] for i in app["instances"]} == {P1}


def test_processes_join_by_application_id_and_the_worst_state_wins(
    fleet: Fleet,
) -> None:
    streams_process(fleet, "wordcount", P1, state=2)
    streams_process(fleet, "wordcount", P2, state=1, thread_states=(2,))
    [app] = fleet.applications()
    assert [(p["process_id"], p["state"]) for p in app["processes"]] == sorted(
        [(P1, "RUNNING"), (P2, "REBALANCING")]
    )
    assert app["state"] == "REBALANCING"
    assert len(app["threads"]) == 3 and len(app["instances"]) == 7 + 4


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ((2, 6), "ERROR"),
        ((5, 4), "PENDING_ERROR"),
        ((0, 2), "CREATED"),
        ((2, 2), "RUNNING"),
    ],
)
def test_the_application_state_is_its_worst_process_state(
    fleet: Fleet, states: tuple[int, int], expected: str
) -> None:
    for process_id, state in zip((P1, P2), states, strict=True):
        streams_process(fleet, "app", process_id, state=state, thread_states=())
    [app] = fleet.applications()
    assert app["state"] == expected


def test_an_ordinal_no_state_has_is_shown_as_its_value(fleet: Fleet) -> None:
    streams_process(fleet, "future", P1, state=9, thread_states=())
    [app] = fleet.applications()
    assert app["state"] is None
    assert (app["processes"][0]["state"], app["processes"][0]["state_value"]) == (
        None,
        9,
    )


def test_a_set_client_id_joins_by_its_prefix_and_process_id(fleet: Fleet) -> None:
    """``client.id=billing``: no uuid in the client ids; the admin's and the thread
    consumer's points carry the process id, the producer joins by the prefix."""
    fleet.push(
        "billing-admin",
        payload(
            [gauge(CLIENT_STATE_METRIC, point(2, process_id=P1, application_id="bill"))]
        ),
    )
    fleet.push(
        "billing-StreamThread-1-consumer",
        payload(
            [
                gauge(
                    THREAD_STATE_METRIC,
                    point(4, process_id=P1, thread_id="billing-StreamThread-1"),
                )
            ],
            {"group_id": "bill"},
        ),
    )
    fleet.push("billing-StreamThread-1-producer", payload([PRODUCER_METRIC]))
    fleet.push("reports-admin", payload([gauge("org.apache.kafka.admin.x", point(1))]))
    [app] = fleet.applications()
    assert (app["application_id"], app["kind"], app["state"]) == (
        "bill",
        "streams",
        "RUNNING",
    )
    assert [p["process_id"] for p in app["processes"]] == [P1]
    assert sorted(i["role"] for i in app["instances"]) == [
        "admin",
        "consumer",
        "producer",
    ]


def test_consumer_and_share_groups(fleet: Fleet) -> None:
    fetch = gauge("org.apache.kafka.consumer.fetch.manager.fetch.latency.avg", point(1))
    share = gauge(
        "org.apache.kafka.consumer.share.fetch.manager.fetch.latency.avg", point(1)
    )
    fleet.push("orders-1", payload([fetch], {"group_id": "orders"}))
    fleet.push("orders-2", payload([fetch], {"group_id": "orders"}))
    fleet.push("jobs-1", payload([share], {"group_id": "jobs"}))
    fleet.push("loner", payload([fetch]))  # no group: no application
    found = fleet.applications()
    assert [(a["kind"], a["application_id"], a["state"]) for a in found] == [
        ("consumer_group", "orders", None),
        ("share_group", "jobs", None),
    ]
    assert [i["client_id"] for i in found[0]["instances"]] == ["orders-1", "orders-2"]
    assert [i["role"] for i in found[1]["instances"]] == ["share-consumer"]
    rows = application_rows({"applications": found})
    assert [r["level"] for r in rows] == [
        "application",
        "instance",
        "instance",
        "application",
        "instance",
    ]


# ----------------------------------------------------------------------------- the endpoint
async def test_the_endpoint_and_the_cli(start: Start, tmp_path: Path) -> None:
    ConfigStore(tmp_path / "data").alter_subscription(
        "all", {"metrics": "*", "interval.ms": "1000"}
    )
    clock = FakeClock(1_000_000, wall_ns=1_700_000_000_000_000_000)
    server = await start(clock, **{"http.admin.secret": SECRET})
    prefix = f"wordcount-{P1}"
    clients: list[WireClient] = []
    for client_id, body in (
        (
            f"{prefix}-admin",
            payload(
                [
                    gauge(
                        CLIENT_STATE_METRIC,
                        point(2, T0, process_id=P1, application_id="wordcount"),
                    )
                ]
            ),
        ),
        (f"{prefix}-StreamThread-1-producer", payload([PRODUCER_METRIC])),
    ):
        client = await connect(server, client_id)
        clients.append(client)  # open: a closed connection takes its instance along
        answer = await get(client)
        request = PushTelemetryRequest(
            client_instance_id=answer.client_instance_id,
            subscription_id=answer.subscription_id,
            terminating=False,
            compression_type=0,
            metrics=body,
        )
        pushed = await client.request(ApiKeys.PUSH_TELEMETRY, 0, request)
        assert pushed.error_code == Errors.NONE
    assert (await http(server, "GET", "/v1/applications"))[0] == 401
    right = {"Authorization": f"Bearer {SECRET}"}
    status, body = await http(server, "GET", "/v1/applications", headers=right)
    assert status == 200
    [app] = body["applications"]
    assert (app["application_id"], app["state"]) == ("wordcount", "RUNNING")
    assert [i["role"] for i in app["instances"]] == ["producer", "admin"][
        ::-1
    ] or sorted(i["role"] for i in app["instances"]) == ["admin", "producer"]

    url = f"http://127.0.0.1:{server.http_port}"
    runner = CliRunner()

    def ktc(*args: str) -> Any:
        return runner.invoke(
            cli,
            [
                "clients",
                "--applications",
                "--server",
                url,
                "--admin-secret",
                SECRET,
                *args,
            ],
        )

    listed = await asyncio.to_thread(ktc, "--format", "json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == body
    table = await asyncio.to_thread(ktc)
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["KIND", "APPLICATION", "LEVEL"]
    assert lines[1].split() == [
        "streams",
        "wordcount",
        "application",
        "-",
        "-",
        "-",
        "RUNNING",
        "-",
        "-",
        "-",
    ]
    assert "1 application(s): 1 streams" in table.stderr
    csv_out = await asyncio.to_thread(ktc, "--format", "csv")
    assert csv_out.stdout.splitlines()[0].startswith("kind,application_id,level,")
    assert (
        len(csv_out.stdout.splitlines()) == 1 + 1 + 1 + 2
    )  # app, process, 2 instances
    wrong = await asyncio.to_thread(ktc, "--inventory")
    assert wrong.exit_code == 2
    assert "--applications and --inventory are exclusive" in wrong.stderr
    refused = await asyncio.to_thread(
        runner.invoke, cli, ["clients", "--applications", "--server", url]
    )
    assert refused.exit_code == 1
    assert refused.stderr.strip() == (
        f"Error: {url}/v1/applications: 401: this endpoint needs Authorization: Bearer"
        " <http.admin.secret>"
    )
