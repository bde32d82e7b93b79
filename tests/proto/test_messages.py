"""Every generated message version: round trip, and byte-for-byte agreement with kio.

kio is generated independently from the same Kafka JSON specs; for every request and
response version we generate, random values (nulls, empty arrays, tagged fields set, extreme
integers included) must encode to the same bytes in both and decode back to the same value.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto.codegen import FieldSpec, MessageSpec
from tests.proto.message_strategies import (
    api_messages,
    kio_class,
    kio_decode,
    kio_encode,
    message_strategy,
    module_of,
    to_kio,
)

CASES = list(api_messages())
IDS = [f"{spec.name}-v{version}" for spec, version in CASES]

# Versions kio 0.6.5 does not have (it predates ApiVersions v5 and MetadataRequest v13's
# sibling changes); these are still covered by the round-trip test.
KIO_MISSING = {(spec.name, v) for spec, v in CASES if kio_class(spec, v) is None}


def _tagged_struct(fields: list[FieldSpec], version: int) -> bool:
    return any(
        f.present(version)
        and (
            (f.tagged(version) and f.is_struct and not f.is_array)
            or _tagged_struct(f.fields, version)
        )
        for f in fields
    )


# kio writes a tagged struct field (FetchResponse's DivergingEpoch, CurrentLeader, SnapshotId;
# ProduceResponse's CurrentLeader) even at its default, and reads an absent one as zeros. Kafka's
# MessageDataGenerator writes it only when it differs from a new instance, and so do we: the
# bytes of these versions are checked against Kafka's own classes instead (tests/gateway/
# test_wire_golden.py, golden bytes serialized by the kafka-clients 4.4.0 jar).
KIO_TAGGED_STRUCT = {
    (spec.name, v) for spec, v in CASES if _tagged_struct(spec.fields, v)
}


def encode(spec: MessageSpec, version: int, message: Any) -> bytes:
    out = bytearray()
    module_of(spec).WRITERS[version](message, out)
    return bytes(out)


def decode(spec: MessageSpec, version: int, data: bytes) -> Any:
    message, end = module_of(spec).READERS[version](memoryview(data), 0)
    assert end == len(data)
    return message


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(spec: MessageSpec, version: int, data: st.DataObject) -> None:
    message = data.draw(message_strategy(spec, version))
    wire = encode(spec, version, message)
    assert decode(spec, version, wire) == message
    # decoding is insensitive to what follows the message (trailing bytes are the caller's)
    assert module_of(spec).READERS[version](wire + b"\xff\x00", 0)[0] == message


@pytest.mark.parametrize(("spec", "version"), CASES, ids=IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_same_bytes_as_kio(
    spec: MessageSpec, version: int, data: st.DataObject
) -> None:
    kio_cls = kio_class(spec, version)
    if kio_cls is None:
        pytest.skip(f"kio has no {spec.name} v{version}")
    if (spec.name, version) in KIO_TAGGED_STRUCT:
        pytest.skip(
            f"kio writes {spec.name} v{version}'s tagged structs at their defaults"
        )
    message = data.draw(message_strategy(spec, version))
    ours = encode(spec, version, message)
    theirs = kio_encode(message, kio_cls)
    assert ours == theirs
    assert decode(spec, version, theirs) == message
    assert kio_decode(ours, kio_cls) == to_kio(message, kio_cls)


def test_kio_covers_every_version_we_serve() -> None:
    from proto.connection import SUPPORTED_VERSIONS

    served = {
        (spec.name, v)
        for spec, v in CASES
        if spec.api_key in SUPPORTED_VERSIONS
        and SUPPORTED_VERSIONS[spec.api_key][0]
        <= v
        <= SUPPORTED_VERSIONS[spec.api_key][1]
    }
    # kio predates KIP-1242: ApiVersions v5 has golden bytes instead
    # (tests/proto/test_connection.py::test_api_versions_v5_golden_bytes).
    kio_predates = {("ApiVersionsRequest", 5), ("ApiVersionsResponse", 5)}
    assert served and not (served - kio_predates) & KIO_MISSING
