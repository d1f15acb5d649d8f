"""When a pass applies a fleet's children again (applied.py)."""

from __future__ import annotations

from typing import Any

from staticfleet.kube.applied import REAPPLY_S, Applied, needs_apply, spec_version

CHILDREN: tuple[dict[str, Any], ...] = ({"kind": "StatefulSet", "spec": {"replicas": 3}}, {"kind": "Service"})


def statefulset(
    version: str = "7",
    *,
    generation: int = 2,
    uid: str = "u1",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    ready: int = 3,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"resourceVersion": version, "generation": generation, "uid": uid}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": {"replicas": 3}, "status": {"readyReplicas": ready}}


def applied_over(observed: dict[str, Any], at: float = 100.0) -> Applied:
    return Applied(CHILDREN, spec_version(observed) or "", at=at)


def test_children_never_applied_by_this_process_are_applied() -> None:
    assert needs_apply(None, CHILDREN, statefulset(), now=0.0)


def test_the_same_children_over_an_unchanged_statefulset_are_not_applied_again() -> None:
    last = applied_over(statefulset())
    assert not needs_apply(last, CHILDREN, statefulset(), now=100.0 + REAPPLY_S - 1)


def test_a_status_written_by_the_controller_since_is_not_a_change() -> None:
    # A rollout: the controller writes the StatefulSet's status on every pod change (a new resourceVersion).
    last = applied_over(statefulset("7", ready=3))
    assert not needs_apply(last, CHILDREN, statefulset("8", ready=2), now=101.0)


def test_children_that_differ_from_the_last_applied_are_applied() -> None:
    last = applied_over(statefulset())
    scaled = ({"kind": "StatefulSet", "spec": {"replicas": 4}}, {"kind": "Service"})
    assert needs_apply(last, scaled, statefulset(), now=101.0)


def test_a_statefulset_someone_changed_since_the_last_apply_gets_it_again() -> None:
    last = applied_over(statefulset())
    assert needs_apply(last, CHILDREN, statefulset("8", generation=3), now=101.0)  # a scale, an edit
    assert needs_apply(last, CHILDREN, statefulset("8", labels={"team": "x"}), now=101.0)
    assert needs_apply(last, CHILDREN, statefulset("8", annotations={"note": "x"}), now=101.0)
    assert needs_apply(last, CHILDREN, statefulset("9", uid="u2", generation=1), now=101.0)  # made again
    assert needs_apply(last, CHILDREN, None, now=101.0)  # deleted


def test_everything_is_applied_again_once_a_minute() -> None:
    last = applied_over(statefulset())
    assert needs_apply(last, CHILDREN, statefulset(), now=100.0 + REAPPLY_S)
