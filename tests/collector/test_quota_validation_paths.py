"""One quota-value validation: the same invalid value gets the same error whichever way it
comes in — ``ktc quotas alter``, a hand-written quotas.yaml, or AlterClientQuotas on the
wire (all three end in ``quota.entity_quotas.validate_quota_value``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collector.app.cli import cli
from collector.app.server import CollectorServer
from proto import ApiKeys
from proto.errors import Errors
from proto.messages import alter_client_quotas_request as acq
from subscriptions.config_file import ConfigFileError
from subscriptions.store import ConfigStore
from tests.collector.wire_client import WireClient

# (what the CLI is given, what quotas.yaml holds, what the wire carries or None when a
# FLOAT64 field cannot carry it, the one error message)
INVALID = [
    pytest.param(
        "-100",
        "-100",
        -100.0,
        "Quota producer_byte_rate must be greater than 0",
        id="negative",
    ),
    pytest.param(
        "1.5",
        "1.5",
        1.5,
        "producer_byte_rate cannot be a fractional value.",
        id="fraction",
    ),
    pytest.param(
        '"100"',
        '"100"',
        None,
        "Quota producer_byte_rate must be a number, got '100'",
        id="text",
    ),
]


def cli_error(data_dir: Path, value: str) -> str:
    result = CliRunner().invoke(
        cli,
        [
            "quotas",
            "alter",
            "--data-dir",
            str(data_dir),
            "--client-id",
            "app",
            "--add-config",
            f"producer_byte_rate={value}",
        ],
    )
    assert result.exit_code == 1, result.output
    return result.output


def file_error(data_dir: Path, value: str) -> ConfigFileError:
    (data_dir / "config").mkdir(parents=True)
    (data_dir / "config" / "quotas.yaml").write_text(
        f"quotas:\n  clients/app:\n    producer_byte_rate: {value}\n"
    )
    with pytest.raises(ConfigFileError) as raised:
        ConfigStore(data_dir).load()
    return raised.value


async def wire_error(server: CollectorServer, value: float) -> tuple[int, str | None]:
    client = await WireClient.connect(server.port(), client_id="kafka-configs")
    request = acq.AlterClientQuotasRequest(
        entries=(
            acq.EntryData(
                entity=(acq.EntityData("client-id", "app"),),
                ops=(acq.OpData("producer_byte_rate", value, False),),
            ),
        ),
        validate_only=False,
    )
    response = await client.request(ApiKeys.ALTER_CLIENT_QUOTAS, 1, request)
    await client.close()
    (entry,) = response.entries
    return entry.error_code, entry.error_message


@pytest.mark.parametrize(("cli_value", "file_value", "wire_value", "message"), INVALID)
async def test_the_same_invalid_value_gets_the_same_error_on_every_path(
    server: CollectorServer,
    tmp_path: Path,
    cli_value: str,
    file_value: str,
    wire_value: float | None,
    message: str,
) -> None:
    assert (
        cli_error(tmp_path / "cli", cli_value) == f"ktc: INVALID_REQUEST: {message}\n"
    )

    error = file_error(tmp_path / "file", file_value)
    assert str(error).endswith(f": {message} (INVALID_REQUEST)"), str(error)

    if wire_value is not None:
        assert await wire_error(server, wire_value) == (Errors.INVALID_REQUEST, message)
    # Nothing was stored on any path.
    for data_dir in (tmp_path / "cli", tmp_path / "data"):
        assert ConfigStore(data_dir).describe_quotas() == {}
