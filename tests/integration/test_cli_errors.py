"""Every start-up and CLI failure a user can cause by hand is one line on stderr and the exit
code docs/operations.md ("Exit codes") gives it: `ktc` run as a real process, as an operator
runs it, once per case.

Log records (timestamped, from a node that had started some of its listeners) may precede
the line; no traceback may."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

ROOT = Path(__file__).resolve().parents[2]
LOG_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [A-Z]+ ")
CANNOT_RUN, REFUSED, KEPT_IN_CLUSTER = 2, 1, 3  # docs/operations.md, Exit codes

# A valid node apart from what a case breaks: loopback, free ports.
NODE = ["--listeners", "PLAINTEXT://127.0.0.1:0", "--http-listener", "127.0.0.1:0"]
GATEWAY = ["gateway", "--upstream", "127.0.0.1:1", "--broker-port-start", "0"]


def ktc(*args: str, cwd: Path) -> tuple[int, str]:
    """Run ``ktc`` to its end (a case that does not fail would run until the timeout)."""
    result = subprocess.run(
        [sys.executable, "-m", "collector.app.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=45,
        check=False,
    )
    return result.returncode, result.stderr


def ktc_here(
    *args: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    """The console script's entry point in this process, for commands that start nothing
    (the same code path as the process, without its second of imports)."""
    from collector.app.cli import main

    monkeypatch.setattr(sys, "argv", ["ktc", *args])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main()
    code = exited.value.code
    return (code if isinstance(code, int) else 1), capsys.readouterr().err


def the_line(stderr: str) -> str:
    """The one line that says what is wrong (after any log records)."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if not LOG_RECORD.match(line)]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("ktc: "), stderr
    return lines[0]


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    """A port another process (here: this one) listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


# ---------------------------------------------------------------------- ports in use


def _port_cases() -> list[tuple[str, list[str], str]]:
    return [
        (
            "serve Kafka listener",
            ["serve", "--listeners", "PLAINTEXT://127.0.0.1:{port}"]
            + ["--http-listener", "127.0.0.1:0"],
            "listeners: cannot bind",
        ),
        (
            "serve HTTP listener",
            ["serve", "--listeners", "PLAINTEXT://127.0.0.1:0"]
            + ["--http-listener", "127.0.0.1:{port}"],
            "address already in use",
        ),
        (
            "gateway bootstrap listener",
            ["gateway", "--upstream", "127.0.0.1:1", "--broker-port-start", "0"]
            + ["--listeners", "PLAINTEXT://127.0.0.1:{port}"]
            + ["--http-listener", "127.0.0.1:0"],
            "listeners: cannot bind",
        ),
        (
            "gateway per-broker listener",
            ["gateway", "--upstream", "127.0.0.1:1", "--broker-port-start", "{port}"]
            + NODE,
            "cannot bind port {port} for upstream node 0",
        ),
        (
            "gateway HTTP listener",
            [*GATEWAY, "--listeners", "PLAINTEXT://127.0.0.1:0"]
            + ["--http-listener", "127.0.0.1:{port}"],
            "address already in use",
        ),
    ]


@pytest.mark.parametrize(
    ("args", "says"),
    [(args, says) for _, args, says in _port_cases()],
    ids=[name for name, _, _ in _port_cases()],
)
def test_a_port_in_use(
    tmp_path: Path, busy_port: int, args: list[str], says: str
) -> None:
    filled = [a.format(port=busy_port) for a in args]
    code, stderr = ktc(*filled, "--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    line = the_line(stderr)
    assert code == CANNOT_RUN
    assert line.startswith("ktc: cannot start: ")
    assert says.format(port=busy_port) in line
    assert str(busy_port) in line


# ---------------------------------------------------------------------- the data directory


@pytest.mark.parametrize("command", ["serve", "gateway"])
def test_a_data_directory_that_cannot_be_created(tmp_path: Path, command: str) -> None:
    (tmp_path / "a-file").write_text("")
    args = GATEWAY if command == "gateway" else ["serve"]
    code, stderr = ktc(
        *args, *NODE, "--data-dir", str(tmp_path / "a-file" / "data"), cwd=tmp_path
    )
    assert the_line(stderr).endswith("/a-file/data: Not a directory")
    assert code == CANNOT_RUN


def test_a_data_directory_that_cannot_be_written(tmp_path: Path) -> None:
    """The landing log's directory is taken by a file: nothing can be landed."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "landing").write_text("")
    code, stderr = ktc("serve", *NODE, "--data-dir", str(data), cwd=tmp_path)
    assert the_line(stderr).endswith("/data/landing/node-1: Not a directory")
    assert code == CANNOT_RUN


# ---------------------------------------------------------------------- broken files

BROKEN_YAML = "subscriptions: [\n"  # an unclosed flow sequence
AUTHORIZER = (
    "authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
)

# Each store file, and every command that reads it.
STORE_READERS: dict[str, list[list[str]]] = {
    "client-metrics.yaml": [
        ["subscriptions", "list"],
        ["subscriptions", "describe"],
        ["subscriptions", "alter", "--name", "s", "--metrics", "a."],
        ["subscriptions", "delete", "--name", "s"],
        ["quotas", "describe"],
        ["serve", *NODE],
        [*GATEWAY, *NODE],
    ],
    "quotas.yaml": [
        ["quotas", "describe"],
        ["quotas", "alter", "--user", "u", "--add-config", "producer_byte_rate=10"],
        ["subscriptions", "list"],
        ["serve", *NODE],
    ],
    "scram-credentials.yaml": [
        ["users", "describe"],
        ["users", "delete", "--entity-name", "alice"],
        ["serve", *NODE],
    ],
    "acls.yaml": [
        ["acls", "list"],
        ["acls", "add", "--allow-principal", "User:a", "--operation", "Alter"]
        + ["--cluster"],
        ["serve", *NODE, "--config", "{authorizer}"],
    ],
}


@pytest.mark.parametrize(
    ("store_file", "args"),
    [(f, args) for f, readers in STORE_READERS.items() for args in readers],
    ids=[f"{f}-{args[0]}-{args[1]}" for f, rs in STORE_READERS.items() for args in rs],
)
def test_a_broken_store_file(
    tmp_path: Path,
    store_file: str,
    args: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = tmp_path / "data"
    (data / "config").mkdir(parents=True)
    (data / "config" / store_file).write_text(BROKEN_YAML)
    authorizer = tmp_path / "authorizer.yaml"
    authorizer.write_text(AUTHORIZER)
    filled = [a.format(authorizer=authorizer) for a in args]
    if args[0] in {"serve", "gateway"}:  # a node: its own process
        code, stderr = ktc(*filled, "--data-dir", str(data), cwd=tmp_path)
    else:
        code, stderr = ktc_here(
            *filled, "--data-dir", str(data), capsys=capsys, monkeypatch=monkeypatch
        )
    line = the_line(stderr)
    assert f"config/{store_file}, line 2: not valid YAML" in line
    assert code == CANNOT_RUN


@pytest.mark.parametrize(
    "args",
    [["serve", *NODE], [*GATEWAY, *NODE], ["validate-config"]],
    ids=["serve", "gateway", "validate-config"],
)
@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("listeners: [PLAINTEXT://127.0.0.1:0\n", "not valid YAML"),
        ("log.levle: DEBUG\n", "unknown key log.levle (did you mean log.level?)"),
    ],
    ids=["not-yaml", "mistyped-key"],
)
def test_a_broken_config_file(
    tmp_path: Path,
    args: list[str],
    content: str,
    says: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = tmp_path / "ktc.yaml"
    config.write_text(content)
    if args == ["validate-config"]:
        code, stderr = ktc_here(
            "validate-config", str(config), capsys=capsys, monkeypatch=monkeypatch
        )
    else:
        code, stderr = ktc(*args, "--config", str(config), cwd=tmp_path)
    assert says in the_line(stderr)
    assert code == CANNOT_RUN


# A --data-dir command for each kind of state, and what its refusal calls the kind and
# points to.
_KEPT = [
    (["subscriptions", "alter", "--name", "s", "--metrics", "*"], "subscriptions",
     "its subscriptions", "--bootstrap-server {}"),
    (["subscriptions", "list"], "subscriptions", "its subscriptions",
     "--bootstrap-server {}"),
    (["quotas", "describe"], "quotas", "its client quotas",
     "kafka-configs.sh --bootstrap-server {}"),
    (["users", "delete", "--entity-name", "carol"], "users", "its SCRAM users",
     "kafka-configs.sh --bootstrap-server {} --entity-type users"),
    (["acls", "list"], "acls", "its ACLs", "kafka-acls.sh --bootstrap-server {}"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "kind", "noun", "use"), _KEPT, ids=[" ".join(k[0][:2]) for k in _KEPT]
)
def test_a_data_directory_whose_node_keeps_that_state_in_a_cluster(
    tmp_path: Path,
    args: list[str],
    kind: str,
    noun: str,
    use: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The node recorded (at start) that it keeps this state in a cluster: the command
    refuses, naming it and --bootstrap-server, and writes nothing. (Recorded by real
    nodes: tests/gateway/test_data_dir_kept_in_cluster.py.)"""
    from collector.app.parts.data_dir import StateLocations, record_state_locations

    data = tmp_path / "data"
    data.mkdir()
    record_state_locations(data, StateLocations("gateway", {kind: "k1:9092,k2:9092"}))
    before = sorted(data.rglob("*"))
    code, stderr = ktc_here(
        *args, "--data-dir", str(data), capsys=capsys, monkeypatch=monkeypatch
    )
    assert the_line(stderr) == (
        f"ktc: the node of data directory {data} keeps {noun} in the cluster "
        f"(k1:9092,k2:9092); use {use.format('k1:9092,k2:9092')}"
    )
    assert code == KEPT_IN_CLUSTER
    assert sorted(data.rglob("*")) == before


def test_a_broken_state_locations_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "state-locations.json").write_text("{")
    code, stderr = ktc_here(
        "subscriptions", "list", "--data-dir", str(data),
        capsys=capsys, monkeypatch=monkeypatch,
    )  # fmt: skip
    assert the_line(stderr).startswith(
        f"ktc: {data}/state-locations.json: not a state-locations file"
    )
    assert code == CANNOT_RUN


# ---------------------------------------------------------------------- ktc client-metrics


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (
            "gateway.upstream.bootstrap.servers: 127.0.0.1:1\n",
            "ktc: configuration error: ktc client-metrics reads the landing topic: set "
            "landing.kafka.topic",
        ),
        (
            "landing.kafka.topic: t\nlanding.kafka.bootstrap.servers: 127.0.0.1:1\n"
            "http.listener: null\n",
            "ktc: configuration error: ktc client-metrics serves over HTTP: set "
            "http.listener",
        ),
    ],
    ids=["no landing topic", "no HTTP listener"],
)
def test_client_metrics_as_configured_cannot_run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    config: str,
    says: str,
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(config)
    code, stderr = ktc_here(
        "client-metrics", "--config", str(path), capsys=capsys, monkeypatch=monkeypatch
    )
    assert (code, the_line(stderr)) == (CANNOT_RUN, says)
