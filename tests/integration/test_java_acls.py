"""Authorization with the Java Admin (kafka-clients 4.4.0) over an SSL listener with client
certificates (principals User:CN=alice and the super user User:CN=admin): alice's
incrementalAlterConfigs on a CLIENT_METRICS resource is denied with Kafka's error; after
createAcls for her it succeeds; describeAcls lists the ACL; deleteAcls removes it and she is
denied again; the super user is never denied (java/AclAdminCheck.java)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.gateway.golden import kafka_classpath
from tests.integration.collector_harness import RunningCollector

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

HERE = Path(__file__).resolve().parent
ALICE, ADMIN = "User:CN=alice", "User:CN=admin"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d: Path) -> Path:
    """A CA, a server certificate for 127.0.0.1, client certificates CN=alice, CN=admin;
    each key and chain also as one PEM keystore (what Kafka's PEM keystore type reads)."""
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
        cwd=d,
    )
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subject in (
        ("server", "/CN=localhost"),
        ("alice", "/CN=alice"),
        ("admin", "/CN=admin"),
    ):
        openssl(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            subject,
            cwd=d,
        )
        extra = ["-extfile", "san.ext"] if name == "server" else []
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.pem",
            "-days",
            "2",
            *extra,
            cwd=d,
        )
        (d / f"{name}-keystore.pem").write_text(
            (d / f"{name}.key").read_text() + (d / f"{name}.pem").read_text()
        )
    return d


def client_properties(pki: Path, name: str) -> Path:
    path = pki / f"{name}.properties"
    path.write_text(
        "security.protocol=SSL\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={pki / f'{name}-keystore.pem'}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki / 'ca.pem'}\n"
    )
    return path


def run_check(bootstrap: str, pki: Path, work: Path) -> dict[str, str]:
    java, classpath = shutil.which("java"), kafka_classpath()
    if java is None or classpath is None:
        reason = "needs java and the kafka-clients 4.4.0 jar (make kafka-libs)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    done = subprocess.run(
        [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Djava.io.tmpdir={work}",
            "-cp",
            classpath,
            str(HERE / "java" / "AclAdminCheck.java"),
            "--bootstrap",
            bootstrap,
            "--user-props",
            str(client_properties(pki, "alice")),
            "--admin-props",
            str(client_properties(pki, "admin")),
            "--principal",
            ALICE,
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
    return steps


def test_java_admin_acls_over_mtls(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki / "server-keystore.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
        "ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ADMIN,
    }
    with RunningCollector(tmp_path / "data", **settings) as collector:
        steps = run_check(collector.bootstrap, pki, tmp_path)
    denied = (
        "error org.apache.kafka.common.errors.ClusterAuthorizationException: "
        "Cluster authorization failed."
    )
    assert steps["user-alter-before"] == denied
    assert steps["user-describe-acls"].startswith(
        "error org.apache.kafka.common.errors.ClusterAuthorizationException: Request Request("
    )
    assert steps["user-describe-acls"].endswith("needs DESCRIBE permission.")
    assert steps["admin-create-acls"] == "ok"
    assert steps["admin-describe-acls"] == (
        "ok 1 [(pattern=ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, "
        "patternType=LITERAL), entry=(principal=User:CN=alice, host=*, "
        "operation=ALTER_CONFIGS, permissionType=ALLOW))]"
    )
    assert steps["user-alter-granted"] == "ok"
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert steps["user-describe-configs"] == "ok org.apache.kafka.consumer."
    assert steps["admin-delete-acls"].startswith(
        "ok 1 [(pattern=ResourcePattern(resourceType=CLUSTER"
    )
    assert steps["admin-describe-after-delete"] == "ok 0"
    assert steps["user-alter-after-delete"] == denied
    assert steps["admin-alter"] == "ok"
    assert steps["admin-alter-quotas"] == "ok"
    assert steps["user-alter-quotas"] == denied
