"""A scale-up's join phase held open on a coordinator that refuses pre-registration (Apache Kafka), and
on any coordinator a second past the last join where the group's assignor is cooperative.

A pending member (KIP-394: a dynamic JoinGroup answered with MEMBER_ID_REQUIRED) keeps every join phase of
the group from completing until it joins, leaves or its session timeout passes. The operator registers one
before the StatefulSet grows, and removes it (LeaveGroup by member id) the moment every expected instance
has joined: the existing members and all the new pods then complete one join phase together, so a scale-up
costs one rebalance however far apart the pods start. The pending member never joins, so it is assigned
nothing; if the operator dies, its session timeout ends the hold. A cooperative group's hold outlasts the
last join by INCREMENTAL_LINGER_S, for the reason given there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from staticfleet.admin import AdminError, GroupDescription

log = logging.getLogger(__name__)

POLL_S = 0.1
"""How often the watcher asks whether everyone has joined while no new instance has come lately."""

ARRIVING_POLL_S = 0.02
"""How often it asks while new instances are arriving (one joined within ARRIVING_FOR_S): the pods start
one after another, and the time from the last one's join to the watcher's next look the whole group
spends in the join phase, consuming nothing."""

ARRIVING_FOR_S = 2.0
"""How long after an instance's arrival the watcher keeps looking every ARRIVING_POLL_S: long enough for
the next pod of a step to start, short enough that a pod that never comes costs few requests."""

INCREMENTAL_LINGER_S = 1.0
"""How long a cooperative group's held join phase lasts after every instance has joined. With an
incremental assignor a scale-up takes two rebalances: the first tells the old members which partitions
to give up, the second gives them to the new ones, and every member joins both. librdkafka sends a
consumer's JoinGroups at least a second apart (its join interval), so a new member that joined the first
less than a second before it completed holds the second until that second is up, and the partitions
given up wait with it. Held that second longer, the first join phase completes when every member may join
again at once: the old members go on consuming meanwhile, so the wait moves to before the partitions are
given up. Java clients rejoin at once and gain nothing; they lose nothing but that second."""


class HoldAdmin(Protocol):
    def describe_group(self, group_id: str) -> GroupDescription: ...
    def release_join_phase(self, group_id: str, member_id: str) -> bool: ...


HoldWatcher = Callable[[HoldAdmin, str, str, tuple[str, ...], float, float], None]


def everyone_joined(group: GroupDescription, instance_ids: Iterable[str]) -> bool:
    """Every expected instance is a member (a new static member is one from its first JoinGroup)."""
    return set(instance_ids) <= group.instance_ids


def release_when_joined(
    admin: HoldAdmin,
    group_id: str,
    member_id: str,
    instance_ids: tuple[str, ...],
    bound_s: float,
    *,
    linger_s: float = 0.0,
    poll_s: float = POLL_S,
    arriving_poll_s: float = ARRIVING_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Waits until every instance has joined, then `linger_s` more (or until `bound_s` passes), then
    releases the hold. Looks every `poll_s`, and every `arriving_poll_s` for ARRIVING_FOR_S after an
    instance joined. True when the release removed the pending member (False: it had expired, or the
    coordinator could not be reached; the reconcile pass then tries again)."""
    deadline = clock() + bound_s
    wanted = frozenset(instance_ids)
    present: int | None = None  # how many of the instances the last look found
    arrived_at = -ARRIVING_FOR_S  # when that number last grew (never, at first)
    while clock() < deadline:
        try:
            group = admin.describe_group(group_id)
            if everyone_joined(group, wanted):
                log.info(
                    "group %s: all %d instances joined; releasing the join phase%s",
                    group_id,
                    len(instance_ids),
                    f" in {linger_s:.1f} s" if linger_s else "",
                )
                sleep(linger_s)
                break
            now_present = len(wanted & group.instance_ids)
            if present is not None and now_present > present:
                arrived_at = clock()
            present = now_present
        except AdminError as exc:  # the group may not exist yet, or the coordinator is moving
            log.debug("group %s: waiting for %s to join: %s", group_id, ", ".join(instance_ids), exc)
        sleep(arriving_poll_s if clock() - arrived_at < ARRIVING_FOR_S else poll_s)
    else:
        log.info(
            "group %s: not every instance joined within %.0f s; releasing the join phase", group_id, bound_s
        )
    try:
        return admin.release_join_phase(group_id, member_id)
    except AdminError as exc:
        log.info("group %s: could not release the held join phase (%s): %s", group_id, member_id, exc)
        return False


def watch_in_thread(
    admin: HoldAdmin,
    group_id: str,
    member_id: str,
    instance_ids: tuple[str, ...],
    bound_s: float,
    linger_s: float = 0.0,
) -> None:
    """Runs release_when_joined beside the reconcile loop, which only passes every few seconds."""
    threading.Thread(
        target=release_when_joined,
        args=(admin, group_id, member_id, instance_ids, bound_s),
        kwargs={"linger_s": linger_s},
        name=f"join-hold-{group_id}",
        daemon=True,
    ).start()
