"""The demo's short form on kind (what `make demo` runs where Docker is reachable): the chart from helm,
the producer and the fleet as pods of the project's image, the coordinator's event log read through
`kubectl exec`, and the same table as on the local cluster."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.helpers import Cluster, pod_report

from .support import REPO_ROOT, Shell, readme_release_absent

pytestmark = pytest.mark.kind


def test_the_demo_on_kind_prints_one_rebalance_per_operation_and_none_for_a_rollout(
    cluster: Cluster, shell: Shell, namespace: str, tmp_path: Path
) -> None:
    # The README's release watches every namespace: two operators must not share the demo's fleet.
    assert readme_release_absent(shell), "run the demo before the README's release is installed (file order)"
    results = tmp_path / "results.json"
    release = f"demo-{secrets.token_hex(3)}"
    argv = [
        sys.executable, "-m", "examples.demo", "up",
        "--state-dir", str(tmp_path / "state"),
        "--kubeconfig", str(cluster.kubeconfig),
        "--namespace", namespace,
        "--release", release,
        "--watch-namespace-only",
        "--pause", "0",
        "--results", str(results),
    ]  # fmt: skip
    env = {**shell.env(), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        _assert_outcomes(results, done.stdout, cluster, namespace)
    finally:
        down = [*argv[:3], "down", *argv[4:6], "--keep-namespace"]
        stopped = subprocess.run(
            down, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not cluster.kubectl.items("staticconsumergroups", namespace)
    assert cluster.kubectl.get_or_none("ClusterRole", f"{release}-staticfleet-operator", "default") is None


def _assert_outcomes(results: Path, stdout: str, cluster: Cluster, namespace: str) -> None:
    """The demo's table: one rebalance per operation and none for a rollout. On failure, the fleets' pods
    and the namespace's events in time order (a rollout costs a rebalance when a pod takes longer than
    the session timeout to come back; the events say which step of its restart took the time)."""
    try:
        rows = {row["label"]: row["outcomes"] for row in json.loads(results.read_text())["rows"]}
        assert list(rows) == ["create 0 -> 3", "rolling restart of 3", "scale 3 -> 1", "scale 1 -> 4"]
        ours = {label: outcomes["staticfleet"] for label, outcomes in rows.items()}
        assert ours["create 0 -> 3"]["rebalances"] == 1
        restart = ours["rolling restart of 3"]
        assert (restart["rebalances"], restart["restarts_absorbed"]) == (0, 3)
        assert (ours["scale 3 -> 1"]["rebalances"], ours["scale 3 -> 1"]["members_removed"]) == (1, 2)
        assert ours["scale 1 -> 4"]["rebalances"] == 1
        assert rows["rolling restart of 3"]["plain static"]["rebalances"] == 0
        assert rows["rolling restart of 3"]["plain dynamic"]["rebalances"] >= 1
        assert "staticfleet against plain dynamic" in stdout
        assert "The demo keeps running" in stdout
    except AssertionError as failure:
        report = pod_report(cluster.kubectl, [namespace], log_lines=200, every_event=True)
        raise AssertionError(f"{failure}\n{report}") from None
