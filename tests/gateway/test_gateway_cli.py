"""``ktc gateway``'s command line: what it refuses, and how it says so (exit code 2, the key
named), before anything binds or connects."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collector.app.cli import cli


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["gateway", *args], env={}, catch_exceptions=False)
    return result.exit_code, result.output


def test_without_an_upstream_it_says_what_is_missing(tmp_path: Path) -> None:
    code, output = run("--data-dir", str(tmp_path))
    assert code == 2
    assert "gateway mode needs the upstream cluster: --upstream" in output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--upstream", "kafka-1"], "gateway.upstream.bootstrap.servers"),
        (["--upstream", "kafka-1:0"], "gateway.upstream.bootstrap.servers"),
        (
            ["--upstream", "k:9092", "--broker-port-start", "70000"],
            "gateway.broker.port.start",
        ),
    ],
)
def test_a_bad_value_names_its_key(tmp_path: Path, args: list[str], named: str) -> None:
    code, output = run(*args, "--data-dir", str(tmp_path))
    assert code == 2
    assert named in output


def test_an_upstream_security_protocol_it_does_not_speak_is_refused(
    tmp_path: Path,
) -> None:
    config = tmp_path / "ktc.yaml"
    config.write_text(
        "gateway.upstream.bootstrap.servers: k:9092\n"
        "gateway.upstream.security.protocol: TLS\n"
    )
    code, output = run("--config", str(config), "--data-dir", str(tmp_path))
    assert code == 2
    assert "gateway.upstream.security.protocol" in output
    assert "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL" in output
