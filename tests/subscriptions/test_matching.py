"""Selector matching: AND of full-string matches, empty = everyone, null never matches."""

from __future__ import annotations

import pytest

from subscriptions.matching import ClientMetadata, java_host_address, matches
from subscriptions.model import Subscription

LIBRDKAFKA = ClientMetadata(
    client_instance_id="VQQTF4UpT8qqtooenFFlgA",
    client_id="orders-producer-1",
    client_software_name="confluent-kafka-python",
    client_software_version="2.16.1-rdkafka-2.16.0",
    client_source_address="10.1.2.3",
    client_source_port="53211",
)


def _sub(match: str) -> Subscription:
    return Subscription.from_configs("s", {"match": match} if match else {})


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        ("", True),  # no selectors: every client
        ("client_id=orders-.*", True),
        (
            "client_id=orders",
            False,
        ),  # full match, not search: "orders" is only a prefix
        ("client_id=.*producer", False),  # ... nor a suffix match
        ("client_id=.*producer.*", True),
        ("client_instance_id=VQQTF4UpT8qqtooenFFlgA", True),
        (
            "client_software_name=confluent-kafka-python,client_software_version=2\\.16\\..*",
            True,
        ),
        (
            "client_software_name=confluent-kafka-python,client_software_version=2\\.15\\..*",
            False,
        ),
        ("client_source_address=10\\.1\\..*", True),
        ("client_source_address=10\\.2\\..*", False),
        ("client_source_port=53211", True),
        ("client_source_port=5321", False),
        ("client_id=ORDERS-.*", False),  # case sensitive
        ("client_id=(?i)ORDERS-.*", True),  # unless asked, same flag syntax as Java
    ],
)
def test_selector_matching(match: str, expected: bool) -> None:
    assert matches(_sub(match), LIBRDKAFKA) is expected


def test_null_attribute_never_matches_even_a_match_anything_pattern() -> None:
    anonymous = ClientMetadata(
        client_instance_id="AAAAAAAAAAAAAAAAAAAAAg", client_id=None
    )
    assert matches(_sub("client_id=.*"), anonymous) is False
    assert matches(_sub("client_source_port=.*"), anonymous) is False
    assert matches(_sub(""), anonymous) is True
    assert matches(_sub("client_software_name=unknown"), anonymous) is True


def test_empty_client_id_matches_only_patterns_that_accept_empty() -> None:
    empty = ClientMetadata(client_instance_id="AAAAAAAAAAAAAAAAAAAAAg", client_id="")
    assert matches(_sub("client_id=.*"), empty) is True
    assert matches(_sub("client_id=.+"), empty) is False


@pytest.mark.parametrize(
    ("address", "java"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "0:0:0:0:0:0:0:1"),
        ("2001:db8::ff00:42:8329", "2001:db8:0:0:0:ff00:42:8329"),
        ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1%eth0"),
        ("::ffff:10.1.2.3", "10.1.2.3"),
    ],
)
def test_source_address_is_rendered_like_java(address: str, java: str) -> None:
    assert java_host_address(address) == java
