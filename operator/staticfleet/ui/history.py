"""What the dashboard itself saw of each fleet's assignment over time.

DescribeGroups tells who owns which partition now; neither it nor the coordinator's HTTP API says which
partitions a rebalance moved. Comparing the Stable assignments seen one after another does, for the
rebalances that happened while the dashboard watched (it remembers nothing across a restart). Against
a cluster without the coordinator's history (Apache Kafka) these changes are also the rebalances shown.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from staticfleet.admin.model import GroupDescription
from staticfleet.coordinator import GroupState
from staticfleet.ui.views import Rebalance, assignment_owners, partitions_moved

KEEP = 50

FleetKey = tuple[str, str]


@dataclass
class _Seen:
    owners: dict[tuple[str, int], str]
    generation: int | None
    changes: deque[Rebalance] = field(default_factory=lambda: deque(maxlen=KEEP))
    moved: dict[int, int] = field(default_factory=dict)


class AssignmentTracker:
    def __init__(self) -> None:
        self._fleets: dict[FleetKey, _Seen] = {}
        self._lock = threading.Lock()

    def observe(
        self, key: FleetKey, group: GroupDescription | None, generation: int | None, now_ms: int
    ) -> None:
        """Records a change when the group is Stable with a decoded assignment that differs from the last
        one seen (or comes with another generation)."""
        if group is None or group.group_state is not GroupState.STABLE:
            return
        if any(m.partitions is None for m in group.members):
            return
        owners = assignment_owners(group)
        with self._lock:
            seen = self._fleets.get(key)
            if seen is None:
                self._fleets[key] = _Seen(owners, generation)
                return
            changed_generation = (
                generation is not None and seen.generation is not None and generation != seen.generation
            )
            if owners == seen.owners and not changed_generation:
                return
            moved = partitions_moved(seen.owners, owners)
            seen.changes.append(
                Rebalance(
                    started_ms=None,
                    completed_ms=now_ms,
                    reason="observed",
                    generation=generation,
                    members=len(group.members),
                    partitions_moved=moved,
                    source="observed",
                )
            )
            if generation is not None:
                seen.moved[generation] = moved
            seen.owners, seen.generation = owners, generation

    def observed(self, key: FleetKey) -> list[Rebalance]:
        with self._lock:
            seen = self._fleets.get(key)
            return list(seen.changes) if seen else []

    def moved_by_generation(self, key: FleetKey) -> dict[int, int]:
        with self._lock:
            seen = self._fleets.get(key)
            return dict(seen.moved) if seen else {}

    def forget(self, key: FleetKey) -> None:
        with self._lock:
            self._fleets.pop(key, None)
