"""What the dashboard shows, computed from what was read: pure functions from plain inputs to the JSON
the pages render. No I/O here; `sources` reads, `server` serves.

Times in the output are epoch milliseconds, so that the browser draws every item on one axis without
parsing dates.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from staticfleet.admin.client import natural_key
from staticfleet.admin.model import GroupDescription, PartitionOffsets, lag_summary
from staticfleet.kube.spec import InstanceIds, SpecError, parse_group

Manifest = dict[str, Any]

HOUR_MS = 3_600_000
RECENT_EVENTS = 25
FENCED_EXIT_CODE = 82  # Kafka's FENCED_INSTANCE_ID: the example consumer exits with it
# An operation owns the rebalances that start from this long before it (its Event is posted after the
# action that may already have started one) until the next operation.
ATTRIBUTION_SLACK_MS = 1_000

_SCALED = re.compile(r"scaling (up|down) from (\d+) to (\d+)")


@dataclass(frozen=True, slots=True)
class Rebalance:
    """A completed (or running) rebalance: from the coordinator's history, or observed by the dashboard."""

    started_ms: int | None
    completed_ms: int | None
    reason: str
    generation: int | None
    members: int | None = None
    partitions_moved: int | None = None
    source: str = "coordinator"  # coordinator | observed

    @property
    def duration_ms(self) -> int | None:
        if self.started_ms is None or self.completed_ms is None:
            return None
        return self.completed_ms - self.started_ms

    @property
    def at_ms(self) -> int:
        return int(self.started_ms or self.completed_ms or 0)


@dataclass(frozen=True, slots=True)
class CoordinatorView:
    """The embedded coordinator's HTTP view of a group (absent on Apache Kafka)."""

    state: str
    generation: int
    leader_instance_id: str | None
    rebalances: int
    rebalance_in_progress: str | None
    history: tuple[Rebalance, ...]
    history_capacity: int = 20


@dataclass(frozen=True, slots=True)
class FleetInputs:
    """Everything read for one fleet in one refresh. An `*_error` says why a source could not answer."""

    body: Manifest
    now_ms: int
    pods: Sequence[Manifest] = ()
    events: Sequence[Manifest] = ()
    revisions: Sequence[Manifest] = ()
    group: GroupDescription | None = None
    group_missing: bool = False
    group_error: str | None = None
    offsets: Sequence[PartitionOffsets] = ()
    offsets_error: str | None = None
    coordinator: CoordinatorView | None = None
    coordinator_api: str | None = None
    coordinator_error: str | None = None
    observed: Sequence[Rebalance] = ()
    moved_by_generation: Mapping[int, int] = field(default_factory=dict)


# -- small readers ------------------------------------------------------------------------------------------


def time_ms(text: Any) -> int | None:
    """Kubernetes timestamps (RFC 3339, with or without fractions) as epoch ms."""
    if not text:
        return None
    try:
        return int(datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def event_time_ms(event: Mapping[str, Any]) -> int | None:
    return (
        time_ms(event.get("eventTime"))
        or time_ms(event.get("lastTimestamp"))
        or time_ms(event.get("firstTimestamp"))
        or time_ms((event.get("metadata") or {}).get("creationTimestamp"))
    )


def pod_ordinal(pod: Mapping[str, Any], fleet: str) -> int | None:
    name = str(pod.get("metadata", {}).get("name", ""))
    index = (pod.get("metadata", {}).get("labels") or {}).get("apps.kubernetes.io/pod-index")
    if index is not None and str(index).isdigit():
        return int(index)
    prefix = f"{fleet}-"
    tail = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


def pod_restarts(pod: Mapping[str, Any]) -> int:
    return sum(int(s.get("restartCount", 0) or 0) for s in _container_statuses(pod))


def pod_ready(pod: Mapping[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _container_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(pod.get("status", {}).get("containerStatuses") or [])


def pod_fenced(pod: Mapping[str, Any]) -> bool:
    for status in _container_statuses(pod):
        for key in ("state", "lastState"):
            terminated = (status.get(key) or {}).get("terminated") or {}
            if terminated.get("exitCode") == FENCED_EXIT_CODE or "FENCED_INSTANCE_ID" in str(
                terminated.get("message") or ""
            ):
                return True
    return False


def partition_labels(partitions: Mapping[str, Sequence[int]] | None) -> list[str]:
    return [f"{t}-{p}" for t in sorted(partitions or {}) for p in sorted((partitions or {})[t])]


def _host(text: str | None) -> str:
    return (text or "").lstrip("/")


def conditions_of(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": c.get("type"),
            "status": c.get("status"),
            "reason": c.get("reason"),
            "message": c.get("message") or "",
            "lastTransitionMs": time_ms(c.get("lastTransitionTime")),
        }
        for c in (body.get("status") or {}).get("conditions") or []
    ]


# -- assignments and moved partitions --------------------------------------------------------------------


def assignment_owners(group: GroupDescription) -> dict[tuple[str, int], str]:
    """partition -> the instance id (or member id) that owns it."""
    owners: dict[tuple[str, int], str] = {}
    for member in group.members:
        for topic, partitions in (member.partitions or {}).items():
            for p in partitions:
                owners[(topic, p)] = member.instance_id or member.member_id
    return owners


def partitions_moved(before: Mapping[tuple[str, int], str], after: Mapping[tuple[str, int], str]) -> int:
    """Partitions that had an owner and now have another one (or none). A first assignment moves none."""
    return sum(1 for tp, owner in before.items() if after.get(tp) != owner)


# -- the timeline --------------------------------------------------------------------------------------------


def operations(
    body: Mapping[str, Any],
    events: Iterable[Mapping[str, Any]],
    revisions: Iterable[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Fleet operations, oldest first: scaling (the operator's Scaled events; creation is a scale up from
    0), rollouts (the StatefulSet's controller revisions after the first) and deletion."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    last_scale = status.get("lastScale") or {}
    found: list[dict[str, Any]] = []
    for event in events:
        if event.get("reason") != "Scaled":
            continue
        match = _SCALED.search(str(event.get("message") or ""))
        at = event_time_ms(event)
        if match is None or at is None:
            continue
        direction, before, after = match.group(1), int(match.group(2)), int(match.group(3))
        kind = "create" if before == 0 and direction == "up" else f"scale {direction}"
        found.append(
            {"kind": kind, "startedMs": at, "from": before, "to": after, "detail": event.get("message")}
        )
    ordered = sorted(revisions, key=lambda r: int(r.get("revision", 0) or 0))
    for revision in ordered[1:]:
        at = time_ms((revision.get("metadata") or {}).get("creationTimestamp"))
        if at is not None:
            found.append(
                {
                    "kind": "rollout",
                    "startedMs": at,
                    "detail": f"pod template revision {revision.get('revision')}",
                }
            )
    if meta.get("deletionTimestamp"):
        at = time_ms(meta["deletionTimestamp"])
        if at is not None:
            found.append({"kind": "delete", "startedMs": at, "detail": "the resource is being deleted"})
    found.sort(key=lambda o: o["startedMs"])
    _anchor_last_scale(found, last_scale)
    found.sort(key=lambda o: o["startedMs"])
    return found


def _anchor_last_scale(found: list[dict[str, Any]], last_scale: Mapping[str, Any]) -> None:
    """The latest scale is on the resource too: it started when the operator's pass saw the new size,
    before it touched the StatefulSet, and ended when the fleet was Ready again. Its Scaled Event is
    posted at the end of that pass, which on a busy machine can be after the rebalance the scale caused,
    so the operation starts at the resource's time, not the Event's."""
    started = time_ms(last_scale.get("startedAt"))
    if started is None:
        return
    sizes = (last_scale.get("fromReplicas"), last_scale.get("toReplicas"))
    for op in reversed(found):
        if op["kind"] not in ("create", "scale up", "scale down"):
            continue
        if sizes != (None, None) and (op["from"], op["to"]) != sizes:
            continue
        # the Event follows the start (the start is kept to the second, the Event is not)
        if op["startedMs"] < started - 2_000:
            return
        op["startedMs"] = min(op["startedMs"], started)
        completed = time_ms(last_scale.get("completedAt"))
        if completed is not None:
            op["completedMs"] = completed
        return


def attribute(ops: list[dict[str, Any]], rebalances: Sequence[Rebalance]) -> None:
    """Each operation's cost: the rebalances from its start until the next operation starts."""
    for i, op in enumerate(ops):
        start = op["startedMs"] - ATTRIBUTION_SLACK_MS
        end = ops[i + 1]["startedMs"] - ATTRIBUTION_SLACK_MS if i + 1 < len(ops) else None
        own = [r for r in rebalances if r.at_ms >= start and (end is None or r.at_ms < end)]
        durations = [r.duration_ms for r in own if r.duration_ms is not None]
        moved = [r.partitions_moved for r in own if r.partitions_moved is not None]
        op["rebalances"] = len(own)
        op["rebalanceMs"] = sum(durations) if durations else None
        op["partitionsMoved"] = sum(moved) if moved else None
        op["generations"] = [r.generation for r in own if r.generation is not None]


def rebalance_json(r: Rebalance) -> dict[str, Any]:
    return {
        "startedMs": r.started_ms,
        "completedMs": r.completed_ms,
        "durationMs": r.duration_ms,
        "reason": r.reason,
        "generation": r.generation,
        "members": r.members,
        "partitionsMoved": r.partitions_moved,
        "source": r.source,
    }


def rebalances_of(inputs: FleetInputs) -> list[Rebalance]:
    """The coordinator's history when it has one (with the moves the dashboard saw joined by generation),
    else what the dashboard observed."""
    if inputs.coordinator is not None:
        return [
            Rebalance(
                r.started_ms,
                r.completed_ms,
                r.reason,
                r.generation,
                r.members,
                inputs.moved_by_generation.get(r.generation) if r.generation is not None else None,
            )
            for r in inputs.coordinator.history
        ]
    return list(inputs.observed)


def rebalances_within(rebalances: Sequence[Rebalance], now_ms: int, window_ms: int = HOUR_MS) -> int:
    return sum(1 for r in rebalances if (r.completed_ms or r.at_ms) >= now_ms - window_ms)


# -- members beside pods ------------------------------------------------------------------------------------


def fleet_ids(body: Mapping[str, Any]) -> InstanceIds:
    """How the fleet names its members; a resource the operator cannot read is taken at the defaults."""
    meta = body.get("metadata") or {}
    try:
        return parse_group(body).ids
    except (SpecError, KeyError, ValueError, TypeError):
        return InstanceIds(str(meta.get("name", "")), str(meta.get("namespace", "")))


def members_beside_pods(
    fleet: str, pods: Sequence[Manifest], group: GroupDescription | None, ids: InstanceIds | None = None
) -> list[dict[str, Any]]:
    """One row per member a pod should run (one per pod, or `membersPerPod` of them, by the fleet's
    naming rule `ids`; the pod's first row says how many rows it has, `podRows`), beside the group member
    with that instance id; then members no pod of this fleet accounts for, each with the pod its instance
    id names, if any (`namedPod`)."""
    ids = ids or InstanceIds(fleet, "")
    members = {m.instance_id: m for m in (group.members if group else ()) if m.instance_id}
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for pod in sorted(pods, key=lambda p: pod_ordinal(p, fleet) or 0):
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        name = str(meta.get("name"))
        ordinal = pod_ordinal(pod, fleet)
        expected = ids.of_pod(ordinal) if ordinal is not None else (name,)
        phase = "Terminating" if meta.get("deletionTimestamp") else status.get("phase") or "Pending"
        for position, instance_id in enumerate(expected):
            member = members.get(instance_id)
            if member is not None:
                seen.add(instance_id)
            rows.append(
                {
                    "pod": name,
                    "ordinal": ordinal,
                    "podRows": len(expected) if position == 0 else 0,
                    "phase": phase,
                    "ready": pod_ready(pod),
                    "restarts": pod_restarts(pod),
                    "podIP": status.get("podIP"),
                    "fenced": pod_fenced(pod),
                    "expectedInstanceId": instance_id,
                    "instanceId": member.instance_id if member else None,
                    "memberId": member.member_id if member else None,
                    "host": _host(member.client_host) if member else None,
                    "partitions": partition_labels(member.partitions) if member else [],
                }
            )
    for member in group.members if group else ():
        key = member.instance_id
        if key is not None and key in seen:
            continue
        place = ids.locate(key) if key else None
        rows.append(
            {
                "pod": None,
                "ordinal": None,
                "podRows": 1,
                "phase": None,
                "ready": False,
                "restarts": None,
                "podIP": None,
                "fenced": False,
                "expectedInstanceId": None,
                "namedPod": f"{ids.name}-{place.ordinal}" if place is not None else None,
                "instanceId": member.instance_id,
                "memberId": member.member_id,
                "host": _host(member.client_host),
                "partitions": partition_labels(member.partitions),
            }
        )
    return rows


def alerts(rows: Sequence[Mapping[str, Any]], body: Mapping[str, Any]) -> list[dict[str, str]]:
    """Fencing and duplicate instance ids: what an operator must act on, each said in words."""
    found: list[dict[str, str]] = []
    fenced = [str(r["pod"]) for r in rows if r.get("fenced")]
    if fenced:
        found.append(
            {
                "kind": "fenced",
                "message": f"{', '.join(fenced)} exited with FENCED_INSTANCE_ID: another process used "
                "the same group.instance.id",
            }
        )
    pods = {str(r["pod"]) for r in rows if r.get("pod")}
    for row in rows:
        if row.get("pod") is None and row.get("instanceId"):
            member = f"member {row['instanceId']} ({row['memberId']}, host {row['host']})"
            named = row.get("namedPod")
            if named in pods:
                why = (
                    f"is named after pod {named} but is not one of the members it runs (left from an "
                    "earlier membersPerPod?)"
                )
            elif named:
                why = f"is named after pod {named}, which this fleet does not run (a departed pod's member)"
            else:
                why = "has no pod in this fleet: another process may be using the instance id"
            found.append({"kind": "unknown-member", "message": f"{member} {why}"})
        elif (
            row.get("pod")
            and row.get("host")
            and row.get("podIP")
            and row["host"] != row["podIP"]
            and not _loopback(str(row["podIP"]))
        ):
            found.append(
                {
                    "kind": "duplicate-instance",
                    "message": f"instance {row['instanceId']} is held by a client at {row['host']}, but pod "
                    f"{row['pod']} runs at {row['podIP']}: a duplicate instance id",
                }
            )
    for c in (body.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Degraded" and c.get("status") == "True" and c.get("reason") == "GroupIdConflict":
            found.append({"kind": "group-conflict", "message": str(c.get("message") or "")})
    return found


def _loopback(address: str) -> bool:
    """A pod at a loopback address shares the machine's network: its clients may come from any of them."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


# -- the pages' JSON ---------------------------------------------------------------------------------------


def _identity(body: Mapping[str, Any]) -> tuple[str, str, int]:
    """namespace, name and desired replicas."""
    meta, spec = body.get("metadata") or {}, body.get("spec") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", "")), int(spec.get("replicas", 0) or 0)


def coordinator_state(inputs: FleetInputs) -> dict[str, Any]:
    """Whether the cluster (admin path) and the coordinator's HTTP API answered, in words."""
    api: dict[str, Any] | None = None
    if inputs.coordinator_api:
        api = {
            "url": inputs.coordinator_api,
            "up": inputs.coordinator_error is None,
            "error": inputs.coordinator_error,
        }
    return {"up": inputs.group_error is None, "error": inputs.group_error, "api": api}


def group_summary(inputs: FleetInputs, rebalances: Sequence[Rebalance]) -> dict[str, Any]:
    status = (inputs.body.get("status") or {}).get("group") or {}
    state: str | None
    if inputs.group is not None:
        state = inputs.group.state
    elif inputs.group_missing:
        state = "NotFound"
    else:
        state = None  # unknown: the coordinator did not answer
    view = inputs.coordinator
    last_hour = rebalances_within(rebalances, inputs.now_ms)
    # The coordinator keeps its last `history_capacity` rebalances: a full history within the hour is a
    # lower bound.
    capped = view is not None and len(view.history) >= view.history_capacity <= last_hour
    generation = view.generation if view else None
    return {
        # Read live, now, from the coordinator; the conditions come from the status, written by the
        # operator's last pass (every --interval seconds): the two may differ for that long.
        "state": state,
        "generation": generation,
        "status": recorded_group(status),
        "statusAgrees": agrees(state, generation, status),
        "leader": view.leader_instance_id if view else None,
        "protocol": inputs.group.protocol if inputs.group else None,
        "rebalances": view.rebalances if view else status.get("rebalances"),
        "rebalancesSource": "coordinator" if view else "observed",
        "rebalancesLastHour": last_hour,
        "rebalancesLastHourAtLeast": capped,
        "rebalanceInProgress": view.rebalance_in_progress if view else None,
        "members": len(inputs.group.members) if inputs.group else None,
    }


def recorded_group(status: Mapping[str, Any]) -> dict[str, Any]:
    """The group as the resource's status has it (the operator's last pass)."""
    return {"state": status.get("state"), "generation": status.get("generation")}


def agrees(state: str | None, generation: int | None, status: Mapping[str, Any]) -> bool:
    """Whether the live view and the status tell the same state (and generation, where both know it)."""
    if state is None or status.get("state") is None:
        return True  # nothing to compare: the page says what it knows and where from
    same_generation = generation is None or status.get("generation") in (None, generation)
    return bool(state == status.get("state") and same_generation)


def lag_json(inputs: FleetInputs) -> dict[str, Any] | None:
    if inputs.offsets_error is not None or not inputs.offsets:
        return None
    return lag_summary(inputs.offsets).to_json()


def fleet_summary(inputs: FleetInputs) -> dict[str, Any]:
    """One row of the overview."""
    body = inputs.body
    namespace, name, replicas = _identity(body)
    status = body.get("status") or {}
    rebalances = rebalances_of(inputs)
    return {
        "namespace": namespace,
        "name": name,
        "groupId": (body.get("spec") or {}).get("groupId") or status.get("groupId") or f"{namespace}.{name}",
        "replicas": replicas,
        "readyReplicas": int(status.get("readyReplicas", 0) or 0),
        "group": group_summary(inputs, rebalances),
        "lag": lag_json(inputs),
        "conditions": conditions_of(body),
        "coordinator": coordinator_state(inputs),
        "deleting": bool((body.get("metadata") or {}).get("deletionTimestamp")),
    }


def fleet_detail(inputs: FleetInputs) -> dict[str, Any]:
    """The fleet page."""
    body = inputs.body
    _, name, _ = _identity(body)
    summary = fleet_summary(inputs)
    rows = members_beside_pods(name, inputs.pods, inputs.group, fleet_ids(body))
    owners = assignment_owners(inputs.group) if inputs.group else {}
    rebalances = rebalances_of(inputs)
    ops = operations(body, inputs.events, inputs.revisions)
    attribute(ops, rebalances)
    # No "now" in the page's data: a snapshot that differs only in its clock is not news (the browser
    # draws the axis up to its own now).
    moments = [o["startedMs"] for o in ops] + [r.at_ms for r in rebalances if r.at_ms]
    recent = sorted(inputs.events, key=lambda e: event_time_ms(e) or 0, reverse=True)[:RECENT_EVENTS]
    status = body.get("status") or {}
    return {
        **summary,
        "bootstrapServers": status.get("bootstrapServers")
        or (body.get("spec") or {}).get("kafka", {}).get("bootstrapServers"),
        "topics": list((body.get("spec") or {}).get("topics") or []),
        "members": rows,
        "partitions": [
            {**o.to_json(), "owner": owners.get((o.topic, o.partition))}
            for o in sorted(inputs.offsets, key=lambda o: (natural_key(o.topic), o.partition))
        ],
        "offsetsError": inputs.offsets_error,
        "operations": ops,
        "rebalances": [rebalance_json(r) for r in sorted(rebalances, key=lambda r: r.at_ms)],
        "timeline": {"startMs": min(moments, default=None), "lastMs": max(moments, default=None)},
        "events": [
            {
                "type": e.get("type"),
                "reason": e.get("reason"),
                "message": e.get("message"),
                "atMs": event_time_ms(e),
                "count": e.get("count") or 1,
            }
            for e in recent
        ],
        "alerts": alerts(rows, body),
        "scaleDown": status.get("scaleDown"),
    }
