"""Unmodified Kafka clients against the embedded coordinator: static membership end to end.

Every consumer is a real client library (confluent-kafka, kafka-python, aiokafka) in its own process;
the coordinator is `staticfleet coordinator` in its own process. Rebalances are counted from the
coordinator's HTTP API and its event log.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import MemberToRemove, NewTopic

from .processes import ConsumerProcess, CoordinatorProcess, wait_until

CLIENTS = ["confluent", "kafka-python", "aiokafka"]
PARTITIONS = 6
SESSION_MS = 15_000
_groups = itertools.count()


def committed(bootstrap: str, group: str) -> dict[int, int]:
    """Committed offset by partition, read with kafka-python's admin client (OffsetFetch)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(group).get(group, {})
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items()}


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[CoordinatorProcess]:
    process = CoordinatorProcess(tmp_path / "data")
    process.start()
    yield process
    process.stop()


class Fleet:
    def __init__(self, coordinator: CoordinatorProcess, client: str) -> None:
        self.coordinator = coordinator
        self.client = client
        self.group = f"fleet-{next(_groups)}"
        self.topic = f"{self.group}-topic"
        self.consumers: dict[str, ConsumerProcess] = {}
        admin = KafkaAdminClient(bootstrap_servers=coordinator.bootstrap)
        admin.create_topics([NewTopic(self.topic, PARTITIONS, 1)])
        admin.close()

    def start(self, instance: str) -> ConsumerProcess:
        consumer = ConsumerProcess(
            self.client, self.coordinator.bootstrap, self.group, instance, self.topic, SESSION_MS
        )
        self.consumers[instance] = consumer
        return consumer

    def produce(self, count: int, prefix: str = "m") -> set[str]:
        producer = KafkaProducer(bootstrap_servers=self.coordinator.bootstrap)
        values = {f"{prefix}{i}" for i in range(count)}
        for i, value in enumerate(sorted(values)):
            producer.send(self.topic, value.encode(), partition=i % PARTITIONS)
        producer.flush()
        producer.close()
        return values

    def view(self) -> dict[str, Any]:
        group = self.coordinator.group(self.group)
        assert group is not None
        return group

    def stable_with(self, *instances: str, timeout: float = 60) -> dict[str, Any]:
        """Wait until the group is Stable with exactly these instances, every partition owned once, and each
        consumer told what the coordinator holds for it."""

        def check() -> dict[str, Any] | None:
            group = self.coordinator.group(self.group)
            if group is None or group["state"] != "Stable":
                return None
            members = {m["instanceId"]: m for m in group["memberList"]}
            if set(members) != set(instances):
                return None
            owned = sorted(p for m in members.values() for p in m["partitions"].get(self.topic, []))
            if owned != list(range(PARTITIONS)):
                return None  # e.g. a leader that assigned before it knew the topic will rejoin
            for instance in instances:
                told = self.consumers[instance].assignment()
                held = sorted(members[instance]["partitions"].get(self.topic, []))
                if told is None or sorted(told) != held:
                    return None
            return group

        try:
            result: dict[str, Any] = wait_until(check, timeout, f"group {self.group} Stable with {instances}")
        except AssertionError:
            raise AssertionError(f"{self.coordinator.group(self.group)}\n{self.history()}") from None
        return result

    def settled_with(self, *instances: str, quiet_s: float = 2.0) -> dict[str, Any]:
        """Stable with these instances and still at the same generation `quiet_s` later: clients such as
        kafka-python rejoin once right after their first assignment, and that must be over."""
        while True:
            first = self.stable_with(*instances)
            time.sleep(quiet_s)
            again = self.stable_with(*instances)
            if again["generation"] == first["generation"]:
                return again

    def history(self) -> str:
        """What each consumer last reported and this group's coordinator events, for failure messages."""
        details = [c.describe() for c in self.consumers.values()]
        events = [json.dumps(e) for e in self.coordinator.events() if e.get("group") == self.group]
        return "\n".join(details + events)

    def partitions_by_instance(self, group: dict[str, Any]) -> dict[str, list[int]]:
        return {m["instanceId"]: m["partitions"].get(self.topic, []) for m in group["memberList"]}

    def stop(self) -> None:
        for consumer in self.consumers.values():
            consumer.stop()


@pytest.fixture
def fleets(coordinator: CoordinatorProcess) -> Iterator[list[Fleet]]:
    created: list[Fleet] = []
    yield created
    for fleet in created:
        fleet.stop()


def _fleet(coordinator: CoordinatorProcess, fleets: list[Fleet], client: str) -> Fleet:
    fleet = Fleet(coordinator, client)
    fleets.append(fleet)
    return fleet


@pytest.mark.parametrize("client", CLIENTS)
def test_static_consumers_subscribe_consume_what_was_produced_and_commit(
    coordinator: CoordinatorProcess, fleets: list[Fleet], client: str
) -> None:
    fleet = _fleet(coordinator, fleets, client)
    produced = fleet.produce(60)
    a, b = fleet.start("c-0"), fleet.start("c-1")
    group = fleet.stable_with("c-0", "c-1")
    assigned = sorted(p for ps in fleet.partitions_by_instance(group).values() for p in ps)
    assert assigned == list(range(PARTITIONS)), "every partition is owned by exactly one consumer"
    wait_until(lambda: a.values() | b.values() >= produced, 60, "every produced record to be consumed")
    assert a.values().isdisjoint(b.values())
    offsets = wait_until(
        lambda: (o := committed(coordinator.bootstrap, fleet.group)) and sum(o.values()) == 60 and o,
        30,
        "committed offsets to cover every record",
    )
    assert offsets == {p: 10 for p in range(PARTITIONS)}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("who", ["follower", "leader"])
def test_restarting_a_static_consumer_causes_no_rebalance(
    coordinator: CoordinatorProcess, fleets: list[Fleet], client: str, who: str
) -> None:
    fleet = _fleet(coordinator, fleets, client)
    for i in range(3):
        fleet.start(f"c-{i}")
    before = fleet.settled_with("c-0", "c-1", "c-2")
    leader = before["leaderInstanceId"]
    target = leader if who == "leader" else next(i for i in ("c-0", "c-1", "c-2") if i != leader)
    old_member = next(m["memberId"] for m in before["memberList"] if m["instanceId"] == target)
    fleet.consumers[target].kill()  # a crash: no LeaveGroup
    restarted = fleet.start(target)
    wait_until(
        lambda: restarted.assignment() is not None, 60, f"the restarted {target} to get its partitions"
    )
    after = fleet.stable_with("c-0", "c-1", "c-2")
    assert after["generation"] == before["generation"], "a static restart must not start a new generation"
    assert after["rebalances"] == before["rebalances"]
    assert fleet.partitions_by_instance(after) == fleet.partitions_by_instance(before)
    new_member = next(m["memberId"] for m in after["memberList"] if m["instanceId"] == target)
    assert new_member != old_member
    replaced = [
        e for e in coordinator.events() if e["type"] == "static_member_replaced" and e["group"] == fleet.group
    ]
    assert [(e["old_member_id"], e["rebalance"]) for e in replaced] == [(old_member, False)]


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_a_second_consumer_with_the_same_instance_id_fences_the_first(
    coordinator: CoordinatorProcess, fleets: list[Fleet], client: str
) -> None:
    fleet = _fleet(coordinator, fleets, client)
    first = fleet.start("c-0")
    fleet.stable_with("c-0")
    second = ConsumerProcess(client, coordinator.bootstrap, fleet.group, "c-0", fleet.topic, SESSION_MS)
    fleet.consumers["c-0-second"] = second
    wait_until(lambda: second.assignment() == list(range(PARTITIONS)), 60, "the second consumer to join")
    # kafka-python learns it was fenced when it commits (its heartbeat thread only logs it): give it work.
    # confluent-kafka learns it from whichever request comes first: a Heartbeat (poll() then returns _FATAL
    # and the assignment is gone) or, if the records arrive first, the OffsetCommit (FENCED_INSTANCE_ID).
    fleet.produce(6)
    fatal = wait_until(lambda: first.of("fatal"), 60, "FENCED_INSTANCE_ID to reach the first consumer")
    assert "fenced" in fatal[0]["error"].lower(), first.describe()
    wait_until(lambda: first.process.poll() is not None, 30, "the fenced consumer to exit")
    assert first.process.returncode == 3
    wait_until(lambda: second.values() >= {f"m{i}" for i in range(6)}, 60, "the second consumer to carry on")
    fenced = [e for e in coordinator.events() if e["type"] == "member_fenced" and e["group"] == fleet.group]
    assert fenced and {e["instance_id"] for e in fenced} == {"c-0"}


# Not kafka-python's consumer: when poll() returns at its deadline just as a join completes, kafka-python
# 3.0.12 drops the answer and joins again, one more rebalance that no coordinator can prevent.
@pytest.mark.parametrize("client", ["confluent", "aiokafka"])
def test_admin_client_removes_a_departed_static_member_by_instance_id_in_one_rebalance(
    coordinator: CoordinatorProcess, fleets: list[Fleet], client: str
) -> None:
    fleet = _fleet(coordinator, fleets, client)
    fleet.start("c-0"), fleet.start("c-1")
    before = fleet.settled_with("c-0", "c-1")
    fleet.consumers.pop("c-1").kill()  # gone for good, without LeaveGroup
    admin = KafkaAdminClient(bootstrap_servers=coordinator.bootstrap)
    try:
        result = admin.remove_group_members(fleet.group, [MemberToRemove(group_instance_id="c-1")])
    finally:
        admin.close()
    assert result is not None
    after = fleet.stable_with("c-0", timeout=30)
    assert after["generation"] == before["generation"] + 1, f"one rebalance:\n{fleet.history()}"
    assert after["rebalances"] == before["rebalances"] + 1
    assert fleet.partitions_by_instance(after) == {"c-0": list(range(PARTITIONS))}
    removed = [e for e in coordinator.events() if e["type"] == "member_removed" and e["group"] == fleet.group]
    assert [e["instance_id"] for e in removed] == ["c-1"]


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_coordinator_killed_and_restarted_on_its_data_dir_costs_no_rebalance(
    coordinator: CoordinatorProcess, fleets: list[Fleet], client: str
) -> None:
    fleet = _fleet(coordinator, fleets, client)
    produced = fleet.produce(30)
    for i in range(3):
        fleet.start(f"c-{i}")
    before = fleet.settled_with("c-0", "c-1", "c-2")
    consumers = list(fleet.consumers.values())
    wait_until(lambda: set().union(*(c.values() for c in consumers)) >= produced, 60, "the first records")
    offsets_before = wait_until(
        lambda: (o := committed(coordinator.bootstrap, fleet.group)) and sum(o.values()) == 30 and o,
        30,
        "commits",
    )
    events_before = len(coordinator.events())
    coordinator.kill()
    coordinator.start()
    more = fleet.produce(30, prefix="after-")
    wait_until(
        lambda: set().union(*(c.values() for c in consumers)) >= more,
        60,
        "records produced after the restart",
    )
    after = fleet.stable_with("c-0", "c-1", "c-2")
    assert after["generation"] == before["generation"]
    assert fleet.partitions_by_instance(after) == fleet.partitions_by_instance(before)
    new_events = coordinator.events()[events_before:]
    assert [e for e in new_events if e["type"] == "rebalance_started"] == [], "zero rebalances"
    assert [e["type"] for e in new_events if e["group"] == fleet.group][:1] == ["group_loaded"]
    offsets_after = committed(coordinator.bootstrap, fleet.group)
    for partition, before_offset in offsets_before.items():
        assert offsets_after[partition] >= before_offset, "committed offsets survive the crash"
    assert all(c.process.poll() is None for c in consumers), "no consumer died"


def test_sigterm_answers_parked_requests_flushes_the_log_and_exits_cleanly(
    coordinator: CoordinatorProcess,
) -> None:
    import asyncio

    from conformance import driver as d

    async def scenario() -> int:
        host, port = coordinator.bootstrap.split(":")
        async with d.Driver(host, int(port)) as driver:
            a, c = await driver.connect("a"), await driver.connect("c")
            protocols = (("range", d.subscription("t")),)
            await d.ensure_topic(a, "t", 1)
            joined = await a.request(d.join_group(9, "term", instance_id="a", protocols=protocols))
            sync = d.sync_group(
                5,
                "term",
                generation=joined.generation_id,
                member_id=joined.member_id,
                instance_id="a",
                protocol_type="consumer",
                protocol_name="range",
                assignments=[(joined.member_id, d.assignment({"t": [0]}))],
            )
            await a.request(sync)
            commit = d.offset_commit(
                9,
                "term",
                generation=joined.generation_id,
                member_id=joined.member_id,
                instance_id="a",
                offsets={"t": {0: 41}},
            )
            await a.request(commit)
            # A newcomer's JoinGroup waits for a (which never rejoins) when the signal arrives.
            parked = c.send(d.join_group(9, "term", instance_id="c", protocols=protocols))
            await parked.assert_parked(300)
            assert coordinator.process is not None
            coordinator.process.send_signal(15)
            answer = await parked.result(10)
            return int(answer.error_code)

    assert asyncio.run(scenario()) == 16, "a parked JoinGroup is answered NOT_COORDINATOR on shutdown"
    assert coordinator.process is not None
    assert coordinator.process.wait(timeout=20) == 0
    coordinator.start()
    group = coordinator.group("term")
    assert group is not None and (group["state"], group["members"], group["generation"]) == ("Stable", 1, 1)
    assert committed(coordinator.bootstrap, "term") == {0: 41}
