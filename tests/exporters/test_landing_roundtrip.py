"""Round trips through a real landing directory: append, read back, reopen."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from exporters.base import Exporter
from exporters.context import TelemetryContext
from exporters.landing import ConsumerPositions, LandingLog, LandingReader
from exporters.landing.format import decode_context, encode_context

MakeContext = Callable[..., TelemetryContext]
MakePayload = Callable[[int], bytes]


def new_log(directory: Path, **options: object) -> LandingLog:
    options.setdefault("housekeeping", False)
    return LandingLog(directory, **options)  # type: ignore[arg-type]


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


_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    name=_TEXT,
    client_id=st.none() | _TEXT,
    principal=_TEXT.map(lambda text: text + '\x00\x1f\x7f\u2028"\\'),
    received=st.integers(-(2**63), 2**63 - 1),
    terminating=st.booleans(),
)
def test_context_encoding_is_the_context_own_json(
    name: str, client_id: str | None, principal: str, received: int, terminating: bool
) -> None:
    """The fast encoder must produce exactly ``TelemetryContext.to_json_bytes()``, and
    decode back to an equal context."""
    context = TelemetryContext(
        client_instance_id="AAAAAAAAAAAAAAAAAAAAAA",
        client_id=client_id,
        client_software_name=name,
        client_software_version="2.16.1",
        client_source_address="::1",
        client_source_port=65535,
        listener_name="PLAINTEXT",
        security_protocol="SASL_SSL",
        principal=principal,
        push_interval_ms=5000,
        terminating=terminating,
        received_time_unix_nano=received,
        node_id=-1,
        cluster_id="c",
        subscription_id=-(2**31),
        compression_type=0,
    )
    encoded = encode_context(context)
    assert encoded == context.to_json_bytes()
    assert decode_context(encoded) == context


def test_decoding_ignores_fields_a_newer_writer_added(make_context: MakeContext) -> None:
    newer = make_context(1).to_json_dict() | {"tenant": "blue"}
    assert decode_context(json.dumps(newer).encode()) == make_context(1)


def test_an_unencodable_context_is_a_failed_export(
    tmp_path: Path, make_context: MakeContext
) -> None:
    with new_log(tmp_path) as log:
        result = log.export(make_context(1, received_time_unix_nano=2**70), b"x")
        assert not result.ok and "not encodable" in (result.error or "")
        assert log.next_offset == 0


def test_offsets_continue_after_reopen(tmp_path: Path, make_context: MakeContext) -> None:
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
