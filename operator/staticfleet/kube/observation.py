"""What a pass, or a deletion, sees: everything it read, as values the planners decide from (observe.py
reads them; steps.py and deletion.py decide)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from staticfleet.admin.coordinator_api import CoordinatorGroupView
from staticfleet.admin.model import GroupDescription, LagSummary
from staticfleet.coordinator import GroupState
from staticfleet.kube.access import AccessObservation, FleetAccess, RetiredUser
from staticfleet.kube.builders import consumer_may_run
from staticfleet.kube.claims import Claim
from staticfleet.kube.fleetstatus import FleetStatus, ShownState, Unobserved, shown_state
from staticfleet.kube.scaling import DEFAULT_STEP_TIMEOUT, FleetObservation, PreRegistration, ScaleDownState
from staticfleet.kube.spec import GroupSpec, Manifest


@dataclass(frozen=True, slots=True)
class GroupObservation:
    """The group as seen this time: DescribeGroups (`description`) and/or the HTTP API (`view`). With
    neither, and not `not_found`, the group was not asked about."""

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
    def shown(self) -> ShownState | None:
        """The state as status shows it: a group state, NotFound, or None when not asked."""
        if self.description is not None:
            return shown_state(self.description.state) or Unobserved.UNKNOWN
        if self.view is not None:
            return shown_state(self.view.state) or Unobserved.UNKNOWN
        return Unobserved.NOT_FOUND if self.not_found else None

    @property
    def state(self) -> GroupState | None:
        shown = self.shown
        return shown if isinstance(shown, GroupState) else None

    @property
    def instance_ids(self) -> frozenset[str] | None:
        if self.description is not None:
            return self.description.instance_ids
        if self.view is not None:
            return frozenset(str(m["instanceId"]) for m in self.view.member_list if m.get("instanceId"))
        return frozenset() if self.not_found else None

    @property
    def left_instance_ids(self) -> frozenset[str]:
        """Static members that have left and are kept for their session (consumer protocol, epoch -2)."""
        return self.description.left_instance_ids if self.description is not None else frozenset()


@dataclass(frozen=True, slots=True)
class Invalid:
    """The resource cannot be acted on as it stands; `why` says which field to fix."""

    body: Manifest
    generation: int
    previous: FleetStatus
    why: str
    now: datetime
    reason: str
    """InvalidSpec, or why the operator refuses to act on it (limits.Refusal, tenancy)."""
    user: str | None = None
    """The user the operator provisioned for the resource, which it must not keep once its namespace may
    no longer claim what it names (TenancyDenied)."""
    withdrawn: RetiredUser | None = None
    """That user as the cluster holds it, to remove."""
    withdrawal_error: str | None = None
    """Why that user could not be read (the next pass tries again)."""


@dataclass(frozen=True, slots=True)
class Conflicting:
    """Another resource owns this one's consumer group."""

    body: Manifest
    spec: GroupSpec
    generation: int
    previous: FleetStatus
    winner: Claim
    now: datetime
    cluster_id: str | None = None


@dataclass(frozen=True, slots=True)
class Observed:
    """Everything one pass reads, read straight from the API server and the coordinator (no cache)."""

    body: Manifest
    spec: GroupSpec
    generation: int
    previous: FleetStatus
    statefulset: Manifest | None
    pods: tuple[Manifest, ...]
    pod_ordinals: frozenset[int]
    """Ordinals of the pods whose consumers may still run (terminating ones included)."""
    group: GroupObservation
    now: datetime
    step_timeout: timedelta = DEFAULT_STEP_TIMEOUT
    """How long a scale-down phase may wait before it counts as blocked (operator flag)."""
    cluster_id: str | None = None
    """The id of the cluster the resource names (claims compare it), when known."""
    lag: LagSummary | None = None
    """The group's lag; None when the offsets could not be read this time."""
    access: AccessObservation | None = None
    """The fleet's provisioned user, Secret and ACLs (None: the operator provisions nothing for it)."""
    retired: RetiredUser | None = None
    """A user provisioned before that the resource no longer wants (kafka.credentials now External)."""

    @property
    def fleet_access(self) -> FleetAccess | None:
        return self.access.access if self.access is not None else None

    @property
    def scale_down(self) -> ScaleDownState | None:
        return self.previous.scale_down

    @property
    def pre_registration(self) -> PreRegistration | None:
        return self.previous.pre_registration

    @property
    def statefulset_replicas(self) -> int | None:
        sts = self.statefulset
        return int(sts["spec"].get("replicas", 1)) if sts else None

    @property
    def running_pods(self) -> tuple[Manifest, ...]:
        """The pods whose consumers may still run (terminating ones included; builders.consumer_may_run)."""
        return tuple(p for p in self.pods if consumer_may_run(p))

    @property
    def consumers_stopped(self) -> bool:
        """The StatefulSet is at 0 (or gone) and no consumer of the fleet may still run."""
        return not self.statefulset_replicas and not self.running_pods

    def fleet(self, group: GroupObservation | None = None) -> FleetObservation:
        """What the scale rules look at (with `group`: as read again after the steps)."""
        pre = self.pre_registration
        group = group or self.group
        return FleetObservation(
            statefulset_replicas=self.statefulset_replicas,
            statefulset_observed_generation=int(
                (self.statefulset or {}).get("status", {}).get("observedGeneration", 0)
            ),
            pod_ordinals=self.pod_ordinals,
            group_instance_ids=group.instance_ids,
            group_left_instance_ids=group.left_instance_ids,
            group_state=group.state,
            group_not_found=group.shown is Unobserved.NOT_FOUND,
            pre_registration_active=pre is not None and pre.accepted,
        )


Observation = Invalid | Conflicting | Observed


@dataclass(frozen=True, slots=True)
class Untouched:
    """A resource being deleted that the operator leaves as it is, and why (it never acted on it)."""

    why: str


@dataclass(frozen=True, slots=True)
class Deleting:
    """A resource being deleted, and what its finalizer reads before it plans. Its group is asked about
    only when its members are to go (`left_alone` is None); the user provisioned for it, whatever the
    deletionPolicy (its Secret goes with the resource: the user would be left with a password nobody
    holds)."""

    observed: Observed
    """Its StatefulSet and pods; its group (asked about once its consumers have stopped); in `retired`
    the user to remove with what the cluster holds of it (read once the members are done with)."""
    deleted_at: datetime
    left_alone: str | None
    """Why its group is left as it is (deletionPolicy Retain, another resource's group, one its
    namespace may not claim)."""
    user: str | None
    """The user the operator provisioned for it (its own, or a former one status still names)."""
    user_error: str | None = None
    """Why that user's credentials and ACLs could not be read."""
    known_replicas: int = 0
    """The most pods the fleet may have had: every member of each goes."""

    @property
    def members_done_with(self) -> bool:
        """Nothing stops the user's removal: the group is left alone, or every consumer has stopped."""
        return self.left_alone is not None or self.observed.consumers_stopped


DeletionObservation = Untouched | Deleting
