"""Listeners in Kafka's own syntax: `NAME://host:port`, several at once, each with a security protocol.

    listeners            PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9094
    advertised.listeners SASL_SSL://coordinator.kafka.svc:9094     (per listener name; defaults to the bind)
    listener.security.protocol.map  INTERNAL:SASL_PLAINTEXT,...    (names that are not protocol names)

An empty host binds every interface; IPv6 hosts are written in brackets.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


class SecurityProtocol(enum.Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


class ListenerError(ValueError):
    """A listener setting that cannot be used; the message says which and why."""


_ENDPOINT = re.compile(
    r"^(?P<name>[A-Za-z0-9_.-]+)://(?P<host>\[[0-9A-Fa-f:.]+\]|[^:\[\]/]*):(?P<port>-?\d+)$"
)


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.name}://{self.address}"


@dataclass(frozen=True)
class Listener:
    name: str
    protocol: SecurityProtocol
    bind: Endpoint
    advertised: Endpoint


def parse_endpoints(values: Iterable[str]) -> list[Endpoint]:
    """Endpoints from one or more comma-separated lists; listener names are upper-cased as Kafka does."""
    endpoints: list[Endpoint] = []
    for value in values:
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            match = _ENDPOINT.match(item)
            if match is None:
                raise ListenerError(
                    f"Unable to parse {item} to a listener endpoint: expected NAME://host:port "
                    "(e.g. SASL_SSL://0.0.0.0:9094)"
                )
            port = int(match.group("port"))
            if not 0 <= port <= 65535:
                raise ListenerError(f"{item}: port {port} is outside 0..65535")
            host = match.group("host").strip("[]")
            endpoints.append(Endpoint(match.group("name").upper(), host, port))
    return endpoints


def parse_protocol_map(value: str) -> dict[str, SecurityProtocol]:
    """`NAME:PROTOCOL,...` (Kafka's listener.security.protocol.map)."""
    mapping: dict[str, SecurityProtocol] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep:
            raise ListenerError(f"listener.security.protocol.map entry {item!r} is not NAME:PROTOCOL")
        try:
            mapping[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            known = ", ".join(p.value for p in SecurityProtocol)
            raise ListenerError(f"unknown security protocol {protocol.strip()!r} (known: {known})") from None
    return mapping


def build_listeners(
    listeners: Iterable[str],
    advertised: Iterable[str] = (),
    protocol_map: Mapping[str, SecurityProtocol] | None = None,
) -> list[Listener]:
    """The listeners to open, each with the address clients are told (Metadata, FindCoordinator)."""
    binds = parse_endpoints(listeners)
    if not binds:
        raise ListenerError("no listener given: name at least one, e.g. PLAINTEXT://0.0.0.0:9092")
    mapping = {p.value: p for p in SecurityProtocol}
    mapping.update(protocol_map or {})
    seen_names: set[str] = set()
    seen_ports: dict[int, str] = {}
    for bind in binds:
        if bind.name in seen_names:
            raise ListenerError(
                f"Each listener must have a different name, listeners: {bind.name} appears twice"
            )
        seen_names.add(bind.name)
        if bind.port and bind.port in seen_ports:
            raise ListenerError(
                f"Each listener must have a different port: {seen_ports[bind.port]} and {bind.name} "
                f"both use {bind.port}"
            )
        seen_ports[bind.port] = bind.name
        if bind.name not in mapping:
            raise ListenerError(
                f"No security protocol defined for listener {bind.name}: name it after a protocol "
                "(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) or map it with --listener-security-protocol-map"
            )
    advertised_by_name: dict[str, Endpoint] = {}
    for endpoint in parse_endpoints(advertised):
        if endpoint.name not in seen_names:
            raise ListenerError(
                f"advertised listener {endpoint} names no listener "
                f"(listeners: {', '.join(sorted(seen_names))})"
            )
        if endpoint.name in advertised_by_name:
            raise ListenerError(f"listener {endpoint.name} is advertised twice")
        if not endpoint.host or endpoint.host in ("0.0.0.0", "::"):
            raise ListenerError(f"advertised listener {endpoint} must name a host clients can reach")
        advertised_by_name[endpoint.name] = endpoint
    result = []
    for bind in binds:
        shown = advertised_by_name.get(bind.name, bind)
        result.append(Listener(bind.name, mapping[bind.name], bind, shown))
    return result
