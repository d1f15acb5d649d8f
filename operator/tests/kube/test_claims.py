from __future__ import annotations

from staticfleet.kube.claims import Claim, conflicting_owner, owner, servers_key


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
