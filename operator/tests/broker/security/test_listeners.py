"""Listener settings in Kafka's syntax."""

from __future__ import annotations

import pytest

from staticfleet.broker.security.listeners import (
    Endpoint,
    ListenerError,
    SecurityProtocol,
    build_listeners,
    parse_endpoints,
    parse_protocol_map,
)


def test_several_listeners_in_one_comma_separated_value_or_repeated() -> None:
    one = build_listeners(["PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9094"])
    two = build_listeners(["PLAINTEXT://127.0.0.1:9092", "SASL_SSL://:9094"])
    assert one == two
    assert [(x.name, x.protocol, x.bind.host, x.bind.port) for x in one] == [
        ("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092),
        ("SASL_SSL", SecurityProtocol.SASL_SSL, "", 9094),
    ]


def test_every_protocol_name_is_its_own_listener_name() -> None:
    listeners = build_listeners(["PLAINTEXT://:1,SSL://:2,SASL_PLAINTEXT://:3,SASL_SSL://:4"])
    assert [x.protocol.uses_tls for x in listeners] == [False, True, False, True]
    assert [x.protocol.uses_sasl for x in listeners] == [False, False, True, True]


def test_advertised_listener_replaces_the_bind_address_per_name() -> None:
    listeners = build_listeners(
        ["PLAINTEXT://0.0.0.0:9092,SASL_SSL://0.0.0.0:9094"], ["SASL_SSL://coordinator.ns.svc:9094"]
    )
    assert listeners[0].advertised == Endpoint("PLAINTEXT", "0.0.0.0", 9092)
    assert listeners[1].advertised == Endpoint("SASL_SSL", "coordinator.ns.svc", 9094)


def test_custom_names_need_the_protocol_map() -> None:
    with pytest.raises(ListenerError, match="No security protocol defined for listener INTERNAL"):
        build_listeners(["INTERNAL://:9092"])
    mapped = build_listeners(["internal://:9092"], protocol_map=parse_protocol_map("INTERNAL:SASL_PLAINTEXT"))
    assert mapped[0].protocol == SecurityProtocol.SASL_PLAINTEXT


def test_ipv6_hosts_are_written_in_brackets() -> None:
    (endpoint,) = parse_endpoints(["SSL://[::1]:9093"])
    assert endpoint.host == "::1" and endpoint.address == "[::1]:9093" and str(endpoint) == "SSL://[::1]:9093"


@pytest.mark.parametrize(
    ("listeners", "advertised", "message"),
    [
        (["127.0.0.1:9092"], [], "expected NAME://host:port"),
        (["PLAINTEXT://:99999"], [], "outside 0..65535"),
        (["PLAINTEXT://:1,PLAINTEXT://:2"], [], "different name"),
        (["PLAINTEXT://:1,SSL://:1"], [], "different port"),
        ([], [], "no listener given"),
        (["PLAINTEXT://:1"], ["SSL://h:1"], "names no listener"),
        (["PLAINTEXT://:1"], ["PLAINTEXT://0.0.0.0:1"], "must name a host"),
        (["PLAINTEXT://:1"], ["PLAINTEXT://a:1,PLAINTEXT://b:1"], "advertised twice"),
    ],
)
def test_invalid_listener_settings_say_what_is_wrong(
    listeners: list[str], advertised: list[str], message: str
) -> None:
    with pytest.raises(ListenerError, match=message):
        build_listeners(listeners, advertised)


def test_protocol_map_rejects_unknown_protocols() -> None:
    with pytest.raises(ListenerError, match="unknown security protocol 'TLS'"):
        parse_protocol_map("A:TLS")
