"""Which typed steps a pass takes, decided from the observation alone (steps.plan_actions), and the one
status write that ends it (status.plan_status)."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

from staticfleet.admin.model import GroupDescription, MemberDescription, Node
from staticfleet.kube import departure, steps
from staticfleet.kube.builders import DEPARTING_ANNOTATION
from staticfleet.kube.claims import Claim
from staticfleet.kube.fleetstatus import FleetStatus
from staticfleet.kube.join_hold import INCREMENTAL_LINGER_S
from staticfleet.kube.observation import Conflicting, GroupObservation, Observed
from staticfleet.kube.scaling import NOT_NEEDED_MESSAGE, PreRegistration, ScaleDownState, ScalePhase, iso
from staticfleet.kube.spec import InstanceIds
from staticfleet.kube.status import plan_conflict, plan_status
from staticfleet.kube.steps import (
    ApplyChildren,
    Checkpoint,
    MarkDeparting,
    Outcome,
    PreRegister,
    PreRegistrationNotNeeded,
    RemoveMembers,
    StepIO,
    WithdrawPreRegistration,
    plan_actions,
)

from .fixtures import group_spec, resource

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)


def group(*ids: str, state: str = "Stable") -> GroupObservation:
    members = tuple(MemberDescription(f"{i}-m", i, i, "/h", {}) for i in ids)
    return GroupObservation(
        description=GroupDescription("shop.orders", state, "consumer", "range", members, Node(1, "h", 9092))
    )


def observed(
    replicas: int,
    sts_replicas: int | None,
    pods: set[int],
    members: GroupObservation,
    members_per_pod: int = 1,
    *,
    marked: frozenset[int] | set[int] = frozenset(),
    stopped: frozenset[int] | set[int] = frozenset(),
    remove_members: str = "Immediate",
    protocol: str = "classic",
    **status: Any,
) -> Observed:
    sts = (
        None
        if sts_replicas is None
        else {"spec": {"replicas": sts_replicas}, "status": {"observedGeneration": 2}, "metadata": {}}
    )
    body = resource(replicas=replicas, membersPerPod=members_per_pod)

    def pod(ordinal: int) -> dict[str, Any]:
        annotations = {DEPARTING_ANNOTATION: "true"} if ordinal in marked else {}
        phase = "Succeeded" if ordinal in stopped else "Running"
        return {
            "metadata": {"name": f"orders-{ordinal}", "annotations": annotations},
            "status": {"phase": phase},
        }

    return Observed(
        body=body,
        spec=group_spec(
            replicas=replicas,
            membersPerPod=members_per_pod,
            scaleDown={"removeMembers": remove_members},
            groupProtocol=protocol,
        ),
        generation=1,
        previous=FleetStatus.of(status),
        statefulset=sts,
        pods=tuple(pod(o) for o in sorted(pods)),
        pod_ordinals=frozenset(pods - stopped),
        group=members,
        now=NOW,
    )


def test_a_steady_fleet_only_applies_its_children() -> None:
    obs = observed(3, 3, {0, 1, 2}, group("orders-0", "orders-1", "orders-2"))
    assert plan_actions(obs).steps == (ApplyChildren(3),)


def test_a_scale_down_persists_its_record_then_marks_the_departing_pods_before_the_statefulset_shrinks() -> (
    None
):
    obs = observed(1, 3, {0, 1, 2}, group("orders-0", "orders-1", "orders-2"))
    plan = plan_actions(obs)
    marks = MarkDeparting(("orders-1", "orders-2"), leaving=("orders-1", "orders-2"))
    assert plan.steps == (Checkpoint("scale-down-recorded"), marks, ApplyChildren(1))
    record = plan.outcome(obs).scale_down  # what the checkpoint writes
    assert record is not None and record.pending_instance_ids == ("orders-1", "orders-2")


def test_departing_pods_stay_marked_until_they_stop_and_a_mark_left_from_before_is_made_good() -> None:
    waiting = ScaleDownState(
        ScalePhase.WAITING_FOR_PODS, 3, 1, ("orders-1", "orders-2"), "Immediate", iso(NOW), 2
    )
    members = group("orders-0", "orders-1", "orders-2")
    # An operator that stopped after marking orders-1 marks orders-2 on its next pass.
    half = observed(1, 1, {0, 1, 2}, members, marked={1}, scaleDown=waiting.to_status())
    assert MarkDeparting(("orders-2",), leaving=("orders-2",)) in plan_actions(half).steps
    # Marked, or stopped for good: nothing to do.
    done = observed(1, 1, {0, 1, 2}, members, marked={1}, stopped={2}, scaleDown=waiting.to_status())
    assert not [s for s in plan_actions(done).steps if isinstance(s, MarkDeparting)]


def test_a_pod_no_scale_down_takes_away_loses_its_mark_so_that_its_consumer_joins_again() -> None:
    # The record was dropped (a new target before the StatefulSet shrank): orders-1 and orders-2 stay.
    steady = observed(3, 3, {0, 1, 2}, group("orders-0"), marked={1, 2})
    assert MarkDeparting((), ("orders-1", "orders-2")) in plan_actions(steady).steps
    # A superseding scale-down to 2 keeps orders-2 departing and gives orders-1 back.
    superseding = ScaleDownState(ScalePhase.SHRINKING, 3, 2, ("orders-2",), "Immediate", iso(NOW))
    obs = observed(2, 3, {0, 1, 2}, group("orders-0"), marked={1, 2}, scaleDown=superseding.to_status())
    assert MarkDeparting((), ("orders-1",)) in plan_actions(obs).steps


def test_departing_pods_that_all_answer_the_handshake_are_marked_with_their_endpoints() -> None:
    obs = observed(1, 3, {0, 1, 2}, group("orders-0", "orders-1", "orders-2"))
    for pod in obs.pods:
        ordinal = pod["metadata"]["name"].rsplit("-", 1)[1]
        pod["status"]["podIP"] = f"10.0.0.{ordinal}"
        pod["spec"] = {"containers": [{"name": "c", "ports": [{"name": "departure", "containerPort": 8080}]}]}
    (marks,) = [s for s in plan_actions(obs).steps if isinstance(s, MarkDeparting)]
    assert marks.endpoints == (
        departure.Endpoint("orders-1", "10.0.0.1", 8080),
        departure.Endpoint("orders-2", "10.0.0.2", 8080),
    )
    # The pod that stays is told when to join again.
    assert marks.staying == (departure.Endpoint("orders-0", "10.0.0.0", 8080),)
    # One departing pod without the port: none leaves sooner, all leave at the mark's moment, and the pods
    # that stay are told nothing (their members learn of the rebalance from their heartbeat).
    obs.pods[2]["spec"]["containers"][0]["ports"] = [{"name": "http", "containerPort": 8080}]
    (marks,) = [s for s in plan_actions(obs).steps if isinstance(s, MarkDeparting)]
    assert marks == MarkDeparting(("orders-1", "orders-2"), leaving=("orders-1", "orders-2"))


def test_a_fleet_that_waits_out_the_session_timeout_marks_no_pod() -> None:
    obs = observed(1, 3, {0, 1, 2}, group("orders-0", "orders-1"), remove_members="AfterSessionTimeout")
    assert not [s for s in plan_actions(obs).steps if isinstance(s, MarkDeparting)]


def test_a_consumer_protocol_fleet_marks_no_pod_and_shrinks_at_once() -> None:
    obs = observed(1, 3, {0, 1, 2}, group("orders-0", "orders-1", "orders-2"), protocol="consumer")
    assert plan_actions(obs).steps == (Checkpoint("scale-down-recorded"), ApplyChildren(1))


def test_a_growing_consumer_protocol_fleet_says_that_no_pre_registration_is_needed() -> None:
    obs = observed(3, 1, {0}, group("orders-0"), protocol="consumer")
    steps = plan_actions(obs).steps
    assert steps == (PreRegistrationNotNeeded(("orders-0", "orders-1", "orders-2")), ApplyChildren(3, True))
    record = PreRegistration(("orders-0",), False, iso(NOW), NOT_NEEDED_MESSAGE, needed=False)
    assert record.to_status()["result"] == "NotNeeded"
    assert PreRegistration.from_status(record.to_status()) == record
    # At rest, nothing to say again.
    steady = observed(3, 3, {0, 1, 2}, group("orders-0", "orders-1", "orders-2"), protocol="consumer")
    assert plan_actions(steady).steps == (ApplyChildren(3),)


def test_members_are_removed_in_one_step_first_thing_once_their_pods_are_gone() -> None:
    waiting = ScaleDownState(
        ScalePhase.WAITING_FOR_PODS, 3, 1, ("orders-1", "orders-2"), "Immediate", iso(NOW), 2
    )
    obs = observed(1, 1, {0}, group("orders-0", "orders-1", "orders-2"), scaleDown=waiting.to_status())
    removal, checkpoint, apply = plan_actions(obs).steps
    assert isinstance(removal, RemoveMembers) and removal.instance_ids == ("orders-1", "orders-2")
    assert (checkpoint, apply) == (Checkpoint("members-removed"), ApplyChildren(1))


def test_a_scale_up_pre_registers_before_the_statefulset_grows() -> None:
    obs = observed(3, 1, {0}, group("orders-0"))
    steps = plan_actions(obs).steps
    assert steps == (
        PreRegister(("orders-0", "orders-1", "orders-2")),
        Checkpoint("pre-registered"),
        ApplyChildren(3, grows=True),
    )


def test_a_cooperative_fleet_holds_its_join_phase_a_second_past_the_last_join_an_eager_one_does_not() -> None:
    ids = ("orders-0", "orders-1", "orders-2")
    eager = replace(
        observed(3, 1, {0}, group("orders-0")), spec=group_spec(replicas=3, assignmentStrategy="roundrobin")
    )
    assert plan_actions(eager).steps[0] == PreRegister(ids)
    cooperative = group_spec(replicas=3, assignmentStrategy="cooperative-sticky")
    assert plan_actions(replace(eager, spec=cooperative)).steps[0] == PreRegister(ids, INCREMENTAL_LINGER_S)
    # A new group: nobody owns a partition to give up, so one rebalance does it.
    new = replace(eager, spec=cooperative, group=GroupObservation(not_found=True))
    assert plan_actions(new).steps[0] == PreRegister(ids)
    # Kafka Streams' incremental assignor runs on Java clients, which rejoin at once: no linger.
    member = MemberDescription("orders-0-m", "orders-0", "orders-0", "/h", {})
    streams = GroupDescription("shop.orders", "Stable", "consumer", "stream", (member,), Node(1, "h", 9092))
    with_streams = replace(eager, group=GroupObservation(description=streams))
    assert plan_actions(with_streams).steps[0] == PreRegister(ids)


def test_a_pre_registration_that_did_its_job_is_withdrawn() -> None:
    pre = PreRegistration(("orders-0", "orders-1"), True, iso(NOW))
    done = observed(2, 2, {0, 1}, group("orders-0", "orders-1"), preRegistration=pre.to_status())
    assert WithdrawPreRegistration() in plan_actions(done).steps
    joining = observed(2, 2, {0, 1}, group("orders-0"), preRegistration=pre.to_status())
    assert WithdrawPreRegistration() not in plan_actions(joining).steps


def test_a_held_join_phase_is_released_once_everyone_has_joined_before_the_group_is_stable() -> None:
    pre = PreRegistration(("orders-0", "orders-1"), True, iso(NOW), "held", hold_member_id="hold-1")
    assert PreRegistration.from_status(pre.to_status()) == pre
    # Held, the group cannot become Stable: the release waits only for the members.
    joined = group("orders-0", "orders-1", state="PreparingRebalance")
    assert (
        WithdrawPreRegistration()
        in plan_actions(observed(2, 2, {0, 1}, joined, preRegistration=pre.to_status())).steps
    )
    joining = group("orders-0", state="PreparingRebalance")
    assert (
        WithdrawPreRegistration()
        not in plan_actions(observed(2, 2, {0, 1}, joining, preRegistration=pre.to_status())).steps
    )
    # A pre-registration the coordinator took still waits for a Stable group.
    taken = PreRegistration(("orders-0", "orders-1"), True, iso(NOW)).to_status()
    assert (
        WithdrawPreRegistration()
        not in plan_actions(observed(2, 2, {0, 1}, joined, preRegistration=taken)).steps
    )


def test_the_status_plan_writes_once_with_the_events_of_the_pass() -> None:
    obs = observed(1, 3, {0, 1, 2}, group("orders-0", "orders-1", "orders-2"))
    plan = plan_actions(obs)
    status = plan_status(obs, plan, plan.outcome(obs), obs.group, obs.pods, FleetStatus()).step
    assert status.status.to_status()["scaleDown"]["pendingInstanceIds"] == ["orders-1", "orders-2"]
    assert [e.reason for e in status.events] == ["Scaled"]


def pod_members(*ordinals: int) -> tuple[str, ...]:
    return tuple(f"orders-{o}-{k}" for o in ordinals for k in (1, 2))


def test_a_scale_down_of_two_member_pods_records_every_member_and_marks_each_departing_pod() -> None:
    obs = observed(1, 3, {0, 1, 2}, group(*pod_members(0, 1, 2)), members_per_pod=2)
    plan = plan_actions(obs)
    # The mark is on the pod: every member the pod runs reads the same file and leaves with the others.
    marks = MarkDeparting(("orders-1", "orders-2"), leaving=pod_members(1, 2))
    assert plan.steps == (Checkpoint("scale-down-recorded"), marks, ApplyChildren(1))
    record = plan.outcome(obs).scale_down
    assert record is not None and record.pending_instance_ids == pod_members(1, 2)


def test_every_member_of_the_departed_pods_leaves_in_one_removal_step() -> None:
    waiting = ScaleDownState(ScalePhase.WAITING_FOR_PODS, 3, 1, pod_members(1, 2), "Immediate", iso(NOW), 2)
    obs = observed(1, 1, {0}, group(*pod_members(0, 1, 2)), 2, scaleDown=waiting.to_status())
    removal, checkpoint, apply = plan_actions(obs).steps
    assert isinstance(removal, RemoveMembers) and removal.instance_ids == pod_members(1, 2)
    assert (checkpoint, apply) == (Checkpoint("members-removed"), ApplyChildren(1))


def test_a_scale_up_of_two_member_pods_pre_registers_every_member() -> None:
    steps = plan_actions(observed(3, 1, {0}, group(*pod_members(0)), members_per_pod=2)).steps
    assert steps == (
        PreRegister(pod_members(0, 1, 2)),
        Checkpoint("pre-registered"),
        ApplyChildren(3, grows=True),
    )


def test_a_held_join_phase_of_two_member_pods_is_released_only_when_every_member_has_joined() -> None:
    pre = PreRegistration(pod_members(0, 1), True, iso(NOW), "held", hold_member_id="hold-1").to_status()
    one_thread_short = group(*pod_members(0), "orders-1-1", state="PreparingRebalance")
    steps = plan_actions(observed(2, 2, {0, 1}, one_thread_short, 2, preRegistration=pre)).steps
    assert WithdrawPreRegistration() not in steps
    everyone = group(*pod_members(0, 1), state="PreparingRebalance")
    assert (
        WithdrawPreRegistration()
        in plan_actions(observed(2, 2, {0, 1}, everyone, 2, preRegistration=pre)).steps
    )


def test_a_conflict_with_a_fleet_whose_ids_overlap_says_which_ids_the_two_would_share() -> None:
    single = group_spec(replicas=3)
    winner = Claim(
        "2026-11-22T09:00:00Z", "shop", "orders-1", ids=InstanceIds("orders-1", "shop"), replicas=3
    )
    body = resource(replicas=3, membersPerPod=2)
    lost = Conflicting(body, group_spec(replicas=3, membersPerPod=2), 1, FleetStatus(), winner, NOW)
    (degraded,) = [c for c in plan_conflict(lost).status.to_status()["conditions"] if c["type"] == "Degraded"]
    assert degraded["reason"] == "GroupIdConflict"
    assert degraded["message"].endswith(
        "consumers with one instance id fence each other: orders-1-1 (member 1 of pod orders-1 here, pod "
        "orders-1-1's own id in shop/orders-1), orders-1-2 (member 2 of pod orders-1 here, pod orders-1-2's "
        "own id in shop/orders-1)."
    )
    apart = Conflicting(resource(), single, 1, FleetStatus(), winner, NOW)
    (plain,) = [c for c in plan_conflict(apart).status.to_status()["conditions"] if c["type"] == "Degraded"]
    assert plain["message"].endswith("Give it another groupId.")


class CheckpointIO:
    """Just what a Checkpoint touches: the status as the server holds it, and the records."""

    def __init__(self, written: FleetStatus, outcome: Outcome) -> None:
        self.written = written
        self.outcome = outcome
        self.writes: list[FleetStatus] = []

    def write_status(self, status: FleetStatus) -> None:
        self.writes.append(status)
        self.written = status


def test_a_checkpoint_writes_the_records_only_when_the_server_does_not_hold_them_yet() -> None:
    record = ScaleDownState(ScalePhase.SHRINKING, 3, 1, ("orders-1", "orders-2"), "Immediate", iso(NOW))
    held = FleetStatus(replicas=3, scale_down=record)
    io = CheckpointIO(FleetStatus(replicas=3), Outcome(record, None, None))
    Checkpoint("scale-down-recorded").run(cast(StepIO, io))
    assert io.writes == [held], "the rest of the status is as the server holds it"
    Checkpoint("scale-down-recorded").run(cast(StepIO, io))
    assert len(io.writes) == 1, "nothing new to make durable"


class MarkingIO:
    """What MarkDeparting touches, each call noted in `calls` in order."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.observed = observed(1, 3, {0, 1, 2}, group("orders-0", "orders-1", "orders-2"))
        self.departure_key = "key"
        self.api = self
        self.admin = self
        self.metrics = self

    def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        self.calls.append(f"annotate {name}")

    def post(self, event: Any) -> None:
        self.calls.append(f"event {event.reason}")

    def describe_group(self, group_id: str) -> Any:
        raise AssertionError("the departure functions describe the group, stubbed here")

    @property
    def departure_handshakes(self) -> Any:
        return self

    def labels(self, *values: str) -> Any:
        return self

    def inc(self) -> None:
        pass


def marking_run(monkeypatch: Any, *, took_marks: bool, sooner: bool) -> list[str]:
    """Runs a MarkDeparting of orders-1 and orders-2 (orders-0 stays) with the handshake's requests
    stubbed: whether the pods took their handed marks, and whether they took the sooner moment."""
    calls: list[str] = []
    marks: list[int] = []
    ends = {p: departure.Endpoint(p, "10.0.0.1", 8080) for p in ("orders-0", "orders-1", "orders-2")}

    def hand_marks(targets: Any, key: str, mark_ms: int) -> frozenset[str]:
        calls.append("hand marks")
        marks.append(mark_ms)
        return frozenset(t.pod for t in targets) if took_marks else frozenset()

    def hasten(targets: Any, mark_ms: int, **kwargs: Any) -> departure.Handshake:
        calls.append("sooner moment")
        if not sooner:
            return departure.Handshake("refused", pods=("orders-2",))
        return departure.Handshake("sooner", time.time() + 0.01, rejoining=("orders-0",), staying=1)

    def rejoin_when_rebalancing(*args: Any, **kwargs: Any) -> int:
        calls.append("rejoin now")
        return 1

    def wait_until_settled(*args: Any, **kwargs: Any) -> bool:
        calls.append("settled")
        return True

    monkeypatch.setattr(departure, "hand_marks", hand_marks)
    monkeypatch.setattr(departure, "hasten", hasten)
    monkeypatch.setattr(departure, "rejoin_when_rebalancing", rejoin_when_rebalancing)
    monkeypatch.setattr(departure, "wait_until_settled", wait_until_settled)
    monkeypatch.setattr(steps, "DEPARTURE_DELAY_S", 0.05)
    step = MarkDeparting(
        ("orders-1", "orders-2"),
        endpoints=(ends["orders-1"], ends["orders-2"]),
        leaving=("orders-1", "orders-2"),
        staying=(ends["orders-0"],),
    )
    step.run(cast(StepIO, MarkingIO(calls)))
    calls.append(f"returned {'after' if time.time() >= marks[0] / 1000 else 'before'} the mark's moment")
    return calls


def test_pods_that_all_took_their_marks_are_annotated_only_after_leaving_and_the_rejoin(
    monkeypatch: Any,
) -> None:
    calls = marking_run(monkeypatch, took_marks=True, sooner=True)
    annotations = ["annotate orders-1", "annotate orders-2"]
    assert calls[:3] == ["hand marks", "sooner moment", "rejoin now"], "no write on the way to the moment"
    assert sorted(calls[3:5]) == annotations
    assert calls[5:7] == ["event DepartureHandshake", "settled"]


def test_pods_that_did_not_take_their_marks_are_annotated_before_their_moment(monkeypatch: Any) -> None:
    calls = marking_run(monkeypatch, took_marks=False, sooner=True)
    assert calls[0] == "hand marks"
    assert {"annotate orders-1", "annotate orders-2"} <= set(calls[:4]), (
        "the pods read the mark from their files"
    )
    assert calls.index("annotate orders-1") < calls.index("rejoin now")


def test_pods_that_keep_the_marks_moment_are_annotated_before_it(monkeypatch: Any) -> None:
    calls = marking_run(monkeypatch, took_marks=True, sooner=False)
    assert calls[:2] == ["hand marks", "sooner moment"]
    assert sorted(calls[2:4]) == ["annotate orders-1", "annotate orders-2"]
    assert "rejoin now" not in calls and "settled" not in calls, "nobody left sooner"
    assert calls[-1] == "returned after the mark's moment"
