"""``ktc gateway`` in front of a real Apache Kafka 4.4.0 node whose only listener requires SASL
(SASL_PLAINTEXT: SCRAM-SHA-512, SCRAM-SHA-256, PLAIN; users alice and bob), with the
gateway's authorizer on (``super.users=User:alice``):

* a raw client that never authenticates gets ApiVersions and nothing else: telemetry (71,
  72), every client-metrics admin API, the quota and ACL APIs the gateway answers close the
  connection with nothing written, as the node itself closes it (checked against the node
  directly); nothing is stored, nothing lands;
* librdkafka (alice, SCRAM-SHA-512) and the Java client (bob, PLAIN) log in through the
  gateway and push telemetry, landed under their principal;
* bob, logged in but without an ACL, is denied a subscription change (Java Admin, and
  kafka-tools 4.4.0's ClientMetricsCommand); alice, the super user, grants him ALTER_CONFIGS
  on the cluster with the Java Admin / kafka-tools' AclCommand through the gateway, and then
  he succeeds;
* client quotas set through the gateway with kafka-tools' ConfigCommand
  (``--entity-type clients|users``) are the gateway's: stored in its config store, enforced
  by its engine, described back; bob without the ACL is denied.

The gateway is not told the cluster requires SASL (``gateway.upstream.security.protocol``
is left at PLAINTEXT): it learns it from the node's answer to its own unauthenticated
question at start.  One more gateway is told (SASL_PLAINTEXT), and one with
``gateway.telemetry.require.authentication=false`` in front of a cluster it cannot ask.
"""

from __future__ import annotations

import gc
import os
import socket
import ssl
import struct
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from collector.app.node import StartupError
from collector.security.credentials import (
    ScramMechanism,
    scram_credential_from_password,
)
from collector.security.credentials_file import DurableCredentialStore
from exporters.landing import LandingRecord
from proto import ApiKeys, encode_request
from proto.messages import (
    AlterClientQuotasRequest,
    ApiVersionsRequest,
    CreateAclsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeConfigsRequest,
    GetTelemetrySubscriptionsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
    PushTelemetryRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from proto.messages import alter_client_quotas_request as acq
from proto.messages import create_acls_request as cacl
from proto.messages import describe_configs_request as dcr
from proto.messages import incremental_alter_configs_request as iac
from subscriptions.store import ConfigStore
from tests.gateway.gateway_harness import RunningGateway, wait_for
from tests.gateway.harness.kafka_cluster import KafkaCluster, classpath, java_bin
from tests.integration.test_tls import pki  # noqa: F401 - the module-scoped CA and server certificate
from tests.secrets_under_test import SASL_USERS, WRONG_PASSWORD

pytestmark = [pytest.mark.gateway, pytest.mark.timeout(600)]

JAVA_DIR = Path(__file__).resolve().parents[1] / "integration" / "java"
CLIENT_METRICS = 16  # ConfigResource.Type.CLIENT_METRICS
SUPER_USER = "User:alice"
ANONYMOUS_CLIENT = "never-authenticates"


# ---- the gateway -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(
    sasl_only_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningGateway]:
    data_dir = tmp_path_factory.mktemp("gateway-security") / "data"
    ConfigStore(data_dir).alter_subscription(
        "everything", {"metrics": "org.apache.kafka.", "interval.ms": "500"}, []
    )
    with RunningGateway(
        data_dir,
        sasl_only_cluster.bootstrap_servers(),
        **{
            "authorizer.class.name": (
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
            ),
            "super.users": SUPER_USER,
        },
    ) as running:
        yield running


# ---- a raw client ----------------------------------------------------------------------


def api_versions(correlation_id: int) -> bytes:
    return encode_request(
        ApiKeys.API_VERSIONS,
        3,
        correlation_id,
        ANONYMOUS_CLIENT,
        ApiVersionsRequest(client_software_name="raw", client_software_version="1.0"),
    )


def alter_subscription(name: str) -> bytes:
    return encode_request(
        ApiKeys.INCREMENTAL_ALTER_CONFIGS,
        1,
        2,
        ANONYMOUS_CLIENT,
        IncrementalAlterConfigsRequest(
            resources=(
                iac.AlterConfigsResource(
                    resource_type=CLIENT_METRICS,
                    resource_name=name,
                    configs=(
                        iac.AlterableConfig(name="metrics", value="*"),
                        iac.AlterableConfig(name="interval.ms", value="100"),
                    ),
                ),
            )
        ),
    )


# Every API the gateway answers itself, as a client that never authenticates sends it.
UNAUTHENTICATED_REQUESTS: dict[str, bytes] = {
    "GetTelemetrySubscriptions": encode_request(
        ApiKeys.GET_TELEMETRY_SUBSCRIPTIONS,
        0,
        2,
        ANONYMOUS_CLIENT,
        GetTelemetrySubscriptionsRequest(),
    ),
    "PushTelemetry": encode_request(
        ApiKeys.PUSH_TELEMETRY,
        0,
        2,
        ANONYMOUS_CLIENT,
        PushTelemetryRequest(client_instance_id=uuid.uuid4(), metrics=b""),
    ),
    "IncrementalAlterConfigs": alter_subscription("anonymous-subscription"),
    "DescribeConfigs": encode_request(
        ApiKeys.DESCRIBE_CONFIGS,
        4,
        2,
        ANONYMOUS_CLIENT,
        DescribeConfigsRequest(
            resources=(
                dcr.DescribeConfigsResource(
                    resource_type=CLIENT_METRICS,
                    resource_name="everything",
                    configuration_keys=None,
                ),
            )
        ),
    ),
    "ListConfigResources": encode_request(
        ApiKeys.LIST_CONFIG_RESOURCES,
        1,
        2,
        ANONYMOUS_CLIENT,
        ListConfigResourcesRequest(resource_types=(CLIENT_METRICS,)),
    ),
    "AlterClientQuotas": encode_request(
        ApiKeys.ALTER_CLIENT_QUOTAS,
        1,
        2,
        ANONYMOUS_CLIENT,
        AlterClientQuotasRequest(
            entries=(
                acq.EntryData(
                    entity=(
                        acq.EntityData(entity_type="client-id", entity_name="victim"),
                    ),
                    ops=(acq.OpData(key="consumer_byte_rate", value=1.0),),
                ),
            )
        ),
    ),
    "DescribeClientQuotas": encode_request(
        ApiKeys.DESCRIBE_CLIENT_QUOTAS,
        1,
        2,
        ANONYMOUS_CLIENT,
        DescribeClientQuotasRequest(),
    ),
    "CreateAcls": encode_request(
        ApiKeys.CREATE_ACLS,
        3,
        2,
        ANONYMOUS_CLIENT,
        CreateAclsRequest(
            creations=(
                cacl.AclCreation(
                    resource_type=4,  # CLUSTER
                    resource_name="kafka-cluster",
                    resource_pattern_type=3,  # LITERAL
                    principal="User:ANONYMOUS",
                    host="*",
                    operation=2,  # ALL
                    permission_type=3,  # ALLOW
                ),
            )
        ),
    ),
    "DescribeAcls": encode_request(
        ApiKeys.DESCRIBE_ACLS,
        3,
        2,
        ANONYMOUS_CLIENT,
        DescribeAclsRequest(
            resource_type_filter=1,  # ANY
            resource_name_filter=None,
            pattern_type_filter=1,  # ANY
            principal_filter=None,
            host_filter=None,
            operation=1,  # ANY
            permission_type=1,  # ANY
        ),
    ),
}


def read_frame(sock: socket.socket) -> bytes | None:
    """The next response payload, or None when the peer closed the connection."""
    buffer = b""
    while len(buffer) < 4 or len(buffer) < 4 + struct.unpack_from(">i", buffer)[0]:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buffer += chunk
    return buffer[4:]


def send_unauthenticated(port: int, *frames: bytes) -> list[bytes | None]:
    """Sends each frame in turn on one connection, reading its answer (None: closed)."""
    answers: list[bytes | None] = []
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        for frame in frames:
            try:
                sock.sendall(frame)
            except (BrokenPipeError, ConnectionResetError):
                answers.append(None)
                break
            answer = read_frame(sock)
            answers.append(answer)
            if answer is None:
                break
    return answers


def test_the_node_itself_closes_a_connection_that_skips_authentication(
    sasl_only_cluster: KafkaCluster,
) -> None:
    """What the gateway must do, as Kafka 4.4.0 does it (SaslServerAuthenticator's
    "Unexpected Kafka request of type ... during SASL handshake"): ApiVersions answered,
    any other request closes the connection, nothing written."""
    port = sasl_only_cluster.node_ports[1]["SASL_PLAINTEXT"]
    for name in ("GetTelemetrySubscriptions", "IncrementalAlterConfigs", "CreateAcls"):
        first, second = send_unauthenticated(
            port, api_versions(1), UNAUTHENTICATED_REQUESTS[name]
        )
        assert first is not None and struct.unpack_from(">ih", first) == (1, 0)
        assert second is None, name
        # And as the very first request.
        assert send_unauthenticated(port, UNAUTHENTICATED_REQUESTS[name]) == [None]


@pytest.mark.parametrize("name", sorted(UNAUTHENTICATED_REQUESTS))
def test_a_client_that_never_authenticates_is_refused(
    gateway: RunningGateway, name: str
) -> None:
    first, second = send_unauthenticated(
        gateway.port, api_versions(1), UNAUTHENTICATED_REQUESTS[name]
    )
    assert first is not None and struct.unpack_from(">ih", first) == (1, 0)
    assert second is None, f"{name} answered before authentication"
    assert send_unauthenticated(gateway.port, UNAUTHENTICATED_REQUESTS[name]) == [None]


def test_a_client_that_stops_half_way_through_scram_is_refused(
    gateway: RunningGateway,
) -> None:
    handshake = encode_request(
        ApiKeys.SASL_HANDSHAKE,
        1,
        2,
        ANONYMOUS_CLIENT,
        SaslHandshakeRequest(mechanism="SCRAM-SHA-512"),
    )
    client_first = encode_request(
        ApiKeys.SASL_AUTHENTICATE,
        2,
        3,
        ANONYMOUS_CLIENT,
        SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=abcdefgh"),
    )
    answers = send_unauthenticated(
        gateway.port,
        api_versions(1),
        handshake,
        client_first,
        alter_subscription("half-way-subscription"),
    )
    assert [a is not None for a in answers] == [True, True, True, False]
    store = ConfigStore(gateway.config.data_dir)
    assert "half-way-subscription" not in store.list_names()


def refusals(gateway: RunningGateway) -> dict[str, float]:
    """ktc_gateway_unauthenticated_refused_total by API, as /metrics reads."""
    prefix = 'ktc_gateway_unauthenticated_refused_total{api="'
    counts = {}
    for line in gateway.metrics_text().splitlines():
        if line.startswith(prefix):
            api, _, value = line[len(prefix) :].partition('"} ')
            counts[api] = float(value)
    return counts


def test_nothing_an_unauthenticated_client_sends_is_stored_or_landed(
    gateway: RunningGateway,
) -> None:
    before = refusals(gateway)
    for name, frame in UNAUTHENTICATED_REQUESTS.items():
        assert send_unauthenticated(gateway.port, api_versions(1), frame)[1:] == [
            None
        ], name
    store = ConfigStore(gateway.config.data_dir)
    assert "anonymous-subscription" not in store.list_names()
    assert not store.describe_quotas()
    assert not [r for r in gateway.landed() if r.context.client_id == ANONYMOUS_CLIENT]
    # Each refusal counted, by API.
    after = refusals(gateway)
    for api in ("GET_TELEMETRY_SUBSCRIPTIONS", "PUSH_TELEMETRY", "CREATE_ACLS"):
        assert after[api] == before.get(api, 0) + 1, after


# ---- clients that log in ---------------------------------------------------------------


def test_librdkafka_and_the_java_client_land_under_their_principal(
    gateway: RunningGateway, sasl_only_cluster: KafkaCluster, tmp_path: Path
) -> None:
    producer = Producer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "client.id": "alice-rdkafka",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": sasl_only_cluster.sasl_users["alice"],
            "log_level": 3,
        }
    )
    java = java_telemetry_client(
        gateway.bootstrap, "PLAIN", "bob", sasl_only_cluster.sasl_users["bob"], tmp_path
    )
    try:
        producer.poll(0)

        def both_landed() -> list[LandingRecord] | None:
            found = gateway.landed()
            wanted = {"alice-rdkafka", "bob-java"}
            return found if wanted <= {r.context.client_id for r in found} else None

        landed = wait_for(
            both_landed,
            timeout_s=60,
            what="pushes from alice's librdkafka producer and bob's Java producer",
            poll_s=0.2,
        )
    finally:
        producer.flush(5)
        out, err = stop_java(java)
    principals = {
        r.context.client_id: r.context.principal
        for r in landed
        if r.context.client_id in {"alice-rdkafka", "bob-java"}
    }
    assert principals == {"alice-rdkafka": "User:alice", "bob-java": "User:bob"}, (
        out,
        err[-2000:],
    )


# ---- authorization ---------------------------------------------------------------------


def java_or_skip() -> str:
    java = java_bin()
    if java is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("needs java")
        pytest.skip("needs java")
    return java


def java_telemetry_client(
    bootstrap: str, mechanism: str, user: str, password: str, work: Path
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            java_or_skip(),
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}",
            "-cp",
            classpath(),
            str(JAVA_DIR / "SaslTelemetryClient.java"),
            "--bootstrap",
            bootstrap,
            "--protocol",
            "SASL_PLAINTEXT",
            "--mechanism",
            mechanism,
            "--user",
            user,
            "--password",
            password,
            "--client-id",
            f"{user}-java",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop_java(process: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()


def client_properties(work: Path, user: str, password: str) -> Path:
    path = work / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="{user}" password="{password}";\n'
    )
    return path


def kafka_tool(
    main_class: str, *args: str, work: Path
) -> subprocess.CompletedProcess[str]:
    """One of kafka-tools 4.4.0's commands, as its kafka-*.sh script runs it."""
    return subprocess.run(
        [
            java_or_skip(),
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}",
            "-cp",
            classpath(),
            main_class,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


CLIENT_METRICS_COMMAND = "org.apache.kafka.tools.ClientMetricsCommand"
ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"


def test_the_subscription_change_needs_the_acl(
    gateway: RunningGateway, sasl_only_cluster: KafkaCluster, tmp_path: Path
) -> None:
    users = sasl_only_cluster.sasl_users
    bob = client_properties(tmp_path, "bob", users["bob"])
    alice = client_properties(tmp_path, "alice", users["alice"])
    # The Java Admin: bob denied, alice grants him, he alters, alice takes it back.
    done = subprocess.run(
        [
            java_or_skip(),
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={tmp_path}",
            "-cp",
            classpath(),
            str(JAVA_DIR / "AclAdminCheck.java"),
            "--bootstrap",
            gateway.bootstrap,
            "--user-props",
            str(bob),
            "--admin-props",
            str(alice),
            "--principal",
            "User:bob",
        ],
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )
    steps = {}
    for line in done.stdout.splitlines():
        if line.startswith("KTC "):
            _, step, outcome = (line + " ").split(" ", 2)
            steps[step] = outcome.strip()
    assert "done" in steps, (
        f"exit {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    )
    denied = (
        "error org.apache.kafka.common.errors.ClusterAuthorizationException: "
        "Cluster authorization failed."
    )
    assert steps["user-alter-before"] == denied
    assert steps["admin-create-acls"] == "ok"
    assert steps["admin-describe-acls"] == (
        "ok 1 [(pattern=ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, "
        "patternType=LITERAL), entry=(principal=User:bob, host=*, "
        "operation=ALTER_CONFIGS, permissionType=ALLOW))]"
    )
    assert steps["user-alter-granted"] == "ok"
    assert steps["user-describe-configs"] == "ok org.apache.kafka.consumer."
    assert steps["admin-delete-acls"].startswith("ok 1 ")
    assert steps["user-alter-after-delete"] == denied
    assert steps["admin-alter"] == "ok"
    # The client quota APIs are the gateway's too (authorized as on serve).
    assert steps["admin-alter-quotas"] == "ok"
    assert steps["user-alter-quotas"] == denied

    # kafka-tools 4.4.0: kafka-client-metrics.sh as bob (denied), kafka-acls.sh as alice
    # (grant), kafka-client-metrics.sh as bob again (allowed), all through the gateway.
    def client_metrics(props: Path, name: str) -> subprocess.CompletedProcess[str]:
        return kafka_tool(
            CLIENT_METRICS_COMMAND,
            "--bootstrap-server",
            gateway.bootstrap,
            "--command-config",
            str(props),
            "--alter",
            "--name",
            name,
            "--metrics",
            "org.apache.kafka.producer.",
            "--interval",
            "5000",
            work=tmp_path,
        )

    refused = client_metrics(bob, "bob-tools")
    assert refused.returncode != 0
    assert "ClusterAuthorizationException" in refused.stdout + refused.stderr
    granted = kafka_tool(
        ACL_COMMAND,
        "--bootstrap-server",
        gateway.bootstrap,
        "--command-config",
        str(alice),
        "--add",
        "--allow-principal",
        "User:bob",
        "--operation",
        "AlterConfigs",
        "--cluster",
        work=tmp_path,
    )
    assert granted.returncode == 0, granted.stdout + granted.stderr
    allowed = client_metrics(bob, "bob-tools")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    stored = ConfigStore(gateway.config.data_dir).describe("bob-tools")
    assert stored["metrics"] == "org.apache.kafka.producer."


def test_client_quotas_set_through_the_gateway_are_the_gateways(
    gateway: RunningGateway, sasl_only_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """kafka-configs.sh --entity-type clients|users through the gateway: the gateway's own
    config store and engine (the quotas it enforces), described back the same way."""
    users = sasl_only_cluster.sasl_users
    alice = client_properties(tmp_path, "alice", users["alice"])
    for entity_type, name, value in (
        ("clients", "tools-client", "consumer_byte_rate=2048"),
        ("users", "bob", "producer_byte_rate=4096"),
    ):
        altered = kafka_tool(
            CONFIG_COMMAND,
            "--bootstrap-server",
            gateway.bootstrap,
            "--command-config",
            str(alice),
            "--alter",
            "--entity-type",
            entity_type,
            "--entity-name",
            name,
            "--add-config",
            value,
            work=tmp_path,
        )
        assert altered.returncode == 0, altered.stdout + altered.stderr
    described = kafka_tool(
        CONFIG_COMMAND,
        "--bootstrap-server",
        gateway.bootstrap,
        "--command-config",
        str(alice),
        "--describe",
        "--entity-type",
        "clients",
        "--entity-name",
        "tools-client",
        work=tmp_path,
    )
    assert described.returncode == 0, described.stdout + described.stderr
    assert "consumer_byte_rate=2048.0" in described.stdout
    engine = gateway.gateway_server.quotas.engine  # type: ignore[union-attr]
    configured = wait_for(
        lambda: (
            q
            if "clients/tools-client" in (q := gateway.call(engine.entity_quotas))
            and "users/bob" in q
            else None
        ),
        timeout_s=10,
        what="the gateway's engine to enforce the quotas set through it",
    )
    assert configured["clients/tools-client"] == {"consumer_byte_rate": 2048.0}
    assert configured["users/bob"] == {"producer_byte_rate": 4096.0}


# ---- when the gateway is told, and when it cannot tell ---------------------------------


def test_a_gateway_told_the_cluster_requires_sasl_refuses_before_asking(
    sasl_only_cluster: KafkaCluster, tmp_path: Path
) -> None:
    with RunningGateway(
        tmp_path / "data",
        sasl_only_cluster.bootstrap_servers(),
        **{"gateway.upstream.security.protocol": "SASL_PLAINTEXT"},
    ) as told:
        state = told.call(lambda: told.gateway_server.gateway.authentication.state)  # type: ignore[union-attr]
        assert state.name == "REQUIRED"
        for name in ("GetTelemetrySubscriptions", "IncrementalAlterConfigs"):
            assert send_unauthenticated(
                told.port, api_versions(1), UNAUTHENTICATED_REQUESTS[name]
            )[1:] == [None]


@pytest.fixture
def silent_upstream() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog) and never answers: a
    cluster the gateway cannot ask."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize("require", [True, False])
def test_a_gateway_that_cannot_tell_follows_its_setting(
    tmp_path: Path, silent_upstream: int, require: bool
) -> None:
    """An upstream that never answers (the gateway's question at start times out): by
    default telemetry is refused to a client that did not authenticate; with
    ``gateway.telemetry.require.authentication=false`` it is served."""
    with RunningGateway(
        tmp_path / "data",
        f"127.0.0.1:{silent_upstream}",
        **{
            "gateway.telemetry.require.authentication": require,
            "gateway.upstream.connect.timeout.ms": 500,
        },
    ) as unsure:
        state = unsure.call(lambda: unsure.gateway_server.gateway.authentication.state)  # type: ignore[union-attr]
        assert state.name == "UNKNOWN"
        (answer,) = send_unauthenticated(
            unsure.port, UNAUTHENTICATED_REQUESTS["GetTelemetrySubscriptions"]
        )
        if require:
            assert answer is None
        else:
            assert answer is not None
            # GetTelemetrySubscriptions v0: correlation id, throttle, error code 0.
            assert struct.unpack_from(">iih", answer) == (2, 0, 0)


# ---- the gateway's own SASL listener, in front of a cluster without SASL ---------------


@pytest.fixture(scope="module")
def sasl_ssl_gateway(
    kafka_cluster: KafkaCluster,
    pki: Path,  # noqa: F811 - test_tls's module-scoped CA and server certificate
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningGateway]:
    """``listeners: SASL_SSL`` on the gateway (SCRAM-SHA-512 and PLAIN against its own
    credential store, as on serve), the cluster's PLAINTEXT listener upstream."""
    data_dir = tmp_path_factory.mktemp("gateway-sasl-ssl") / "data"
    ConfigStore(data_dir).alter_subscription(
        "everything", {"metrics": "org.apache.kafka.", "interval.ms": "500"}, []
    )
    DurableCredentialStore(data_dir).write(
        {
            user: {
                m: scram_credential_from_password(m, SASL_USERS[user], b"s" * 16, 4096)
                for m in ScramMechanism
            }
            for user in ("alice", "carol")
        }
    )
    with RunningGateway(
        data_dir,
        kafka_cluster.bootstrap_servers("PLAINTEXT"),
        **{
            "listeners": "SASL_SSL://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "ssl.keystore.location": str(pki / "server-keystore.pem"),
            "ssl.truststore.location": str(pki / "ca.pem"),
        },
    ) as running:
        yield running


def tls_exchange(port: int, ca: Path, *frames: bytes) -> list[bytes | None]:
    context = ssl.create_default_context(cafile=str(ca))
    answers: list[bytes | None] = []
    with socket.create_connection(("127.0.0.1", port), timeout=15) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            for frame in frames:
                sock.sendall(frame)
                try:
                    answer = read_frame(sock)
                except ssl.SSLError:
                    answer = None
                answers.append(answer)
                if answer is None:
                    break
    return answers


def test_clients_log_in_at_the_gateways_sasl_ssl_listener(
    sasl_ssl_gateway: RunningGateway,
    kafka_cluster: KafkaCluster,
    pki: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """In front of a PLAINTEXT cluster: librdkafka (SCRAM-SHA-512, alice) produces through
    the gateway's SASL_SSL ports and both it and the Java client (PLAIN, carol) land their
    telemetry under the principal the gateway authenticated; a raw client that does not
    log in gets ApiVersions only; a wrong password is refused; a user added with
    kafka-configs.sh through the gateway logs in."""
    gateway = sasl_ssl_gateway
    tls = {
        "bootstrap.servers": gateway.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki / "ca.pem"),
        "log_level": 3,
    }
    topic = f"gw-sasl-ssl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers()})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
    producer = Producer(
        {
            **tls,
            "client.id": "alice-sasl-ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": SASL_USERS["alice"],
        }
    )
    java = subprocess.Popen(
        [
            java_or_skip(),
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={tmp_path}",
            "-cp",
            classpath(),
            str(JAVA_DIR / "SaslTelemetryClient.java"),
            *("--bootstrap", gateway.bootstrap, "--protocol", "SASL_SSL"),
            *("--mechanism", "PLAIN", "--user", "carol"),
            *("--password", SASL_USERS["carol"], "--client-id", "carol-java"),
            *("--truststore", str(pki / "ca.pem")),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for index in range(100):
            producer.produce(topic, key=str(index).encode(), value=b"v")
        assert producer.flush(60) == 0

        def both_landed() -> list[LandingRecord] | None:
            found = gateway.landed()
            wanted = {"alice-sasl-ssl", "carol-java"}
            return found if wanted <= {r.context.client_id for r in found} else None

        landed = wait_for(
            both_landed,
            timeout_s=60,
            what="pushes from alice's librdkafka producer and carol's Java producer",
            poll_s=0.2,
        )
    finally:
        producer.flush(5)
        out, err = stop_java(java)
    principals = {
        r.context.client_id: r.context.principal
        for r in landed
        if r.context.client_id in {"alice-sasl-ssl", "carol-java"}
    }
    assert principals == {
        "alice-sasl-ssl": "User:alice",
        "carol-java": "User:carol",
    }, (out, err[-2000:])
    # Produced through the gateway, to the cluster.
    high = Consumer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers("PLAINTEXT"),
            "group.id": "unused",
        }
    ).get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    assert high == 100

    # A client that never logs in: ApiVersions, then nothing (closed, nothing written).
    ca = pki / "ca.pem"
    for name in ("GetTelemetrySubscriptions", "IncrementalAlterConfigs"):
        first, second = tls_exchange(
            gateway.port, ca, api_versions(1), UNAUTHENTICATED_REQUESTS[name]
        )
        assert first is not None and struct.unpack_from(">ih", first) == (1, 0)
        assert second is None, name
    assert (
        "anonymous-subscription"
        not in ConfigStore(gateway.config.data_dir).list_names()
    )
    # A wrong password: refused at the gateway, as on serve (its SaslAuthenticate answer).
    errors: list[KafkaError] = []
    wrong = Producer(
        {
            **tls,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": WRONG_PASSWORD,
            "log_level": 0,
            "error_cb": errors.append,
        }
    )
    try:
        with pytest.raises(KafkaException):
            wrong.list_topics(timeout=5)
    finally:
        wrong.flush(1)
    assert any(
        e.code() == KafkaError._AUTHENTICATION
        and "invalid credentials with SASL mechanism SCRAM-SHA-512" in e.str()
        for e in errors
    ), errors

    # Its users are the gateway's: kafka-configs.sh --entity-type users through the gateway
    # (kafka-tools 4.4.0's ConfigCommand, logged in as alice) adds one, who then logs in.
    alice = tmp_path / "alice-ssl.properties"
    alice.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
        f'required username="alice" password="{SASL_USERS["alice"]}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki / 'ca.pem'}\n"
    )
    added = kafka_tool(
        CONFIG_COMMAND,
        *("--bootstrap-server", gateway.bootstrap, "--command-config", str(alice)),
        *("--alter", "--entity-type", "users", "--entity-name", "fast"),
        *("--add-config", f"SCRAM-SHA-512=[password={SASL_USERS['fast']}]"),
        work=tmp_path,
    )
    assert added.returncode == 0, added.stdout + added.stderr
    fast = Producer(
        {
            **tls,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "fast",
            "sasl.password": SASL_USERS["fast"],
        }
    )
    try:

        def logged_in() -> Any:
            try:
                return fast.list_topics(timeout=5)
            except KafkaException:
                return None  # the gateway has not read the new credential yet

        metadata = wait_for(
            logged_in,
            timeout_s=30,
            what="the user added through the gateway to log in",
        )
        assert topic in metadata.topics
    finally:
        fast.flush(1)


def test_a_sasl_listener_in_front_of_a_cluster_that_requires_sasl_is_refused_at_start(
    sasl_only_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """The gateway would have to log in to the cluster itself: not served, one clear line
    at start, whether configuration says the cluster requires SASL or the cluster does."""
    for told in (True, False):
        settings: dict[str, object] = {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
        }
        if told:
            settings["gateway.upstream.security.protocol"] = "SASL_PLAINTEXT"
        running = RunningGateway(
            tmp_path / f"data-{told}", sasl_only_cluster.bootstrap_servers(), **settings
        )
        with pytest.raises(StartupError, match="the cluster requires SASL too"):
            running.__enter__()


# ---- the gateway's own SASL listener, in front of a cluster that requires SASL ---------


def test_the_gateway_logs_in_to_a_sasl_cluster_for_clients_that_log_in_at_it(
    sasl_only_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """Clients log in at the gateway's SASL_PLAINTEXT listener (carol, the gateway's user);
    every upstream connection logs in to the cluster as the gateway's own user (alice,
    gateway.upstream.sasl.*): carol creates a topic and produces through the gateway, and
    her telemetry lands under her principal at the gateway. A gateway with such a login
    and a listener that does not authenticate does not start."""
    data_dir = tmp_path / "data"
    ConfigStore(data_dir).alter_subscription(
        "everything", {"metrics": "org.apache.kafka.", "interval.ms": "500"}, []
    )
    DurableCredentialStore(data_dir).write(
        {
            "carol": {
                m: scram_credential_from_password(
                    m, SASL_USERS["carol"], b"c" * 16, 4096
                )
                for m in ScramMechanism
            }
        }
    )
    login = {
        "gateway.upstream.security.protocol": "SASL_PLAINTEXT",
        "gateway.upstream.sasl.mechanism": "SCRAM-SHA-512",
        "gateway.upstream.sasl.username": "alice",
        "gateway.upstream.sasl.password": sasl_only_cluster.sasl_users["alice"],
    }
    with RunningGateway(
        data_dir,
        sasl_only_cluster.bootstrap_servers(),
        **{
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            **login,
        },
    ) as gateway:
        carol: dict[str, str | int | float | bool] = {
            "bootstrap.servers": gateway.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "carol",
            "sasl.password": SASL_USERS["carol"],
            "log_level": 3,
        }
        topic = f"gw-login-{uuid.uuid4().hex[:8]}"
        admin = AdminClient(carol)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=60)
        producer = Producer({**carol, "client.id": "carol-through-login"})
        try:
            for index in range(10):
                producer.produce(topic, key=str(index).encode(), value=b"v")
            assert producer.flush(60) == 0
            records = wait_for(
                lambda: [
                    r
                    for r in gateway.landed()
                    if r.context.client_id == "carol-through-login"
                ],
                timeout_s=60,
                what="a push from carol's producer",
            )
        finally:
            producer.flush(5)
        assert {r.context.principal for r in records} == {"User:carol"}
        # Closed before the gateway stops (a client still connected holds its drain).
        del producer, admin
        gc.collect()
    running = RunningGateway(
        tmp_path / "data-plain",
        sasl_only_cluster.bootstrap_servers(),
        **{
            "listeners": "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
            **login,
        },
    )
    with pytest.raises(StartupError, match="every listener must authenticate them"):
        running.__enter__()
