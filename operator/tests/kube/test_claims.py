from __future__ import annotations

from staticfleet.kube.claims import Claim, conflicting_owner, owner


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
