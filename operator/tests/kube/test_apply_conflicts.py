"""Server-side applies of the children: another staticfleet operator's fields raise ApplyConflict, anyone
else's are taken back with force."""

from __future__ import annotations

from typing import Any

import pytest

from staticfleet.kube.kubeapi import (
    ApplyConflict,
    KubeApi,
    KubeError,
    conflicting_managers,
    is_operator_manager,
)

SCALE_CONFLICT = (
    "PATCH /apis/apps/v1/namespaces/shop/statefulsets/orders: HTTP 409: Apply failed with 1 conflict: "
    'conflict with "kubectl-scale" using apps/v1: .spec.replicas'
)
PEER_CONFLICT = (
    'Apply failed with 2 conflicts: conflicts with "staticfleet-operator/ops/blue" using apps/v1:\n'
    '- .spec.template.spec.containers[name="consumer"].env[name="KAFKA_BOOTSTRAP_SERVERS"].value'
)


class ScriptedApi(KubeApi):
    """KubeApi with its applies answered from a script (no API server)."""

    def __init__(self, field_manager: str, answers: list[KubeError | None]) -> None:
        self.field_manager = field_manager
        self.answers = answers
        self.forced: list[bool] = []

    def _apply(self, manifest: dict[str, Any], *, force: bool) -> dict[str, Any]:
        self.forced.append(force)
        answer = self.answers.pop(0)
        if answer is not None:
            raise answer
        return manifest


def test_the_managers_a_conflict_names() -> None:
    assert conflicting_managers(SCALE_CONFLICT) == ("kubectl-scale",)
    assert conflicting_managers(PEER_CONFLICT) == ("staticfleet-operator/ops/blue",)
    assert is_operator_manager("staticfleet-operator") and is_operator_manager("staticfleet-operator/a")
    assert not is_operator_manager("staticfleet-operator-x") and not is_operator_manager("kubectl-scale")


def test_fields_of_kubectl_are_taken_back_with_force() -> None:
    api = ScriptedApi("staticfleet-operator/ops/green", [KubeError(409, SCALE_CONFLICT), None])
    api.apply({"kind": "StatefulSet"})
    assert api.forced == [False, True]


def test_fields_of_another_operator_are_a_conflict_and_not_forced() -> None:
    api = ScriptedApi("staticfleet-operator/ops/green", [KubeError(409, PEER_CONFLICT)])
    with pytest.raises(ApplyConflict) as raised:
        api.apply({"kind": "StatefulSet"})
    assert raised.value.managers == ("staticfleet-operator/ops/blue",)
    assert api.forced == [False]


def test_an_apply_without_conflict_is_not_forced() -> None:
    api = ScriptedApi("staticfleet-operator", [None])
    api.apply({"kind": "Service"})
    assert api.forced == [False]
