"""Operator events: what the fleet's operator did, as JSON lines beside the coordinator's event log.

An operation (a rollout, a scale-down, ...) is a window in time: rebalances and membership events of the
same group whose time falls inside it are attributed to it. The format is documented in docs/events.md.
"""

from __future__ import annotations

from typing import Any, Final

FLEET_OPERATION_STARTED: Final = "fleet_operation_started"
FLEET_OPERATION_COMPLETED: Final = "fleet_operation_completed"

# Operations the operator performs ...
ROLLOUT: Final = "rollout"
RESTART: Final = "restart"
SCALE_DOWN: Final = "scale-down"
SCALE_UP: Final = "scale-up"
# ... and disruptions a simulation injects, recorded the same way so they can be compared.
CRASH: Final = "crash"
NETWORK_BLIP: Final = "network-blip"


def operation_event(
    kind: str,
    ts: int,
    group: str,
    operation: str,
    operation_id: str,
    from_replicas: int,
    to_replicas: int,
    mode: str | None = None,
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "v": 1,
        "ts": ts,
        "type": kind,
        "group": group,
        "operation": operation,
        "id": operation_id,
        "from_replicas": from_replicas,
        "to_replicas": to_replicas,
    }
    if mode is not None:
        event["mode"] = mode
    return event
