"""A small event log written by hand, one group per thing to check; the answers in the tests were worked
out by hand from these lines."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _e(ts: int, kind: str, group: str, **fields: Any) -> str:
    return json.dumps({"v": 1, "ts": ts, "type": kind, "group": group, **fields}, separators=(",", ":"))


def _m(member_id: str, instance_id: str | None, assignment: dict[str, list[int]] | None) -> dict[str, Any]:
    return {"member_id": member_id, "instance_id": instance_id, "assignment": assignment}


def _done(ts: int, group: str, gen: int, duration: int, members: list[dict[str, Any]], reason: str) -> str:
    return _e(
        ts,
        "rebalance_completed",
        group,
        generation=gen,
        state="Stable",
        reason=reason,
        duration_ms=duration,
        protocol_type="consumer",
        protocol="range",
        leader=members[0]["member_id"],
        leader_instance_id=members[0]["instance_id"],
        members=members,
    )


def _start(ts: int, group: str, gen: int, reason: str, from_state: str, members: int) -> str:
    return _e(
        ts,
        "rebalance_started",
        group,
        generation=gen,
        state="PreparingRebalance",
        reason=reason,
        detail="written by hand",
        from_state=from_state,
        members=members,
    )


def _replaced(
    ts: int,
    group: str,
    gen: int,
    state: str,
    instance: str,
    old: str,
    new: str,
    host: str,
    *,
    rebalance: bool,
) -> str:
    return _e(
        ts,
        "static_member_replaced",
        group,
        generation=gen,
        state=state,
        instance_id=instance,
        old_member_id=old,
        new_member_id=new,
        client_host=host,
        rebalance=rebalance,
    )


def _joined(ts: int, group: str, gen: int, state: str, member: str, instance: str | None) -> str:
    return _e(
        ts,
        "member_joined",
        group,
        generation=gen,
        state=state,
        member_id=member,
        instance_id=instance,
        client_id="c",
        client_host="/10.0.0.1",
        session_timeout_ms=45000,
        rebalance_timeout_ms=60000,
    )


def _join_done(ts: int, group: str, gen: int) -> str:
    return _e(ts, "join_completed", group, generation=gen, state="CompletingRebalance", members=[])


def _op(ts: int, kind: str, group: str, operation: str, **fields: Any) -> str:
    return _e(ts, f"fleet_operation_{kind}", group, operation=operation, **fields)


ORD, PAY, LEG, FLT, OTH = "orders", "payments", "legacy", "fleet", "other"

# orders: static members; an episode restarted from CompletingRebalance, an absorbed restart, a fence,
# an expiry, a coordinator restart mid-rebalance, and a rebalance right at a file boundary.
ORDERS_ROTATED = [
    _joined(1000, ORD, 0, "Empty", "o0-a", "orders-0"),
    _start(1000, ORD, 0, "member-joined", "Empty", 1),
    _joined(1500, ORD, 0, "PreparingRebalance", "o1-a", "orders-1"),
    _join_done(4000, ORD, 1),
    _done(
        4010,
        ORD,
        1,
        3010,
        [_m("o0-a", "orders-0", {"t": [0, 1, 2]}), _m("o1-a", "orders-1", {"t": [3, 4, 5]})],
        "member-joined",
    ),
    _joined(10000, ORD, 1, "Stable", "o2-a", "orders-2"),
    _start(10000, ORD, 1, "member-joined", "Stable", 3),
    _join_done(12000, ORD, 2),
    _replaced(12500, ORD, 2, "CompletingRebalance", "orders-1", "o1-a", "o1-b", "/10.0.0.2", rebalance=True),
    _start(12500, ORD, 2, "static-member-replaced-during-sync", "CompletingRebalance", 3),
    _join_done(15000, ORD, 3),
    _done(
        15020,
        ORD,
        3,
        5020,
        [
            _m("o0-a", "orders-0", {"t": [0, 1]}),
            _m("o1-b", "orders-1", {"t": [2, 3]}),
            _m("o2-a", "orders-2", {"t": [4, 5]}),
        ],
        "member-joined",
    ),
    _replaced(20000, ORD, 3, "Stable", "orders-0", "o0-a", "o0-b", "/10.0.0.3", rebalance=False),
    _e(
        30000,
        "member_fenced",
        ORD,
        generation=3,
        state="Stable",
        member_id="o0-a",
        instance_id="orders-0",
        api="Heartbeat",
    ),
    _e(
        40000,
        "member_expired",
        ORD,
        generation=3,
        state="Stable",
        member_id="o2-a",
        instance_id="orders-2",
        cause="session-timeout",
    ),
    _start(40000, ORD, 3, "session-timeout", "Stable", 2),
    _e(41000, "group_loaded", ORD, generation=3, state="Stable", members=2),
    _e(
        50000,
        "member_left",
        ORD,
        generation=3,
        state="Stable",
        member_id="o1-b",
        instance_id="orders-1",
        client_reason="bye",
    ),
    _start(50000, ORD, 3, "member-left", "Stable", 1),
    _join_done(53000, ORD, 4),
    _done(53000, ORD, 4, 3000, [_m("o0-b", "orders-0", {"t": [0, 1, 2, 3, 4, 5]})], "member-left"),
]
ORDERS_ACTIVE = [
    _joined(53000, ORD, 4, "Stable", "o3-a", "orders-3"),
    _start(53000, ORD, 4, "member-joined", "Stable", 2),
    _join_done(56000, ORD, 5),
    _done(
        56000,
        ORD,
        5,
        3000,
        [_m("o0-b", "orders-0", {"t": [0, 1, 2]}), _m("o3-a", "orders-3", {"t": [3, 4, 5]})],
        "member-joined",
    ),
]

# payments: dynamic members (no instance ids), an undecodable assignment, a group that empties and
# comes back, and a rebalance still open at the end of the log.
PAYMENTS = [
    _joined(1000, PAY, 0, "Empty", "m-a", None),
    _start(1000, PAY, 0, "member-joined", "Empty", 1),
    _join_done(4000, PAY, 1),
    _done(4000, PAY, 1, 3000, [_m("m-a", None, {"p": [0, 1]})], "member-joined"),
    _joined(5000, PAY, 1, "Stable", "m-b", None),
    _start(5000, PAY, 1, "member-joined", "Stable", 2),
    _join_done(6000, PAY, 2),
    _done(6000, PAY, 2, 1000, [_m("m-a", None, {"p": [0]}), _m("m-b", None, {"p": [1]})], "member-joined"),
    _joined(7000, PAY, 2, "Stable", "m-c", None),
    _start(7000, PAY, 2, "member-joined", "Stable", 3),
    _join_done(8000, PAY, 3),
    _done(
        8000,
        PAY,
        3,
        1000,
        [_m("m-a", None, None), _m("m-b", None, {"p": [1]}), _m("m-c", None, {})],
        "member-joined",
    ),
    _e(
        9000,
        "member_left",
        PAY,
        generation=3,
        state="Stable",
        member_id="m-a",
        instance_id=None,
        client_reason=None,
    ),
    _start(9000, PAY, 3, "member-left", "Stable", 2),
    _e(
        12000,
        "member_expired",
        PAY,
        generation=3,
        state="PreparingRebalance",
        member_id="m-b",
        instance_id=None,
        cause="rebalance-timeout",
    ),
    _e(
        12000,
        "member_expired",
        PAY,
        generation=3,
        state="PreparingRebalance",
        member_id="m-c",
        instance_id=None,
        cause="session-timeout",
    ),
    _e(12000, "group_empty", PAY, generation=4, state="Empty", reason="member-left", duration_ms=3000),
    _joined(20000, PAY, 4, "Empty", "m-d", None),
    _start(20000, PAY, 4, "member-joined", "Empty", 1),
    _join_done(23000, PAY, 5),
    _done(23000, PAY, 5, 3000, [_m("m-d", None, {"p": [0, 1]})], "member-joined"),
    _joined(30000, PAY, 5, "Stable", "m-e", None),
    _start(30000, PAY, 5, "member-joined", "Stable", 2),
]

# legacy: the log starts in the middle of a rebalance.
LEGACY = [
    _done(100000, LEG, 7, 4000, [_m("l0", "legacy-0", {"x": [0]})], "session-timeout"),
]

# fleet: operator events around rebalances and restarts, boundaries included, one operation with no id
# and no completion, one restart after an operation ended.
FLEET = [
    _joined(100, FLT, 0, "Empty", "f0", "fleet-0"),
    _start(100, FLT, 0, "member-joined", "Empty", 1),
    _joined(200, FLT, 0, "PreparingRebalance", "f1", "fleet-1"),
    _joined(300, FLT, 0, "PreparingRebalance", "f2", "fleet-2"),
    _join_done(3100, FLT, 1),
    _done(
        3100,
        FLT,
        1,
        3000,
        [
            _m("f0", "fleet-0", {"t": [0, 1]}),
            _m("f1", "fleet-1", {"t": [2, 3]}),
            _m("f2", "fleet-2", {"t": [4, 5]}),
        ],
        "member-joined",
    ),
    _op(10000, "started", FLT, "scale-down", id="op-1", from_replicas=3, to_replicas=2, mode="staticfleet"),
    _e(
        12000,
        "member_removed",
        FLT,
        generation=1,
        state="Stable",
        member_id="f2",
        instance_id="fleet-2",
        client_reason="scaled down",
    ),
    _start(12000, FLT, 1, "member-removed", "Stable", 2),
    _join_done(14000, FLT, 2),
    _done(
        14000,
        FLT,
        2,
        2000,
        [_m("f0", "fleet-0", {"t": [0, 1, 2]}), _m("f1", "fleet-1", {"t": [3, 4, 5]})],
        "member-removed",
    ),
    _op(15000, "completed", FLT, "scale-down", id="op-1", from_replicas=3, to_replicas=2, mode="staticfleet"),
    _replaced(15000, FLT, 2, "Stable", "fleet-0", "f0", "f0b", "/10.0.0.4", rebalance=False),
    _op(20000, "started", FLT, "rollout", id="op-2", from_replicas=2, to_replicas=2, mode="staticfleet"),
    _replaced(21000, FLT, 2, "Stable", "fleet-1", "f1", "f1b", "/10.0.0.5", rebalance=False),
    _replaced(22000, FLT, 2, "Stable", "fleet-0", "f0b", "f0c", "/10.0.0.6", rebalance=False),
    _op(23000, "completed", FLT, "rollout", id="op-2", from_replicas=2, to_replicas=2, mode="staticfleet"),
    _replaced(23001, FLT, 2, "Stable", "fleet-1", "f1b", "f1c", "/10.0.0.7", rebalance=False),
    _op(30000, "started", FLT, "scale-up", from_replicas=2, to_replicas=4),
    _joined(31000, FLT, 2, "Stable", "f2b", "fleet-2"),
    _start(31000, FLT, 2, "member-joined", "Stable", 3),
    _joined(33000, FLT, 2, "PreparingRebalance", "f3", "fleet-3"),
    _join_done(34000, FLT, 3),
    _done(
        34000,
        FLT,
        3,
        3000,
        [
            _m("f0c", "fleet-0", {"t": [0, 1]}),
            _m("f1c", "fleet-1", {"t": [2, 3]}),
            _m("f2b", "fleet-2", {"t": [4]}),
            _m("f3", "fleet-3", {"t": [5]}),
        ],
        "member-joined",
    ),
]

OTHER = [_op(5000, "completed", OTH, "restart", id="lonely", from_replicas=1, to_replicas=1)]

BAD_LINES = [
    "this is not json",
    '{"v":1,"ts":"yesterday","type":"member_joined","group":"orders"}',
    '{"v":1,"type":"member_joined","group":"orders"}',
    '{"v":1,"ts":5,"type":"member_joined"}',
    '{"v":2,"ts":5,"type":"member_joined","group":"orders"}',
    "",
    '{"v":1,"ts":9',
]


def write(directory: Path) -> list[Path]:
    """Two files like a rotated coordinator log, plus an operator log; the rotated file is older."""
    directory.mkdir(parents=True, exist_ok=True)
    rotated = directory / "coordinator" / "events-000001.jsonl"
    active = directory / "coordinator" / "events.jsonl"
    operator = directory / "operator" / "fleet.jsonl"
    for path in (rotated, active, operator):
        path.parent.mkdir(parents=True, exist_ok=True)
    coordinator_lines = PAYMENTS + LEGACY + [line for line in FLEET if '"fleet_operation' not in line]
    rotated.write_text("\n".join(ORDERS_ROTATED + BAD_LINES[:3]) + "\n")
    active.write_text("\n".join(ORDERS_ACTIVE + coordinator_lines + BAD_LINES[3:]) + "\n")
    operator.write_text("\n".join([line for line in FLEET if '"fleet_operation' in line] + OTHER) + "\n")
    os.utime(rotated, (1_700_000_000, 1_700_000_000))
    os.utime(active, (1_700_000_100, 1_700_000_100))
    os.utime(operator, (1_700_000_100, 1_700_000_100))
    return [rotated, active, operator]
