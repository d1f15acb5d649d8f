"""Status, computed in one place from what was observed: a pure function of its inputs.

The previous status is an input too: conditions keep their lastTransitionTime while their status holds,
and, against clusters without the embedded coordinator's HTTP API, rebalances are inferred from the
transitions seen between two observations (`group.rebalancesSource: observed`, a lower bound).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from staticfleet.admin.client import natural_key
from staticfleet.admin.coordinator_api import CoordinatorGroupView
from staticfleet.admin.model import GroupDescription, LagSummary, group_state
from staticfleet.coordinator import GroupState
from staticfleet.coordinator.events import REASON_SESSION_TIMEOUT
from staticfleet.kube.builders import pod_ordinal, selector_string
from staticfleet.kube.scaling import Blocked, PreRegistration, ScaleDownState, iso, parse_time
from staticfleet.kube.spec import GroupSpec, Manifest

MEMBER_LIST_CAP = 50
FENCED_EXIT_CODE = 82  # Kafka's FENCED_INSTANCE_ID: the example consumer exits with it
FENCING_MEMORY = timedelta(minutes=5)

READY = "Ready"
GROUP_STABLE = "GroupStable"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
SCALE_DOWN_BLOCKED = "ScaleDownBlocked"
PODS_OUTSIDE_GROUP = "PodsOutsideGroup"
MEMBERS_OUTSIDE_FLEET = "MembersOutsideFleet"
INVALID_SPEC = "InvalidSpec"
ACCESS_NOT_PROVISIONED = "AccessNotProvisioned"

# status.group.state also says when the group could not be described: words of ours, not group states.
NOT_FOUND = "NotFound"
UNKNOWN = "Unknown"

SOURCE_COORDINATOR = "coordinator"
SOURCE_OBSERVED = "observed"


@dataclass(frozen=True, slots=True)
class EventSpec:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class GroupObservation:
    """The group as seen this time: DescribeGroups (`description`) and/or the HTTP API (`view`)."""

    description: GroupDescription | None = None
    view: CoordinatorGroupView | None = None
    not_found: bool = False
    error: str | None = None
    """Why the coordinator could not be asked (CoordinatorUnavailable)."""
    missing_topics: tuple[str, ...] = ()
    """Subscribed topics the cluster does not have (looked up while the group is not Stable)."""

    @property
    def reachable(self) -> bool:
        return self.error is None

    @property
    def state(self) -> GroupState | None:
        return parse_state(self.state_text)

    @property
    def state_text(self) -> str | None:
        """The state as status shows it: a group state, NotFound, or None when not asked."""
        if self.description is not None:
            return self.description.state
        if self.view is not None:
            return self.view.state
        return NOT_FOUND if self.not_found else None

    @property
    def instance_ids(self) -> frozenset[str] | None:
        if self.description is not None:
            return self.description.instance_ids
        if self.view is not None:
            return frozenset(str(m["instanceId"]) for m in self.view.member_list if m.get("instanceId"))
        return frozenset() if self.not_found else None


parse_state = group_state


@dataclass(frozen=True, slots=True)
class StatusInputs:
    spec: GroupSpec
    generation: int
    previous: Mapping[str, Any]
    statefulset: Manifest | None
    pods: Sequence[Manifest]
    group: GroupObservation
    now: datetime
    scale_down: ScaleDownState | None = None
    scale_waiting: str | None = None
    pre_registration: PreRegistration | None = None
    last_scale: Mapping[str, Any] | None = None
    removal_error: str | None = None
    access_error: str | None = None
    """Provisioning the fleet's user or ACLs failed."""
    kafka_user: Mapping[str, Any] | None = None
    """status.kafkaUser: the fleet's provisioned user (name, secretName)."""
    blocked: Blocked | None = None
    cluster_id: str | None = None
    lag: LagSummary | None = None
    """None when the offsets could not be read: the previous lag is kept while the coordinator is away."""


@dataclass(frozen=True, slots=True)
class StatusResult:
    status: dict[str, Any]
    events: tuple[EventSpec, ...] = ()
    completed_scale: Mapping[str, Any] | None = None


def condition(
    previous: Sequence[Mapping[str, Any]],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    generation: int,
    now: datetime,
) -> dict[str, Any]:
    """A metav1.Condition whose lastTransitionTime moves only when its status changes."""
    value = "True" if status else "False"
    before = next((c for c in previous if c.get("type") == type_), None)
    transition = (
        str(before["lastTransitionTime"])
        if before is not None and before.get("status") == value and before.get("lastTransitionTime")
        else iso(now)
    )
    return {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": transition,
    }


def member_entries(group: GroupObservation, spec: GroupSpec | None = None) -> list[dict[str, Any]]:
    """The group's members in natural order (a pod's members together); with `spec`, each names the pod
    whose member its instance id is (the fleet's naming rule; whether or not that pod still runs)."""
    if group.description is not None:
        entries = [
            {
                "instanceId": m.instance_id,
                "memberId": m.member_id,
                "clientId": m.client_id,
                "host": m.client_host,
                "partitions": m.partitions or {},
            }
            for m in group.description.members
        ]
    elif group.view is not None:
        entries = [
            {
                "instanceId": m.get("instanceId"),
                "memberId": m.get("memberId"),
                "clientId": m.get("clientId"),
                "host": m.get("clientHost"),
                "partitions": m.get("partitions") or {},
            }
            for m in group.view.member_list
        ]
    else:
        return []
    if spec is not None:
        ids = spec.ids
        for entry in entries:
            place = ids.locate(str(entry["instanceId"])) if entry["instanceId"] else None
            entry["pod"] = spec.pod_name(place.ordinal) if place is not None else None
    return sorted(entries, key=lambda e: natural_key(str(e["instanceId"] or e["memberId"])))


def assignment_fingerprint(entries: Sequence[Mapping[str, Any]]) -> str:
    """Changes when the member set or the assignment changes; a static restart (new member id, same
    instance id and partitions) leaves it as it was."""
    canonical = sorted(
        (
            str(e.get("instanceId") or e.get("memberId")),
            tuple(sorted((t, tuple(sorted(p))) for t, p in (e.get("partitions") or {}).items())),
        )
        for e in entries
    )
    return hashlib.sha256(repr(canonical).encode()).hexdigest()[:16]


def fenced_pods(pods: Sequence[Manifest], now: datetime) -> list[str]:
    """Pods whose consumer recently exited because another process took its instance id."""
    found = []
    for pod in pods:
        for status in pod.get("status", {}).get("containerStatuses", []) or []:
            for key in ("state", "lastState"):
                terminated = (status.get(key) or {}).get("terminated")
                if not terminated:
                    continue
                fenced = terminated.get("exitCode") == FENCED_EXIT_CODE or "FENCED_INSTANCE_ID" in str(
                    terminated.get("message") or ""
                )
                finished = _parse_k8s_time(terminated.get("finishedAt"))
                if fenced and (finished is None or now - finished <= FENCING_MEMORY):
                    found.append(str(pod["metadata"]["name"]))
    return sorted(set(found), key=natural_key)


@dataclass(frozen=True, slots=True)
class PodMissingMembers:
    """A pod of the fleet and those of its members that are not in the group."""

    pod: Manifest
    missing: tuple[str, ...]

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    def to_status(self) -> dict[str, Any]:
        return {"pod": self.name, "missing": list(self.missing)}


def pods_missing_members(
    spec: GroupSpec,
    pods: Sequence[Manifest],
    member_ids: frozenset[str],
    departing: Collection[str] = (),
) -> list[PodMissingMembers]:
    """Each pod of the fleet (an ordinal below replicas, not being deleted) whose members are not all in
    the group, with the missing ones, in pod order; members a scale-down is removing are not missing."""
    found = []
    for pod in pods:
        ordinal = pod_ordinal(pod, spec.name)
        if ordinal is None or ordinal >= spec.replicas or pod["metadata"].get("deletionTimestamp"):
            continue
        missing = tuple(i for i in spec.pod_member_ids(ordinal) if i not in member_ids and i not in departing)
        if missing:
            found.append((ordinal, PodMissingMembers(pod, missing)))
    return [p for _, p in sorted(found, key=lambda pair: pair[0])]


def _running_and_ready(pod: Manifest) -> bool:
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return status.get("phase") == "Running" and ready


def pods_outside_group(
    spec: GroupSpec,
    pods: Sequence[Manifest],
    member_ids: frozenset[str] | None,
    departing: Collection[str] = (),
) -> list[PodMissingMembers]:
    """Pods that are Running and Ready, but whose members are not all in the group: the consumer runs,
    yet the coordinator expired it (it cannot reach the coordinator, or is stuck; with several members
    per pod, one of its consumers may have stopped). The example consumer becomes Ready only once every
    member of the pod is in the group, so a pod that is still joining is not named; neither is a member
    a scale-down is removing."""
    if member_ids is None:
        return []
    return [p for p in pods_missing_members(spec, pods, member_ids, departing) if _running_and_ready(p.pod)]


def _pods_outside_message(spec: GroupSpec, outside: Sequence[PodMissingMembers]) -> str:
    if spec.members_per_pod == 1:
        return (
            f"{', '.join(p.name for p in outside)}: Running but not in group {spec.group_id}; the "
            "coordinator expired the member (cut off from the coordinator, or stuck?)"
        )
    named = _first([f"{p.name} ({', '.join(p.missing)})" for p in outside])
    return (
        f"{named}: Running, but these members of theirs are not in group {spec.group_id}; the coordinator "
        "expired them (cut off from the coordinator, a consumer of the pod stopped, or stuck?)"
    )


def members_outside_fleet(
    spec: GroupSpec, entries: Sequence[Mapping[str, Any]], departing: Collection[str] = ()
) -> list[str]:
    """Members of the group that no pod of the fleet runs, each with why: an id of a pod beyond the
    replicas, an id of a pod that is not one of its members (left from another membersPerPod), an id that
    is not the fleet's at all, or a member without an instance id. Members a scale-down is removing are
    not named: the removal (or their session timeout) takes care of them."""
    ids, found = spec.ids, []
    for entry in entries:
        instance_id = entry.get("instanceId")
        if not instance_id:
            found.append(f"{entry.get('memberId')} (no group.instance.id: a dynamic member)")
            continue
        if instance_id in departing:
            continue
        place = ids.locate(str(instance_id))
        if place is None:
            found.append(f"{instance_id} (not an instance id of this fleet)")
        elif place.ordinal >= spec.replicas:
            found.append(
                f"{instance_id} (pod {spec.pod_name(place.ordinal)} is beyond the fleet's {spec.replicas} "
                "replicas)"
            )
        elif not ids.expects(place, spec.replicas):
            count = "one member" if spec.members_per_pod == 1 else f"{spec.members_per_pod} members"
            found.append(
                f"{instance_id} (pod {spec.pod_name(place.ordinal)} runs {count}: "
                f"{', '.join(spec.pod_member_ids(place.ordinal))})"
            )
    return found


NAMED_IN_A_MESSAGE = 20
"""A condition's message names at most this many members; the count says how many more there are."""


def _first(items: Sequence[str], separator: str = ", ") -> str:
    more = len(items) - NAMED_IN_A_MESSAGE
    return separator.join(items[:NAMED_IN_A_MESSAGE]) + (f"{separator}and {more} more" if more > 0 else "")


def missing_by_pod(spec: GroupSpec, missing: Sequence[str]) -> str:
    """Missing instance ids as a person reads them: by pod when each pod has several members."""
    if spec.members_per_pod == 1:
        return ", ".join(missing)
    by_pod: dict[str, list[str]] = {}
    ids = spec.ids
    for instance_id in missing:
        place = ids.locate(instance_id)
        by_pod.setdefault(spec.pod_name(place.ordinal) if place else "?", []).append(instance_id)
    return _first([f"{pod} ({', '.join(members)})" for pod, members in by_pod.items()])


def _parse_k8s_time(text: Any) -> datetime | None:
    return parse_time(str(text)) if text else None


def rebalances_total(shown: Any, last_seen: Any, reported: int) -> int:
    """The count the resource shows, kept across coordinator restarts.

    The embedded coordinator counts rebalances since its process started: a restart sets its count back
    to zero while the group, recovered from its log, carries on. So the resource adds what the
    coordinator counted since the last observation (`last_seen`, kept in status as
    group.coordinatorRebalances) to what it showed, and takes a count below `last_seen` as a restart.
    Without a previous observation it starts from the coordinator's count."""
    if not isinstance(shown, int) or not isinstance(last_seen, int):
        return reported
    return shown + (reported - last_seen if reported >= last_seen else reported)


def _group_status(
    inputs: StatusInputs, entries: list[dict[str, Any]], rolling: bool
) -> tuple[dict[str, Any], list[EventSpec]]:
    group, previous = inputs.group, dict(inputs.previous.get("group") or {})
    events: list[EventSpec] = []
    state_text = group.state_text if group.reachable else previous.get("state")
    state = parse_state(state_text)
    partitions = sum(len(p) for e in entries for p in (e.get("partitions") or {}).values())
    leader = None
    out: dict[str, Any] = {
        "state": state_text or UNKNOWN,
        "members": len(entries),
        "assignedPartitions": partitions,
    }
    if group.description is not None:
        out["protocol"] = group.description.protocol or None
    fingerprint = assignment_fingerprint(entries)
    out["observedFingerprint"] = fingerprint if group.reachable else previous.get("observedFingerprint")
    prev_count = previous.get("rebalances")
    if group.view is not None:
        view = group.view
        leader = view.leader_instance_id
        total = rebalances_total(prev_count, previous.get("coordinatorRebalances"), view.rebalances)
        out.update(
            generation=view.generation,
            rebalances=total,
            coordinatorRebalances=view.rebalances,
            rebalancesSource=SOURCE_COORDINATOR,
            protocol=out.get("protocol") or view.protocol,
            preRegisteredInstanceIds=list(view.expected_instance_ids),
        )
        if view.rebalance_in_progress:
            out["rebalanceInProgress"] = view.rebalance_in_progress
        last = view.last_rebalance
        if last is not None:
            out["lastRebalance"] = {
                "time": iso(datetime.fromtimestamp(last.completed_ms / 1000, tz=inputs.now.tzinfo))
                if last.completed_ms
                else None,
                "reason": last.reason,
                "durationMs": last.duration_ms,
                "generation": last.generation,
            }
        if isinstance(prev_count, int) and total > prev_count:
            n = total - prev_count
            detail = (
                f"generation {last.generation}, reason {last.reason}, {last.duration_ms} ms"
                if last is not None
                else f"generation {view.generation}"
            )
            if rolling and last is not None and last.reason == REASON_SESSION_TIMEOUT:
                detail += (
                    "; a session ran out during the rolling update (a replaced pod that does not rejoin "
                    f"within sessionTimeoutMs, {inputs.spec.session_timeout_ms} ms, costs a rebalance)"
                )
            events.append(
                EventSpec(
                    "Normal",
                    "RebalanceObserved",
                    f"{'a rebalance' if n == 1 else f'{n} rebalances'} completed ({detail}); "
                    f"{len(entries)} members, {partitions} partitions",
                )
            )
    elif group.reachable and not (
        inputs.spec.coordinator_api and previous.get("rebalancesSource") == SOURCE_COORDINATOR
    ):
        count = int(prev_count) if isinstance(prev_count, int) else 0
        prev_state = previous.get("state")
        was_stable = parse_state(prev_state) is GroupState.STABLE
        came_back = prev_state not in (None, UNKNOWN) and not was_stable
        reassigned = was_stable and previous.get("observedFingerprint") not in (None, fingerprint)
        rebalanced = state is GroupState.STABLE and (came_back or reassigned)
        out.update(rebalances=count + (1 if rebalanced else 0), rebalancesSource=SOURCE_OBSERVED)
        out["lastRebalance"] = previous.get("lastRebalance")
        if rebalanced:
            out["lastRebalance"] = {"time": iso(inputs.now), "reason": "observed", "durationMs": None}
            events.append(
                EventSpec(
                    "Normal",
                    "RebalanceObserved",
                    f"the group rebalanced (observed: {prev_state} -> Stable or a new assignment); "
                    f"{len(entries)} members, {partitions} partitions",
                )
            )
    else:
        # The coordinator unreachable, or its API not answering for now (a coordinator still starting
        # serves Kafka before HTTP): the counts stay as they were, the coordinator's own count with them,
        # so that its next answer is added to them rather than taken as the whole count.
        for key in ("generation", "rebalances", "coordinatorRebalances", "rebalancesSource", "lastRebalance"):
            if key in previous:
                out[key] = previous[key]
    if leader is None and group.description is not None and group.view is None:
        leader = None  # DescribeGroups does not name the leader
    out["leader"] = leader
    return {k: v for k, v in out.items() if v is not None}, events


def rolling_update(statefulset: Manifest | None) -> bool:
    """Whether the StatefulSet is replacing pods: a template change not yet rolled out to every pod."""
    status = (statefulset or {}).get("status", {}) or {}
    return bool(statefulset) and (
        status.get("currentRevision") != status.get("updateRevision")
        or int(status.get("updatedReplicas", 0) or 0) < int(status.get("replicas", 0) or 0)
    )


def compute_status(inputs: StatusInputs) -> StatusResult:
    spec, now, gen = inputs.spec, inputs.now, inputs.generation
    previous_conditions: list[Mapping[str, Any]] = list(inputs.previous.get("conditions") or [])
    sts = inputs.statefulset or {}
    sts_status = sts.get("status", {}) or {}
    ready_replicas = int(sts_status.get("readyReplicas", 0) or 0)
    current_replicas = int(sts_status.get("replicas", 0) or 0)
    entries = (
        member_entries(inputs.group, spec)
        if inputs.group.reachable
        else list(inputs.previous.get("members") or [])
    )
    rolling = rolling_update(inputs.statefulset)
    group_status, events = _group_status(inputs, entries, rolling)
    state_text = str(group_status.get("state"))
    state = parse_state(state_text)
    member_ids = inputs.group.instance_ids
    expected_ids = set(spec.member_ids(0, spec.replicas))
    fenced = fenced_pods(inputs.pods, now)

    stable = state is GroupState.STABLE or (
        spec.replicas == 0 and (state in (GroupState.EMPTY, GroupState.DEAD) or state_text == NOT_FOUND)
    )
    members_complete = member_ids is not None and expected_ids <= member_ids
    extra_pods = [p for p in inputs.pods if (pod_ordinal(p, spec.name) or 0) >= spec.replicas]
    fleet_ready = (
        inputs.group.reachable
        and inputs.scale_down is None
        and ready_replicas >= spec.replicas
        and not extra_pods
        and stable
        and (members_complete or spec.replicas == 0)
    )

    # Ready
    if not inputs.group.reachable:
        ready = (False, "CoordinatorUnavailable", inputs.group.error or "")
    elif inputs.scale_down is not None or inputs.scale_waiting:
        ready = (False, "ScalingInProgress", inputs.scale_waiting or "")
    elif ready_replicas < spec.replicas:
        ready = (False, "PodsNotReady", f"{ready_replicas} of {spec.replicas} pods ready")
    elif not stable:
        ready = (False, "GroupNotStable", f"group {spec.group_id} is {state_text}")
    elif not members_complete and spec.replicas:
        missing = sorted(expected_ids - (member_ids or frozenset()), key=natural_key)
        ready = (False, "MembersMissing", f"not yet in the group: {missing_by_pod(spec, missing)}")
    else:
        consumers = (
            f"{spec.replicas} consumers"
            if spec.members_per_pod == 1
            else f"{spec.replicas} pods of {spec.members_per_pod} consumers"
        )
        ready = (True, "FleetReady", f"{consumers} in group {spec.group_id}, Stable")

    # GroupStable
    if not inputs.group.reachable:
        group_stable = (False, "CoordinatorUnavailable", inputs.group.error or "")
    elif state is GroupState.STABLE:
        detail = f" at generation {group_status['generation']}" if "generation" in group_status else ""
        group_stable = (
            True,
            "Stable",
            f"group {spec.group_id} is Stable{detail} with {len(entries)} members",
        )
    elif state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
        reason_text = group_status.get("rebalanceInProgress")
        group_stable = (
            False,
            "RebalanceInProgress",
            f"group {spec.group_id} is {state_text}" + (f" ({reason_text})" if reason_text else ""),
        )
    elif state is GroupState.EMPTY:
        group_stable = (False, "GroupEmpty", f"group {spec.group_id} has no members")
    else:
        group_stable = (False, "GroupNotFound", f"the coordinator does not know group {spec.group_id} yet")

    # Progressing
    pre = inputs.pre_registration
    pre_note = ""
    if pre is not None and not pre.accepted:
        pre_note = (
            f"; pre-registration not supported by the coordinator ({pre.message}), "
            "so the join phase is not held for the new instances"
        )
    elif pre is not None and pre.hold_member_id:
        pre_note = f"; {pre.message}"
    last_scale = dict(inputs.last_scale) if inputs.last_scale else None
    completed_scale = None
    if last_scale and not last_scale.get("completedAt") and fleet_ready:
        started = parse_time(last_scale.get("startedAt"))
        last_scale["completedAt"] = iso(now)
        last_scale["durationSeconds"] = round((now - started).total_seconds(), 1) if started else None
        completed_scale = dict(last_scale)
    if inputs.scale_down is not None or inputs.scale_waiting:
        progressing = (True, "ScalingDown", (inputs.scale_waiting or "") + pre_note)
    elif last_scale and not last_scale.get("completedAt"):
        direction = "ScalingUp" if last_scale.get("direction") == "Up" else "ScalingDown"
        progressing = (
            True,
            direction,
            f"scaling from {last_scale.get('fromReplicas')} to {last_scale.get('toReplicas')}: "
            f"{ready_replicas} pods ready, group {state_text}" + pre_note,
        )
    elif rolling:
        progressing = (
            True,
            "RollingUpdate",
            f"{sts_status.get('updatedReplicas', 0)} of {current_replicas} pods updated",
        )
    else:
        progressing = (False, "Reconciled", f"{spec.replicas} replicas" + pre_note)

    # Degraded
    if not inputs.group.reachable:
        degraded = (True, "CoordinatorUnavailable", inputs.group.error or "")
    elif inputs.group.missing_topics:
        absent = inputs.group.missing_topics
        degraded = (
            True,
            "TopicNotFound",
            f"{'topic' if len(absent) == 1 else 'topics'} {', '.join(absent)} "
            f"{'does' if len(absent) == 1 else 'do'} not exist on {spec.bootstrap_servers}: the consumers "
            "cannot be assigned partitions until it is created (for example with the partitions the fleet "
            "should spread over)",
        )
    elif fenced:
        degraded = (
            True,
            "InstanceFenced",
            f"{', '.join(fenced)} exited with FENCED_INSTANCE_ID: another process used the same "
            "group.instance.id; check for duplicate instance ids",
        )
    elif inputs.removal_error:
        degraded = (True, "MemberRemovalFailed", inputs.removal_error)
    elif inputs.access_error:
        degraded = (True, ACCESS_NOT_PROVISIONED, inputs.access_error)
    else:
        degraded = (False, "AsExpected", "")

    # PodsOutsideGroup, MembersOutsideFleet: the pods and the group compared, both ways
    departing = frozenset(inputs.scale_down.pending_instance_ids if inputs.scale_down else ())
    compared = inputs.group.reachable and state_text != NOT_FOUND and member_ids is not None
    outside = pods_outside_group(spec, inputs.pods, member_ids, departing) if compared else []
    pods_outside = (
        (True, "RunningNotInGroup", _pods_outside_message(spec, outside))
        if outside
        else (False, "AllPodsInGroup", "")
    )
    strays = members_outside_fleet(spec, entries, departing) if compared else []
    members_outside = (
        (
            True,
            "UnexpectedMembers",
            f"{_first(strays, '; ')}: members of group {spec.group_id} that no pod of this fleet runs. They "
            "hold their partitions until the coordinator expires them after their session timeout; "
            "remove them sooner with `staticfleet members remove` once their processes are gone",
        )
        if strays
        else (False, "AllMembersInFleet", "")
    )
    incomplete = (
        pods_missing_members(spec, inputs.pods, member_ids or frozenset(), departing) if compared else []
    )

    # ScaleDownBlocked
    blocked = inputs.blocked
    scale_down_blocked = (
        (True, blocked.reason, blocked.message) if blocked is not None else (False, "NotBlocked", "")
    )

    conditions = [
        condition(previous_conditions, t, s, r, m, gen, now)
        for t, (s, r, m) in (
            (READY, ready),
            (GROUP_STABLE, group_stable),
            (PROGRESSING, progressing),
            (DEGRADED, degraded),
            (SCALE_DOWN_BLOCKED, scale_down_blocked),
            (PODS_OUTSIDE_GROUP, pods_outside),
            (MEMBERS_OUTSIDE_FLEET, members_outside),
        )
    ]
    events.extend(
        _outside_events(
            previous_conditions,
            PODS_OUTSIDE_GROUP,
            pods_outside,
            "PodsBackInGroup",
            "every Running pod is in the group again",
        )
    )
    events.extend(
        _outside_events(
            previous_conditions,
            MEMBERS_OUTSIDE_FLEET,
            members_outside,
            "MembersOutsideFleetCleared",
            "every member of the group belongs to a pod of the fleet again",
        )
    )
    events.extend(_transition_events(previous_conditions, degraded, fenced))
    if blocked is not None and _held_reason(previous_conditions, SCALE_DOWN_BLOCKED) != blocked.reason:
        events.append(EventSpec("Warning", SCALE_DOWN_BLOCKED, f"{blocked.reason}: {blocked.message}"))

    status: dict[str, Any] = {
        "observedGeneration": gen,
        "replicas": current_replicas,
        "readyReplicas": ready_replicas,
        "selector": selector_string(spec),
        "groupId": spec.group_id,
        "bootstrapServers": spec.bootstrap_servers,
        "clusterId": inputs.cluster_id or inputs.previous.get("clusterId"),
        "group": group_status,
        "members": entries[:MEMBER_LIST_CAP],
        "membersTotal": len(entries),
        "membersTruncated": len(entries) > MEMBER_LIST_CAP,
        "podsMissingMembers": [p.to_status() for p in incomplete[:MEMBER_LIST_CAP]] if compared else None,
        "scaleDown": inputs.scale_down.to_status() if inputs.scale_down else None,
        "preRegistration": pre.to_status() if pre else None,
        "lastScale": last_scale,
        "lag": inputs.lag.to_json() if inputs.lag is not None else inputs.previous.get("lag"),
        "kafkaUser": dict(inputs.kafka_user) if inputs.kafka_user else None,
        "conditions": conditions,
    }
    return StatusResult(status, tuple(events), completed_scale)


def _held_reason(previous: Sequence[Mapping[str, Any]], type_: str) -> str | None:
    before = next((c for c in previous if c.get("type") == type_), None)
    return str(before.get("reason")) if before and before.get("status") == "True" else None


def _outside_events(
    previous: Sequence[Mapping[str, Any]],
    type_: str,
    now: tuple[bool, str, str],
    cleared_reason: str,
    cleared_message: str,
) -> list[EventSpec]:
    """A Warning when the condition starts to name something (or what it names changes), a Normal Event
    when it names nothing any more."""
    before = next((c for c in previous if c.get("type") == type_), None)
    was_active = (before or {}).get("status") == "True"
    active, _, message = now
    if active and (not was_active or (before or {}).get("message") != message):
        return [EventSpec("Warning", type_, message)]
    if was_active and not active:
        return [EventSpec("Normal", cleared_reason, cleared_message)]
    return []


def _transition_events(
    previous: Sequence[Mapping[str, Any]], degraded: tuple[bool, str, str], fenced: list[str]
) -> list[EventSpec]:
    before = next((c for c in previous if c.get("type") == DEGRADED), None)
    was = (before or {}).get("reason") if (before or {}).get("status") == "True" else None
    active, reason, message = degraded
    if active and reason != was and reason in ("CoordinatorUnavailable", "InstanceFenced", "TopicNotFound"):
        return [EventSpec("Warning", reason, message)]
    return []


def conflict_status(
    spec: GroupSpec,
    generation: int,
    previous: Mapping[str, Any],
    winner: str,
    now: datetime,
    cluster_id: str | None = None,
    shared_ids: str = "",
) -> StatusResult:
    """A resource that lost a claim on its group: nothing is reconciled, the status says why (and which
    instance ids the two fleets would share, described in `shared_ids`)."""
    message = (
        f"group {spec.group_id} on {spec.bootstrap_servers} is already managed by StaticConsumerGroup "
        f"{winner}; this resource is not reconciled. Give it another groupId."
    )
    if shared_ids:
        message += (
            f" In one group the two fleets would also share instance ids, and consumers with one instance "
            f"id fence each other: {shared_ids}."
        )
    prev = list(previous.get("conditions") or [])
    conditions = [
        condition(prev, READY, False, "GroupIdConflict", message, generation, now),
        condition(prev, GROUP_STABLE, False, "GroupIdConflict", message, generation, now),
        condition(prev, PROGRESSING, False, "GroupIdConflict", message, generation, now),
        condition(prev, DEGRADED, True, "GroupIdConflict", message, generation, now),
    ]
    before = next((c for c in prev if c.get("type") == DEGRADED), None)
    events: tuple[EventSpec, ...] = ()
    if not before or before.get("reason") != "GroupIdConflict":
        events = (EventSpec("Warning", "GroupIdConflict", message),)
    status = {
        "observedGeneration": generation,
        "selector": selector_string(spec),
        "groupId": spec.group_id,
        "bootstrapServers": spec.bootstrap_servers,
        "clusterId": cluster_id or previous.get("clusterId"),
        "conditions": conditions,
    }
    return StatusResult(status, events)


def invalid_spec_status(
    previous: Mapping[str, Any], generation: int, message: str, now: datetime, reason: str = INVALID_SPEC
) -> dict[str, Any]:
    prev = list(previous.get("conditions") or [])
    return {
        "observedGeneration": generation,
        "conditions": [
            condition(prev, READY, False, reason, message, generation, now),
            condition(prev, DEGRADED, True, reason, message, generation, now),
        ],
    }


def degraded_reason(previous: Mapping[str, Any]) -> str | None:
    """The reason of a Degraded condition that holds, from an earlier status."""
    before = next((c for c in previous.get("conditions") or [] if c.get("type") == DEGRADED), None)
    return str(before.get("reason")) if before and before.get("status") == "True" else None


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch turning old into new: keys that disappeared become null (merge patch merges
    nested objects, so a plain write would leave stale keys behind). Lists are replaced whole."""
    patch: dict[str, Any] = {}
    for key in old:
        if (key not in new or new[key] is None) and old[key] is not None:
            patch[key] = None
    for key, value in new.items():
        if value is None:
            continue
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif value != before:
            patch[key] = value
    return patch
