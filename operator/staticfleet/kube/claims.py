"""Which StaticConsumerGroup owns a consumer group: the oldest claim wins (creationTimestamp, then
namespace/name). The others are reported as GroupIdConflict and left alone, so two fleets never remove
each other's members.

A group is one group id on one cluster, and a cluster is known by its id (Kafka's cluster id, from
Metadata), not by how a resource spells its address: `coordinator:9092` and its FQDN are one cluster.
Each resource records the id of its cluster in status.clusterId once it has reached it; a claim whose
cluster id is not known yet is compared by its bootstrap servers instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Claim:
    created: str  # RFC 3339 with a fixed format, so text order is time order
    namespace: str
    name: str
    cluster_id: str | None = None
    servers: str = ""
    """The bootstrap servers, normalised (servers_key)."""

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
