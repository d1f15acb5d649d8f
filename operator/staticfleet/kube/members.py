"""The group's members and the fleet's pods, compared: pure functions the status is built from.

Both ways: pods whose consumers run but whose members the coordinator does not list (PodsOutsideGroup),
and members no pod of the fleet runs (MembersOutsideFleet). Members a scale-down is removing belong to
neither: the removal, or their session timeout, takes care of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from staticfleet.admin.client import natural_key
from staticfleet.kube.builders import pod_ordinal
from staticfleet.kube.fleetstatus import Member, PodMembers
from staticfleet.kube.observation import GroupObservation
from staticfleet.kube.scaling import parse_time
from staticfleet.kube.spec import GroupSpec, Manifest

FENCED_EXIT_CODE = 82  # Kafka's FENCED_INSTANCE_ID: the example consumer exits with it
FENCING_MEMORY = timedelta(minutes=5)
NAMED_IN_A_MESSAGE = 20
"""A condition's message names at most this many members; the count says how many more there are."""


def first_named(items: Sequence[str], separator: str = ", ") -> str:
    more = len(items) - NAMED_IN_A_MESSAGE
    return separator.join(items[:NAMED_IN_A_MESSAGE]) + (f"{separator}and {more} more" if more > 0 else "")


def group_members(group: GroupObservation, spec: GroupSpec) -> list[Member]:
    """The group's members in natural order (a pod's members together), each naming the pod whose
    member its instance id is (the fleet's naming rule; whether or not that pod still runs)."""
    if group.description is not None:
        found = [
            Member(
                m.instance_id,
                m.member_id,
                m.client_id,
                m.client_host,
                m.partitions or {},
                member_epoch=m.member_epoch,
                # Shown only while the member is on its way there.
                target_partitions=m.target_partitions if m.target_partitions != m.partitions else None,
            )
            for m in group.description.members
        ]
    elif group.view is not None:
        found = [
            Member(
                m.get("instanceId"),
                m.get("memberId"),
                m.get("clientId"),
                m.get("clientHost"),
                m.get("partitions"),
            )
            for m in group.view.member_list
        ]
    else:
        return []
    ids = spec.ids
    members = []
    for member in found:
        place = ids.locate(member.instance_id) if member.instance_id else None
        pod = spec.pod_name(place.ordinal) if place is not None else None
        members.append(replace(member, partitions=member.assigned, pod=pod))
    return sorted(members, key=lambda m: natural_key(str(m.instance_id or m.member_id)))


def assigned_partitions(members: Sequence[Member]) -> int:
    return sum(len(p) for m in members for p in m.assigned.values())


def assignment_fingerprint(members: Sequence[Member]) -> str:
    """Changes when the member set or the assignment changes; a static restart (new member id, same
    instance id and partitions) leaves it as it was."""
    canonical = sorted(
        (
            str(m.instance_id or m.member_id),
            tuple(sorted((t, tuple(sorted(p))) for t, p in m.assigned.items())),
        )
        for m in members
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
                at = terminated.get("finishedAt")
                finished = parse_time(str(at)) if at else None
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

    def shown(self) -> PodMembers:
        return PodMembers(self.name, self.missing)


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


def running_and_ready(pod: Mapping[str, Any]) -> bool:
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
    return [p for p in pods_missing_members(spec, pods, member_ids, departing) if running_and_ready(p.pod)]


def pods_outside_message(spec: GroupSpec, outside: Sequence[PodMissingMembers]) -> str:
    if spec.members_per_pod == 1:
        return (
            f"{', '.join(p.name for p in outside)}: Running but not in group {spec.group_id}; the "
            "coordinator expired the member (cut off from the coordinator, or stuck?)"
        )
    named = first_named([f"{p.name} ({', '.join(p.missing)})" for p in outside])
    return (
        f"{named}: Running, but these members of theirs are not in group {spec.group_id}; the coordinator "
        "expired them (cut off from the coordinator, a consumer of the pod stopped, or stuck?)"
    )


def members_outside_fleet(
    spec: GroupSpec, members: Sequence[Member], departing: Collection[str] = ()
) -> list[str]:
    """Members of the group that no pod of the fleet runs, each with why: an id of a pod beyond the
    replicas, an id of a pod that is not one of its members (left from another membersPerPod), an id that
    is not the fleet's at all, or a member without an instance id. Members a scale-down is removing are
    not named: the removal (or their session timeout) takes care of them."""
    ids, found = spec.ids, []
    for member in members:
        instance_id = member.instance_id
        if not instance_id:
            found.append(f"{member.member_id} (no group.instance.id: a dynamic member)")
            continue
        if instance_id in departing:
            continue
        place = ids.locate(instance_id)
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


def missing_by_pod(spec: GroupSpec, missing: Sequence[str]) -> str:
    """Missing instance ids as a person reads them: by pod when each pod has several members."""
    if spec.members_per_pod == 1:
        return ", ".join(missing)
    by_pod: dict[str, list[str]] = {}
    ids = spec.ids
    for instance_id in missing:
        place = ids.locate(instance_id)
        by_pod.setdefault(spec.pod_name(place.ordinal) if place else "?", []).append(instance_id)
    return first_named([f"{pod} ({', '.join(members)})" for pod, members in by_pod.items()])
