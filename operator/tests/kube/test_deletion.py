"""A deletion as planned steps: the rules of deletion.plan_deletion, and the finalizer running them against
the in-memory API server and coordinator of test_reconcile."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from staticfleet.admin import AclBinding, CoordinatorUnreachable
from staticfleet.admin.model import GroupDescription, MemberDescription, MemberRemoval, Node, RemovalReport
from staticfleet.kube.access import RetiredUser
from staticfleet.kube.deletion import DeletionPlan, members_finished, plan_deletion
from staticfleet.kube.fleetstatus import FleetStatus
from staticfleet.kube.observation import Deleting, GroupObservation, Observed
from staticfleet.kube.reconcile import Retry, finalize, reconcile
from staticfleet.kube.scaling import iso
from staticfleet.kube.steps import (
    Outcome,
    RemoveMembers,
    RetireFleetUser,
    StopConsumers,
    WithdrawPreRegistration,
    removal_message,
)

from .fixtures import group_spec, resource
from .test_access import USER, secured
from .test_reconcile import FakeAdmin, steady

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
HELD = RetiredUser(
    USER, frozenset({"SCRAM-SHA-512"}), frozenset({AclBinding("GROUP", "g", f"User:{USER}", "READ")})
)


def deleting(
    sts_replicas: int | None,
    running: int,
    group: GroupObservation,
    left_alone: str | None = None,
    deleted: timedelta = timedelta(seconds=10),
    **fleet: Any,
) -> Deleting:
    sts = None if sts_replicas is None else {"spec": {"replicas": sts_replicas}, "status": {}, "metadata": {}}
    pods = tuple(
        {"metadata": {"name": f"orders-{o}"}, "status": {"phase": "Running"}} for o in range(running)
    )
    observed = Observed(
        resource(), group_spec(), 1, FleetStatus(), sts, pods, frozenset(range(running)), group, NOW, **fleet
    )
    return Deleting(
        observed, NOW - deleted, left_alone, USER if "retired" in fleet else None, known_replicas=3
    )


def members(*ids: str) -> GroupObservation:
    found = tuple(MemberDescription(f"{i}-m", i, i, "/h", {}) for i in ids)
    return GroupObservation(
        description=GroupDescription("shop.orders", "Stable", "consumer", "range", found, Node(1, "h", 9))
    )


def test_a_deletion_stops_the_consumers_and_removes_no_member_while_one_may_still_run() -> None:
    assert plan_deletion(deleting(3, 3, GroupObservation())) == DeletionPlan(
        (StopConsumers(),), "waiting for 3 pods to stop before removing their members"
    )
    assert plan_deletion(deleting(0, 1, GroupObservation())) == DeletionPlan(
        waiting="waiting for 1 pods to stop before removing their members"
    )


def test_a_deletion_removes_every_member_of_every_pod_the_fleet_had_and_any_other_the_group_lists() -> None:
    plan = plan_deletion(deleting(0, 0, members("orders-0", "orders-7", "someone")))
    removal, withdrawal = plan.members
    assert removal == RemoveMembers(
        ("orders-0", "orders-1", "orders-2", "orders-7", "someone"),
        "staticfleet: StaticConsumerGroup deleted",
        "deleted",
    )
    assert withdrawal == WithdrawPreRegistration() and plan.waiting is None


def test_the_user_goes_after_the_members_and_also_with_a_group_left_as_it_is() -> None:
    plan = plan_deletion(deleting(0, 0, members("orders-0"), retired=HELD))
    assert [type(s) for s in plan.members] == [RemoveMembers, WithdrawPreRegistration]
    (retire,) = plan.user
    assert isinstance(retire, RetireFleetUser) and retire.user == HELD
    retained = plan_deletion(deleting(0, 0, GroupObservation(), "deletionPolicy Retain", retired=HELD))
    assert retained.members == () and retained.user == plan.user


def test_an_unreachable_coordinator_holds_the_deletion_for_a_while_then_lets_it_go_with_a_warning() -> None:
    away = GroupObservation(error="coordinator at kafka:9092 unreachable")
    patient = deleting(0, 0, away)
    assert plan_deletion(patient) == DeletionPlan()
    assert members_finished(patient, DeletionPlan(), Outcome()).retry == (
        "cannot remove the members yet: coordinator at kafka:9092 unreachable"
    )
    late = deleting(0, 0, away, deleted=timedelta(minutes=6))
    given_up = members_finished(late, DeletionPlan(), Outcome())
    assert (
        given_up.retry is None
        and given_up.message == "gave up removing members: coordinator at kafka:9092 unreachable"
    )
    assert [(e.type, e.reason) for e in given_up.events] == [("Warning", "CoordinatorUnavailable")]


def test_a_removal_answered_with_failures_is_tried_again_however_long_the_deletion_has_waited() -> None:
    late = deleting(0, 0, members("orders-0"), deleted=timedelta(hours=1))
    failed = RemovalReport("shop.orders", (MemberRemoval("orders-0", 15),))  # COORDINATOR_NOT_AVAILABLE
    outcome = Outcome(removal=failed, removal_error=removal_message(failed, "removal incomplete"))
    assert members_finished(late, DeletionPlan(), outcome).retry == (
        "removal incomplete: failed: orders-0 (failed: COORDINATOR_NOT_AVAILABLE) (group shop.orders)"
    )


class UnreachableAdmin(FakeAdmin):
    def describe_group(self, group_id: str) -> GroupDescription:
        raise CoordinatorUnreachable("no coordinator answered")


def test_a_deleted_fleet_whose_coordinator_stays_away_is_released_after_the_patience_with_a_warning() -> None:
    kube, _, ctx = steady(2)
    kube.objects["StatefulSet"]["spec"]["replicas"] = 0
    kube.set_pods()
    ctx.fake_admin = UnreachableAdmin(set())
    with pytest.raises(Retry, match="cannot remove the members yet: no coordinator answered"):
        finalize(ctx, kube.group, {})
    kube.group["metadata"]["deletionTimestamp"] = iso(datetime.now(UTC) - timedelta(minutes=6))
    assert finalize(ctx, kube.group, {}) == "gave up removing members: no coordinator answered"
    assert [e["reason"] for e in kube.events] == ["CoordinatorUnavailable"]


def test_a_failed_removal_keeps_the_user_until_the_members_are_gone(tmp_path: Path) -> None:
    kube, admin, ctx = secured(tmp_path)
    reconcile(ctx, "shop", "orders", {})
    kube.objects["StatefulSet"]["spec"]["replicas"] = 0
    admin.members = {"orders-0"}
    refused = admin.remove_members

    def failing(group_id: str, ids: Any, reason: str | None = None) -> RemovalReport:
        raise CoordinatorUnreachable("LeaveGroup timed out")

    admin.remove_members = failing  # type: ignore[method-assign]
    with pytest.raises(Retry, match="cannot remove the members yet: LeaveGroup timed out"):
        finalize(ctx, kube.group, {})
    assert USER in admin.credentials, "the user waits for the members"
    admin.remove_members = refused  # type: ignore[method-assign]
    message = finalize(ctx, kube.group, {})
    assert "removed orders-0" in message and f"user {USER} and its 5 ACLs removed" in message
    assert admin.credentials == {}
    assert [e["reason"] for e in kube.events][-2:] == ["MembersRemoved", "UserRemoved"]
