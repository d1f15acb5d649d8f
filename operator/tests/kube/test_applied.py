"""When a pass applies a fleet's children again (applied.py)."""

from __future__ import annotations

from typing import Any

from staticfleet.kube.applied import REAPPLY_S, Applied, needs_apply

CHILDREN: tuple[dict[str, Any], ...] = ({"kind": "StatefulSet", "spec": {"replicas": 3}}, {"kind": "Service"})


def statefulset(version: str) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version}, "spec": {"replicas": 3}}


def test_children_never_applied_by_this_process_are_applied() -> None:
    assert needs_apply(None, CHILDREN, statefulset("7"), now=0.0)


def test_the_same_children_over_an_unchanged_statefulset_are_not_applied_again() -> None:
    last = Applied(CHILDREN, "7", at=100.0)
    assert not needs_apply(last, CHILDREN, statefulset("7"), now=100.0 + REAPPLY_S - 1)


def test_children_that_differ_from_the_last_applied_are_applied() -> None:
    last = Applied(CHILDREN, "7", at=100.0)
    scaled = ({"kind": "StatefulSet", "spec": {"replicas": 4}}, {"kind": "Service"})
    assert needs_apply(last, scaled, statefulset("7"), now=101.0)


def test_a_statefulset_changed_since_the_last_apply_gets_it_again() -> None:
    last = Applied(CHILDREN, "7", at=100.0)
    assert needs_apply(last, CHILDREN, statefulset("8"), now=101.0)
    assert needs_apply(last, CHILDREN, None, now=101.0)  # deleted


def test_everything_is_applied_again_once_a_minute() -> None:
    last = Applied(CHILDREN, "7", at=100.0)
    assert needs_apply(last, CHILDREN, statefulset("7"), now=100.0 + REAPPLY_S)
