"""proto/removed_api_versions.py against Kafka's own specs: the table is exactly the
versions below each API's lowest valid version in Kafka 4.4.0's specs (the whole-release
table ``proto.api_table`` is generated from, itself checked against the kafka-clients jar),
and agrees with every vendored ``*Request.json``."""

from __future__ import annotations

import json
from pathlib import Path

from proto.api_table import API_TABLE
from proto.codegen import strip_comments
from proto.removed_api_versions import LOWEST_ACCEPTED, is_removed

SPECS = Path(__file__).resolve().parents[2] / "proto" / "specs"


def test_the_table_is_every_version_below_the_specs_lowest() -> None:
    from_specs = {
        key: info.min_version
        for key, info in API_TABLE.items()
        if info.min_version  # None: the API is gone whole; 0: nothing removed
    }
    assert dict(LOWEST_ACCEPTED) == from_specs


def test_the_vendored_request_specs_agree() -> None:
    checked = 0
    for path in sorted(SPECS.glob("*Request.json")):
        spec = json.loads(strip_comments(path.read_text()))
        if "apiKey" not in spec:
            continue
        lowest = int(spec["validVersions"].split("-")[0])
        assert LOWEST_ACCEPTED.get(spec["apiKey"], 0) == lowest, path.name
        checked += 1
    assert checked >= 10


def test_what_kip_896_names() -> None:
    # A few of KIP-896's rows, as the KIP states them.
    assert [v for v in range(5) if is_removed(0, v)] == [0, 1, 2]  # Produce v0-v2
    assert [v for v in range(6) if is_removed(1, v)] == [0, 1, 2, 3]  # Fetch v0-v3
    assert [v for v in range(3) if is_removed(2, v)] == [0]  # ListOffsets v0
    assert not is_removed(18, 0)  # ApiVersions v0 stays
    assert not is_removed(3, 0)  # Metadata v0 stays
