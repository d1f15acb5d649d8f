"""Which StaticConsumerGroup owns a consumer group: the oldest claim wins (creationTimestamp, then
namespace/name). The others are reported as GroupIdConflict and left alone, so two fleets never remove
each other's members."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Claim:
    created: str  # RFC 3339 with a fixed format, so text order is time order
    namespace: str
    name: str

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def owner(claims: Iterable[Claim]) -> Claim | None:
    ordered = sorted(set(claims))
    return ordered[0] if ordered else None


def conflicting_owner(claims: Iterable[Claim], namespace: str, name: str) -> Claim | None:
    """The claim that wins over (namespace, name), or None when (namespace, name) owns its group."""
    winner = owner(claims)
    if winner is None or (winner.namespace, winner.name) == (namespace, name):
        return None
    return winner
