"""The watcher that releases a held join phase (the real coordinators are in tests/admin/test_admin.py)."""

from __future__ import annotations

from staticfleet.admin import CoordinatorUnreachable, GroupDescription, GroupNotFound, MemberDescription, Node
from staticfleet.kube.join_hold import ARRIVING_FOR_S, INCREMENTAL_LINGER_S, release_when_joined

IDS = ("orders-0", "orders-1", "orders-2")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Admin:
    """Answers each describe with the next of `views` (the last one repeats)."""

    def __init__(self, *views: frozenset[str] | Exception) -> None:
        self.views = list(views)
        self.describes = 0
        self.released: list[str] = []
        self.release_error: Exception | None = None

    def describe_group(self, group_id: str) -> GroupDescription:
        view = self.views[min(self.describes, len(self.views) - 1)]
        self.describes += 1
        if isinstance(view, Exception):
            raise view
        members = tuple(MemberDescription(f"{i}-m", i, i, "/h", None) for i in sorted(view))
        return GroupDescription(
            group_id, "PreparingRebalance", "consumer", "range", members, Node(1, "h", 9092)
        )

    def release_join_phase(self, group_id: str, member_id: str) -> bool:
        if self.release_error is not None:
            raise self.release_error
        self.released.append(member_id)
        return True


def test_the_hold_is_released_once_every_instance_has_joined_looked_for_sooner_as_they_arrive() -> None:
    clock = Clock()
    admin = Admin(
        GroupNotFound("not yet"),
        frozenset({"orders-0"}),
        frozenset({"orders-0", "orders-2"}),
        frozenset(IDS),
    )
    assert release_when_joined(
        admin, "g", "hold-1", IDS, 60.0, poll_s=0.1, arriving_poll_s=0.02, clock=clock, sleep=clock.sleep
    )
    assert admin.released == ["hold-1"] and admin.describes == 4
    # Two looks 0.1 s apart; once orders-2 has arrived, the next 0.02 s later.
    assert abs(clock.now - 0.22) < 1e-9


def test_an_instance_that_does_not_come_is_looked_for_often_only_for_a_while_after_the_last_arrival() -> None:
    clock = Clock()
    admin = Admin(frozenset({"orders-0"}), frozenset({"orders-0", "orders-1"}))
    assert release_when_joined(
        admin, "g", "hold-1", IDS, 10.0, poll_s=0.5, arriving_poll_s=0.02, clock=clock, sleep=clock.sleep
    )
    often = round(ARRIVING_FOR_S / 0.02)
    seldom = round((10.0 - 0.5 - ARRIVING_FOR_S) / 0.5)
    assert abs(admin.describes - (2 + often + seldom)) <= 2
    assert admin.released == ["hold-1"]


def test_a_lingering_hold_is_released_its_linger_after_every_instance_joined_and_only_then() -> None:
    clock = Clock()
    admin = Admin(frozenset({"orders-0"}), frozenset(IDS))
    assert release_when_joined(
        admin,
        "g",
        "hold-1",
        IDS,
        60.0,
        linger_s=INCREMENTAL_LINGER_S,
        poll_s=0.1,
        clock=clock,
        sleep=clock.sleep,
    )
    assert admin.released == ["hold-1"] and admin.describes == 2
    assert abs(clock.now - (0.1 + INCREMENTAL_LINGER_S)) < 1e-9
    # One that never completes lingers no further than the bound.
    never, stuck = Clock(), Admin(frozenset({"orders-0"}))
    assert release_when_joined(
        stuck,
        "g",
        "hold-1",
        IDS,
        5.0,
        linger_s=INCREMENTAL_LINGER_S,
        poll_s=0.5,
        clock=never,
        sleep=never.sleep,
    )
    assert never.now == 5.0


def test_the_hold_is_released_at_the_bound_when_an_instance_never_comes() -> None:
    clock = Clock()
    admin = Admin(CoordinatorUnreachable("moving"), frozenset({"orders-0", "orders-1"}))
    assert release_when_joined(admin, "g", "hold-1", IDS, 5.0, poll_s=0.5, clock=clock, sleep=clock.sleep)
    assert admin.released == ["hold-1"] and admin.describes == 10 and clock.now == 5.0


def test_a_release_the_coordinator_does_not_answer_is_left_to_the_reconcile_pass() -> None:
    clock = Clock()
    admin = Admin(frozenset(IDS))
    admin.release_error = CoordinatorUnreachable("gone")
    assert not release_when_joined(admin, "g", "hold-1", IDS, 5.0, clock=clock, sleep=clock.sleep)


def test_a_hold_for_pods_of_several_members_waits_for_every_member_not_for_the_pods_own_ids() -> None:
    clock = Clock()
    members = ("orders-0-1", "orders-0-2", "orders-1-1", "orders-1-2")
    admin = Admin(
        frozenset({"orders-0", "orders-1"}),  # the pods' own ids: no member of a pod of two
        frozenset(members[:3]),
        frozenset(members),
    )
    assert release_when_joined(
        admin, "g", "hold-1", members, 60.0, poll_s=0.1, clock=clock, sleep=clock.sleep
    )
    assert admin.describes == 3 and admin.released == ["hold-1"]
