"""The committed generated code is what the vendored specs produce, and the generator is sane."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from proto import codegen

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_fresh() -> None:
    stale = codegen.stale_files()
    assert not stale, f"run `python -m proto.codegen`; stale: {[str(p) for p in stale]}"


def test_check_flag_reports_fresh_tree() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "proto.codegen", "--check"],
        cwd=ROOT,
        check=False,
        capture_output=True,
    )
    assert done.returncode == 0, done.stdout


def test_versions_and_names() -> None:
    v = codegen.Versions.parse
    assert 3 in v("3+") and 2 not in v("3+")
    assert 4 in v("0-4") and 5 not in v("0-4")
    assert 0 not in v("none")
    assert codegen.snake_case("ClientInstanceId") == "client_instance_id"
    assert codegen.snake_case("ZkMigrationReady") == "zk_migration_ready"
    assert codegen.snake_case("IsrNodes") == "isr_nodes"


def test_comments_are_stripped_outside_strings_only() -> None:
    text = '{"a": "http://x", // note\n "b": 1}'
    assert codegen.strip_comments(text) == '{"a": "http://x", \n "b": 1}'


def test_every_vendored_spec_carries_the_apache_license_header() -> None:
    for spec in codegen.SPEC_DIR.glob("*.json"):
        assert "Licensed to the Apache Software Foundation" in spec.read_text()
    assert "Apache License" in (codegen.SPEC_DIR / "LICENSE").read_text()


def test_absent_non_ignorable_field_with_a_value_cannot_be_written() -> None:
    import pytest

    from proto.errors import UnsupportedVersionError
    from proto.messages.metadata_request import WRITERS, MetadataRequest

    with pytest.raises(UnsupportedVersionError, match="AllowAutoTopicCreation"):
        WRITERS[3](
            MetadataRequest(topics=None, allow_auto_topic_creation=False), bytearray()
        )
    out = bytearray()
    WRITERS[3](MetadataRequest(topics=None), out)  # the default (true) is fine
    assert bytes(out) == b"\xff\xff\xff\xff"
