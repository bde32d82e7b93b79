"""proto/api_table.py against Kafka itself: ``ApiKeys`` in the kafka-clients 4.4.0 jar (run with
the JDK), and against the generated modules and ``proto.api_keys``.

The Java check skips when java or the jar is missing, except with CI=true, where it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from proto import codegen
from proto.api_keys import ApiKeys
from proto.api_table import (
    API_TABLE,
    KAFKA_RELEASE,
    request_header_version,
    response_header_version,
)
from proto.messages import REQUEST_MODULES, RESPONSE_MODULES

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "java" / "ApiKeysTable.java"


def kafka_clients_jar(release: str = KAFKA_RELEASE) -> Path | None:
    """The kafka-clients jar: `make kafka-libs`' cache (KTC_KAFKA_LIBS), else Maven's."""
    name = f"kafka-clients-{release}.jar"
    candidates = [
        Path(
            os.environ.get("KTC_KAFKA_LIBS")
            or Path.home() / ".cache/ktc" / f"kafka-{release}"
        )
        / name,
        Path.home() / ".m2/repository/org/apache/kafka/kafka-clients" / release / name,
    ]
    return next((path for path in candidates if path.is_file()), None)


def require_java() -> tuple[str, Path]:
    java, jar = shutil.which("java"), kafka_clients_jar()
    if java is None or jar is None:
        reason = f"needs java and kafka-clients-{KAFKA_RELEASE}.jar"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return java, jar


@pytest.fixture(scope="module")
def java_api_keys(tmp_path_factory: pytest.TempPathFactory) -> list[list[str]]:
    java, jar = require_java()
    work = tmp_path_factory.mktemp("api-keys")
    done = subprocess.run(
        [java, f"-Djava.io.tmpdir={work}", "-cp", str(jar), str(SOURCE)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [line.split("\t") for line in done.stdout.splitlines()]


def test_table_matches_kafkas_api_keys(java_api_keys: list[list[str]]) -> None:
    assert [int(row[0]) for row in java_api_keys] == sorted(API_TABLE)
    for (
        key,
        name,
        oldest,
        latest,
        latest_unstable,
        listeners,
        req,
        resp,
    ) in java_api_keys:
        info = API_TABLE[int(key)]
        assert info.name == name
        assert info.listeners == frozenset(filter(None, listeners.split(",")))
        if oldest == "-":
            assert info.min_version is None and info.max_version is None
            continue
        assert info.min_version is not None and info.max_version is not None
        assert (info.min_version, info.max_version) == (
            int(oldest),
            int(latest_unstable),
        )
        stable = (
            info.max_version - 1 if info.latest_version_unstable else info.max_version
        )
        assert stable == int(latest), name
        versions = range(info.min_version, info.max_version + 1)
        assert [request_header_version(info.api_key, v) for v in versions] == [
            int(v) for v in req.split(",")
        ], name
        assert [response_header_version(info.api_key, v) for v in versions] == [
            int(v) for v in resp.split(",")
        ], name


def test_table_names_match_proto_api_keys() -> None:
    assert sorted(API_TABLE) == sorted(int(k) for k in ApiKeys)
    for key in ApiKeys:
        assert codegen.snake_case(API_TABLE[key].name).upper() == key.name


def test_table_agrees_with_every_generated_module() -> None:
    for modules in (REQUEST_MODULES, RESPONSE_MODULES):
        for api_key, module in modules.items():
            info = API_TABLE[api_key]
            assert (info.min_version, info.max_version) == module.VALID_VERSIONS, module
            assert info.first_flexible == module.FIRST_FLEXIBLE_VERSION, module


def test_throttle_columns() -> None:
    fetch, produce = API_TABLE[ApiKeys.FETCH], API_TABLE[ApiKeys.PRODUCE]
    assert fetch.throttle_at_start(4) and fetch.throttle_at_start(18)
    assert fetch.fixed_throttle_offset(18) == 0
    assert not produce.throttle_at_start(13) and produce.has_throttle(13)
    assert produce.fixed_throttle_offset(13) is None  # after Responses[]
    assert (
        API_TABLE[ApiKeys.OFFSET_DELETE].fixed_throttle_offset(0) == 2
    )  # after ErrorCode
    metadata = API_TABLE[ApiKeys.METADATA]
    assert not metadata.has_throttle(2) and metadata.throttle_at_start(3)
    assert not API_TABLE[ApiKeys.SASL_HANDSHAKE].has_throttle(1)
    assert API_TABLE[ApiKeys.INIT_PRODUCER_ID].latest_version_unstable


def test_the_table_is_derived_from_specs_like_the_vendored_ones() -> None:
    """api_table_rows on our vendored specs gives the vendored table's rows for those keys."""
    texts = {p.name: p.read_text() for p in codegen.SPEC_DIR.glob("*.json")}
    pairs = {
        n
        for n in texts
        if n.endswith("Request.json") and n.replace("Request", "Response") in texts
    }
    rows = codegen.api_table_rows(
        {
            n: texts[n]
            for n in texts
            if n in pairs or n.replace("Response", "Request") in pairs
        }
    )
    import json

    vendored = {
        row["apiKey"]: row
        for row in json.loads(
            codegen.strip_comments(codegen.api_table_spec().read_text())
        )
    }
    assert rows
    for row in rows:
        assert vendored[row["apiKey"]] == row
