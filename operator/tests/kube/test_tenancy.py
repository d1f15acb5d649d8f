"""Which topics and group ids a namespace's fleets may claim: the StaticFleetTenancyPolicy rules, pure
(a pass against them: test_access.py; the real API server and coordinator: e2e/tests/operator)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from staticfleet.kube.tenancy import (
    NamePattern,
    NamespaceSelector,
    PolicyError,
    Requirement,
    Tenancy,
    TenancyPolicy,
    parse_policy,
)

from .fixtures import group_spec

CRD = Path(__file__).resolve().parents[3] / "crds" / "staticfleettenancypolicies.staticfleet.io.yaml"


def policy(name: str = "p", selector: dict[str, Any] | None = None, **spec: Any) -> TenancyPolicy:
    return parse_policy({"metadata": {"name": name}, "spec": {"namespaceSelector": selector or {}, **spec}})


def team(name: str) -> dict[str, Any]:
    return {"matchLabels": {"team": name}}


def test_without_a_policy_a_namespace_claims_only_names_that_start_with_its_name_and_a_dot() -> None:
    tenancy = Tenancy()
    assert tenancy.allows_topic("shop", "shop.orders") and tenancy.allows_group("shop", "shop.orders")
    assert tenancy.allows_topic("shop", "shop.eu.orders")
    for other in ("orders", "shop", "shop-eu.orders", "shopping.orders", "shop_orders", "eu.shop.orders"):
        assert not tenancy.allows_topic("shop", other), other
        assert not tenancy.allows_group("shop", other), other


def test_a_policy_adds_literal_and_prefixed_names_for_the_namespaces_it_selects() -> None:
    tenancy = Tenancy.of(
        [
            policy(
                selector=team("payments"),
                topics=[{"name": "orders"}, {"name": "audit.", "patternType": "Prefixed"}],
                groupIds=[{"name": "legacy-billing", "patternType": "Literal"}],
            )
        ],
        {"shop": {"team": "payments"}, "blog": {"team": "content"}},
    )
    assert tenancy.allows_topic("shop", "orders") and tenancy.allows_topic("shop", "audit.2026")
    assert not tenancy.allows_topic("shop", "orders-eu"), "a literal name is that name only"
    assert not tenancy.allows_topic("shop", "audit"), "a prefix does not allow itself without the rest"
    assert tenancy.allows_group("shop", "legacy-billing") and not tenancy.allows_group("shop", "orders")
    assert not tenancy.allows_topic("blog", "orders"), "the policy does not select blog"
    assert tenancy.allows_topic("shop", "shop.refunds"), "policies only add: the own prefix stays"


def test_a_literal_star_allows_every_name_and_a_star_prefix_only_names_that_start_with_a_star() -> None:
    assert NamePattern("*").matches("anything") and NamePattern("*").matches("*")
    assert not NamePattern("*", prefixed=True).matches("anything")
    tenancy = Tenancy.of([policy(topics=[{"name": "*"}])], {})
    assert tenancy.allows_topic("any", "whatever") and not tenancy.allows_group("any", "whatever")


def test_several_policies_selecting_a_namespace_add_up() -> None:
    tenancy = Tenancy.of(
        [
            policy("a", team("payments"), topics=[{"name": "orders"}]),
            policy(
                "b",
                {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
                topics=[{"name": "refunds"}],
            ),
        ],
        {"shop": {"team": "payments", "env": "prod"}},
    )
    assert tenancy.refusal(group_spec(topics=["orders", "refunds"])) is None
    assert [p.name for p in tenancy.policies_for("shop")] == ["a", "b"]


@pytest.mark.parametrize(
    ("requirement", "labels", "selected"),
    [
        (Requirement("env", "In", frozenset({"prod", "stage"})), {"env": "stage"}, True),
        (Requirement("env", "In", frozenset({"prod"})), {}, False),
        (Requirement("env", "NotIn", frozenset({"prod"})), {"env": "dev"}, True),
        (Requirement("env", "NotIn", frozenset({"prod"})), {}, True),
        (Requirement("env", "NotIn", frozenset({"prod"})), {"env": "prod"}, False),
        (Requirement("env", "Exists"), {"env": ""}, True),
        (Requirement("env", "Exists"), {}, False),
        (Requirement("env", "DoesNotExist"), {}, True),
        (Requirement("env", "DoesNotExist"), {"env": "x"}, False),
    ],
)
def test_selector_expressions_follow_kubernetes_label_selectors(
    requirement: Requirement, labels: dict[str, str], selected: bool
) -> None:
    assert NamespaceSelector((), (requirement,)).selects(labels) is selected


def test_an_empty_selector_selects_every_namespace_and_every_namespace_has_its_name_label() -> None:
    assert NamespaceSelector().selects({})
    by_name = policy(
        selector={"matchLabels": {"kubernetes.io/metadata.name": "shop"}}, topics=[{"name": "o"}]
    )
    tenancy = Tenancy.of([by_name], {})  # the namespace itself not seen: its name label still counts
    assert tenancy.allows_topic("shop", "o") and not tenancy.allows_topic("blog", "o")


def test_a_refusal_names_each_name_refused_and_the_policies_that_select_the_namespace() -> None:
    spec = group_spec(groupId="payments.orders", topics=["shop.orders", "payments.ledger", "audit"])
    refusal = Tenancy().refusal(spec)
    assert refusal is not None and refusal.reason == "TenancyDenied"
    assert "group id payments.orders, topic payments.ledger, topic audit" in refusal.message
    assert "no StaticFleetTenancyPolicy selects it" in refusal.message and "'shop.'" in refusal.message
    selected = Tenancy.of(
        [policy("shop-extra", team("payments"), topics=[{"name": "audit"}])], {"shop": {"team": "payments"}}
    )
    refusal = selected.refusal(spec)
    assert refusal is not None and "audit" not in refusal.message.split(":")[0]
    assert "(shop-extra)" in refusal.message
    assert Tenancy().refusal(group_spec(topics=["shop.orders"])) is None, "the default group shop.orders"


def test_output_topics_are_claimed_as_topics_and_internal_topics_as_the_group_ids_prefix() -> None:
    streams = {"outputTopics": ["shop.counts"], "internalTopics": True}
    assert Tenancy().refusal(group_spec(topics=["shop.orders"], kafka={"access": streams})) is None
    spec = group_spec(topics=["shop.orders"], kafka={"access": {"outputTopics": ["audit"]}})
    refusal = Tenancy().refusal(spec)
    assert refusal is not None and "output topic audit" in refusal.message
    # A group id allowed by a literal name: its internal topics need a prefix (or `*`) that covers them.
    legacy = group_spec(groupId="legacy", topics=["shop.orders"], kafka={"access": {"internalTopics": True}})
    literal = Tenancy.of([policy("l", groupIds=[{"name": "legacy"}])], {})
    refusal = literal.refusal(legacy)
    assert refusal is not None and "the internal topics legacy-*" in refusal.message
    for topics in ([{"name": "leg", "patternType": "Prefixed"}], [{"name": "*"}]):
        covered = Tenancy.of([policy("l", groupIds=[{"name": "legacy"}], topics=topics)], {})
        assert covered.refusal(legacy) is None, topics
    narrower = Tenancy.of(
        [
            policy(
                "l", groupIds=[{"name": "legacy"}], topics=[{"name": "legacy-x", "patternType": "Prefixed"}]
            )
        ],
        {},
    )
    assert narrower.refusal(legacy) is not None, "a prefix narrower than legacy- does not cover them all"


def test_a_policy_without_a_selector_or_with_an_unknown_pattern_type_is_refused() -> None:
    with pytest.raises(PolicyError, match="namespaceSelector is required"):
        parse_policy({"metadata": {"name": "p"}, "spec": {}})
    with pytest.raises(PolicyError, match="patternType Glob"):
        policy(topics=[{"name": "x", "patternType": "Glob"}])
    assert policy(topics=[{"name": "x"}]).topics == (NamePattern("x"),), "Literal by default"


def test_the_crd_names_the_fields_the_operator_reads() -> None:
    crd = yaml.safe_load(CRD.read_text())
    assert crd["spec"]["scope"] == "Cluster"
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["namespaceSelector"]
    for field in ("topics", "groupIds"):
        entry = spec["properties"][field]["items"]["properties"]
        assert entry["patternType"]["enum"] == ["Literal", "Prefixed"]
        assert entry["patternType"]["default"] == "Literal"
