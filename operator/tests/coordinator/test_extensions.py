"""staticfleet's two coordinator extensions: expected instances (one rebalance per scale-up) and
rebalancing consumer groups when a subscribed topic gains partitions."""

from __future__ import annotations

import pytest

from staticfleet.coordinator import (
    EXPECTED_INSTANCE_IDS,
    CoordinatorConfig,
    CoordinatorError,
    ErrorCode,
    GroupState,
)
from staticfleet.coordinator.consumer_protocol import Subscription, encode_subscription
from staticfleet.coordinator.messages import Protocol

from .harness import Harness

E = ErrorCode


def test_without_expected_instances_a_scale_up_costs_one_rebalance_per_late_joiner() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.join("", "b")
    h.join(ids["a"], "a")  # the join completes with a and b
    assert h.generation() == 2
    h.sync(ids["a"], 2, "a", assignments={})
    h.join("", "c")  # c starts a little later: another rebalance
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_expected_instances_hold_the_join_phase_until_every_one_has_joined() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: "a,b,c"})
    a = h.join(ids["a"], "a")
    b = h.join("", "b")
    assert not a.done and not b.done, "c is expected and has not joined"
    c = h.join("", "c")
    assert a.get().generation_id == b.get().generation_id == c.get().generation_id == 2
    assert len(a.get().members) == 3


def test_expected_instances_wait_no_longer_than_the_rebalance_timeout() -> None:
    h = Harness()
    ids = h.stable_static_group("a", rebalance=5_000, session=60_000)
    h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: "a,b,never"})
    a = h.join(ids["a"], "a", rebalance=5_000, session=60_000)
    h.join("", "b", rebalance=5_000, session=60_000)
    h.advance(4_999)
    assert not a.done
    h.advance(1)
    assert a.get().generation_id == 2 and len(a.get().members) == 2


def test_expected_instances_let_an_initial_rebalance_finish_as_soon_as_all_have_joined() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=3_000, min_session_timeout_ms=10))
    h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: "a,b"})
    a = h.join("", "a")
    assert not a.done
    b = h.join("", "b")
    assert a.get().generation_id == b.get().generation_id == 1


def test_a_single_expected_instance_ends_the_initial_rebalance_when_it_joins() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=3_000, min_session_timeout_ms=10))
    h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: "a"})
    assert h.join("", "a").get().generation_id == 1


def test_expected_instances_extend_an_initial_rebalance_until_the_rebalance_timeout() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=1_000, min_session_timeout_ms=10))
    h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: "a,b"})
    a = h.join("", "a", rebalance=10_000)
    h.advance(9_999)
    assert not a.done
    h.advance(1)
    assert a.get().generation_id == 1


def test_lowering_the_expectation_lets_a_waiting_join_phase_complete() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: "a,b"})
    a = h.join(ids["a"], "a")
    assert not a.done
    h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: None})
    assert a.get().generation_id == 2


def test_group_configs_reject_unknown_keys_and_malformed_lists() -> None:
    h = Harness()
    with pytest.raises(CoordinatorError) as unknown:
        h.coordinator.alter_group_config("g", {"consumer.session.timeout.ms": "1"})
    assert unknown.value.code == E.invalid_config and "Unknown group config" in str(unknown.value)
    with pytest.raises(CoordinatorError, match="twice"):
        h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: "a,a"})
    with pytest.raises(CoordinatorError, match="empty instance id"):
        h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: "a,,b"})
    assert h.coordinator.describe_group_config("g") == {}


def test_group_configs_are_durable() -> None:
    h = Harness()
    h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: " a , b"})
    assert h.coordinator.describe_group_config("g") == {EXPECTED_INSTANCE_IDS: "a,b"}
    r = Harness()
    r.coordinator.load(h.store.records)
    assert r.coordinator.describe_group_config("g") == {EXPECTED_INSTANCE_IDS: "a,b"}


def _consumer_protocols(*topics: str) -> tuple[Protocol, ...]:
    return (Protocol("range", encode_subscription(Subscription(1, topics))),)


def test_partition_growth_of_a_subscribed_topic_rebalances_a_stable_consumer_group() -> None:
    h = Harness(rebalance_on_partition_growth=True)
    h.stable_static_group("a", "b", protocols=_consumer_protocols("orders", "payments"))
    h.stable_static_group("x", group="other", protocols=_consumer_protocols("audit"))
    assert h.coordinator.on_partitions_changed("orders") == ["g"]
    assert h.state("g") is GroupState.PREPARING_REBALANCE
    assert h.state("other") is GroupState.STABLE
    assert h.events.of_type("rebalance_started")[-1]["reason"] == "partitions-changed"


def test_partition_growth_is_ignored_unless_enabled() -> None:
    h = Harness()
    h.stable_static_group("a", protocols=_consumer_protocols("orders"))
    assert h.coordinator.on_partitions_changed("orders") == []
    assert h.state() is GroupState.STABLE
