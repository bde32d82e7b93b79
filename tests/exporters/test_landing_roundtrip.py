"""Round trips through a real landing directory: append, read back, reopen."""

from __future__ import annotations

import dataclasses
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clock.testing import FakeClock
from exporters.base import Exporter
from exporters.context import TelemetryContext
from exporters.landing import (
    ConsumerPositions,
    LandingLog,
    LandingOptions,
    LandingReader,
)
from exporters.landing.format import (
    ContextEncodingError,
    _constant_parts,
    decode_context,
    encode_context,
)

MakeContext = Callable[..., TelemetryContext]
MakePayload = Callable[[int], bytes]


def new_log(directory: Path, **options: Any) -> LandingLog:
    housekeeping = bool(options.pop("housekeeping", False))
    options.setdefault("write_behind", False)  # export() appends: readable at once
    return LandingLog(directory, LandingOptions(**options), housekeeping=housekeeping)


def test_records_come_back_as_written(
    tmp_path: Path, make_context: MakeContext, make_payload: MakePayload
) -> None:
    written = [(make_context(i), make_payload(i)) for i in range(50)]
    with new_log(tmp_path) as log:
        offsets = [log.append(context, payload) for context, payload in written]
    assert offsets == list(range(50))
    records = list(LandingReader(tmp_path).read(0))
    assert [r.offset for r in records] == offsets
    assert [(r.context, r.payload) for r in records] == written


def test_landing_log_is_an_exporter(tmp_path: Path, make_context: MakeContext) -> None:
    with new_log(tmp_path) as log:
        assert isinstance(log, Exporter)
        result = log.export(make_context(1), b"payload")
        assert result.ok
    (record,) = LandingReader(tmp_path).read(0)
    assert record.payload == b"payload"


_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30)


_INT64 = st.integers(
    -(2**63), 2**64 - 1
)  # what orjson (and so a landed context) carries


@settings(max_examples=300, deadline=None)
@given(
    name=_TEXT,
    client_id=st.none() | _TEXT,
    principal=_TEXT.map(lambda text: text + '\x00\x1f\x7f\u2028"\\'),
    cluster_id=_TEXT,
    content_type=_TEXT,
    ints=st.lists(_INT64, min_size=8, max_size=8),
    terminating=st.booleans(),
    upstream_cluster_id=st.none() | _TEXT,
    upstream_node_id=st.none() | _INT64,
    next_push=st.tuples(_INT64, _INT64, st.booleans(), st.none() | _INT64),
)
def test_context_encoding_is_the_context_own_json(
    name: str,
    client_id: str | None,
    principal: str,
    cluster_id: str,
    content_type: str,
    ints: list[int],
    terminating: bool,
    upstream_cluster_id: str | None,
    upstream_node_id: int | None,
    next_push: tuple[int, int, bool, int | None],
) -> None:
    """The fast encoder must produce exactly ``TelemetryContext.to_json_bytes()``, and
    decode back to an equal context; also for the next push of the same instance (its
    constant part remembered, the per-push fields new, the upstream node id too: it is
    per connection)."""
    port, interval, received, node_id, subscription_id, compression, correlation, _ = (
        ints
    )
    context = TelemetryContext(
        client_instance_id="AAAAAAAAAAAAAAAAAAAAAA",
        client_id=client_id,
        client_software_name=name,
        client_software_version="2.16.1",
        client_source_address="::1",
        client_source_port=port,
        listener_name="PLAINTEXT",
        security_protocol="SASL_SSL",
        principal=principal,
        push_interval_ms=interval,
        terminating=terminating,
        received_time_unix_nano=received,
        node_id=node_id,
        cluster_id=cluster_id,
        subscription_id=subscription_id,
        compression_type=compression,
        correlation_id=correlation,
        content_type=content_type,
        upstream_cluster_id=upstream_cluster_id,
        upstream_node_id=upstream_node_id,
    )
    next_context = dataclasses.replace(
        context,
        received_time_unix_nano=next_push[0],
        correlation_id=next_push[1],
        terminating=next_push[2],
        upstream_node_id=next_push[3],
    )
    for pushed in (context, next_context):
        encoded = encode_context(pushed)
        assert encoded == pushed.to_json_bytes()
        assert decode_context(encoded) == pushed


@pytest.mark.parametrize(
    "change",
    [
        {"received_time_unix_nano": 2**64},
        {"correlation_id": -(2**63) - 1},
        {"client_source_port": 2**70},
        {"node_id": 2**64},
        {"upstream_node_id": 2**64},
    ],
)
def test_a_context_beyond_64_bit_integers_is_not_encodable(
    make_context: MakeContext, change: dict[str, Any]
) -> None:
    """orjson carries 64-bit integers only; the fast path must refuse the same values."""
    encode_context(make_context(1))  # its constant part remembered first
    with pytest.raises(ContextEncodingError, match="not encodable"):
        encode_context(dataclasses.replace(make_context(1), **change))


def test_unusual_field_types_encode_as_orjson_encodes_them(
    make_context: MakeContext,
) -> None:
    """An int subclass in an integer field takes orjson's whole-context path: a bool there
    is JSON ``true``, where the fast path's ``%d`` would write ``1``.  (Where exporters is
    compiled, the typed attribute already stores the bool as the int 1; interpreted, the
    bool stays and only the whole-context path encodes it as orjson does.)"""
    context = dataclasses.replace(make_context(1), correlation_id=True)
    assert encode_context(context) == orjson.dumps(context.to_json_dict())


@pytest.mark.parametrize(
    "change",
    [
        {"client_id": None},
        {"client_id": "another-client"},
        {"client_software_version": "2.17.0"},
        {"client_source_address": "10.0.0.7"},
        {"client_source_port": 50001},
        {"listener_name": "INTERNAL"},
        {"security_protocol": "SSL"},
        {"principal": "User:CN=other"},
        {"node_id": 7},
        {"cluster_id": "another-cluster"},
        {"upstream_cluster_id": "upstream-cluster"},
        {"upstream_node_id": 2},
        {"content_type": "OTLP2"},
        # Equal to what is remembered, but orjson writes a bool as true, not 1.
        {"client_source_port": True, "node_id": 1},
        {"node_id": True},
    ],
)
def test_a_changed_constant_field_is_encoded_anew(
    make_context: MakeContext, change: dict[str, object]
) -> None:
    """The constant part is remembered per instance id and checked field by field: the same
    instance id with any one field changed (a client that reconnected elsewhere, say)
    encodes its new values, never the remembered ones."""
    remembered = dataclasses.replace(make_context(1), client_source_port=1, node_id=1)
    assert encode_context(remembered) == orjson.dumps(remembered.to_json_dict())
    changed = dataclasses.replace(remembered, **change)  # type: ignore[arg-type]
    assert encode_context(changed) == orjson.dumps(changed.to_json_dict())
    assert encode_context(remembered) == orjson.dumps(remembered.to_json_dict())


def test_the_upstream_node_id_does_not_renew_the_remembered_part(
    make_context: MakeContext,
) -> None:
    """A gateway client pushes over whichever broker connection it picks, so the upstream
    node id changes between pushes of one instance: it is formatted per push, and the
    part remembered for the instance stays (re-encoding it per push would cost orjson's
    3.5 us the part exists to save), while every push still encodes its own node id."""
    remembered = make_context(1, upstream_cluster_id="Yw3dJ2xXQ6qRbtJmPMOxZw")
    encode_context(remembered)
    part = _constant_parts[remembered.client_instance_id]
    for node in (0, 1, None, 2, 2**31 - 1, 0):
        pushed = dataclasses.replace(remembered, upstream_node_id=node)
        assert encode_context(pushed) == pushed.to_json_bytes()
        assert decode_context(encode_context(pushed)).upstream_node_id == node
        assert _constant_parts[remembered.client_instance_id] is part


def test_upstream_fields_default_to_none(make_context: MakeContext) -> None:
    context = make_context(1)
    assert context.upstream_cluster_id is None and context.upstream_node_id is None
    assert b'"upstream_cluster_id":null,"upstream_node_id":null' in encode_context(
        context
    )


def test_decoding_ignores_fields_a_newer_writer_added(
    make_context: MakeContext,
) -> None:
    newer = make_context(1).to_json_dict() | {"tenant": "blue"}
    assert decode_context(json.dumps(newer).encode()) == make_context(1)


def test_an_unencodable_context_is_a_failed_export(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with new_log(tmp_path) as log:
        result = log.export(make_context(1, received_time_unix_nano=2**70), b"x")
        assert not result.ok and "not encodable" in (result.error or "")
        assert log.next_offset == 0


def test_offsets_continue_after_reopen(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with new_log(tmp_path) as log:
        for i in range(5):
            log.append(make_context(i), b"a")
    with new_log(tmp_path) as log:
        assert log.next_offset == 5
        assert log.append(make_context(5), b"b") == 5
    assert LandingReader(tmp_path).end_offset() == 6


def test_positions_round_trip(tmp_path: Path) -> None:
    positions = ConsumerPositions(tmp_path, "otlp-forwarder")
    assert positions.load() == 0
    positions.commit(42)
    assert ConsumerPositions(tmp_path, "otlp-forwarder").load() == 42


def test_a_commit_is_stamped_by_the_clock(tmp_path: Path) -> None:
    clock = FakeClock(wall_ns=1_700_000_000_123_456_789)
    positions = ConsumerPositions(tmp_path, "otlp-forwarder", clock=clock)
    positions.commit(7)
    document = json.loads(positions.path.read_bytes())
    assert document["committed_time_unix_nano"] == 1_700_000_000_123_456_789


def test_a_remembered_constant_part_is_small(make_context: MakeContext) -> None:
    """The part kept per instance id holds exact-size bytes: the object orjson returns
    keeps its 4 KiB output buffer, which kept per instance would be ~64 MiB at the
    default 16,384 cached instances (the instance itself is well under 1 KiB)."""
    contexts = [
        dataclasses.replace(make_context(i), client_instance_id=f"{i:022d}")
        for i in range(1000)
    ]
    encode_context(make_context(0))  # lazily created module state, outside the measure
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for context in contexts:
            encode_context(context)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert grown / len(contexts) < 1024
