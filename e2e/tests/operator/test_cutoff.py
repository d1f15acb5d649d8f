"""A consumer cut off from the coordinator while its pod stays Running.

The test makes a network namespace and a veth pair (iproute2): the host end carries the address the
coordinator listens on, the other end sits in the namespace, and one pod (orders-1) runs its consumer in
that namespace (the local pod runner honours the pod template annotation
`netns.e2e.staticfleet.io/<pod>`: e2e/localcluster/podspec.py). The operator and the other pod reach
the coordinator from the host. Taking the namespace's end of the link down cuts orders-1 off: the
coordinator expires it after its session timeout (one rebalance), the resource names the pod that is
Running but not in the group (condition PodsOutsideGroup and an Event), and when the link comes back
the consumer rejoins (one more rebalance). Only addresses on the test's own link are used; everything
is removed in `finally`.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e.helpers import Cluster, pod_report, wait_until

from .harness import (
    OperatorRunner,
    condition,
    consumer_template,
    events,
    fleet_manifest,
    get_fleet,
    ready_with,
    start_coordinator,
    stop_coordinator,
    stopwatch,
    timing,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

NAME = "orders"
CUT_POD = "orders-1"
SESSION_TIMEOUT_MS = 10_000


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass(frozen=True)
class Link:
    """A namespace `netns` joined to the host by a veth pair: host end `host_if` with `host_address`,
    namespace end `inner_if` with the next address of a /30."""

    netns: str
    host_if: str
    inner_if: str
    host_address: str

    def down(self) -> None:
        ip("-n", self.netns, "link", "set", self.inner_if, "down")

    def up(self) -> None:
        ip("-n", self.netns, "link", "set", self.inner_if, "up")


@pytest.fixture
def link() -> Iterator[Link]:
    tag = secrets.token_hex(3)
    # Link-local addresses (169.254.0.0/16) on a link of our own: nothing else routes them.
    subnet = 4 * secrets.randbelow(60)
    third = 10 + secrets.randbelow(150)
    host_address, inner_address = f"169.254.{third}.{subnet + 1}", f"169.254.{third}.{subnet + 2}"
    made = Link(f"sfcut-{tag}", f"sfh{tag}", f"sfp{tag}", host_address)
    try:
        ip("netns", "add", made.netns)
        ip("link", "add", made.host_if, "type", "veth", "peer", "name", made.inner_if)
        ip("link", "set", made.inner_if, "netns", made.netns)
        ip("addr", "add", f"{host_address}/30", "dev", made.host_if)
        ip("link", "set", made.host_if, "up")
        ip("-n", made.netns, "addr", "add", f"{inner_address}/30", "dev", made.inner_if)
        ip("-n", made.netns, "link", "set", "lo", "up")
        made.up()
        yield made
    finally:
        subprocess.run(["ip", "link", "del", made.host_if], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", made.netns], capture_output=True, timeout=30)


def test_a_consumer_cut_off_while_running_is_named_and_rejoins(
    cluster: Cluster, namespace: str, operator: OperatorRunner, link: Link, tmp_path: Path, chaos_round: int
) -> None:
    kubectl = cluster.kubectl
    gid = f"{namespace}.{NAME}"
    topic = f"{namespace}-orders"
    coordinator = start_coordinator(tmp_path / "coordinator", host=link.host_address)
    try:
        coordinator.create_topic(topic)
        allowed = link.host_address
        operator.extra_args = ("--allowed-bootstrap-servers", allowed, "--allowed-coordinator-apis", allowed)
        operator.start()
        template = consumer_template()
        template["metadata"] = {"annotations": {f"netns.e2e.staticfleet.io/{CUT_POD}": link.netns}}
        spec = {"sessionTimeoutMs": SESSION_TIMEOUT_MS, "heartbeatIntervalMs": 1_000, "template": template}
        kubectl.apply(fleet_manifest(NAME, 2, coordinator, topic, **spec), namespace)
        wait_fleet(kubectl, namespace, NAME, ready_with(2), timeout=120, what="Ready with 2")
        group = coordinator.group(gid)
        assert group is not None and group["state"] == "Stable"
        before = group["rebalances"]

        link.down()
        cut = stopwatch()
        wait_until(
            lambda: (
                coordinator.members(gid) == {"orders-0"}
                and (coordinator.group(gid) or {}).get("state") == "Stable"
            ),
            timeout=SESSION_TIMEOUT_MS / 1000 + 60,
            what=f"{CUT_POD} expired and the group Stable without it",
        )
        timing("cut-off consumer: link down -> member expired, group Stable", cut())
        group = coordinator.group(gid)
        assert group is not None and group["rebalances"] == before + 1, "one rebalance for the expiry"
        expired = [e for e in coordinator.events(gid) if e["type"] == "member_expired"]
        assert [e.get("instance_id") for e in expired] == [CUT_POD]

        body = wait_fleet(
            kubectl,
            namespace,
            NAME,
            lambda b: condition(b, "PodsOutsideGroup").get("status") == "True",
            timeout=60,
            what="PodsOutsideGroup",
        )
        timing("cut-off consumer: link down -> PodsOutsideGroup on the resource", cut())
        found = condition(body, "PodsOutsideGroup")
        assert found["reason"] == "RunningNotInGroup"
        assert found["message"].startswith(f"{CUT_POD}: Running but not in group {gid}")
        (warning,) = events(kubectl, namespace, NAME, "PodsOutsideGroup")
        assert CUT_POD in warning["message"]
        pod = kubectl.get("pod", CUT_POD, namespace)
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["containerStatuses"][0]["restartCount"] == 0

        link.up()
        back = stopwatch()
        wait_until(
            lambda: (
                coordinator.members(gid) == {"orders-0", CUT_POD}
                and (coordinator.group(gid) or {}).get("state") == "Stable"
            ),
            timeout=120,
            what=f"{CUT_POD} back in a Stable group",
        )
        timing("cut-off consumer: link up -> rejoined, group Stable", back())
        group = coordinator.group(gid)
        assert group is not None and group["rebalances"] == before + 2, "one rebalance for the rejoin"
        body = wait_fleet(
            kubectl,
            namespace,
            NAME,
            lambda b: condition(b, "PodsOutsideGroup").get("status") == "False" and ready_with(2)(b),
            timeout=60,
            what="every pod in the group again",
        )
        assert events(kubectl, namespace, NAME, "PodsBackInGroup")
        pod = kubectl.get("pod", CUT_POD, namespace)
        status = pod["status"]["containerStatuses"][0]
        if status["restartCount"]:
            # Requests the consumer sent into the cut reach the coordinator once the link is back (its
            # kernel retransmits them), after librdkafka has given up on them: a JoinGroup sent there can
            # register the instance under a new member id while the client still heartbeats with the old
            # one, which the coordinator then fences, as Kafka's does. librdkafka's fenced error is fatal:
            # the consumer exits 82 and its container restarts. The id fenced is the expired one, or one
            # the client had since rejoined under and a late JoinGroup of its own replaced. That is the
            # client's own doing; a restart for any other reason, or a fence of any other member id, fails.
            logged = coordinator.events(gid)
            fenced = [e for e in logged if e["type"] == "member_fenced" and e["api"] != "replaced"]
            replaced = {
                e["old_member_id"]
                for e in logged
                if e["type"] == "static_member_replaced" and e.get("instance_id") == CUT_POD
            }
            stale = {e["member_id"] for e in expired} | replaced
            report = pod_report(kubectl, [namespace], log_lines=80)
            assert status["restartCount"] == 1, f"the consumer kept running:\n{report}"
            assert status["lastState"]["terminated"]["exitCode"] == 82, report
            assert fenced and {e["member_id"] for e in fenced} <= stale, f"{fenced}\n{report}"
        assert get_fleet(kubectl, namespace, NAME)["status"]["group"]["members"] == 2
    finally:
        kubectl.run("delete", "scg", NAME, "-n", namespace, "--wait=false", check=False)
        try:
            gone = lambda: not kubectl.items("staticconsumergroups", namespace)  # noqa: E731
            wait_until(gone, timeout=90, what="the fleet to go")
        finally:
            stop_coordinator(coordinator)
