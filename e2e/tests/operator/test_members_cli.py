"""`staticfleet members remove` against the embedded coordinator, as a person would use it: a fleet that
lets departed members expire (removeMembers: AfterSessionTimeout) is cleaned up by hand."""

from __future__ import annotations

import subprocess
import sys

import pytest

from e2e.helpers import Cluster, wait_until

from .harness import (
    REPO_ROOT,
    Coordinator,
    OperatorRunner,
    fleet_manifest,
    ready_with,
    stopwatch,
    timing,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

NAME = "orders"


def test_members_remove_cleans_up_what_the_session_timeout_would_keep(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    gid = f"{namespace}.{NAME}"
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic)
    operator.start()
    spec = {"sessionTimeoutMs": 60_000, "scaleDown": {"removeMembers": "AfterSessionTimeout"}}
    kubectl.apply(fleet_manifest(NAME, 2, coordinator, topic, **spec), namespace)
    wait_fleet(kubectl, namespace, NAME, ready_with(2), timeout=120, what="Ready with 2")

    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=1")
    body = wait_fleet(
        kubectl,
        namespace,
        NAME,
        lambda b: (b.get("status", {}).get("scaleDown") or {}).get("phase") == "WaitingForSessionTimeout",
        timeout=60,
        what="the operator to wait for the session timeout",
    )
    assert body["status"]["scaleDown"]["pendingInstanceIds"] == ["orders-1"]
    assert coordinator.members(gid) == {"orders-0", "orders-1"}, "the operator did not remove it"

    elapsed = stopwatch()
    done = subprocess.run(
        [
            sys.executable, "-m", "staticfleet.cli", "members", "remove",
            "--bootstrap-server", coordinator.bootstrap, "--group", gid,
            "--instance-id", "orders-1", "--instance-id", "orders-7",
        ],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [line.split(None, 1) for line in done.stdout.splitlines()] == [
        ["INSTANCE-ID", "RESULT"],
        ["orders-1", "removed"],
        ["orders-7", "already gone"],
    ]
    wait_until(lambda: coordinator.members(gid) == {"orders-0"}, timeout=10, what="orders-1 to be gone")
    body = wait_fleet(kubectl, namespace, NAME, ready_with(1), timeout=60, what="Ready with 1")
    timing("members remove -> Ready with 1", elapsed())
    assert "scaleDown" not in body["status"]  # the operator saw the member go and closed the scale-down
    removed = [e for e in coordinator.events(gid) if e["type"] == "member_removed"]
    assert [e["instance_id"] for e in removed] == ["orders-1"]
