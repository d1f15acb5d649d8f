"""e2e.helpers.established: when a CRD counts as served, including the moment before the API server has
written any condition (where `kubectl wait --for=condition=Established` fails instead of waiting)."""

from __future__ import annotations

from e2e.helpers import established


def test_a_new_crd_without_conditions_is_not_established_yet() -> None:
    assert not established({"metadata": {"name": "x"}})
    assert not established({"status": None})
    assert not established({"status": {"conditions": None}})


def test_only_a_true_established_condition_counts() -> None:
    names_accepted = {"type": "NamesAccepted", "status": "True"}
    assert not established({"status": {"conditions": [names_accepted]}})
    assert not established({"status": {"conditions": [{"type": "Established", "status": "False"}]}})
    served = {"type": "Established", "status": "True"}
    assert established({"status": {"conditions": [names_accepted, served]}})
