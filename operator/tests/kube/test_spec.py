from __future__ import annotations

import pytest

from staticfleet.kube.spec import (
    AFTER_SESSION_TIMEOUT,
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
    IMMEDIATE,
    REMOVE_MEMBERS,
    MemberPlace,
    OperatorDefaults,
    SpecError,
    parse_group,
)

from .fixtures import group_spec, resource


def test_defaults_apply_when_fields_are_absent() -> None:
    spec = group_spec()
    assert spec.group_id == "shop.orders"
    assert spec.session_timeout_ms == DEFAULT_SESSION_TIMEOUT_MS == 120_000
    assert spec.instance_id_template == "{pod}"
    assert spec.remove_members == IMMEDIATE
    assert spec.pre_register is True
    assert spec.deletion_policy == REMOVE_MEMBERS
    assert spec.rebalance_timeout_ms is None and spec.heartbeat_interval_ms == 250
    assert spec.assignment_strategy is None
    assert spec.security_protocol == "PLAINTEXT"


def test_the_assignment_strategy_is_one_of_librdkafkas_names() -> None:
    assert group_spec(assignmentStrategy="cooperative-sticky").assignment_strategy == "cooperative-sticky"
    with pytest.raises(SpecError, match="assignmentStrategy must be one of range, roundrobin"):
        group_spec(assignmentStrategy="org.apache.kafka.clients.consumer.StickyAssignor")


def test_instance_ids_follow_the_template() -> None:
    assert group_spec().member_ids(0, 3) == ("orders-0", "orders-1", "orders-2")
    spec = group_spec(instanceIdTemplate="{namespace}.{name}-{ordinal}")
    assert spec.member_ids(1, 3) == ("shop.orders-1", "shop.orders-2")


def test_one_member_per_pod_is_the_default_and_its_member_is_the_pods_own_instance_id() -> None:
    spec = group_spec()
    assert spec.members_per_pod == 1
    assert spec.pod_member_ids(3) == ("orders-3",) == (spec.instance_id(3),)


def test_several_members_per_pod_take_kafka_streams_thread_suffixes_from_one() -> None:
    spec = group_spec(membersPerPod=2)
    assert spec.instance_id(3) == "orders-3"  # KAFKA_GROUP_INSTANCE_ID stays the pod's own id
    assert spec.pod_member_ids(3) == ("orders-3-1", "orders-3-2")
    assert spec.member_ids(0, 2) == ("orders-0-1", "orders-0-2", "orders-1-1", "orders-1-2")
    templated = group_spec(membersPerPod=3, instanceIdTemplate="{namespace}-{pod}")
    assert templated.pod_member_ids(0) == ("shop-orders-0-1", "shop-orders-0-2", "shop-orders-0-3")


def test_members_per_pod_outside_one_to_sixty_four_is_refused() -> None:
    for wrong in (0, 65):
        with pytest.raises(SpecError, match="membersPerPod must be between 1 and 64"):
            group_spec(membersPerPod=wrong)


def test_an_instance_id_is_located_at_its_pod_and_member_whatever_the_members_per_pod() -> None:
    ids = group_spec(membersPerPod=2).ids
    assert ids.locate("orders-3-2") == MemberPlace(3, 2)
    assert ids.locate("orders-3") == MemberPlace(3, None)  # the pod's own id, as a one-member pod uses it
    assert ids.locate("orders-12-7") == MemberPlace(12, 7)
    for foreign in ("orders", "orders-03", "orders-3-0", "orders-3-02", "billing-3-1", "orders-3-1-1"):
        assert ids.locate(foreign) is None, foreign
    templated = group_spec(membersPerPod=2, instanceIdTemplate="{namespace}.{ordinal}.x").ids
    assert templated.locate("shop.4.x-1") == MemberPlace(4, 1)
    assert templated.locate("other.4.x-1") is None


def test_a_fleet_expects_its_pods_members_only() -> None:
    two = group_spec(membersPerPod=2).ids
    assert two.expects(MemberPlace(2, 2), replicas=3)
    assert not two.expects(MemberPlace(3, 1), replicas=3), "beyond the replicas"
    assert not two.expects(MemberPlace(2, 3), replicas=3), "a third member of a pod of two"
    assert not two.expects(MemberPlace(2, None), replicas=3), "the pod's own id is no member of a pod of two"
    one = group_spec().ids
    assert one.expects(MemberPlace(2, None), replicas=3)
    assert not one.expects(MemberPlace(2, 1), replicas=3)


def test_operator_defaults_fill_the_bootstrap_servers_and_the_coordinator_api() -> None:
    body = resource()
    del body["spec"]["kafka"]
    defaults = OperatorDefaults("coordinator.staticfleet:9092", "http://coordinator.staticfleet:8080/")
    spec = parse_group(body, defaults)
    assert spec.bootstrap_servers == "coordinator.staticfleet:9092"
    assert spec.coordinator_api == "http://coordinator.staticfleet:8080"


def test_the_default_coordinator_api_is_not_used_for_another_cluster() -> None:
    spec = group_spec(OperatorDefaults("coordinator:9092", "http://coordinator:8080"))
    assert spec.bootstrap_servers == "kafka:9092"
    assert spec.coordinator_api is None


def test_security_protocol_follows_tls_and_sasl() -> None:
    sasl = {"secretName": "creds"}
    tls = {"secretName": "ca"}
    assert group_spec(kafka={"bootstrapServers": "k:9093", "tls": tls}).security_protocol == "SSL"
    assert (
        group_spec(kafka={"bootstrapServers": "k:9093", "sasl": sasl}).security_protocol == "SASL_PLAINTEXT"
    )
    both = group_spec(kafka={"bootstrapServers": "k:9093", "sasl": sasl, "tls": tls})
    assert both.security_protocol == "SASL_SSL"
    assert both.sasl is not None and both.sasl.mechanism == "SCRAM-SHA-512"


def test_a_resource_without_topics_is_rejected() -> None:
    with pytest.raises(SpecError, match="topics"):
        group_spec(topics=[])


def test_scale_down_mode_is_read() -> None:
    assert (
        group_spec(scaleDown={"removeMembers": AFTER_SESSION_TIMEOUT}).remove_members == AFTER_SESSION_TIMEOUT
    )


def test_a_fleet_whose_scale_ups_are_pre_registered_heartbeats_every_quarter_second() -> None:
    api = {"bootstrapServers": "coordinator:9092", "coordinatorApi": "http://coordinator:8080"}
    assert group_spec(kafka=api).heartbeat_interval_ms == DEFAULT_HEARTBEAT_INTERVAL_MS == 250
    assert group_spec(kafka=api, heartbeatIntervalMs=3_000).heartbeat_interval_ms == 3_000
    # Never a third of the session timeout or more, which the clients would refuse.
    assert group_spec(kafka=api, sessionTimeoutMs=600).heartbeat_interval_ms == 200
    # The operator's default coordinator is the embedded one, with its API.
    defaults = OperatorDefaults(
        bootstrap_servers="coordinator:9092", coordinator_api="http://coordinator:8080"
    )
    assert parse_group(resource(kafka=None), defaults).heartbeat_interval_ms == 250
    # Apache Kafka: the operator holds the join phase instead, so the same default applies.
    assert group_spec(kafka={"bootstrapServers": "kafka:9092"}).heartbeat_interval_ms == 250
    # Without pre-registration nothing holds a scale-up's join phase: the client's default stays.
    assert group_spec(kafka=api, scaleUp={"preRegister": False}).heartbeat_interval_ms is None
