"""The Java KafkaConsumer (kafka-clients 4.3.1, Kafka's reference client) with static membership, on Apache
Kafka and on the embedded coordinator alike:

* a static member that crashes and comes back with its instance id gets its partitions again at the same
  generation, and the other members see nothing (no rebalance);
* the same for the group's leader (KIP-814: its JoinGroup answer says to skip the assignment, and it keeps
  the one it had);
* a crashed member removed by instance id through the admin path (one LeaveGroup) is replaced at once: the
  survivor gets every partition in the next generation, long before the session timeout would expire it.

Each consumer is conformance/javaclient's driver in its own JVM; what it reports (assignments with their
generation and member id, records, commits) comes as JSON lines, and the consumer coordinator's own log
lines tell which member led an assignment.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.backends import Backend, describe_group
from conformance.java_consumers import SESSION_MS, WAIT_S, JavaFleet
from conformance.java_process import wait_until
from staticfleet.admin.client import GroupAdmin
from staticfleet.admin.connection import KafkaConnection

PARTITIONS = 6
_SKIPPED = re.compile(r"Skipped assignment for returning static leader at generation (\d+)")

# kafka-python (the admin path) loads its protocol schemas with importlib.resources calls that Python 3.11
# deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files\\(\\) instead:DeprecationWarning")


@pytest.fixture
def backend(plain_backend: Backend) -> Backend:
    return plain_backend


@pytest.mark.parametrize("who", ["follower", "leader"])
def test_a_restarted_static_java_consumer_gets_its_partitions_at_the_same_generation(
    backend: Backend, driver_jar: Path, java_fleets: list[JavaFleet], who: str
) -> None:
    fleet = JavaFleet(backend, driver_jar, PARTITIONS)
    java_fleets.append(fleet)
    for instance in ("c-0", "c-1", "c-2"):
        fleet.start(instance)
    before = fleet.settled()
    generation = next(iter(before.values()))["generation"]
    leader = fleet.leader(generation)
    target = leader if who == "leader" else next(i for i in sorted(before) if i != leader)
    others = {name: len(c.events) for name, c in fleet.consumers.items() if name != target}

    fleet.consumers[target].kill()  # a crash: no LeaveGroup
    restarted = fleet.start(target)
    came_back = wait_until(lambda: restarted.last("assigned"), WAIT_S, f"{target} back\n{fleet.describe()}")

    assert came_back["generation"] == generation, f"no new generation\n{fleet.describe()}"
    assert came_back["partitions"] == before[target]["partitions"]
    assert came_back["member_id"] != before[target]["member_id"], "a new member id replaced the old one"
    after = fleet.settled()
    assert after[target]["generation"] == generation
    for name, seen in others.items():
        news = [e["event"] for e in fleet.consumers[name].events[seen:]]
        assert not {"assigned", "revoked", "lost"} & set(news), f"{name} saw a rebalance: {news}"
    skipped = [int(g) for g in _SKIPPED.findall(restarted.stderr_text())]
    if who == "leader":
        assert skipped == [generation], (
            f"KIP-814: the returning leader skips the assignment\n{fleet.describe()}"
        )
    else:
        assert skipped == []
    members = describe_group(backend, fleet.group).members
    assert sorted(m.instance_id or "" for m in members) == ["c-0", "c-1", "c-2"]
    assert {m.member_id for m in members if m.instance_id == target} == {came_back["member_id"]}


def test_a_crashed_static_java_consumer_removed_by_instance_id_is_replaced_at_once(
    backend: Backend, driver_jar: Path, java_fleets: list[JavaFleet]
) -> None:
    # The session timeout is the coordinator's largest (GroupSettings: 30 s) and the wait below is shorter:
    # the survivor's new assignment comes from the removal, not from the crashed member's expiry.
    fleet = JavaFleet(backend, driver_jar, PARTITIONS, session_ms=SESSION_MS)
    java_fleets.append(fleet)
    fleet.start("c-0"), fleet.start("c-1")
    before = fleet.settled()
    generation = before["c-0"]["generation"]

    fleet.consumers["c-1"].kill()
    fleet.stopped.append(fleet.consumers.pop("c-1"))
    with GroupAdmin(KafkaConnection(backend.bootstrap)) as admin:
        report = admin.remove_members(fleet.group, ["c-1"], reason="scaled down")
    assert report.removed == ("c-1",), report

    survivor = fleet.consumers["c-0"]
    taken = wait_until(
        lambda: (e := survivor.last("assigned")) and e["generation"] > generation and e,
        20.0,
        f"c-0 to take every partition\n{fleet.describe()}",
    )
    assert taken["generation"] == generation + 1, "one rebalance"
    assert taken["partitions"] == list(range(PARTITIONS))
    members = describe_group(backend, fleet.group).members
    assert [m.instance_id for m in members] == ["c-0"]
