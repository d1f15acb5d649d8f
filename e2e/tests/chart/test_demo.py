"""The demo's short form (what `make demo-ci` runs) on the e2e cluster: the chart installed with helm with
its secured defaults (SASL_SSL, SCRAM, ACLs, HTTPS and tokens, tenancy), its operator and coordinator run
as pods, a producer and the example consumers as a StaticConsumerGroup logged in as its own user.
A fleet of 3 becomes a Stable group of 3; a rolling restart costs no rebalance; scaling 3 -> 1 removes
the two departed members in one rebalance; 1 -> 4 is one rebalance. Plain static and plain dynamic
fleets run the same operations beside it. The counts come from the demo's own summary (`staticfleet
analyze` over the coordinator's event log) and are checked against the coordinator's HTTP API."""

from __future__ import annotations

import base64
import json
import os
import secrets
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from e2e.helm import Helm
from e2e.helpers import Cluster
from e2e.tests.operator.harness import REPO_ROOT, timing
from staticfleet.admin.coordinator_api import fetch_group_json

pytestmark = pytest.mark.localcluster  # the demo reads the coordinator's log from the pod runner's volume


def coordinator_group(api: str, group_id: str, token: str, cafile: str) -> dict[str, Any]:
    found = fetch_group_json(api, group_id, timeout_s=10, token=token, cafile=cafile)
    assert found is not None
    return found


def https_get(url: str, token: str, cafile: str) -> bytes:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    context = ssl.create_default_context(cafile=cafile)
    with urllib.request.urlopen(request, timeout=10, context=context) as response:
        body: bytes = response.read()
        return body


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
        # The two departing consumers leave on their own (or, had they missed the mark, are removed).
        down = ours["scale 3 -> 1"]
        assert (down["rebalances"], down["members_left"] + down["members_removed"]) == (1, 2)
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
        assert len(outcome["steps_s"]) == 8, outcome["steps_s"]  # every step of the demo, timed
        for title, seconds in outcome["steps_s"].items():
            timing(f"demo step: {title}", seconds)

        # Secured: the fleet logs in as the user the operator made, the plain fleets as those the demo made.
        assert state["secured"] is True
        kubectl = cluster.kubectl
        fleet = kubectl.get("scg", "orders", namespace)
        assert fleet["status"]["kafkaUser"]["name"] == f"staticfleet.{namespace}.orders"
        for plain in ("orders-static", "orders-dynamic"):
            secret = kubectl.get("secret", f"{plain}-kafka-user", namespace)
            assert base64.b64decode(secret["data"]["username"]).decode() == f"demo.{namespace}.{plain}"
        token = Path(state["api_token_file"]).read_text().strip()
        cafile = state["ca_file"]
        assert state["coordinator_api"].startswith("https://")

        # The coordinator itself agrees: three rebalances in all, four static members now.
        group = coordinator_group(state["coordinator_api"], f"{namespace}.orders", token, cafile)
        assert (group["state"], group["rebalances"], group["members"]) == ("Stable", 3, 4)
        assert sorted(m["instanceId"] for m in group["memberList"]) == [f"orders-{i}" for i in range(4)]
        reasons = [r["reason"] for r in group["recentRebalances"]][-3:]
        assert reasons[0] == reasons[2] == "member-joined" and reasons[1] in ("member-left", "member-removed")
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
        assert f"the dashboard: {page}?token=" in done.stdout
        ui_token = base64.b64decode(
            kubectl.get("secret", f"{state['release']}-staticfleet-dashboard-token", namespace)["data"][
                "token"
            ]
        ).decode()
        assert "Pods and members" in https_get(page, ui_token, cafile).decode()
        fleet_json = https_get(f"{state['dashboard']}api/fleets/{namespace}/orders", ui_token, cafile)
        assert len(json.loads(fleet_json)["members"]) == 4
        with pytest.raises(urllib.error.HTTPError) as refused:  # the dashboard needs its token
            https_get(page, "not-the-token", cafile)
        assert refused.value.code == 401
    finally:
        down = [*argv[:3], "down", *argv[4:6], "--keep-namespace"]
        stopped = subprocess.run(
            down, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    release = state["release"]
    assert cluster.kubectl.get_or_none("ClusterRole", f"{release}-staticfleet-operator", "default") is None
    assert not cluster.kubectl.items("staticconsumergroups", namespace)
