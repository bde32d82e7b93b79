"""Kafka-style listener strings."""

from __future__ import annotations

import socket

import pytest

from collector.app.config import DEFAULT_SECURITY_PROTOCOL_MAP
from collector.net.listeners import (
    EndPoint,
    ListenerError,
    advertised_endpoint,
    parse_listeners,
    parse_security_protocol_map,
)

PROTOCOLS = parse_security_protocol_map(
    DEFAULT_SECURITY_PROTOCOL_MAP + ",INTERNAL:PLAINTEXT"
)


def test_parse_several() -> None:
    endpoints = parse_listeners(
        "PLAINTEXT://127.0.0.1:0, INTERNAL://[::1]:9093,SSL://:9094", PROTOCOLS
    )
    assert endpoints == [
        EndPoint("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT"),
        EndPoint("INTERNAL", "::1", 9093, "PLAINTEXT"),
        EndPoint("SSL", "", 9094, "SSL"),
    ]
    assert str(endpoints[1]) == "INTERNAL://[::1]:9093"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "127.0.0.1:9092",
        "PLAINTEXT://host:99999",
        "NOPE://h:1",
        "PLAINTEXT://a:1,PLAINTEXT://b:2",
    ],
)
def test_rejects(text: str) -> None:
    with pytest.raises(ListenerError):
        parse_listeners(text, PROTOCOLS)


def test_bad_protocol_map() -> None:
    with pytest.raises(ListenerError, match="listener.security.protocol.map"):
        parse_security_protocol_map("PLAINTEXT:CARRIER_PIGEON")


def test_advertised_port_zero_takes_bound_port() -> None:
    bound = EndPoint("PLAINTEXT", "127.0.0.1", 40123, "PLAINTEXT")
    assert advertised_endpoint(bound, None) == bound
    adv = EndPoint("PLAINTEXT", "collector.example", 0, "PLAINTEXT")
    assert advertised_endpoint(bound, adv) == EndPoint(
        "PLAINTEXT", "collector.example", 40123, "PLAINTEXT"
    )


def test_wildcard_bind_advertises_host_name() -> None:
    bound = EndPoint("PLAINTEXT", "", 9092, "PLAINTEXT")
    assert advertised_endpoint(bound, None).host == socket.getfqdn()
