"""The resource's status as typed values: what a pass shows, and what the next pass reads back.

`FleetStatus` holds every field of the CRD's status (its schema is structural, so the API server keeps
nothing else) and becomes the status object in one place, `to_status`, and is read back in one place,
`FleetStatus.of`: tolerant, a field it cannot read counts as absent. A field that is None is absent, and
applying the status removes it. The scale records (`ScaleDownState`, `PreRegistration`, `LastScale`)
are scaling.py's, with their own shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from staticfleet.admin.model import LagSummary, group_state
from staticfleet.coordinator import GroupState
from staticfleet.kube.scaling import LastScale, PreRegistration, ScaleDownState


@dataclass(frozen=True, slots=True)
class EventSpec:
    """A Kubernetes Event a pass posts on the resource."""

    type: str  # Normal | Warning
    reason: str
    message: str


class Unobserved(Enum):
    """status.group.state when it is not a group state: words of ours."""

    NOT_FOUND = "NotFound"
    """The coordinator does not know the group."""
    UNKNOWN = "Unknown"
    """The coordinator could not be asked, and no earlier state is known."""


ShownState = GroupState | Unobserved


def shown_state(text: object) -> ShownState | None:
    """A state as status shows it, from a group state's name or one of ours; None for anything else."""
    found = group_state(text) if isinstance(text, str) else None
    if found is not None:
        return found
    try:
        return Unobserved(text)
    except ValueError:
        return None


class RebalancesSource(Enum):
    """Where status.group.rebalances comes from."""

    COORDINATOR = "coordinator"
    """The embedded coordinator's HTTP API counts them."""
    OBSERVED = "observed"
    """Inferred from the transitions seen between two passes (a lower bound)."""


# -- reading an object the API server returns ----------------------------------------------------------------


def _text(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return str(value) if value is not None else None


def _int(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _object(data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    value = data.get(key)
    return value if isinstance(value, Mapping) else None


def _objects(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]] | None:
    value = data.get(key)
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else None


def _texts(data: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    value = data.get(key)
    return tuple(str(v) for v in value) if isinstance(value, list) else None


# -- the parts -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Condition:
    """A metav1.Condition."""

    type: str
    status: bool
    reason: str
    message: str
    observed_generation: int
    last_transition_time: str

    def to_status(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "status": "True" if self.status else "False",
            "reason": self.reason,
            "message": self.message,
            "observedGeneration": self.observed_generation,
            "lastTransitionTime": self.last_transition_time,
        }

    @staticmethod
    def of(data: Mapping[str, Any]) -> Condition | None:
        if not data.get("type"):
            return None
        return Condition(
            type=str(data["type"]),
            status=data.get("status") == "True",
            reason=str(data.get("reason") or ""),
            message=str(data.get("message") or ""),
            observed_generation=_int(data, "observedGeneration") or 0,
            last_transition_time=str(data.get("lastTransitionTime") or ""),
        )


def find_condition(conditions: Sequence[Condition] | None, type_: str) -> Condition | None:
    return next((c for c in conditions or () if c.type == type_), None)


def holding_reason(conditions: Sequence[Condition] | None, type_: str) -> str | None:
    """The reason of the condition of this type, when it holds (status True)."""
    found = find_condition(conditions, type_)
    return found.reason if found is not None and found.status else None


@dataclass(frozen=True, slots=True)
class Member:
    """One member of the group as status lists it; `pod` is the pod whose member its instance id names."""

    instance_id: str | None
    member_id: str | None
    client_id: str | None = None
    host: str | None = None
    partitions: Mapping[str, Sequence[int]] | None = None
    pod: str | None = None
    member_epoch: int | None = None
    """Consumer protocol (KIP-848): the member's epoch; -2 for a static member that has left but is kept."""
    target_partitions: Mapping[str, Sequence[int]] | None = None
    """Consumer protocol: where the coordinator is moving the member, while that differs from `partitions`."""

    @property
    def assigned(self) -> Mapping[str, Sequence[int]]:
        return self.partitions or {}

    def to_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "instanceId": self.instance_id,
            "memberId": self.member_id,
            "clientId": self.client_id,
            "host": self.host,
            "partitions": {t: list(p) for t, p in self.assigned.items()},
            "pod": self.pod,
        }
        if self.member_epoch is not None:
            out["memberEpoch"] = self.member_epoch
        if self.target_partitions is not None:
            out["targetPartitions"] = {t: list(p) for t, p in self.target_partitions.items()}
        return out

    @staticmethod
    def of(data: Mapping[str, Any]) -> Member:
        partitions = _object(data, "partitions") or {}
        return Member(
            instance_id=_text(data, "instanceId"),
            member_id=_text(data, "memberId"),
            client_id=_text(data, "clientId"),
            host=_text(data, "host"),
            partitions=_partitions(partitions),
            pod=_text(data, "pod"),
            member_epoch=_int(data, "memberEpoch"),
            target_partitions=_partitions(target) if (target := _object(data, "targetPartitions")) else None,
        )


def _partitions(data: Mapping[str, Any]) -> dict[str, list[int]]:
    return {str(t): [int(p) for p in ps] for t, ps in data.items() if isinstance(ps, list)}


@dataclass(frozen=True, slots=True)
class PodMembers:
    """status.podsMissingMembers: a pod of the fleet and those of its members the group lacks."""

    pod: str
    missing: tuple[str, ...]

    def to_status(self) -> dict[str, Any]:
        return {"pod": self.pod, "missing": list(self.missing)}

    @staticmethod
    def of(data: Mapping[str, Any]) -> PodMembers:
        return PodMembers(str(data.get("pod") or ""), _texts(data, "missing") or ())


@dataclass(frozen=True, slots=True)
class LastRebalance:
    time: str | None
    reason: str | None
    duration_ms: int | None
    generation: int | None = None

    def to_status(self) -> dict[str, Any]:
        out = {"time": self.time, "reason": self.reason, "durationMs": self.duration_ms}
        return out if self.generation is None else {**out, "generation": self.generation}

    @staticmethod
    def of(data: Mapping[str, Any]) -> LastRebalance:
        return LastRebalance(
            _text(data, "time"), _text(data, "reason"), _int(data, "durationMs"), _int(data, "generation")
        )


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """status.group: the consumer group as last seen, and the rebalances counted so far."""

    state: ShownState
    members: int
    assigned_partitions: int
    protocol: str | None = None
    observed_fingerprint: str | None = None
    """Changes with the member set or the assignment (members.assignment_fingerprint)."""
    generation: int | None = None
    rebalances: int | None = None
    coordinator_rebalances: int | None = None
    """The coordinator's own count when last seen (it starts again from zero when it restarts)."""
    rebalances_source: RebalancesSource | None = None
    pre_registered_instance_ids: tuple[str, ...] | None = None
    rebalance_in_progress: str | None = None
    last_rebalance: LastRebalance | None = None
    leader: str | None = None
    group_epoch: int | None = None
    """Consumer protocol (KIP-848): the group's epoch, raised by every new target assignment."""
    assignment_epoch: int | None = None
    """Consumer protocol: the group epoch its current target assignment was computed at."""

    def to_status(self) -> dict[str, Any]:
        out = {
            "state": self.state.value,
            "members": self.members,
            "assignedPartitions": self.assigned_partitions,
            "protocol": self.protocol,
            "observedFingerprint": self.observed_fingerprint,
            "generation": self.generation,
            "rebalances": self.rebalances,
            "coordinatorRebalances": self.coordinator_rebalances,
            "rebalancesSource": self.rebalances_source.value if self.rebalances_source else None,
            "preRegisteredInstanceIds": (
                list(self.pre_registered_instance_ids)
                if self.pre_registered_instance_ids is not None
                else None
            ),
            "rebalanceInProgress": self.rebalance_in_progress,
            "lastRebalance": self.last_rebalance.to_status() if self.last_rebalance else None,
            "leader": self.leader,
            "groupEpoch": self.group_epoch,
            "assignmentEpoch": self.assignment_epoch,
        }
        return {k: v for k, v in out.items() if v is not None}

    @staticmethod
    def of(data: Mapping[str, Any]) -> GroupStatus:
        last = _object(data, "lastRebalance")
        source = data.get("rebalancesSource")
        return GroupStatus(
            state=shown_state(data.get("state")) or Unobserved.UNKNOWN,
            members=_int(data, "members") or 0,
            assigned_partitions=_int(data, "assignedPartitions") or 0,
            protocol=_text(data, "protocol"),
            observed_fingerprint=_text(data, "observedFingerprint"),
            generation=_int(data, "generation"),
            rebalances=_int(data, "rebalances"),
            coordinator_rebalances=_int(data, "coordinatorRebalances"),
            rebalances_source=RebalancesSource(source) if source in ("coordinator", "observed") else None,
            pre_registered_instance_ids=_texts(data, "preRegisteredInstanceIds"),
            rebalance_in_progress=_text(data, "rebalanceInProgress"),
            last_rebalance=LastRebalance.of(last) if last is not None else None,
            leader=_text(data, "leader"),
            group_epoch=_int(data, "groupEpoch"),
            assignment_epoch=_int(data, "assignmentEpoch"),
        )


@dataclass(frozen=True, slots=True)
class Lag:
    """status.lag: the group's lag over its partitions with a committed offset, and the worst one."""

    total: int
    partitions: int
    uncommitted: int
    worst_topic: str | None = None
    worst_partition: int | None = None
    worst_lag: int | None = None

    @staticmethod
    def of_summary(summary: LagSummary) -> Lag:
        worst = summary.worst
        if worst is None:
            return Lag(summary.total, summary.partitions, summary.uncommitted)
        return Lag(
            summary.total, summary.partitions, summary.uncommitted, worst.topic, worst.partition, worst.lag
        )

    def to_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "total": self.total,
            "partitions": self.partitions,
            "uncommittedPartitions": self.uncommitted,
        }
        if self.worst_topic is not None:
            out["worstPartition"] = {
                "topic": self.worst_topic,
                "partition": self.worst_partition,
                "lag": self.worst_lag,
            }
        return out

    @staticmethod
    def of(data: Mapping[str, Any]) -> Lag:
        worst = _object(data, "worstPartition") or {}
        return Lag(
            total=_int(data, "total") or 0,
            partitions=_int(data, "partitions") or 0,
            uncommitted=_int(data, "uncommittedPartitions") or 0,
            worst_topic=_text(worst, "topic"),
            worst_partition=_int(worst, "partition"),
            worst_lag=_int(worst, "lag"),
        )


@dataclass(frozen=True, slots=True)
class KafkaUser:
    """status.kafkaUser: the user the operator provisioned for the fleet, and the Secret that holds it."""

    name: str
    secret_name: str | None = None

    def to_status(self) -> dict[str, Any]:
        return {"name": self.name, "secretName": self.secret_name}

    @staticmethod
    def of(data: Mapping[str, Any]) -> KafkaUser | None:
        name = data.get("name")
        return KafkaUser(str(name), _text(data, "secretName")) if name else None


# -- the whole -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FleetStatus:
    observed_generation: int | None = None
    replicas: int | None = None
    ready_replicas: int | None = None
    selector: str | None = None
    """For the scale subresource (HPA, KEDA)."""
    group_id: str | None = None
    bootstrap_servers: str | None = None
    cluster_id: str | None = None
    group: GroupStatus | None = None
    members: tuple[Member, ...] | None = None
    """Capped at MEMBER_LIST_CAP; members_total says how many there are."""
    members_total: int | None = None
    members_truncated: bool | None = None
    pods_missing_members: tuple[PodMembers, ...] | None = None
    scale_down: ScaleDownState | None = None
    pre_registration: PreRegistration | None = None
    last_scale: LastScale | None = None
    lag: Lag | None = None
    kafka_user: KafkaUser | None = None
    conditions: tuple[Condition, ...] | None = None

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)

    def to_status(self) -> dict[str, Any]:
        """The status object, every field of ours named (None: absent, removed by the apply)."""
        return {
            "observedGeneration": self.observed_generation,
            "replicas": self.replicas,
            "readyReplicas": self.ready_replicas,
            "selector": self.selector,
            "groupId": self.group_id,
            "bootstrapServers": self.bootstrap_servers,
            "clusterId": self.cluster_id,
            "group": self.group.to_status() if self.group else None,
            "members": [m.to_status() for m in self.members] if self.members is not None else None,
            "membersTotal": self.members_total,
            "membersTruncated": self.members_truncated,
            "podsMissingMembers": (
                [p.to_status() for p in self.pods_missing_members]
                if self.pods_missing_members is not None
                else None
            ),
            "scaleDown": self.scale_down.to_status() if self.scale_down else None,
            "preRegistration": self.pre_registration.to_status() if self.pre_registration else None,
            "lastScale": self.last_scale.to_status() if self.last_scale else None,
            "lag": self.lag.to_status() if self.lag else None,
            "kafkaUser": self.kafka_user.to_status() if self.kafka_user else None,
            "conditions": [c.to_status() for c in self.conditions] if self.conditions is not None else None,
        }

    @staticmethod
    def of(data: Mapping[str, Any] | None) -> FleetStatus:
        """The status as the API server holds it (None or {}: none yet)."""
        data = data or {}
        group, lag, user = _object(data, "group"), _object(data, "lag"), _object(data, "kafkaUser")
        members, pods = _objects(data, "members"), _objects(data, "podsMissingMembers")
        conditions = _objects(data, "conditions")
        truncated = data.get("membersTruncated")
        return FleetStatus(
            observed_generation=_int(data, "observedGeneration"),
            replicas=_int(data, "replicas"),
            ready_replicas=_int(data, "readyReplicas"),
            selector=_text(data, "selector"),
            group_id=_text(data, "groupId"),
            bootstrap_servers=_text(data, "bootstrapServers"),
            cluster_id=_text(data, "clusterId"),
            group=GroupStatus.of(group) if group is not None else None,
            members=tuple(Member.of(m) for m in members) if members is not None else None,
            members_total=_int(data, "membersTotal"),
            members_truncated=truncated if isinstance(truncated, bool) else None,
            pods_missing_members=tuple(PodMembers.of(p) for p in pods) if pods is not None else None,
            scale_down=ScaleDownState.from_status(_object(data, "scaleDown")),
            pre_registration=PreRegistration.from_status(_object(data, "preRegistration")),
            last_scale=LastScale.of(_object(data, "lastScale")),
            lag=Lag.of(lag) if lag is not None else None,
            kafka_user=KafkaUser.of(user) if user is not None else None,
            conditions=tuple(c for c in map(Condition.of, conditions) if c)
            if conditions is not None
            else None,
        )


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
