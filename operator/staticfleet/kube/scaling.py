"""The scale flows as pure step functions over state kept in the resource's status.

Scale-down is a small state machine (status.scaleDown), in the manner of a checked downscale: every
step is idempotent, and an operator that restarts at any step reads the state back and finishes:

    ShrinkingStatefulSet   pending instance ids are in status; the StatefulSet is (being) shrunk
    WaitingForPods         the StatefulSet was shrunk; pods with ordinal >= toReplicas may still run
    RemovingMembers        the pods are gone or stopped for good (terminal phase); one LeaveGroup batch
                           removes the pending instance ids (every member of every departed pod)
    ConfirmingRemoval      the coordinator acknowledged; the record stays until it reports a settled
                           (Stable or Empty) group without them, which it only does once the rebalance
                           the removal started has completed and been persisted. A coordinator that
                           restarts before that brings them back: they are removed again.
    WaitingForSessionTimeout  (removeMembers: AfterSessionTimeout) the coordinator expires them itself
    (cleared)              done: an Event says so

Invariant: a member is removed only once no pod with its ordinal may still run (the pod is gone, or
in a terminal phase: every container stopped for good) and the StatefulSet controller has seen the
shrink. Removing the member of a running pod would make it rejoin as a new member.

No stuck steps: a phase that waits on others (pods that do not go, a removal the coordinator does not
accept, a removal it does not confirm) longer than the step timeout is *blocked* (status condition
ScaleDownBlocked, and an Event). A running scale-down ignores a new target, except when it is blocked:
then the new target supersedes it. The new record keeps fromReplicas and pends the instance ids of the
ordinals from the new target up; ordinals below the new target get their pods back and are not
removed (their members rejoin under the same instance id, or join again if they were already removed);
a new target at or above fromReplicas drops the record and becomes a scale-up.

The pending instance ids are those of every member of the departing pods: with several members per pod
(spec.membersPerPod, Kafka Streams' stream threads) each pod is several static members, and a pod's own
instance id names none of them.

Scale-up pre-registers the instance ids of every member of the new replica count (group config
`staticfleet.expected.instance.ids`) before growing the StatefulSet, so the coordinator completes one
join phase with every new instance in it. Once the group is Stable with all of them, the
pre-registration is withdrawn again: in steady state the group follows Kafka's rules, where a consumer
that is gone for good costs no more than its session timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from staticfleet.coordinator import GroupState
from staticfleet.kube.spec import AFTER_SESSION_TIMEOUT, CONSUMER_PROTOCOL, IMMEDIATE, GroupSpec


class ScalePhase(Enum):
    """status.scaleDown.phase: where a scale-down stands (the sequence above)."""

    SHRINKING = "ShrinkingStatefulSet"
    WAITING_FOR_PODS = "WaitingForPods"
    REMOVING_MEMBERS = "RemovingMembers"
    CONFIRMING_REMOVAL = "ConfirmingRemoval"
    WAITING_FOR_SESSION_TIMEOUT = "WaitingForSessionTimeout"

    @property
    def blockable(self) -> bool:
        """The phase waits on others (pods, the coordinator), and so may block."""
        return self in (
            ScalePhase.WAITING_FOR_PODS,
            ScalePhase.REMOVING_MEMBERS,
            ScalePhase.CONFIRMING_REMOVAL,
        )

    @staticmethod
    def named(text: object) -> ScalePhase | None:
        try:
            return ScalePhase(text)
        except ValueError:
            return None


class ScaleDirection(Enum):
    UP = "Up"
    DOWN = "Down"


# After the session timeout the coordinator needs a moment to notice; past this we stop waiting.
SESSION_EXPIRY_GRACE = timedelta(seconds=30)
# A pre-registration that never completes is withdrawn after this long (or the rebalance timeout).
DEFAULT_PRE_REGISTRATION_LIFETIME = timedelta(minutes=5)
# A lingering hold whose instances have all joined is released by a pass only this long after it was set:
# its watcher releases it a second after the last join, unless the operator that ran it stopped.
LINGERING_HOLD_LIFETIME = timedelta(seconds=30)
# How long a scale-down phase may wait on pods or the coordinator before it counts as blocked.
DEFAULT_STEP_TIMEOUT = timedelta(minutes=5)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=now_utc().tzinfo)


def now_utc() -> datetime:
    from datetime import UTC

    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ScaleDownState:
    phase: ScalePhase
    from_replicas: int
    to_replicas: int
    pending_instance_ids: tuple[str, ...]
    remove_members: str
    started_at: str
    statefulset_generation: int | None = None
    pods_gone_at: str | None = None
    last_error: str | None = None
    phase_since: str | None = None
    """When the current phase began (startedAt when not recorded)."""

    def to_status(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value,
            "fromReplicas": self.from_replicas,
            "toReplicas": self.to_replicas,
            "pendingInstanceIds": list(self.pending_instance_ids),
            "removeMembers": self.remove_members,
            "startedAt": self.started_at or None,  # a date-time, never ""
            "statefulSetGeneration": self.statefulset_generation,
            "podsGoneAt": self.pods_gone_at,
            "lastError": self.last_error,
            "phaseSince": self.phase_since,
        }

    @staticmethod
    def from_status(data: Mapping[str, Any] | None) -> ScaleDownState | None:
        phase = ScalePhase.named((data or {}).get("phase"))
        if not data or phase is None:
            return None
        generation = data.get("statefulSetGeneration")
        return ScaleDownState(
            phase=phase,
            from_replicas=int(data.get("fromReplicas", 0)),
            to_replicas=int(data.get("toReplicas", 0)),
            pending_instance_ids=tuple(str(i) for i in data.get("pendingInstanceIds", []) or []),
            remove_members=str(data.get("removeMembers", IMMEDIATE)),
            started_at=str(data.get("startedAt", "")),
            statefulset_generation=int(generation) if generation is not None else None,
            pods_gone_at=data.get("podsGoneAt"),
            last_error=data.get("lastError"),
            phase_since=data.get("phaseSince"),
        )

    def entering(self, phase: ScalePhase, now: datetime, **changes: Any) -> ScaleDownState:
        """This record in `phase`, which begins now (a phase kept keeps its start)."""
        since = self.phase_since if phase == self.phase else iso(now)
        return replace(self, phase=phase, phase_since=since, **changes)

    def waited(self, now: datetime) -> timedelta:
        since = parse_time(self.phase_since) or parse_time(self.started_at)
        return now - since if since is not None else timedelta(0)

    def shrunk(self, statefulset_generation: int) -> ScaleDownState:
        """The StatefulSet now has toReplicas, as of this generation."""
        if self.phase is not ScalePhase.SHRINKING:
            return self
        return replace(self, phase=ScalePhase.WAITING_FOR_PODS, statefulset_generation=statefulset_generation)


@dataclass(frozen=True, slots=True)
class FleetObservation:
    """What the cluster looks like right now (read directly from the API server, not a cache)."""

    statefulset_replicas: int | None
    """spec.replicas of the StatefulSet; None when it does not exist."""
    statefulset_observed_generation: int = 0
    pod_ordinals: frozenset[int] = frozenset()
    """Ordinals of every pod whose consumer may still run: terminating ones included, pods in a
    terminal phase (Succeeded, Failed: the kubelet runs none of their containers again) not."""
    group_instance_ids: frozenset[str] | None = None
    """Instance ids of the group's members; None when the coordinator could not be asked."""
    group_left_instance_ids: frozenset[str] = frozenset()
    """Those of them that have left and are kept for their session (consumer protocol, epoch -2)."""
    group_state: GroupState | None = None
    group_not_found: bool = False
    pre_registration_active: bool = False
    """A pre-registration of ours is still in force on the coordinator."""


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    direction: ScaleDirection
    from_replicas: int
    to_replicas: int


@dataclass(frozen=True, slots=True)
class LastScale:
    """status.lastScale: the latest scale operation, from its start until the group is Stable at the new
    size."""

    direction: ScaleDirection
    from_replicas: int
    to_replicas: int
    started_at: str | None
    completed_at: str | None = None
    duration_seconds: float | None = None

    @staticmethod
    def starting(event: ScaleEvent, now: datetime) -> LastScale:
        return LastScale(event.direction, event.from_replicas, event.to_replicas, iso(now))

    def completing(self, now: datetime) -> LastScale:
        started = parse_time(self.started_at)
        duration = round((now - started).total_seconds(), 1) if started else None
        return replace(self, completed_at=iso(now), duration_seconds=duration)

    def to_status(self) -> dict[str, Any]:
        return {
            "direction": self.direction.value,
            "fromReplicas": self.from_replicas,
            "toReplicas": self.to_replicas,
            "startedAt": self.started_at,
            "completedAt": self.completed_at,
            "durationSeconds": self.duration_seconds,
        }

    @staticmethod
    def of(data: Mapping[str, Any] | None) -> LastScale | None:
        if not data or data.get("direction") not in ("Up", "Down"):
            return None
        duration = data.get("durationSeconds")
        return LastScale(
            direction=ScaleDirection(data["direction"]),
            from_replicas=int(data.get("fromReplicas") or 0),
            to_replicas=int(data.get("toReplicas") or 0),
            started_at=data.get("startedAt"),
            completed_at=data.get("completedAt"),
            duration_seconds=float(duration) if isinstance(duration, int | float) else None,
        )


@dataclass(frozen=True, slots=True)
class Blocked:
    reason: str  # PodsNotGone | RemovalFailing | RemovalNotConfirmed
    message: str


@dataclass(frozen=True, slots=True)
class ScalePlan:
    statefulset_replicas: int
    scale_down: ScaleDownState | None
    persist_first: bool = False
    """Write scale_down to status before touching the StatefulSet (the pending ids must be durable)."""
    pre_register_ids: tuple[str, ...] | None = None
    """Pre-register these instance ids with the coordinator before applying the StatefulSet."""
    remove_instance_ids: tuple[str, ...] = ()
    started: ScaleEvent | None = None
    waiting: str | None = None
    """Why the scale flow is not done yet (for conditions); None when it is idle."""
    completed_scale_down: ScaleDownState | None = None
    """A scale-down that ended in this step without a removal (AfterSessionTimeout)."""
    blocked: Blocked | None = None
    """The scale-down waited longer than the step timeout (a new target may supersede it)."""
    returned_instance_ids: tuple[str, ...] = ()
    """Removed members the coordinator reports again (it restarted before persisting the removal)."""


def plan_scale(
    spec: GroupSpec,
    state: ScaleDownState | None,
    obs: FleetObservation,
    now: datetime,
    step_timeout: timedelta = DEFAULT_STEP_TIMEOUT,
) -> ScalePlan:
    """The next step of the scale flows. Pure: the caller performs the plan, in the order of its fields."""
    desired = spec.replicas
    current = obs.statefulset_replicas
    untouched = state is not None and state.phase is ScalePhase.SHRINKING and current == state.from_replicas
    if untouched and state is not None and desired != state.to_replicas:
        # Nothing happened yet (the StatefulSet still has fromReplicas): re-plan for the new target.
        return plan_scale(spec, None, obs, now, step_timeout)
    if state is not None:
        plan = _continue_scale_down(spec, state, obs, now)
        if plan.scale_down is None or not plan.scale_down.phase.blockable:
            return plan
        if plan.scale_down.waited(now) <= step_timeout:
            return plan
        blocked = _blocked(spec, plan.scale_down, obs, step_timeout)
        if desired != state.to_replicas:
            return _supersede(spec, state, obs, now, step_timeout, blocked)
        return replace(plan, blocked=blocked)
    if current is None:
        # First reconcile: the StatefulSet is created at full size, one pre-registered join phase.
        return ScalePlan(
            statefulset_replicas=desired,
            scale_down=None,
            pre_register_ids=spec.member_ids(0, desired) if spec.pre_register and desired else None,
            started=ScaleEvent(ScaleDirection.UP, 0, desired) if desired else None,
        )
    if desired > current:
        return ScalePlan(
            statefulset_replicas=desired,
            scale_down=None,
            pre_register_ids=spec.member_ids(0, desired) if spec.pre_register else None,
            started=ScaleEvent(ScaleDirection.UP, current, desired),
        )
    if desired < current:
        new_state = ScaleDownState(
            phase=ScalePhase.SHRINKING,
            from_replicas=current,
            to_replicas=desired,
            pending_instance_ids=spec.member_ids(desired, current),
            remove_members=spec.remove_members,
            started_at=iso(now),
        )
        return ScalePlan(
            statefulset_replicas=desired,
            scale_down=new_state,
            persist_first=True,
            pre_register_ids=spec.member_ids(0, desired) if obs.pre_registration_active else None,
            started=ScaleEvent(ScaleDirection.DOWN, current, desired),
            waiting=f"scaling down from {current} to {desired}: waiting for the pods to stop",
        )
    return ScalePlan(statefulset_replicas=current, scale_down=None)


def _blocked(spec: GroupSpec, state: ScaleDownState, obs: FleetObservation, timeout: timedelta) -> Blocked:
    after = f"after {int(timeout.total_seconds())} s"
    if state.phase is ScalePhase.WAITING_FOR_PODS:
        stuck = [spec.pod_name(o) for o in sorted(obs.pod_ordinals) if o >= state.to_replicas]
        what = ", ".join(stuck) if stuck else "the StatefulSet controller (it has not observed the shrink)"
        return Blocked("PodsNotGone", f"still waiting for {what} {after} (stuck Terminating?)")
    pending = ", ".join(state.pending_instance_ids)
    if state.phase is ScalePhase.REMOVING_MEMBERS:
        error = state.last_error or "no answer"
        return Blocked("RemovalFailing", f"removing {pending} has not succeeded {after}: {error}")
    return Blocked(
        "RemovalNotConfirmed",
        f"the coordinator acknowledged removing {pending} but has not reported a settled group without "
        f"them {after}",
    )


def _supersede(
    spec: GroupSpec,
    state: ScaleDownState,
    obs: FleetObservation,
    now: datetime,
    step_timeout: timedelta,
    blocked: Blocked,
) -> ScalePlan:
    """A blocked scale-down meets a new target: pend only the ordinals from the new target up."""
    target = spec.replicas
    if target >= state.from_replicas:
        plan = plan_scale(spec, None, obs, now, step_timeout)
        return replace(plan, blocked=blocked)
    superseding = ScaleDownState(
        phase=ScalePhase.SHRINKING,
        from_replicas=state.from_replicas,
        to_replicas=target,
        pending_instance_ids=spec.member_ids(target, state.from_replicas),
        remove_members=state.remove_members,
        started_at=iso(now),
        phase_since=iso(now),
    )
    return ScalePlan(
        statefulset_replicas=target,
        scale_down=superseding,
        persist_first=True,
        started=ScaleEvent(ScaleDirection.DOWN, state.from_replicas, target),
        waiting=f"scaling down from {state.from_replicas} to {target} (superseding the blocked scale-down to "
        f"{state.to_replicas}): waiting for the pods to stop",
        blocked=blocked,
    )


def _continue_scale_down(
    spec: GroupSpec, state: ScaleDownState, obs: FleetObservation, now: datetime
) -> ScalePlan:
    target = state.to_replicas
    if state.phase is ScalePhase.SHRINKING:
        return ScalePlan(
            statefulset_replicas=target,
            scale_down=state,
            pre_register_ids=spec.member_ids(0, target) if obs.pre_registration_active else None,
            waiting=f"scaling down from {state.from_replicas} to {target}: shrinking the StatefulSet",
        )
    if state.phase is ScalePhase.WAITING_FOR_PODS:
        remaining = sorted(o for o in obs.pod_ordinals if o >= target)
        seen = (
            state.statefulset_generation is None
            or obs.statefulset_observed_generation >= state.statefulset_generation
        )
        if remaining and seen and _all_left(spec, state, obs):
            return _removal(state, now)
        if remaining or not seen:
            pods = ", ".join(spec.pod_name(o) for o in remaining) or "the StatefulSet controller"
            return ScalePlan(
                statefulset_replicas=target,
                scale_down=state,
                waiting=f"scaling down from {state.from_replicas} to {target}: waiting for {pods}",
            )
        state = replace(state, pods_gone_at=iso(now))
        if state.remove_members == AFTER_SESSION_TIMEOUT:
            return ScalePlan(
                statefulset_replicas=target,
                scale_down=state.entering(ScalePhase.WAITING_FOR_SESSION_TIMEOUT, now),
                waiting=_session_wait(spec, state),
            )
        return _removal(state, now)
    if state.phase is ScalePhase.REMOVING_MEMBERS:
        return _removal(state, now)
    if state.phase is ScalePhase.CONFIRMING_REMOVAL:
        return _confirming(state, obs, now)
    # WaitingForSessionTimeout
    gone_at = parse_time(state.pods_gone_at) or now
    deadline = gone_at + timedelta(milliseconds=spec.session_timeout_ms) + SESSION_EXPIRY_GRACE
    still_members = (
        None
        if obs.group_instance_ids is None
        else [i for i in state.pending_instance_ids if i in obs.group_instance_ids]
    )
    if still_members == [] or now >= deadline:
        return ScalePlan(statefulset_replicas=target, scale_down=None, completed_scale_down=state)
    return ScalePlan(statefulset_replicas=target, scale_down=state, waiting=_session_wait(spec, state))


def _all_left(spec: GroupSpec, state: ScaleDownState, obs: FleetObservation) -> bool:
    """On the consumer protocol a static member that stops leaves with epoch -2, and the coordinator keeps
    its partitions until its session ends: nobody consumes them. Once every departing member has so left
    (or is gone), with the StatefulSet already shrunk so that no departing pod comes back, they are removed
    at once rather than once their pods have stopped. On the classic protocol a stopping static member
    sends nothing, so only its pod's end says it will not run again."""
    if spec.group_protocol != CONSUMER_PROTOCOL or state.remove_members != IMMEDIATE:
        return False
    members, left = obs.group_instance_ids, obs.group_left_instance_ids
    return members is not None and all(i not in members or i in left for i in state.pending_instance_ids)


def _session_wait(spec: GroupSpec, state: ScaleDownState) -> str:
    return (
        f"scaling down from {state.from_replicas} to {state.to_replicas}: the pods have stopped; the "
        f"coordinator expires {', '.join(state.pending_instance_ids)} after the session timeout "
        f"({spec.session_timeout_ms} ms)"
    )


def _removal(state: ScaleDownState, now: datetime, returned: tuple[str, ...] = ()) -> ScalePlan:
    removing = state.entering(ScalePhase.REMOVING_MEMBERS, now)
    again = " again (the coordinator reports them as members once more)" if returned else ""
    return ScalePlan(
        statefulset_replicas=state.to_replicas,
        scale_down=removing,
        remove_instance_ids=state.pending_instance_ids,
        waiting=f"scaling down from {state.from_replicas} to {state.to_replicas}: removing "
        f"{', '.join(state.pending_instance_ids)} from the group{again}",
        returned_instance_ids=returned,
    )


def removal_confirmed(state: ScaleDownState, obs: FleetObservation) -> bool:
    """The coordinator reports a settled group without the departed members (observed after it
    acknowledged their removal). Removing a member of a Stable group starts a rebalance, so the group is
    Stable again only with a new generation, which the coordinator persists as it completes; until then
    a restart would bring the members back."""
    if obs.group_instance_ids is None or set(state.pending_instance_ids) & obs.group_instance_ids:
        return False
    return obs.group_not_found or obs.group_state in (GroupState.STABLE, GroupState.EMPTY, GroupState.DEAD)


def _confirming(state: ScaleDownState, obs: FleetObservation, now: datetime) -> ScalePlan:
    target = state.to_replicas
    if removal_confirmed(state, obs):
        return ScalePlan(statefulset_replicas=target, scale_down=None)
    returned = tuple(i for i in state.pending_instance_ids if i in (obs.group_instance_ids or ()))
    if returned:
        return _removal(state, now, returned)
    return ScalePlan(
        statefulset_replicas=target,
        scale_down=state,
        waiting=f"scaling down from {state.from_replicas} to {target}: removed "
        f"{', '.join(state.pending_instance_ids)}; waiting for the group to settle without them",
    )


def after_removal(
    state: ScaleDownState, ok: bool, error: str | None, now: datetime | None = None
) -> ScaleDownState:
    """The LeaveGroup batch answered: on success the record waits for the coordinator to confirm; on
    failure it stays, with the error."""
    moment = now or now_utc()
    if ok:
        return state.entering(ScalePhase.CONFIRMING_REMOVAL, moment, last_error=None)
    return state.entering(ScalePhase.REMOVING_MEMBERS, moment, last_error=error)


# -- pre-registration ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PreRegistration:
    """status.preRegistration: the instance ids we pre-registered with the coordinator, or why the
    coordinator refused them."""

    instance_ids: tuple[str, ...]
    accepted: bool
    set_at: str
    message: str = ""
    hold_member_id: str = ""
    """Set when a pending member holds the join phase (join_hold.py): instead of the pre-registration the
    coordinator refused, or beside it while the hold lingers."""
    linger_ms: int = 0
    """How long the hold outlasts the last join (a cooperative group: join_hold.INCREMENTAL_LINGER_S)."""
    needed: bool = True
    """False where the group's protocol has no join phase to prepare (the consumer protocol): nothing was
    sent, and `message` says why."""

    @property
    def result(self) -> str:
        return "Accepted" if self.accepted else "Rejected" if self.needed else NOT_NEEDED

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "instanceIds": list(self.instance_ids),
            "result": self.result,
            "setAt": self.set_at or None,  # a date-time, never ""
            "message": self.message,
        }
        if self.hold_member_id:
            status["holdMemberId"] = self.hold_member_id
        if self.linger_ms:
            status["lingerMs"] = self.linger_ms
        return status

    @staticmethod
    def from_status(data: Mapping[str, Any] | None) -> PreRegistration | None:
        if not data or "result" not in data:
            return None
        return PreRegistration(
            instance_ids=tuple(str(i) for i in data.get("instanceIds", []) or []),
            accepted=data.get("result") == "Accepted",
            set_at=str(data.get("setAt", "")),
            message=str(data.get("message", "")),
            hold_member_id=str(data.get("holdMemberId", "") or ""),
            linger_ms=int(data.get("lingerMs", 0) or 0),
            needed=data.get("result") != NOT_NEEDED,
        )


NOT_NEEDED = "NotNeeded"
NOT_NEEDED_MESSAGE = (
    "not needed: on the consumer protocol the coordinator assigns each member as it joins, with no join "
    "phase to hold"
)


def pre_registration_done(
    pre: PreRegistration,
    group_state: GroupState | None,
    group_instance_ids: frozenset[str] | None,
    rebalance_timeout_ms: int | None,
    now: datetime,
) -> bool:
    """Withdraw the pre-registration once the group is Stable with every pre-registered instance, or when
    it is too old to still be useful (a pod that never comes would hold every later join phase). A held
    join phase is released as soon as every instance has joined: the group cannot be Stable before. A
    lingering hold is the watcher's to release a second after the last join, which a pass cannot tell:
    a pass releases it only once the scale-up is long past (LINGERING_HOLD_LIFETIME), should the operator
    that watched it have stopped."""
    joined = group_instance_ids is not None and set(pre.instance_ids) <= group_instance_ids
    set_at = parse_time(pre.set_at)
    if joined and group_state is GroupState.STABLE:
        return True
    if joined and pre.hold_member_id:
        if not pre.linger_ms:
            return True
        if set_at is not None and now - set_at > LINGERING_HOLD_LIFETIME:
            return True
    lifetime = max(
        DEFAULT_PRE_REGISTRATION_LIFETIME,
        timedelta(milliseconds=2 * rebalance_timeout_ms) if rebalance_timeout_ms else timedelta(0),
    )
    return set_at is not None and now - set_at > lifetime
