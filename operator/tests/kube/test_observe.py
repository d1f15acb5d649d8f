"""observe_group: what the operator asks the cluster about a fleet's group before computing status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from staticfleet.admin import GroupAdmin, GroupNotFound
from staticfleet.admin.errors import CoordinatorUnreachable
from staticfleet.admin.model import GroupDescription, Node
from staticfleet.kube.observe import observe_group

from .fixtures import group_spec


class Admin:
    def __init__(self, state: str | None, topics: set[str] | None) -> None:
        self.state = state
        self.topics = topics
        self.topic_lookups = 0

    def describe_group(self, group_id: str) -> GroupDescription:
        if self.state is None:
            raise GroupNotFound(f"group {group_id} does not exist")
        return GroupDescription(group_id, self.state, "consumer", "range", (), Node(1, "h", 9092))

    def missing_topics(self, topics: Sequence[str]) -> list[str]:
        self.topic_lookups += 1
        if self.topics is None:
            raise CoordinatorUnreachable("unreachable while listing topics")
        return [t for t in topics if t not in self.topics]


def observe(admin: Admin) -> tuple[str, ...]:
    return observe_group(cast(GroupAdmin, admin), group_spec()).missing_topics


def test_a_group_that_is_not_stable_has_its_missing_topics_named() -> None:
    assert observe(Admin(None, {"refunds"})) == ("orders",)
    assert observe(Admin("Empty", set())) == ("orders", "refunds")
    assert observe(Admin("PreparingRebalance", {"orders", "refunds"})) == ()


def test_a_stable_group_costs_no_topic_lookup() -> None:
    admin = Admin("Stable", set())
    assert observe(admin) == () and admin.topic_lookups == 0


def test_a_failed_topic_lookup_leaves_the_observation_without_missing_topics() -> None:
    assert observe(Admin(None, None)) == ()
