from __future__ import annotations

from staticfleet.kube.claims import (
    Claim,
    conflicting_owner,
    describe_shared,
    owner,
    servers_key,
    shared_instance_ids,
)
from staticfleet.kube.spec import InstanceIds

from .fixtures import group_spec


def test_the_oldest_claim_owns_the_group() -> None:
    first = Claim("2026-11-22T10:00:00Z", "b", "late-name")
    second = Claim("2026-11-22T10:00:05Z", "a", "early-name")
    assert owner([second, first]) == first
    assert conflicting_owner([first, second], "a", "early-name") == first
    assert conflicting_owner([first, second], "b", "late-name") is None


def test_ties_on_time_are_broken_by_namespace_then_name() -> None:
    a = Claim("2026-11-22T10:00:00Z", "ns", "a")
    b = Claim("2026-11-22T10:00:00Z", "ns", "b")
    assert conflicting_owner([b, a], "ns", "b") == a


def test_a_lone_claim_has_no_conflict() -> None:
    assert conflicting_owner([], "ns", "a") is None
    assert conflicting_owner([Claim("t", "ns", "a")], "ns", "a") is None


def test_servers_keys_ignore_order_and_case() -> None:
    assert servers_key("B:9092, a:9092") == servers_key("a:9092,b:9092")
    assert servers_key("a:9092") != servers_key("a:9093")


def test_two_addresses_of_one_cluster_are_one_claim_once_the_cluster_id_is_known() -> None:
    first = Claim("2026-11-22T10:00:00Z", "ns", "first", "cluster-x", "coordinator:9092")
    second = Claim("2026-11-22T10:00:05Z", "ns", "second", None, "coordinator.ns.svc.cluster.local:9092")
    claims = [first, second]
    fqdn = "coordinator.ns.svc.cluster.local:9092"
    assert conflicting_owner(claims, "ns", "second", "cluster-x", fqdn) == first
    assert conflicting_owner(claims, "ns", "second", "cluster-y", fqdn) is None  # another cluster
    assert conflicting_owner(claims, "ns", "second", None, fqdn) is None  # not reached yet: the text
    assert conflicting_owner(claims, "ns", "first", "cluster-x", "coordinator:9092") is None


def test_a_claim_that_learns_its_cluster_id_is_a_new_index_value() -> None:
    # kopf's index keeps a value that compares equal to the new one: the cluster id must count.
    assert Claim("t", "ns", "a") != Claim("t", "ns", "a", "cluster-x")


def claim_of_fleet(name: str, replicas: int, members_per_pod: int = 1, namespace: str = "shop") -> Claim:
    spec = group_spec(replicas=replicas, membersPerPod=members_per_pod, groupId="shop.orders")
    ids = InstanceIds(name, namespace, spec.instance_id_template, members_per_pod)
    return Claim("2026-11-22T10:00:00Z", namespace, name, ids=ids, replicas=replicas)


def test_a_member_id_of_one_fleet_equal_to_a_pods_own_id_of_another_is_shared() -> None:
    streams = group_spec(replicas=3, membersPerPod=2)  # orders: orders-1-1, orders-1-2, ...
    single = claim_of_fleet("orders-1", replicas=3)  # orders-1: pods orders-1-0, orders-1-1, orders-1-2
    assert shared_instance_ids(streams, single) == ("orders-1-1", "orders-1-2")
    described = describe_shared(streams, single, ("orders-1-1",))
    assert described == "orders-1-1 (member 1 of pod orders-1 here, pod orders-1-1's own id in shop/orders-1)"


def test_fleets_whose_members_are_named_apart_share_no_instance_id() -> None:
    assert shared_instance_ids(group_spec(replicas=3, membersPerPod=2), claim_of_fleet("billing", 3)) == ()
    assert shared_instance_ids(group_spec(replicas=3), claim_of_fleet("orders-1", 3, members_per_pod=2)) == ()
    assert shared_instance_ids(group_spec(replicas=3), Claim("t", "shop", "orders")) == (), "rule unknown"


def test_two_fleets_of_one_name_in_two_namespaces_share_the_ids_their_replicas_have_in_common() -> None:
    spec = group_spec(replicas=3, membersPerPod=2)
    other = claim_of_fleet("orders", replicas=1, members_per_pod=2, namespace="billing")
    assert shared_instance_ids(spec, other) == ("orders-0-1", "orders-0-2")
    many = claim_of_fleet("orders", replicas=9, members_per_pod=2, namespace="billing")
    assert describe_shared(spec, many, shared_instance_ids(spec, many)).endswith(" and 1 more")
