"""The CRD manifest: structural, complete, and in agreement with the operator's defaults; the sample
resources in examples/ are valid against its schema. (CEL rules are exercised against a real API server
in e2e/tests/operator/test_validation.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from staticfleet.admin.instance_ids import MAX_MEMBERS_PER_POD
from staticfleet.kube import spec as specmod

ROOT = Path(__file__).resolve().parents[3]
CRD_PATH = ROOT / "crds" / "staticconsumergroups.staticfleet.io.yaml"


def load_crd() -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
    return crd


def version() -> dict[str, Any]:
    (served,) = load_crd()["spec"]["versions"]
    return dict(served)


def schema() -> dict[str, Any]:
    return dict(version()["schema"]["openAPIV3Schema"])


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def json_schema(node: Any) -> Any:
    """OpenAPI v3 as JSON Schema: drop the Kubernetes extensions (no CEL here)."""
    if isinstance(node, dict):
        return {k: json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes")}
    if isinstance(node, list):
        return [json_schema(v) for v in node]
    return node


def samples() -> list[dict[str, Any]]:
    found = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == specmod.KIND:
                found.append(doc)
    return found


def test_names_group_and_version_match_the_operator() -> None:
    crd = load_crd()
    assert crd["metadata"]["name"] == f"{specmod.PLURAL}.{specmod.GROUP}"
    assert crd["spec"]["group"] == specmod.GROUP
    assert crd["spec"]["scope"] == "Namespaced"
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == (specmod.KIND, specmod.PLURAL, ["scg"])
    assert version()["name"] == specmod.VERSION


def test_scale_subresource_points_at_replicas_and_a_string_selector() -> None:
    sub = version()["subresources"]
    assert sub["status"] == {}
    assert sub["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    status = schema()["properties"]["status"]["properties"]
    assert status["selector"]["type"] == "string"  # HPA needs a serialized selector, not an object


def test_default_printer_columns_show_the_ready_condition_beside_replicas_pods_state_and_lag() -> None:
    columns = {
        c["name"]: c["jsonPath"] for c in version()["additionalPrinterColumns"] if not c.get("priority")
    }
    assert columns == {
        "Replicas": ".spec.replicas",
        "Ready": '.status.conditions[?(@.type=="Ready")].status',
        "Ready-Pods": ".status.readyReplicas",
        "State": ".status.group.state",
        "Generation": ".status.group.generation",
        "Rebalances": ".status.group.rebalances",
        "Lag": ".status.lag.total",
        "Age": ".metadata.creationTimestamp",
    }


def test_the_schema_is_structural_every_node_has_a_type() -> None:
    missing = [path for path, node in walk(schema()) if "type" not in node]
    assert missing == []


def test_every_spec_field_is_described() -> None:
    spec_schema = schema()["properties"]["spec"]
    opaque = (".template.", ".volumeClaimTemplates")  # Kubernetes' own types, documented there
    undocumented = [
        path
        for path, node in walk(spec_schema)
        if path and "[]" not in path and not path.startswith(opaque) and not node.get("description")
    ]
    assert undocumented == []


def test_every_property_of_spec_and_status_and_every_item_is_described() -> None:
    """`kubectl explain staticconsumergroup.status...` answers for every field, the items of lists and
    maps too."""
    # The API server refuses anything but a type on metadata (kubectl explain describes it anyway).
    undocumented = [
        path for path, node in walk(schema()) if path not in ("", ".metadata") and not node.get("description")
    ]
    assert undocumented == []


def test_every_timestamp_is_a_date_time() -> None:
    """A field that holds a moment (…At, …Since, time, lastTransitionTime) says so: clients parse it, and
    the API server refuses anything else."""
    moments = [
        path
        for path, node in walk(schema())
        if path.rsplit(".", 1)[-1].endswith(("At", "Since", "Time")) or path.endswith(".time")
    ]
    assert len(moments) >= 8
    assert [path for path in moments if schema_at(path).get("format") != "date-time"] == []


def schema_at(path: str) -> dict[str, Any]:
    return dict(next(node for found, node in walk(schema()) if found == path))


def test_every_validation_rule_has_a_message() -> None:
    rules = [(path, r) for path, node in walk(schema()) for r in node.get("x-kubernetes-validations", [])]
    assert len(rules) >= 15
    assert all(r.get("message") for _, r in rules)


def test_defaults_agree_with_the_operator() -> None:
    props = schema()["properties"]["spec"]["properties"]
    assert props["sessionTimeoutMs"]["default"] == specmod.DEFAULT_SESSION_TIMEOUT_MS
    assert props["instanceIdTemplate"]["default"] == specmod.DEFAULT_INSTANCE_ID_TEMPLATE
    assert props["scaleDown"]["properties"]["removeMembers"]["default"] == specmod.IMMEDIATE
    assert props["scaleDown"]["properties"]["removeMembers"]["enum"] == [
        specmod.IMMEDIATE,
        specmod.AFTER_SESSION_TIMEOUT,
    ]
    assert props["deletionPolicy"]["default"] == specmod.REMOVE_MEMBERS
    assert props["deletionPolicy"]["enum"] == [specmod.REMOVE_MEMBERS, specmod.RETAIN]
    assert props["scaleUp"]["properties"]["preRegister"]["default"] is True
    assert props["replicas"]["default"] == 1
    assert props["membersPerPod"]["default"] == 1
    assert props["membersPerPod"]["maximum"] == MAX_MEMBERS_PER_POD
    assert props["assignmentStrategy"]["enum"] == list(specmod.ASSIGNMENT_STRATEGIES)
    assert props["groupProtocol"]["enum"] == list(specmod.GROUP_PROTOCOLS)
    assert props["groupProtocol"]["default"] == specmod.CLASSIC_PROTOCOL
    status = schema()["properties"]["status"]["properties"]
    from staticfleet.kube.scaling import ScalePhase

    assert status["scaleDown"]["properties"]["phase"]["enum"] == [p.value for p in ScalePhase]


def test_the_samples_are_valid_and_parse() -> None:
    found = samples()
    assert len(found) >= 2
    validator = jsonschema.Draft7Validator(json_schema(schema()))
    for doc in found:
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        assert errors == [], f"{doc['metadata']['name']}: {[e.message for e in errors]}"
        parsed = specmod.parse_group({**doc, "metadata": {**doc["metadata"], "namespace": "default"}})
        assert parsed.topics


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"replicas": "three"}, "is not of type 'integer'"),
        ({"scaleDown": {"removeMembers": "Later"}}, "is not one of"),
        ({"deletionPolicy": "Keep"}, "is not one of"),
        ({"assignmentStrategy": "sticky"}, "is not one of"),
        ({"groupProtocol": "streams"}, "is not one of"),
        ({"kafka": {"sasl": {"secretName": "s", "mechanism": "GSSAPI"}}}, "is not one of"),
        ({"topics": "orders"}, "is not of type 'array'"),
        ({"membersPerPod": 65}, "is greater than the maximum of 64"),
        ({"membersPerPod": "two"}, "is not of type 'integer'"),
    ],
)
def test_the_schema_rejects_wrong_types_and_values(change: dict[str, Any], fragment: str) -> None:
    doc = samples()[0]
    bad = {**doc, "spec": {**doc["spec"], **change}}
    messages = [e.message for e in jsonschema.Draft7Validator(json_schema(schema())).iter_errors(bad)]
    assert any(fragment in m for m in messages), messages
