"""Which StaticConsumerGroup owns a consumer group: the oldest claim wins (creationTimestamp, then
namespace/name). The others are reported as GroupIdConflict and left alone, so two fleets never remove
each other's members.

A group is one group id on one cluster, and a cluster is known by its id (Kafka's cluster id, from
Metadata), not by how a resource spells its address: `coordinator:9092` and its FQDN are one cluster.
Each resource records the id of its cluster in status.clusterId once it has reached it; a claim whose
cluster id is not known yet is compared by its bootstrap servers instead.

Two fleets in one group would also share instance ids when their naming rules overlap, whether the same
template or not: a fleet `orders` of two members per pod has the member `orders-1-1`, which a fleet
`orders-1` of one member per pod gives its pod `orders-1-1`. Consumers with one instance id fence each
other, so a conflict says which ids the two would share (`shared_instance_ids`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from staticfleet.kube.spec import GroupSpec, InstanceIds


@dataclass(frozen=True, slots=True)
class Claim:
    created: str  # RFC 3339 with a fixed format, so text order is time order
    namespace: str
    name: str
    cluster_id: str | None = None
    servers: str = ""
    """The bootstrap servers, normalised (servers_key)."""
    ids: InstanceIds | None = None
    """How the claiming fleet names its members, and how many pods it has (None: not known)."""
    replicas: int = 0

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def servers_key(bootstrap_servers: str | None) -> str:
    """Bootstrap servers as comparable text: order and case do not matter."""
    return ",".join(sorted(s.strip().lower() for s in (bootstrap_servers or "").split(",") if s.strip()))


def same_cluster(claim: Claim, cluster_id: str | None, servers: str) -> bool:
    if claim.cluster_id and cluster_id:
        return claim.cluster_id == cluster_id
    return claim.servers == servers


def owner(claims: Iterable[Claim]) -> Claim | None:
    ordered = sorted(set(claims), key=lambda c: (c.created, c.namespace, c.name))
    return ordered[0] if ordered else None


def conflicting_owner(
    claims: Iterable[Claim],
    namespace: str,
    name: str,
    cluster_id: str | None = None,
    servers: str | None = None,
) -> Claim | None:
    """The claim that wins over (namespace, name) on its cluster, or None when (namespace, name) owns
    its group. Without `servers`, every claim given counts as one on the same cluster."""
    if servers is not None:
        claims = [
            c
            for c in claims
            if (c.namespace, c.name) == (namespace, name) or same_cluster(c, cluster_id, servers)
        ]
    winner = owner(claims)
    if winner is None or (winner.namespace, winner.name) == (namespace, name):
        return None
    return winner


SHARED_SHOWN = 5
"""A conflict's message names at most this many shared instance ids."""


def shared_instance_ids(spec: GroupSpec, other: Claim) -> tuple[str, ...]:
    """The instance ids both fleets would have in their group (empty when the other's rule is unknown)."""
    if other.ids is None:
        return ()
    shared = []
    for instance_id in spec.member_ids(0, spec.replicas):
        place = other.ids.locate(instance_id)
        if place is not None and other.ids.expects(place, other.replicas):
            shared.append(instance_id)
    return tuple(shared)


def describe_shared(spec: GroupSpec, other: Claim, shared: tuple[str, ...]) -> str:
    """Says, for the first few shared ids, what each is in either fleet."""

    def role(ids: InstanceIds, instance_id: str) -> str:
        place = ids.locate(instance_id)
        assert place is not None
        pod = f"{ids.name}-{place.ordinal}"
        return f"pod {pod}'s own id" if place.index is None else f"member {place.index} of pod {pod}"

    assert other.ids is not None
    shown = [
        f"{i} ({role(spec.ids, i)} here, {role(other.ids, i)} in {other.ref})" for i in shared[:SHARED_SHOWN]
    ]
    more = f" and {len(shared) - SHARED_SHOWN} more" if len(shared) > SHARED_SHOWN else ""
    return ", ".join(shown) + more
