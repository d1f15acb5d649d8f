"""Which topics and consumer group ids a namespace's fleets may claim (StaticFleetTenancyPolicy).

Every namespace may claim the names that start with `<namespace>.`: the default group id of a fleet is
`<namespace>.<name>`, and a namespace name has no dot, so no other namespace's names start that way (with
`-` they would: namespace `shop` would own `shop-eu-orders` of namespace `shop-eu`). Cluster-scoped
policies add more, each for the namespaces its label selector picks: literal names, prefixes, or `*`
(everything), as Kafka's ACL patterns. Policies only add; none takes a name away.

A fleet that names a topic or group id its namespace may not claim is refused: the operator gives it no
Kafka user and no ACL (revoking those it had), does not act on its group, and says why in its Degraded
condition. Otherwise anyone who may create a StaticConsumerGroup in one namespace would obtain, through
the operator, READ on another namespace's topics, or remove another namespace's members.

Everything here is pure: the snapshot of policies and namespace labels comes from the operator's watches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from staticfleet.kube.limits import Refusal
from staticfleet.kube.spec import GROUP, GroupSpec

TENANCY_PLURAL = "staticfleettenancypolicies"
TENANCY_KIND = "StaticFleetTenancyPolicy"
TENANCY_CRD = f"{TENANCY_PLURAL}.{GROUP}"
TENANCY_DENIED = "TenancyDenied"
LITERAL = "Literal"
PREFIXED = "Prefixed"
ANY_NAME = "*"
NAME_LABEL = "kubernetes.io/metadata.name"


class PolicyError(ValueError):
    """A policy object the operator cannot read (the CRD's schema normally prevents it)."""


@dataclass(frozen=True, slots=True)
class NamePattern:
    """A topic or group id pattern, as Kafka's ACL resource patterns: LITERAL (`*`: every name) or
    PREFIXED."""

    name: str
    prefixed: bool = False

    def matches(self, value: str) -> bool:
        if self.prefixed:
            return value.startswith(self.name)
        return self.name == ANY_NAME or self.name == value

    def describe(self) -> str:
        return f"{self.name}*" if self.prefixed else self.name


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        return False  # an unknown operator selects nothing


@dataclass(frozen=True, slots=True)
class NamespaceSelector:
    """A metav1.LabelSelector: every matchLabels entry and every expression must hold; empty selects
    every namespace."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    def selects(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            r.matches(labels) for r in self.expressions
        )


@dataclass(frozen=True, slots=True)
class TenancyPolicy:
    name: str
    selector: NamespaceSelector
    topics: tuple[NamePattern, ...] = ()
    group_ids: tuple[NamePattern, ...] = ()


def _patterns(entries: Any, what: str, policy: str) -> tuple[NamePattern, ...]:
    found = []
    for entry in entries or []:
        if not isinstance(entry, Mapping) or not entry.get("name"):
            raise PolicyError(f"{TENANCY_KIND} {policy}: every {what} entry needs a name")
        pattern = str(entry.get("patternType") or LITERAL)
        if pattern not in (LITERAL, PREFIXED):
            raise PolicyError(
                f"{TENANCY_KIND} {policy}: patternType {pattern} is neither Literal nor Prefixed"
            )
        found.append(NamePattern(str(entry["name"]), pattern == PREFIXED))
    return tuple(found)


def parse_selector(selector: Any, policy: str) -> NamespaceSelector:
    if not isinstance(selector, Mapping):
        raise PolicyError(f"{TENANCY_KIND} {policy}: spec.namespaceSelector is required")
    labels = tuple(sorted((str(k), str(v)) for k, v in (selector.get("matchLabels") or {}).items()))
    expressions = []
    for entry in selector.get("matchExpressions") or []:
        operator = str(entry.get("operator", ""))
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise PolicyError(f"{TENANCY_KIND} {policy}: unknown selector operator {operator!r}")
        values = frozenset(str(v) for v in entry.get("values") or [])
        expressions.append(Requirement(str(entry["key"]), operator, values))
    return NamespaceSelector(labels, tuple(expressions))


def parse_policy(body: Mapping[str, Any]) -> TenancyPolicy:
    name = str(body.get("metadata", {}).get("name", ""))
    spec = body.get("spec") or {}
    return TenancyPolicy(
        name,
        parse_selector(spec.get("namespaceSelector"), name),
        _patterns(spec.get("topics"), "topics", name),
        _patterns(spec.get("groupIds"), "groupIds", name),
    )


def own_prefix(namespace: str) -> str:
    return f"{namespace}."


@dataclass(frozen=True)
class Tenancy:
    """One snapshot of the policies and the namespaces' labels, against which fleets are checked."""

    policies: tuple[TenancyPolicy, ...] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @staticmethod
    def of(policies: Iterable[TenancyPolicy], labels: Mapping[str, Mapping[str, str]]) -> Tenancy:
        return Tenancy(tuple(sorted(policies, key=lambda p: p.name)), dict(labels))

    def labels(self, namespace: str) -> Mapping[str, str]:
        """A namespace's labels; one not seen (yet) still has the label Kubernetes gives every namespace."""
        return {NAME_LABEL: namespace, **self.namespace_labels.get(namespace, {})}

    def policies_for(self, namespace: str) -> tuple[TenancyPolicy, ...]:
        labels = self.labels(namespace)
        return tuple(p for p in self.policies if p.selector.selects(labels))

    def allows_topic(self, namespace: str, topic: str) -> bool:
        return topic.startswith(own_prefix(namespace)) or any(
            pattern.matches(topic) for policy in self.policies_for(namespace) for pattern in policy.topics
        )

    def allows_topic_prefix(self, namespace: str, prefix: str) -> bool:
        """Every topic whose name starts with `prefix` (a PREFIXED ACL on it grants them all)."""
        return prefix.startswith(own_prefix(namespace)) or any(
            prefix.startswith(pattern.name) if pattern.prefixed else pattern.name == ANY_NAME
            for policy in self.policies_for(namespace)
            for pattern in policy.topics
        )

    def allows_group(self, namespace: str, group_id: str) -> bool:
        return group_id.startswith(own_prefix(namespace)) or any(
            pattern.matches(group_id)
            for policy in self.policies_for(namespace)
            for pattern in policy.group_ids
        )

    def refusal(self, spec: GroupSpec) -> Refusal | None:
        """Why the fleet may not have what it names, or None when its namespace may claim all of it."""
        namespace = spec.namespace
        refused = [f"topic {t}" for t in spec.topics if not self.allows_topic(namespace, t)]
        refused += [
            f"output topic {t}" for t in spec.access.output_topics if not self.allows_topic(namespace, t)
        ]
        internal = spec.access.internal_prefix(spec.group_id)
        if internal is not None and not self.allows_topic_prefix(namespace, internal):
            refused.append(f"the internal topics {internal}*")
        if not self.allows_group(namespace, spec.group_id):
            refused.insert(0, f"group id {spec.group_id}")
        if not refused:
            return None
        selecting = [p.name for p in self.policies_for(namespace)]
        which = (
            f"no {TENANCY_KIND} selecting it ({', '.join(selecting)}) allows"
            if selecting
            else f"no {TENANCY_KIND} selects it to allow"
        )
        return Refusal(
            TENANCY_DENIED,
            f"namespace {namespace} may not claim {', '.join(refused)}: {which} "
            f"{'them' if len(refused) > 1 else 'it'}, and without one a namespace claims only names that "
            f"start with {own_prefix(namespace)!r}. This fleet gets no Kafka user and no ACL, and the "
            "operator does not act on its group, until a policy allows these names or the fleet names "
            "others.",
        )
