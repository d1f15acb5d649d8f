"""status.group: the consumer group as this pass saw it, and its rebalances counted across passes.

From the embedded coordinator's HTTP API the generation, the rebalance count and the last rebalance are
the coordinator's own. Against clusters without it, rebalances are inferred from the transitions seen
between two observations (`rebalancesSource: observed`, a lower bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from staticfleet.coordinator import GroupState
from staticfleet.coordinator.events import REASON_SESSION_TIMEOUT
from staticfleet.kube.fleetstatus import (
    EventSpec,
    GroupStatus,
    LastRebalance,
    Member,
    RebalancesSource,
    Unobserved,
)
from staticfleet.kube.members import assigned_partitions, assignment_fingerprint
from staticfleet.kube.observation import GroupObservation
from staticfleet.kube.scaling import iso
from staticfleet.kube.spec import GroupSpec


@dataclass(frozen=True, slots=True)
class GroupSeen:
    """What the group block is made of."""

    spec: GroupSpec
    group: GroupObservation
    previous: GroupStatus | None
    members: Sequence[Member]
    """As listed in status: this pass's, or the previous ones while the coordinator is away."""
    rolling: bool
    """The StatefulSet is replacing pods (a session that runs out now is explained)."""
    now: datetime


def rebalances_total(shown: int | None, last_seen: int | None, reported: int) -> int:
    """The count the resource shows, kept across coordinator restarts.

    The embedded coordinator counts rebalances since its process started: a restart sets its count back
    to zero while the group, recovered from its log, carries on. So the resource adds what the
    coordinator counted since the last observation (`last_seen`, kept in status as
    group.coordinatorRebalances) to what it showed, and takes a count below `last_seen` as a restart.
    Without a previous observation it starts from the coordinator's count."""
    if shown is None or last_seen is None:
        return reported
    return shown + (reported - last_seen if reported >= last_seen else reported)


def group_status(seen: GroupSeen) -> tuple[GroupStatus, list[EventSpec]]:
    """The group block, and a RebalanceObserved Event when rebalances completed since the last pass."""
    group, previous = seen.group, seen.previous
    shown = group.shown if group.reachable else (previous.state if previous else None)
    partitions = assigned_partitions(seen.members)
    fingerprint = assignment_fingerprint(seen.members)
    base = GroupStatus(
        state=shown or Unobserved.UNKNOWN,
        members=len(seen.members),
        assigned_partitions=partitions,
        protocol=(group.description.protocol or None) if group.description is not None else None,
        group_epoch=group.description.group_epoch if group.description is not None else None,
        assignment_epoch=group.description.assignment_epoch if group.description is not None else None,
        observed_fingerprint=fingerprint
        if group.reachable
        else (previous.observed_fingerprint if previous else None),
    )
    if group.view is not None:
        return _from_coordinator(seen, base)
    coordinator_counted = previous is not None and previous.rebalances_source is RebalancesSource.COORDINATOR
    if group.reachable and not (seen.spec.coordinator_api and coordinator_counted):
        return _observed(seen, base)
    # The coordinator unreachable, or its API not answering for now (a coordinator still starting serves
    # Kafka before HTTP): the counts stay as they were, the coordinator's own count with them, so that its
    # next answer is added to them rather than taken as the whole count.
    if previous is None:
        return base, []
    kept = replace(
        base,
        generation=previous.generation,
        rebalances=previous.rebalances,
        coordinator_rebalances=previous.coordinator_rebalances,
        rebalances_source=previous.rebalances_source,
        last_rebalance=previous.last_rebalance,
    )
    return kept, []


def _from_coordinator(seen: GroupSeen, base: GroupStatus) -> tuple[GroupStatus, list[EventSpec]]:
    view, previous = seen.group.view, seen.previous
    assert view is not None
    shown = previous.rebalances if previous else None
    total = rebalances_total(shown, previous.coordinator_rebalances if previous else None, view.rebalances)
    last = view.last_rebalance
    status = replace(
        base,
        protocol=base.protocol or view.protocol,
        generation=view.generation,
        rebalances=total,
        coordinator_rebalances=view.rebalances,
        rebalances_source=RebalancesSource.COORDINATOR,
        pre_registered_instance_ids=tuple(view.expected_instance_ids),
        rebalance_in_progress=view.rebalance_in_progress or None,
        last_rebalance=(
            LastRebalance(
                iso(datetime.fromtimestamp(last.completed_ms / 1000, tz=seen.now.tzinfo))
                if last.completed_ms
                else None,
                last.reason,
                last.duration_ms,
                last.generation,
            )
            if last is not None
            else None
        ),
        leader=view.leader_instance_id,
    )
    if shown is None or total <= shown:
        return status, []
    n = total - shown
    detail = (
        f"generation {last.generation}, reason {last.reason}, {last.duration_ms} ms"
        if last is not None
        else f"generation {view.generation}"
    )
    if seen.rolling and last is not None and last.reason == REASON_SESSION_TIMEOUT:
        detail += (
            "; a session ran out during the rolling update (a replaced pod that does not rejoin "
            f"within sessionTimeoutMs, {seen.spec.session_timeout_ms} ms, costs a rebalance)"
        )
    message = (
        f"{'a rebalance' if n == 1 else f'{n} rebalances'} completed ({detail}); "
        f"{base.members} members, {base.assigned_partitions} partitions"
    )
    return status, [EventSpec("Normal", "RebalanceObserved", message)]


def _observed(seen: GroupSeen, base: GroupStatus) -> tuple[GroupStatus, list[EventSpec]]:
    """Without the coordinator's count: a rebalance is a return to Stable, or a Stable group with a new
    assignment (a static restart keeps the fingerprint)."""
    previous = seen.previous
    count = previous.rebalances if previous is not None and previous.rebalances is not None else 0
    before = previous.state if previous is not None else None
    was_stable = before is GroupState.STABLE
    came_back = before not in (None, Unobserved.UNKNOWN) and not was_stable
    reassigned = (
        was_stable
        and previous is not None
        and previous.observed_fingerprint not in (None, base.observed_fingerprint)
    )
    rebalanced = base.state is GroupState.STABLE and (came_back or reassigned)
    last = previous.last_rebalance if previous is not None else None
    if rebalanced:
        last = LastRebalance(iso(seen.now), "observed", None)
    status = replace(
        base,
        rebalances=count + (1 if rebalanced else 0),
        rebalances_source=RebalancesSource.OBSERVED,
        last_rebalance=last,
    )
    if not rebalanced:
        return status, []
    shown_before = before.value if before is not None else None
    message = (
        f"the group rebalanced (observed: {shown_before} -> Stable or a new assignment); "
        f"{base.members} members, {base.assigned_partitions} partitions"
    )
    return status, [EventSpec("Normal", "RebalanceObserved", message)]
