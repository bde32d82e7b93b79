"""Round trips through a real landing directory: append, read back, reopen."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from exporters.base import Exporter
from exporters.context import TelemetryContext
from exporters.landing import ConsumerPositions, LandingLog, LandingReader
from exporters.landing.format import encode_context

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


def test_context_encoding_matches_the_context_own_json(make_context: MakeContext) -> None:
    for context in (make_context(3), make_context(4, client_id=None, principal="User:\u00fc")):
        assert encode_context(context) == context.to_json_bytes()


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
