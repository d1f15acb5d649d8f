"""The demo's short form (what `make demo-ci` runs) on the e2e cluster: the chart installed with helm, its
operator and coordinator run as pods, a producer and the example consumers as a StaticConsumerGroup.
A fleet of 3 becomes a Stable group of 3; a rolling restart costs no rebalance; scaling 3 -> 1 removes
the two departed members in one rebalance; 1 -> 4 is one rebalance. Plain static and plain dynamic
fleets run the same operations beside it. The counts come from the demo's own summary (`staticfleet
analyze` over the coordinator's event log) and are checked against the coordinator's HTTP API."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from e2e.helm import Helm
from e2e.helpers import Cluster
from e2e.tests.operator.harness import REPO_ROOT, timing

pytestmark = pytest.mark.localcluster  # the demo reads the coordinator's log from the pod runner's volume


def coordinator_group(api: str, group_id: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{api}/api/groups/{group_id}", timeout=10) as response:
        found: dict[str, Any] = json.loads(response.read())
        return found


def test_the_demo_installs_the_chart_and_each_operation_costs_at_most_one_rebalance(
    cluster: Cluster, namespace: str, helm: Helm, tmp_path: Path
) -> None:
    assert cluster.local is not None
    results = tmp_path / "results.json"
    argv = [
        sys.executable, "-m", "examples.demo", "up",
        "--state-dir", str(tmp_path / "state"),
        "--kubeconfig", str(cluster.kubeconfig),
        "--run-dir", str(cluster.local.run_dir),
        "--namespace", namespace,
        "--release", f"demo-{secrets.token_hex(3)}",
        "--watch-namespace-only",
        "--pause", "0",
        "--results", str(results),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    outcome = json.loads(results.read_text())
    state = outcome["state"]
    try:
        rows = {row["label"]: row["outcomes"] for row in outcome["rows"]}
        assert list(rows) == ["create 0 -> 3", "rolling restart of 3", "scale 3 -> 1", "scale 1 -> 4"]
        ours = {label: outcomes["staticfleet"] for label, outcomes in rows.items()}
        assert ours["create 0 -> 3"]["rebalances"] == 1
        restart = ours["rolling restart of 3"]
        assert (restart["rebalances"], restart["restarts_absorbed"]) == (0, 3)
        assert (ours["scale 3 -> 1"]["rebalances"], ours["scale 3 -> 1"]["members_removed"]) == (1, 2)
        assert ours["scale 3 -> 1"]["partitions_moved"] == 4  # the 4 of the 6 partitions orders-1 and -2 had
        assert ours["scale 1 -> 4"]["rebalances"] == 1
        # The baselines ran beside it: plain static membership absorbs the restarts too; dynamic members
        # leave and join, and each time the group rebalances.
        assert rows["rolling restart of 3"]["plain static"]["rebalances"] == 0
        assert rows["rolling restart of 3"]["plain dynamic"]["rebalances"] >= 1
        assert rows["scale 3 -> 1"]["plain static"]["members_removed"] == 0
        for label, outcomes in rows.items():
            for kind, cost in outcomes.items():
                timing(f"demo: {label}, {kind}", cost["seconds_to_stable"])

        # The coordinator itself agrees: three rebalances in all, four static members now.
        group = coordinator_group(state["coordinator_api"], f"{namespace}.orders")
        assert (group["state"], group["rebalances"], group["members"]) == ("Stable", 3, 4)
        assert sorted(m["instanceId"] for m in group["memberList"]) == [f"orders-{i}" for i in range(4)]
        assert [r["reason"] for r in group["recentRebalances"]][-3:] == [
            "member-joined",
            "member-removed",
            "member-joined",
        ]
        # The producer's messages went through the coordinator to the consumers' state files.
        consumed = sum(
            json.loads(path.read_text())["messages"]
            for i in range(4)
            for path in cluster.claim_dir(namespace, f"state-orders-{i}").glob("orders-*.json")
        )
        assert consumed > 0
        assert "staticfleet against plain dynamic" in done.stdout
        assert "The demo keeps running" in done.stdout
        # The printed dashboard URL answers with the fleet's page, and its JSON shows the 4 members.
        page = f"{state['dashboard']}fleets/{namespace}/orders"
        assert f"the dashboard: {page}" in done.stdout
        with urllib.request.urlopen(page, timeout=10) as response:
            assert "Pods and members" in response.read().decode()
        with urllib.request.urlopen(f"{state['dashboard']}api/fleets/{namespace}/orders", timeout=10) as got:
            assert len(json.loads(got.read())["members"]) == 4
    finally:
        down = [*argv[:3], "down", *argv[4:6], "--keep-namespace"]
        stopped = subprocess.run(
            down, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    release = state["release"]
    assert cluster.kubectl.get_or_none("ClusterRole", f"{release}-staticfleet-operator", "default") is None
    assert not cluster.kubectl.items("staticconsumergroups", namespace)
