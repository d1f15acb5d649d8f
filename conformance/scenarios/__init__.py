"""Every conformance scenario; importing this package registers them."""

from conformance.scenarios import (
    admin,
    consumer_group,
    dynamic,
    leave,
    limits,
    offsets,
    persistence,
    protocols,
    security_acl,
    security_sasl,
    static,
    sync_heartbeat,
    timeouts,
    topics,
)

__all__ = [
    "admin",
    "consumer_group",
    "dynamic",
    "leave",
    "limits",
    "offsets",
    "persistence",
    "protocols",
    "security_acl",
    "security_sasl",
    "static",
    "sync_heartbeat",
    "timeouts",
    "topics",
]
