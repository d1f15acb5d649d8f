"""Who is asking, and what they may do: the principal and address of a connection, and the authorization
checks the dispatch path makes for the ACLs each API declares (Kafka's AuthHelper). Without an authorizer
every check passes, as in Kafka."""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

from staticfleet.broker.security.acl import (
    ANONYMOUS,
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
)
from staticfleet.broker.security.authorizer import Authorizer


@functools.lru_cache(maxsize=4096)  # every request asks; clients come from few addresses
def kafka_host(address: str) -> str:
    """A client address as Kafka's ACL host field compares it (Java's InetAddress.getHostAddress):
    IPv4 dotted, IPv6 as eight uncompressed hex groups (::1 is 0:0:0:0:0:0:0:1), IPv4-mapped as IPv4."""
    text = address.split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":"))
    return str(ip)


@dataclass(frozen=True, slots=True)
class Session:
    """An authenticated connection: `User:<name>` (or `User:ANONYMOUS`) and the client's address."""

    principal: str = ANONYMOUS
    host: str = "127.0.0.1"

    @classmethod
    def of(cls, principal: str, address: str) -> Session:
        return cls(principal, kafka_host(address))


class Access:
    """The checks of one request: `authorizer` None means no authorizer is configured."""

    def __init__(self, authorizer: Authorizer | None, session: Session) -> None:
        self.authorizer = authorizer
        self.session = session

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(
            self.session.principal, self.session.host, operation, resource_type, name
        )

    def cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized_operations(self, resource_type: ResourceType, name: str, *, requested: bool = True) -> int:
        """The KIP-430 bitfield, or the not-requested value."""
        if not requested:
            return AUTHORIZED_OPERATIONS_OMITTED
        if self.authorizer is None:
            bits = 0
            for operation in SUPPORTED_OPERATIONS[resource_type]:
                bits |= 1 << int(operation)
            return bits
        return self.authorizer.authorized_operations(
            self.session.principal, self.session.host, resource_type, name
        )
