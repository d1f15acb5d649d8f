"""SASL mechanism names, the order Kafka lists them in, and a server exchange for each mechanism."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from staticfleet.broker.security.plain import PlainLookup, PlainServer
from staticfleet.broker.security.scram import CredentialLookup, ScramMechanism, ScramServer

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
# Kafka's own mechanisms this coordinator does not implement; naming one is a configuration error.
UNSUPPORTED_MECHANISMS = ("GSSAPI", "OAUTHBEARER")


class SaslServer(Protocol):
    authorization_id: str | None

    @property
    def complete(self) -> bool: ...

    def evaluate(self, response: bytes) -> bytes: ...


def new_server(mechanism: str, plain: PlainLookup, scram: CredentialLookup) -> SaslServer:
    if mechanism == PLAIN:
        return PlainServer(plain)
    scram_mechanism = ScramMechanism.by_name(mechanism)
    if scram_mechanism is None:
        raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
    return ScramServer(scram_mechanism, scram)


def validate_mechanisms(mechanisms: Iterable[str]) -> tuple[str, ...]:
    """The configured mechanisms, checked (names are case-sensitive, as in Kafka)."""
    names = tuple(mechanisms)
    if not names:
        raise ValueError(
            "sasl.enabled.mechanisms is empty: name at least one of " + ", ".join(SUPPORTED_MECHANISMS)
        )
    for name in names:
        if name in UNSUPPORTED_MECHANISMS:
            raise ValueError(f"SASL mechanism {name} is not supported by the staticfleet coordinator")
        if name not in SUPPORTED_MECHANISMS:
            raise ValueError(
                f"unknown SASL mechanism {name!r}: supported are " + ", ".join(SUPPORTED_MECHANISMS)
            )
    return names


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def handshake_order(mechanisms: Iterable[str]) -> list[str]:
    """The order Kafka's SaslHandshake response lists the enabled mechanisms in.

    The broker builds `new ArrayList<>(new HashSet<>(enabled))`, so the wire order is a java.util.HashSet's
    iteration order: buckets by the spread hash, insertion order within a bucket; duplicates collapse.
    """
    unique = list(dict.fromkeys(mechanisms))
    wanted = max(int(len(unique) / 0.75) + 1, 16)
    capacity = 1 << (wanted - 1).bit_length()

    def bucket(name: str) -> int:
        h = java_string_hash(name) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    order = sorted(range(len(unique)), key=lambda i: (bucket(unique[i]), i))
    return [unique[i] for i in order]
